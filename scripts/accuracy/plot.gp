# SPDX-License-Identifier: BSD-2-Clause
# Admitted requests per second for each mode against the limit, from
# per_second.csv (second, limit, then one column per mode; header line).
# Called by scripts/accuracy/run.sh as
#   gnuplot -e "datafile='...'; outfile='...'; labels='...'; plottitle='...'; ncols=N; term='pngcairo'" plot.gp
# where labels is a file report.py writes: lbl[1..ncols-2] (the legend of
# each mode), limit_label, nsec (seconds in the series).

if (!exists("term")) term = "pngcairo"
if (term eq "pngcairo") {
    set terminal pngcairo size 1100,700 enhanced font "DejaVu Sans,11"
} else {
    set terminal png size 1100,700
}
load labels
set output outfile
set datafile separator ","
set key at screen 0.5, screen 0.015 center bottom horizontal box noenhanced maxcols 3 spacing 1.3 width 1
set bmargin 8
set title plottitle noenhanced
set xlabel "second of the run (by when the request was sent)"
set ylabel "admitted requests (HTTP 200) per second"
set grid ytics xtics lc rgb "#dddddd"
set xtics 1
set xrange [-0.3:nsec - 0.7]
set yrange [0:*]
set style line 1 lc rgb "#000000" lw 2.5 dt 2
set style line 2 lc rgb "#1b9e77" lw 2 pt 7 ps 1.0
set style line 3 lc rgb "#d95f02" lw 2 pt 5 ps 1.0
set style line 4 lc rgb "#7570b3" lw 2 pt 9 ps 1.2
set style line 5 lc rgb "#e7298a" lw 2 pt 11 ps 1.2
set style line 6 lc rgb "#66a61e" lw 2 pt 13 ps 1.2
set style line 7 lc rgb "#e6ab02" lw 2 pt 3 ps 1.2

# the limit last, so that it shows on top of a mode that follows it
plot for [i=3:ncols] datafile using 1:i with linespoints ls (i - 1) \
         title lbl[i - 2], \
     datafile using 1:2 with lines ls 1 title limit_label
