#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# docs/delay.png: what delay= does to a burst, from a real run. One nginx
# (2 workers) with the module serves two locations side by side, with the
# same rate, burst and delay:
#   throttle zone=... delay=3   (throttle_zone rate=10r/s burst=9)
#   limit_req zone=... burst=9 delay=3   (limit_req_zone rate=10r/s)
# scripts/delay/timeline.pl sends each of them 14 requests at once, then 6
# more 1.2 s later, and records when each left; gnuplot draws arrivals
# and departures (scripts/delay/plot.gp).
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   DELAY_DOCS [docs]            where delay.png goes ("" leaves docs/ alone)
#   PYTHON [python3]
#
# Output in build/delay-figure/: timeline.dat (the plotted lines),
# delay.png, nginx/ (prefix, logs).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/delay
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
PYTHON=${PYTHON:-python3}
DOCS=${DELAY_DOCS-$ROOT/docs}
OUT=$ROOT/build/delay-figure
PREFIX=$OUT/nginx

die() { echo "delay-figure: $*" >&2; exit 1; }

# shellcheck source=../lib/processes.sh
. "$ROOT/scripts/lib/processes.sh"

check_nginx_and_module
for tool in gnuplot perl curl "$PYTHON"; do
    command -v "$tool" >/dev/null || die "$tool is missing (make delay-figure installs it)"
done

rm -rf "$OUT"
mkdir -p "$PREFIX/conf" "$PREFIX/logs" "$PREFIX/html" "$PREFIX/temp"
printf 'a\n' >"$PREFIX/html/a.txt"
PORT=$(free_port)
cat >"$PREFIX/conf/nginx.conf" <<CONF
load_module $MODULE;
worker_processes 2;
pid logs/nginx.pid;
error_log logs/error.log info;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path temp;
    proxy_temp_path temp;
    fastcgi_temp_path temp;
    uwsgi_temp_path temp;
    scgi_temp_path temp;
    throttle_zone \$http_x_key zone=th:1m rate=10r/s burst=9;
    limit_req_zone \$http_x_key zone=lr:1m rate=10r/s;
    limit_req_status 429;
    server {
        listen 127.0.0.1:$PORT;
        # when nginx read and answered each request (t/lib/Timeline.pm)
        add_header X-Timing "\$msec \$request_time" always;
        location /throttle/  { throttle zone=th delay=3; alias html/; }
        location /limit_req/ { limit_req zone=lr burst=9 delay=3; alias html/; }
    }
}
CONF

"$NGINX_BIN" -p "$PREFIX/" -c conf/nginx.conf -e logs/error.log
trap 'stop_nginx "$PREFIX/logs/nginx.pid"' EXIT
wait_http "$PORT" throttle/a.txt || die "nginx did not answer; see $PREFIX/logs/error.log"
# the probe above charged the key "" of neither zone (an empty key is not
# limited): the timeline starts on fresh keys

perl "$HERE/timeline.pl" "$PORT" "$OUT/timeline.dat"
stop_nginx "$PREFIX/logs/nginx.pid"
trap - EXIT

echo "delay-figure: when each request left (ms), throttle and limit_req:"
column -t "$OUT/timeline.dat" | sed 's/^/  /'

gnuplot -e "datafile='$OUT/timeline.dat'; outfile='$OUT/delay.png'; plottitle='delay=3, rate=10r/s, burst=9: 14 requests at once, 6 more 1.2 s later (nginx $(nginx_version))'" \
    "$HERE/plot.gp"
if [ -n "$DOCS" ]; then
    cp "$OUT/delay.png" "$DOCS/delay.png"
    echo "delay-figure: wrote $DOCS/delay.png"
fi
