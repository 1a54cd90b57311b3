# SPDX-License-Identifier: BSD-2-Clause
# docs/delay.png: arrivals and departures of two bursts, throttle with
# delay= against limit_req. Called by scripts/delay/run.sh as
#   gnuplot -e "datafile='...'; outfile='...'; plottitle='...'" plot.gp
# on the lines scripts/delay/timeline.pl writes.

set terminal pngcairo size 1000,620 enhanced font "DejaVu Sans,11"
set output outfile
set title plottitle noenhanced
set xlabel "time since the first burst was sent (ms)"
set ylabel "request: admitted, in the order they left, then rejected"
set grid xtics ytics lc rgb "#dddddd"
set xtics 100
set ytics 1, 1
set yrange [0.5:*] reverse
set xrange [-40:*]
set key outside right top box spacing 1.3 noenhanced

set style line 1 lc rgb "#1b9e77" lw 2
set style line 2 lc rgb "#1b9e77" pt 7 ps 1.3
set style line 3 lc rgb "#000000" pt 6 ps 1.1
set style line 4 lc rgb "#d95f02" pt 2 ps 1.6 lw 2
set style line 5 lc rgb "#7570b3" pt 4 ps 1.9 lw 1.5

admitted(s) = (s == 200)

plot datafile using 2:1:($3 - $2):(0) \
         with vectors nohead ls 1 title "throttle: held back", \
     datafile using 2:1 with points ls 3 title "arrival", \
     datafile using 3:(admitted($4) ? $1 : 1/0) with points ls 2 \
         title "throttle: left (200)", \
     datafile using 3:(admitted($4) ? 1/0 : $1) with points ls 4 \
         title "throttle: rejected (429)", \
     datafile using 5:(admitted($6) ? $1 : 1/0) with points ls 5 \
         title "limit_req: left (200)", \
     datafile using 5:(admitted($6) ? 1/0 : $1) with points ls 5 pt 3 \
         title "limit_req: rejected (429)"
