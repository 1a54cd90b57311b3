# SPDX-License-Identifier: BSD-2-Clause
# The soak run's series, from plot.dat (scripts/soak/report.py: t, req/s,
# then each worker's VmRSS and RssAnon, then each zone's resident pages,
# MiB). Called by scripts/soak/run.sh as
#   gnuplot -e "datafile='...'; outfile='...'; term='pngcairo'; warmup=300" plot.gp
# Top: the workers' memory; bottom: the zones' pages; a dashed line where
# the warm-up ends (after it, every line must stay flat).

if (!exists("term")) term = "pngcairo"
if (term eq "pngcairo") {
    set terminal pngcairo size 1100,800 enhanced font "DejaVu Sans,11"
} else {
    set terminal png size 1100,800
}
set output outfile
set multiplot layout 2,1 title "Soak: distinct keys at full speed into small zones, a sample every 10 s" noenhanced
set grid ytics xtics lc rgb "#dddddd"
set key outside right top noenhanced
set xlabel "seconds since the load started"
set xrange [0:*]
set yrange [0:*]
set arrow 1 from warmup, graph 0 to warmup, graph 1 nohead dt 2 lc rgb "#888888"
set style line 1 lc rgb "#1b9e77" lw 2 pt 7 ps 0.6
set style line 2 lc rgb "#d95f02" lw 2 pt 5 ps 0.6
set style line 3 lc rgb "#1b9e77" lw 2 dt 3
set style line 4 lc rgb "#d95f02" lw 2 dt 3
set style line 5 lc rgb "#7570b3" lw 2 pt 9 ps 0.6

set title "worker memory (MiB)"
plot datafile using 1:3 with linespoints ls 1 title "worker 1 VmRSS", \
     datafile using 1:5 with linespoints ls 2 title "worker 2 VmRSS", \
     datafile using 1:4 with lines ls 3 title "worker 1 RssAnon", \
     datafile using 1:6 with lines ls 4 title "worker 2 RssAnon"

set title "zone pages resident (MiB; sizes 1, 2 and 3 MiB)"
plot datafile using 1:7 with linespoints ls 1 title "local (1 MiB)", \
     datafile using 1:8 with linespoints ls 2 title "strict (2 MiB)", \
     datafile using 1:9 with linespoints ls 5 title "async (3 MiB)"
unset multiplot
