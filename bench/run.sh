#!/usr/bin/env bash
# Benchmark: throughput and latency of the throttle module against no
# limiting and against nginx's limit_req, with wrk on loopback; then the
# number of keys a zone holds per MiB. Measures, never asserts.
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   BENCH_ROUNDS [3]       rounds; each runs every configuration once
#   BENCH_DURATION [5]     seconds per wrk run
#   BENCH_THREADS [1]      wrk threads
#   BENCH_CONNECTIONS [32] wrk connections
#   BENCH_WORKERS [auto]   nginx worker_processes
#   BENCH_NGINX_CPUS []    nginx worker_cpu_affinity (e.g. "auto", "01")
#   BENCH_WRK_CPUS []      CPUs to pin wrk to with taskset (e.g. "1")
#   BENCH_DENSITY [1m 4m]  zone sizes for the keys-per-MiB probe ("" skips)
#
# Output: a table on stdout, the same as Markdown in build/bench/results.md,
# raw wrk output in build/bench/raw/, nginx logs in build/bench/nginx/logs/.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-5}
THREADS=${BENCH_THREADS:-1}
CONNECTIONS=${BENCH_CONNECTIONS:-32}
WORKERS=${BENCH_WORKERS:-auto}
DENSITY_SIZES=${BENCH_DENSITY-1m 4m}
PYTHON=${PYTHON:-python3}
NGINX_CPUS=${BENCH_NGINX_CPUS-}
WRK_CPUS=${BENCH_WRK_CPUS-}
WRK_PIN=
[ -n "$WRK_CPUS" ] && WRK_PIN="taskset -c $WRK_CPUS"

OUT=$ROOT/build/bench
PREFIX=$OUT/nginx
RAW=$OUT/raw
RUNS=$OUT/runs.tsv
DENSITY=$OUT/density.jsonl

CONFIGS=(none limit_req throttle_pass throttle_pass_noheaders throttle_reject)

die() { echo "bench: $*" >&2; exit 1; }

for tool in wrk curl "$PYTHON"; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
[ -x "$NGINX_BIN" ] || die "no nginx binary at $NGINX_BIN"
[ -f "$MODULE" ] || die "no module at $MODULE (run: make build)"
case $MODULE in /*) ;; *) MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE") ;; esac
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "BENCH_DURATION must be a positive integer (seconds)"

# A free TCP port on loopback.
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the nginx whose pid file is $1, and waits for it (a zombie counts
# as gone: the daemon's adoptive parent may be slow to reap it).
stop_nginx() {
    local pidfile=$1 pid i state
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 200); do
        state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) || break
        [ "$state" = Z ] && break
        sleep 0.05
    done
    rm -f "$pidfile"
}

cleanup() {
    local f
    stop_nginx "$PREFIX/logs/nginx.pid"
    for f in "$OUT"/density/*/logs/nginx.pid; do
        [ -e "$f" ] && stop_nginx "$f"
    done
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the nginx under test ---------------------------------------------------

rm -rf "$PREFIX" "$RAW" "$OUT/density"
mkdir -p "$PREFIX"/{conf,html,logs,temp} "$RAW"
chmod 755 "$OUT" "$PREFIX" "$PREFIX/html"
PORT=$(free_port)
if [ -n "$NGINX_CPUS" ]; then
    AFFINITY="worker_cpu_affinity $NGINX_CPUS;"
else
    AFFINITY="# worker_cpu_affinity: not set"
fi
sed -e "s|@MODULE@|$MODULE|g" -e "s|@WORKERS@|$WORKERS|g" \
    -e "s|@AFFINITY@|$AFFINITY|g" \
    -e "s|@PORT@|$PORT|g" "$BENCH/nginx.conf.in" >"$PREFIX/conf/nginx.conf"
for c in "${CONFIGS[@]}"; do
    # a small static file, one per location
    printf '{"ok":true}\n' >"$PREFIX/html/$c"
    chmod 644 "$PREFIX/html/$c"
done

ngx() {
    "$NGINX_BIN" -p "$PREFIX/" -c conf/nginx.conf -e logs/error.log "$@"
}
ngx -t -q || die "nginx -t failed for $PREFIX/conf/nginx.conf"
ngx
for i in $(seq 50); do
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/none" && break
    [ "$i" -eq 50 ] && die "nginx did not answer; see $PREFIX/logs/error.log"
    sleep 0.1
done

# Every location must answer as intended before anything is measured.
check() {
    local path=$1 want=$2 got
    got=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$path")
    [ "$got" = "$want" ] || die "/$path answered $got, expected $want"
}
for c in none limit_req throttle_pass throttle_pass_noheaders; do
    check "$c" 200
