#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Soak run: one nginx (2 workers) with the module and one Redis, on
# loopback; wrk sends distinct keys at full speed into three small zones
# (local, strict and async: scripts/soak/nginx.conf.in), which evict all
# the time; every SOAK_INTERVAL seconds scripts/soak/sample.py reads each
# worker's memory and each zone's resident pages from /proc. Then
# scripts/soak/report.py checks that they stayed flat after the warm-up,
# prints the series, plots it (gnuplot) and exits non-zero if a check
# failed.
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   SOAK_SECONDS [600]     how long the load runs (a multiple of the interval)
#   SOAK_INTERVAL [10]     seconds between samples
#   SOAK_WARMUP [300]      seconds after which memory must stay flat (at
#                          most half of SOAK_SECONDS is used): the workers'
#                          heap reaches its high-water mark within minutes
#                          (see scripts/soak/report.py)
#   SOAK_CONNECTIONS [16]  wrk connections
#   SOAK_DOCS [docs]       where reliability.md (its soak section) and
#                          soak.png go ("" leaves docs/ alone)
#   REDIS_SERVER [redis-server]  REDIS_CLI [redis-cli]  PYTHON [python3]
#
# Output in build/soak/: series.csv (the samples), counts (the answers per
# sample, scripts/lib/load.lua), wrk.txt, soak.png, results.md, nginx/
# (prefix, error log), redis/ (log).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/soak
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
SECONDS_RUN=${SOAK_SECONDS:-600}
INTERVAL=${SOAK_INTERVAL:-10}
WARMUP=${SOAK_WARMUP:-300}
CONNECTIONS=${SOAK_CONNECTIONS:-16}
DOCS=${SOAK_DOCS-$ROOT/docs}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
PYTHON=${PYTHON:-python3}

OUT=$ROOT/build/soak
PREFIX=$OUT/nginx
REDIS_DIR=$OUT/redis
EPOCH_FILE=$OUT/epoch
# the zones' sizes in kB, as nginx.conf.in sets them
ZONES=local=1024,strict=2048,async=3072

die() { echo "soak: $*" >&2; exit 1; }

[[ $INTERVAL =~ ^[1-9][0-9]*$ ]] || die "SOAK_INTERVAL must be a positive integer (seconds)"
if ! [[ $SECONDS_RUN =~ ^[1-9][0-9]*$ ]] || [ $((SECONDS_RUN % INTERVAL)) -ne 0 ] \
    || [ "$SECONDS_RUN" -lt $((5 * INTERVAL)) ]; then
    die "SOAK_SECONDS must be a multiple of SOAK_INTERVAL ($INTERVAL), at least 5 of them"
fi
[[ $WARMUP =~ ^[0-9]+$ ]] || die "SOAK_WARMUP must be an integer (seconds)"
[ "$WARMUP" -le $((SECONDS_RUN / 2)) ] || WARMUP=$((SECONDS_RUN / 2 / INTERVAL * INTERVAL))
[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || die "SOAK_CONNECTIONS must be a positive integer"
for tool in wrk curl gnuplot "$PYTHON" "$REDIS_SERVER" "$REDIS_CLI"; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make soak installs it)"
done

# check_nginx_and_module, free_port, rcli, redis_version, nginx_version,
# png_terminal, start_redis, stop_redis, stop_nginx, wait_http, source_commit
. "$ROOT/scripts/lib/processes.sh"
check_nginx_and_module

WRK_PID=
cleanup() {
    [ -z "$WRK_PID" ] || kill -TERM "$WRK_PID" 2>/dev/null || true
    stop_nginx "$PREFIX/logs/nginx.pid"
    stop_redis
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$PREFIX"/{conf,logs,temp} "$REDIS_DIR"

REDIS_PORT=$(free_port)
start_redis
REDIS_VERSION=$(redis_version)

PORT=$(free_port)
[ "$PORT" != "$REDIS_PORT" ] || die "nginx and Redis drew the same free port; run again"
sed -e "s|@MODULE@|$MODULE|g" -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
    -e "s|@PORT@|$PORT|g" "$HERE/nginx.conf.in" >"$PREFIX/conf/nginx.conf"
"$NGINX_BIN" -p "$PREFIX/" -c conf/nginx.conf -e logs/error.log \
    || die "nginx did not start; see $PREFIX/logs/error.log"
wait_http "$PORT" health || die "nginx does not answer on 127.0.0.1:$PORT"
NGINX_VERSION=$(nginx_version)

RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
COMMIT=$(source_commit)
echo "soak: nginx $NGINX_VERSION (2 workers) on 127.0.0.1:$PORT, redis-server" \
     "$REDIS_VERSION on 127.0.0.1:$REDIS_PORT; wrk -c$CONNECTIONS, distinct keys," \
     "for $SECONDS_RUN s, a sample every $INTERVAL s (warm-up $WARMUP s)"

echo 1 >"$EPOCH_FILE"
# wrk runs a little longer than the sampler, so that the last sample is
# taken under load
wrk -t1 -c"$CONNECTIONS" -d"$((SECONDS_RUN + 2))s" --timeout 2s \
    -s "$ROOT/scripts/lib/load.lua" "http://127.0.0.1:$PORT" -- \
    "$EPOCH_FILE" "$OUT/counts" distinct /local,/strict,/async >"$OUT/wrk.txt" 2>&1 &
WRK_PID=$!
"$PYTHON" "$HERE/sample.py" --pid-file "$PREFIX/logs/nginx.pid" \
    --error-log "$PREFIX/logs/error.log" --epoch-file "$EPOCH_FILE" \
    --redis-port "$REDIS_PORT" --zones "$ZONES" --seconds "$SECONDS_RUN" \
    --interval "$INTERVAL" --out "$OUT/series.csv" \
    || die "scripts/soak/sample.py failed"
wait "$WRK_PID" || { WRK_PID=; die "wrk failed; see $OUT/wrk.txt"; }
WRK_PID=

DOCS_ARGS=()
if [ -n "$DOCS" ]; then
    mkdir -p "$DOCS"
    DOCS_ARGS=(--docs "$DOCS/reliability.md" --date "$RUN_DATE" --commit "$COMMIT")
fi
term=$(png_terminal)
echo
status=0
"$PYTHON" "$HERE/report.py" "${DOCS_ARGS[@]}" --series "$OUT/series.csv" \
    --counts "$OUT/counts" --zones "$ZONES" --warmup "$WARMUP" \
    --interval "$INTERVAL" --markdown "$OUT/results.md" --plot-data "$OUT/plot.dat" \
    --setup "nginx $NGINX_VERSION (2 workers), redis-server $REDIS_VERSION (--save '' --appendonly no), loopback; wrk -t1 -c$CONNECTIONS --timeout 2s, distinct keys at full speed, ${SECONDS_RUN} s; $(nproc) CPUs shared by all" \
    || status=$?
gnuplot -e "datafile='$OUT/plot.dat'; outfile='$OUT/soak.png'; term='$term'; warmup=$WARMUP" \
    "$HERE/plot.gp" || die "gnuplot failed"
[ -z "$DOCS" ] || cp "$OUT/soak.png" "$DOCS/soak.png"
echo "soak: series in $OUT/series.csv, plot in $OUT/soak.png"
exit "$status"
