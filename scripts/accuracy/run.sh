#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Accuracy: how many requests the module admits across nodes, against the
# ideal global limit, in strict mode and in async mode at several sync
# intervals.
#
# Two nginx (2 workers each) with the module share one redis-server. Each
# mode has its own zone and its own constant key (one location per mode,
# serving a static file), the same policy (ACCURACY_RATE r/s, burst
# ACCURACY_BURST). For each mode in turn, a steady open-loop load of
# ACCURACY_LOAD req/s in all, alternating between the two nginx, runs for
# ACCURACY_SECONDS; every answer is recorded. Then: admitted (200) per
# second and in all against the ideal R x T + B + 1, and for async the
# bound docs/modes.md states on over-admission; async at 100 ms is the
# pass/fail line (printed; the exit status is 0 unless something broke).
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   ACCURACY_SECONDS [12]        seconds of load per mode (at least 10)
#   ACCURACY_RATE [100]          the limit, r/s (integer)
#   ACCURACY_BURST [5]           the limit's burst
#   ACCURACY_LOAD [600]          offered req/s in all (at least 5x the rate)
#   ACCURACY_INTERVALS [50 100 500]  async sync_interval values, ms
#   ACCURACY_CONNECTIONS [24]    load generator connections in all
#   ACCURACY_DOCS [docs]         where accuracy.md and accuracy.png go
#                                ("" leaves docs/ alone)
#   REDIS_SERVER [redis-server]  REDIS_CLI [redis-cli]  PYTHON [python3]
#
# Output in build/accuracy/: results.md (the tables), per_second.csv (the
# plotted series), per_second_detail.csv, per_100ms.csv, accuracy.png; raw/
# one CSV line per request and the load generator's summary per mode, and
# for async modes Redis's MONITOR during the load (the syncs) with what
# syncs.py read from it; nginx-a/, nginx-b/ (prefixes, logs), redis/ (log).
# In ACCURACY_DOCS: accuracy.md (the tables, with how to read them, and
# which run they come from) and accuracy.png (the plot), for the docs.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/accuracy
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
SECONDS_RUN=${ACCURACY_SECONDS:-12}
RATE=${ACCURACY_RATE:-100}
BURST=${ACCURACY_BURST:-5}
LOAD=${ACCURACY_LOAD:-600}
INTERVALS=${ACCURACY_INTERVALS:-50 100 500}
CONNECTIONS=${ACCURACY_CONNECTIONS:-24}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
PYTHON=${PYTHON:-python3}
DOCS=${ACCURACY_DOCS-$ROOT/docs}

OUT=$ROOT/build/accuracy
RAW=$OUT/raw
REDIS_DIR=$OUT/redis
NODES=(a b)

die() { echo "accuracy: $*" >&2; exit 1; }

# --- parameters and tools ---------------------------------------------------

if ! [[ $SECONDS_RUN =~ ^[0-9]+$ ]] || [ "$SECONDS_RUN" -lt 10 ]; then
    die "ACCURACY_SECONDS must be an integer of at least 10"