done
check throttle_reject 200   # the one request a day
check throttle_reject 429
headers=$(curl -s -D - -o /dev/null "http://127.0.0.1:$PORT/throttle_pass")
grep -qi '^RateLimit-Policy:' <<<"$headers" \
    || die "/throttle_pass sent no RateLimit-Policy"
headers=$(curl -s -D - -o /dev/null "http://127.0.0.1:$PORT/throttle_pass_noheaders")
if grep -qi '^RateLimit' <<<"$headers"; then
    die "/throttle_pass_noheaders sent RateLimit headers"
fi

# --- throughput and latency -------------------------------------------------

# Runs wrk once; appends "config round req/s p99_ms non2xx errors requests"
# to $RUNS.
run_wrk() {
    local config=$1 round=$2 duration=$3 raw
    raw=$RAW/$config.$round.txt
    $WRK_PIN wrk -t"$THREADS" -c"$CONNECTIONS" -d"${duration}s" --latency \
        "http://127.0.0.1:$PORT/$config" >"$raw" 2>&1 \
        || die "wrk failed, see $raw"
    [ "$round" = warmup ] && return 0
    awk -v config="$config" -v round="$round" '
        function ms(v) {
            if (v ~ /us$/) return v / 1000
            if (v ~ /ms$/) return v + 0
            if (v ~ /m$/)  return v * 60000
            if (v ~ /s$/)  return v * 1000
            return v
        }
        $1 == "99%"                     { p99 = ms($2) }
        /requests in/                   { requests = $1 }
        /^Requests\/sec:/               { rps = $2 }
        /Non-2xx or 3xx responses:/     { non2xx = $NF }
        /Socket errors:/ {
            gsub(/,/, "")
            errors = $4 + $6 + $8 + $10
        }
        END {
            if (rps == "" || p99 == "") exit 1
            printf "%s\t%s\t%s\t%.3f\t%d\t%d\t%d\n", config, round, rps,
                   p99, non2xx, errors, requests
        }' "$raw" >>"$RUNS" || die "could not parse $raw"
}

printf 'config\tround\trps\tp99_ms\tnon2xx\terrors\trequests\n' >"$RUNS"
# wrk and nginx share the machine with whatever else runs: say how busy it is
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOAD_BEFORE" -v n="$(nproc)" 'BEGIN { exit !(l > n * 0.75) }'; then
    echo "bench: note: load average is $LOAD_BEFORE on $(nproc) CPUs;" \
         "other processes will add noise"
fi
echo "bench: nginx $WORKERS workers on 127.0.0.1:$PORT;" \
     "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s;" \
     "$ROUNDS rounds of ${#CONFIGS[@]} configurations"
for c in "${CONFIGS[@]}"; do
    run_wrk "$c" warmup 1
done
for round in $(seq "$ROUNDS"); do
    for c in "${CONFIGS[@]}"; do
        run_wrk "$c" "$round" "$DURATION"
        tail -n 1 "$RUNS" | awk -F'\t' '{ printf "  round %s  %-24s %10.0f req/s  p99 %7.3f ms  non-2xx %d\n", $2, $1, $3, $4, $5 }'
    done
done
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
stop_nginx "$PREFIX/logs/nginx.pid"

# --- keys per MiB -----------------------------------------------------------

: >"$DENSITY"
if [ -n "$DENSITY_SIZES" ]; then
    echo "bench: keys per MiB (16-byte keys), zone sizes: $DENSITY_SIZES"
    DPORT=$(free_port)
    for size in $DENSITY_SIZES; do
        for kind in throttle limit_req; do
            "$PYTHON" "$BENCH/density.py" --nginx "$NGINX_BIN" \
                --module "$MODULE" --prefix "$OUT/density/$kind-$size" \
                --port "$DPORT" --kind "$kind" --size "$size" \
                | tee -a "$DENSITY" | sed 's/^/  /'
        done
    done
fi

# --- report -----------------------------------------------------------------

NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | sed 's/^nginx version: //')
CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
WRK_VERSION=$( (wrk -v 2>&1 || true) | awk 'NR == 1 { print $2 }')

"$PYTHON" "$BENCH/report.py" \
    --runs "$RUNS" --density "$DENSITY" --markdown "$OUT/results.md" \
    --setting "nginx: $NGINX_VERSION, worker_processes $WORKERS, keepalive, access_log off" \
    --setting "wrk $WRK_VERSION: -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency, $ROUNDS rounds, loopback" \
    --setting "hardware: $(nproc) CPUs, ${CPU_MODEL:-unknown CPU}, Linux $(uname -r); load average $LOAD_BEFORE before, $LOAD_AFTER after (wrk and nginx included)"

echo
echo "bench: Markdown table in $OUT/results.md; raw wrk output in $RAW/"