fi
[[ $RATE =~ ^[1-9][0-9]*$ ]] || die "ACCURACY_RATE must be a positive integer (r/s)"
[[ $BURST =~ ^[0-9]+$ ]] || die "ACCURACY_BURST must be a non-negative integer"
[[ $LOAD =~ ^[1-9][0-9]*$ ]] || die "ACCURACY_LOAD must be a positive integer (req/s)"
[ "$LOAD" -ge $((5 * RATE)) ] || die "ACCURACY_LOAD ($LOAD) must be at least 5x ACCURACY_RATE ($RATE)"
[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || die "ACCURACY_CONNECTIONS must be a positive integer"
for iv in $INTERVALS; do
    if ! [[ $iv =~ ^[1-9][0-9]*$ ]] || [ "$iv" -lt 10 ] || [ "$iv" -gt 60000 ]; then
        die "ACCURACY_INTERVALS: \"$iv\" is not a number of ms from 10 to 60000"
    fi
done

pkgs=()
command -v gnuplot >/dev/null || pkgs+=(gnuplot-nox)
if [ "$PYTHON" = python3 ]; then command -v python3 >/dev/null || pkgs+=(python3); fi
if [ "$REDIS_SERVER" = redis-server ]; then command -v redis-server >/dev/null || pkgs+=(redis-server); fi
if [ "$REDIS_CLI" = redis-cli ]; then command -v redis-cli >/dev/null || pkgs+=(redis-tools); fi
command -v curl >/dev/null || pkgs+=(curl)
if [ ${#pkgs[@]} -gt 0 ]; then
    "$ROOT/scripts/lib/deps.sh" "${pkgs[@]}" \
        || die "could not install: ${pkgs[*]}"
fi
for tool in gnuplot "$PYTHON" "$REDIS_SERVER" "$REDIS_CLI" curl; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
# check_nginx_and_module, free_port, wait_http, rcli, redis_version,
# nginx_version, png_terminal, start_redis, stop_redis (and REDIS_PID),
# stop_nginx, source_commit
. "$ROOT/scripts/lib/processes.sh"
check_nginx_and_module

MODES=(strict)
for iv in $INTERVALS; do MODES+=("async_${iv}ms"); done

# --- processes and cleanup --------------------------------------------------

LOADGEN_PID=
MONITOR_PID=
cleanup() {
    local n p
    for p in "$LOADGEN_PID" "$MONITOR_PID"; do
        [ -n "$p" ] || continue
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    for n in "${NODES[@]}"; do
        stop_nginx "$OUT/nginx-$n/logs/nginx.pid"
    done
    stop_redis
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$RAW" "$REDIS_DIR" "$OUT"/nginx-* "$OUT"/results.md "$OUT"/*.csv "$OUT"/accuracy.png
mkdir -p "$RAW" "$REDIS_DIR"
chmod 755 "$OUT"

# --- Redis ------------------------------------------------------------------

REDIS_PORT=$(free_port)
start_redis
REDIS_VERSION=$(redis_version)

# EVALSHA + EVAL calls Redis has run so far (INFO commandstats).
redis_script_calls() {
    rcli INFO commandstats | tr -d '\r' | awk -F'[:,=]' '
        $1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { n += $3 }
        END { print n + 0 }'
}

# "<client port> <node>" for each connection from our nginx to Redis, from
# ss: the worker's parent is the master whose pid file names the node.
redis_clients() {
    local line port pid ppid n
    command -v ss >/dev/null || return 0
    ss -tnpH state established "( dport = :$REDIS_PORT )" 2>/dev/null \
        | while read -r line; do
            port=$(awk '{ n = split($3, a, ":"); print a[n] }' <<<"$line")
            pid=$(grep -o 'pid=[0-9]*' <<<"$line" | head -1 | cut -d= -f2)
            [ -n "$pid" ] || continue
            ppid=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$pid/stat" 2>/dev/null) || continue
            for n in "${NODES[@]}"; do
                if [ "$ppid" = "$(cat "$OUT/nginx-$n/logs/nginx.pid" 2>/dev/null)" ]; then
                    echo "$port $n"
                fi
            done
        done
}

# --- the two nginx ----------------------------------------------------------

declare -A PORT
for n in "${NODES[@]}"; do
    p=$OUT/nginx-$n
    mkdir -p "$p"/{conf,html,logs,temp}
    chmod 755 "$p" "$p/html"
    PORT[$n]=$(free_port)
    while [ "${PORT[$n]}" = "$REDIS_PORT" ] || { [ "$n" = b ] && [ "${PORT[b]}" = "${PORT[a]}" ]; }; do
        PORT[$n]=$(free_port)
    done
    sed -e "s|@MODULE@|$MODULE|g" -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
        -e "s|@PORT@|${PORT[$n]}|g" "$HERE/nginx.conf.in" >"$p/conf/nginx.conf"
    {
        echo "# one zone per mode; the key is a constant, one per mode"
        for m in "${MODES[@]}"; do
            case $m in
                strict) extra="redis=accuracy sync=strict" ;;
                async_*) iv=${m#async_}; extra="redis=accuracy sync=async sync_interval=$iv" ;;
            esac
            echo "throttle_zone \"key_$m\" zone=acc_$m:1m rate=${RATE}r/s burst=$BURST $extra;"
        done
    } >"$p/conf/zones.conf"
    {
        for m in "${MODES[@]}"; do
            printf 'location = /%s {\n    throttle zone=acc_%s;\n}\n' "$m" "$m"
        done
    } >"$p/conf/locations.conf"
    for f in health "${MODES[@]}"; do
        printf 'ok\n' >"$p/html/$f"
        chmod 644 "$p/html/$f"
    done
    "$NGINX_BIN" -p "$p/" -c conf/nginx.conf -e logs/error.log -t -q \
        || die "nginx -t failed for $p/conf/nginx.conf"
    "$NGINX_BIN" -p "$p/" -c conf/nginx.conf -e logs/error.log \
        || die "nginx $n did not start; see $p/logs/error.log"
    wait_http "${PORT[$n]}" health \
        || die "nginx $n does not answer on 127.0.0.1:${PORT[$n]}"
done
NGINX_VERSION=$(nginx_version)

TARGETS="127.0.0.1:${PORT[a]},127.0.0.1:${PORT[b]}"
echo "accuracy: redis-server $REDIS_VERSION on 127.0.0.1:$REDIS_PORT; nginx $NGINX_VERSION" \
     "on 127.0.0.1:${PORT[a]} and 127.0.0.1:${PORT[b]} (2 workers each)"
echo "accuracy: limit rate=${RATE}r/s burst=$BURST; load $LOAD req/s for ${SECONDS_RUN}s per mode" \
     "over $CONNECTIONS keep-alive connections; modes: ${MODES[*]}"

# --- the runs ---------------------------------------------------------------

# which run the report describes
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
COMMIT=$(source_commit)

for m in "${MODES[@]}"; do
    # the previous mode's last syncs (up to two rounds after its last
    # request) are over before this one's count starts
    sleep 1.2
    before=$(redis_script_calls)
    if [ "$m" != strict ]; then
        # the syncs, as Redis receives them (a few a second: MONITOR costs
        # nothing worth counting here)
        rcli MONITOR >"$RAW/$m.monitor" 2>/dev/null &
        MONITOR_PID=$!
    fi
    "$PYTHON" "$HERE/loadgen.py" --targets "$TARGETS" --path "/$m" \
        --rate "$LOAD" --seconds "$SECONDS_RUN" --connections "$CONNECTIONS" \
        --out "$RAW/$m.csv" >"$RAW/$m.json" &
    LOADGEN_PID=$!
    wait "$LOADGEN_PID" || { LOADGEN_PID=; die "the load generator failed for $m"; }
    LOADGEN_PID=
    after=$(redis_script_calls)
    echo $((after - before)) >"$RAW/$m.redis"
    if [ -n "$MONITOR_PID" ]; then
        redis_clients >"$RAW/$m.clients"
        kill -TERM "$MONITOR_PID" 2>/dev/null || true
        wait "$MONITOR_PID" 2>/dev/null || true
        MONITOR_PID=
        "$PYTHON" "$HERE/syncs.py" "$RAW/$m" \
            "$("$PYTHON" "$ROOT/scripts/lib/redis_keys.py" throttle: "acc_$m" "key_$m")" \
            || die "could not read the syncs of $m from $RAW/$m.monitor"
    fi
    "$PYTHON" - "$RAW/$m.json" "$m" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("accuracy: %-12s offered %.1f req/s (%d requests, late p99 %.2f ms), statuses %s"
      % (sys.argv[2], s["offered_rate"], s["requests"], s["late_p99_ms"],
         " ".join("%s:%d" % kv for kv in sorted(s["statuses"].items()))))
PY
done

# --- nginx error logs -------------------------------------------------------

LOG_NOTES=
for n in "${NODES[@]}"; do
    log=$OUT/nginx-$n/logs/error.log
    cnt=$(grep -cE '\[(warn|error|crit|alert|emerg)\]' "$log" || true)
    if [ "$cnt" -gt 0 ]; then
        LOG_NOTES+="- nginx $n: $cnt lines at warn or above in nginx-$n/logs/error.log, e.g. \`$(grep -m1 -E '\[(warn|error|crit|alert|emerg)\]' "$log" | cut -c1-200)\`"$'\n'
    fi
done
[ -n "$LOG_NOTES" ] || LOG_NOTES="- nginx error logs: no line at warn or above"$'\n'

# --- report and plot --------------------------------------------------------

MODES_CSV=$(IFS=,; echo "${MODES[*]}")
SETUP="- 2 nginx ($NGINX_VERSION, worker_processes 2 each) on loopback, one redis-server $REDIS_VERSION (--save '' --appendonly no), throttle_redis defaults (timeout 50ms, keepalive 2)
- zones: rate=${RATE}r/s burst=$BURST, a constant key per mode; strict: redis= sync=strict; async: sync=async sync_interval=${INTERVALS// /ms, }ms
- load: scripts/accuracy/loadgen.py (asyncio, HTTP/1.1 keep-alive, $CONNECTIONS connections, open loop: request i due at i / $LOAD s, alternating between the two nginx), ${SECONDS_RUN}s per mode, modes one after the other
- machine: $(nproc) CPUs, $(uname -sr); load, nginx and Redis share the CPUs
$LOG_NOTES"

DOCS_ARGS=()
if [ -n "$DOCS" ]; then
    mkdir -p "$DOCS"
    DOCS_ARGS=(--docs "$DOCS/accuracy.md" --date "on $RUN_DATE" --commit "$COMMIT")
fi

echo
"$PYTHON" "$HERE/report.py" "${DOCS_ARGS[@]}" \
    --raw "$RAW" --out "$OUT" --modes "$MODES_CSV" \
    --rate "$RATE" --burst "$BURST" --seconds "$SECONDS_RUN" --load "$LOAD" \
    --nodes 2 --setup "$SETUP"
printf '%s' "$LOG_NOTES"

term=$(png_terminal)
ncols=$(( ${#MODES[@]} + 2 ))
gnuplot -e "datafile='$OUT/per_second.csv'; outfile='$OUT/accuracy.png'; \
labels='$RAW/plot_labels.gp'; \
plottitle='Admitted per second: 2 nginx x 2 workers, one Redis; rate=${RATE}r/s burst=$BURST, offered ${LOAD} req/s'; \
ncols=$ncols; term='$term'" "$HERE/plot.gp" || die "gnuplot failed"
[ -z "$DOCS" ] || cp "$OUT/accuracy.png" "$DOCS/accuracy.png"

echo
echo "accuracy: results in $OUT/results.md, per-second series in $OUT/per_second.csv," \
     "plot in $OUT/accuracy.png"
[ -z "$DOCS" ] || echo "accuracy: $DOCS/accuracy.md and $DOCS/accuracy.png written"
