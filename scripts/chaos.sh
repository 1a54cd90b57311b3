#!/usr/bin/env bash
# Chaos run: two nginx (2 workers each) with the module and one Redis, on
# loopback, under wrk load in local, strict and async zones, while Redis
# is stalled, killed and restarted, has its scripts flushed, its clients
# killed and its maxmemory reached, and while each nginx is reloaded twice
# and one is upgraded in place (USR2, WINCH, QUIT). Then it asserts what
# scripts/chaos/report.py lists (no worker crash, no wrk timeout, no slow
# answer, every answer as the policy says, decisions resuming after each
# fault, async units kept), prints a table of faults and outcomes, and
# exits non-zero if any assertion failed.
#
# The run is a sequence of phases, one per fault (and "steady", without
# one, first). In each, wrk loads both nginx (scripts/lib/load.lua: every
# limited location in turn, at full speed); the fault starts after
# LEAD seconds and lasts about 2 s (or is instantaneous); once it is over,
# the script waits for decisions to come from Redis again, lets the load
# run TAIL seconds more, stops it and reads from Redis what the async
# zone synced. Requests and answers are told apart by epoch: "pre" (before
# the fault), "fault", "post" (after it), and "end" (the last 0.3 s, whose
# requests wrk may stop before their answers arrive: not compared).
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   CHAOS_CONNECTIONS [8]   wrk connections to each nginx
#   CHAOS_RESUME_MS [5000]  how long decisions may take to resume after a
#                           fault (Redis backoff: 2 s at most, plus jitter)
#   CHAOS_DOCS [docs/reliability.md]  the file whose chaos section the
#                           report replaces ("" leaves it alone)
#   REDIS_SERVER [redis-server]  REDIS_CLI [redis-cli]  PYTHON [python3]
#
# Output in build/chaos/: raw/ (per phase and nginx, load.lua's counts and
# wrk's output; what each phase recorded; the counts Redis holds), nginx-a/
# and nginx-b/ (prefixes, error logs), redis/ (log), results.md (the table).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/chaos
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
CONNECTIONS=${CHAOS_CONNECTIONS:-8}
RESUME_MS=${CHAOS_RESUME_MS:-5000}
DOCS=${CHAOS_DOCS-$ROOT/docs/reliability.md}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
PYTHON=${PYTHON:-python3}

OUT=$ROOT/build/chaos
RAW=$OUT/raw
PREFIX=$OUT/nginx
REDIS_DIR=$OUT/redis
EPOCH_FILE=$OUT/epoch
NODES=(a b)
HOT_KEYS=20 # keys of the load's limited zones (20 r/s each)
LEAD=1.5    # seconds of load before a fault
TAIL=1.5    # ... after decisions resumed
PHASES=(steady stall kill script_flush client_kill maxmemory reload upgrade)

die() { echo "chaos: $*" >&2; exit 1; }

[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || die "CHAOS_CONNECTIONS must be a positive integer"
[[ $RESUME_MS =~ ^[1-9][0-9]*$ ]] || die "CHAOS_RESUME_MS must be a positive integer (ms)"
for tool in wrk curl "$PYTHON" "$REDIS_SERVER" "$REDIS_CLI"; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make chaos installs it)"
done

# check_nginx_and_module, free_port, start_redis, stop_redis, stop_nginx,
# wait_gone, nginx_workers, wait_http
. "$ROOT/scripts/lib/processes.sh"
check_nginx_and_module
# fault_* and restore_*, keep_limit, keep_check
. "$HERE/faults.sh"

WRK_PIDS=()
RESUME_PID=
cleanup() {
    local p n
    for p in "${WRK_PIDS[@]}" $RESUME_PID; do
        kill -TERM "$p" 2>/dev/null || true
    done
    kill -CONT "$REDIS_PID" 2>/dev/null || true
    for n in "${NODES[@]}"; do
        stop_nginx "$PREFIX/$n/logs/nginx.pid.oldbin"
        stop_nginx "$PREFIX/$n/logs/nginx.pid"
    done
    stop_redis
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$RAW" "$REDIS_DIR"
mkfifo "$OUT/resume.fifo"
# the interpreter itself, not a shim that finds it anew at each start
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')

now_ms() { date +%s%3N; }
# One "name value" line in this phase's record, for the report.
record() { echo "$1 $2" >>"$RAW/$PHASE.record"; }
set_epoch() { echo "$PHASE.$1" >"$EPOCH_FILE.tmp" && mv "$EPOCH_FILE.tmp" "$EPOCH_FILE"; }

# --- Redis and the two nginx ------------------------------------------------

REDIS_PORT=$(free_port)
rcli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
start_redis
REDIS_VERSION=$(rcli INFO server | tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }')

declare -A PORT
for n in "${NODES[@]}"; do
    PORT[$n]=$(free_port)
done
[ "${PORT[a]}" != "${PORT[b]}" ] && [ "${PORT[a]}" != "$REDIS_PORT" ] \
    && [ "${PORT[b]}" != "$REDIS_PORT" ] || die "two servers drew the same free port; run again"
for n in "${NODES[@]}"; do
    p=$PREFIX/$n
    mkdir -p "$p"/{conf,logs,temp}
    sed -e "s|@MODULE@|$MODULE|g" -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
        -e "s|@PORT@|${PORT[$n]}|g" "$HERE/nginx.conf.in" >"$p/conf/nginx.conf"
    "$NGINX_BIN" -p "$p/" -c conf/nginx.conf -e logs/error.log \
        || die "nginx $n did not start; see $p/logs/error.log"
    wait_http "${PORT[$n]}" health || die "nginx $n does not answer on 127.0.0.1:${PORT[$n]}"
done
NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | sed 's|.*nginx/||')
echo "chaos: redis-server $REDIS_VERSION on 127.0.0.1:$REDIS_PORT; nginx $NGINX_VERSION" \
     "on 127.0.0.1:${PORT[a]} (a) and 127.0.0.1:${PORT[b]} (b), 2 workers each;" \
     "wrk -c$CONNECTIONS on each"

# --- the load ---------------------------------------------------------------

start_load() {
    local n
    WRK_PIDS=()
    for n in "${NODES[@]}"; do
        wrk -t1 -c"$CONNECTIONS" -d10m --timeout 2s -s "$ROOT/scripts/lib/load.lua" \
            "http://127.0.0.1:${PORT[$n]}" -- "$EPOCH_FILE" "$RAW/$PHASE.$n.counts" \
            "$HOT_KEYS" /local,/strict,/strict_deny,/async,/count \
            >"$RAW/$PHASE.$n.wrk" 2>&1 &
        WRK_PIDS+=($!)
    done
}

# Stops wrk, which writes its counts on the way out.
stop_load() {
    local p n
    for p in "${WRK_PIDS[@]}"; do
        kill -INT "$p" 2>/dev/null || true
        wait "$p" || die "wrk failed in phase $PHASE; see $RAW/$PHASE.*.wrk"
    done
    WRK_PIDS=()
    for n in "${NODES[@]}"; do
        [ -s "$RAW/$PHASE.$n.counts" ] || die "wrk wrote no counts for nginx $n in phase $PHASE"
    done
}

# --- decisions resuming -----------------------------------------------------

# Starts scripts/chaos/resume.py, which waits for the end of the fault
# (await_resume) to measure how long each nginx takes to decide from Redis
# again, at most CHAOS_RESUME_MS; what it finds goes to the record.
start_resume_probe() {
    local n nodes=()
    for n in "${NODES[@]}"; do nodes+=("$n=${PORT[$n]}"); done
    "$PYTHON" "$HERE/resume.py" --phase "$PHASE" --redis-port "$REDIS_PORT" \
        --limit-ms "$RESUME_MS" "${nodes[@]}" <"$OUT/resume.fifo" >>"$RAW/$PHASE.record" &
    RESUME_PID=$!
    exec 3>"$OUT/resume.fifo"
}

# Tells the probe that the fault ended at $1 (ms), and waits for it.
await_resume() {
    echo "$1" >&3
    exec 3>&-
    wait "$RESUME_PID" || die "scripts/chaos/resume.py failed in phase $PHASE"
    RESUME_PID=
}

# --- the async units --------------------------------------------------------

# "<epoch> <units>" for each epoch of this phase: what the count zone holds
# in Redis for its keys ("<phase>.<epoch>.<i>").
redis_epochs() {
    rcli EVAL "local out = {}
        for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
            out[#out + 1] = key
            out[#out + 1] = redis.call('HGET', key, 'n') or '0'
        end
        return out" 0 "throttle:{count:*}:$PHASE.*" \
        | awk 'NR % 2 { split($0, part, "."); epoch = part[2]; next }
               { units[epoch] += $0 }
               END { for (e in units) print e, units[e] }' | sort
}

# Units the load's answers say the count zone admitted (200, PASSED) in
# the compared epochs, both nginx together.
admitted_units() {
    cat "$RAW/$PHASE".*.counts \
        | awk '$2 == "/count" && $3 == 200 && $1 !~ /\.(end|probe)$/ { n += $5 } END { print n + 0 }'
}

# Waits until the syncs of this phase's last units have reached Redis:
# until Redis holds as many units of the compared epochs as were admitted,
# or the figure has not moved for 1 s (units lost, as after Redis was
# killed), at most 8 s; then writes what Redis holds per epoch.
settle_units() {
    local want held last= still=0 i
    want=$(admitted_units)
    for i in $(seq 80); do
        held=$(redis_epochs | awk '$1 != "end" && $1 != "probe" { n += $2 } END { print n + 0 }')
        [ "$held" -ge "$want" ] && break
        if [ "$held" = "$last" ]; then still=$((still + 1)); else still=0; fi
        [ "$still" -lt 10 ] || break
        last=$held
        sleep 0.1
    done
    redis_epochs >"$RAW/$PHASE.redis"
}

# --- nginx's logs -------------------------------------------------------------

# Lines of each error log before the phase, to read only its own after.
declare -A LOG_LINES
log_mark() {
    local n
    for n in "${NODES[@]}"; do
        LOG_LINES[$n]=$(wc -l <"$PREFIX/$n/logs/error.log")
    done
}

# Records this phase's error-log lines that tell of a crash or worse
# (a worker "exited on signal", alert, emerg), and its warn/error lines.
log_check() {
    local n lines
    for n in "${NODES[@]}"; do
        lines=$(tail -n +"$((LOG_LINES[$n] + 1))" "$PREFIX/$n/logs/error.log")
        record "crash_lines_$n" "$(grep -cE 'exited on signal|\[(alert|emerg)\]' <<<"$lines" || true)"
        record "error_lines_$n" "$(grep -cE '\[(error|crit)\]' <<<"$lines" || true)"
        record "warn_lines_$n" "$(grep -c '\[warn\]' <<<"$lines" || true)"
        grep -E 'exited on signal|\[(alert|emerg|crit)\]' <<<"$lines" \
            >>"$RAW/$PHASE.crashes" || true
    done
}

# --- the phases ---------------------------------------------------------------

run_phase() {
    local begun started ended
    PHASE=$1
    begun=$(now_ms)
    : >"$RAW/$PHASE.record"
    log_mark
    set_epoch pre
    start_load
    start_resume_probe
    sleep "$LEAD"
    started=$(now_ms)
    "fault_$PHASE"
    "restore_$PHASE"
    ended=$(now_ms)
    record fault_ms $((ended - started))
    set_epoch post
    await_resume "$ended"
    sleep "$TAIL"
    set_epoch end
    sleep 0.3
    stop_load
    settle_units
    log_check
    echo "chaos: $PHASE done in $(($(now_ms) - begun)) ms"
}

RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
COMMIT=$(source_commit)
RUN_START=$(now_ms)
DAY=$(date -u +%F)
for phase in "${PHASES[@]}"; do
    run_phase "$phase"
done
RUN_SECONDS=$((($(now_ms) - RUN_START) / 1000))
# the count zone counts per UTC day: a run across midnight splits its counts
[ "$(date -u +%F)" = "$DAY" ] && DAY_TURNED=no || DAY_TURNED=yes

DOCS_ARGS=()
[ -n "$DOCS" ] && DOCS_ARGS=(--docs "$DOCS" --date "$RUN_DATE" --commit "$COMMIT")
echo
"$PYTHON" "$HERE/report.py" "${DOCS_ARGS[@]}" --raw "$RAW" \
    --phases "${PHASES[*]}" --nodes "${NODES[*]}" --markdown "$OUT/results.md" \
    --redis-timeout-ms 50 --resume-ms "$RESUME_MS" --day-turned "$DAY_TURNED" \
    --setup "2 nginx $NGINX_VERSION (2 workers each), redis-server $REDIS_VERSION (--save '' --appendonly no), loopback; wrk -t1 -c$CONNECTIONS --timeout 2s on each nginx, at full speed; $(nproc) CPUs shared by all; phases run in ${RUN_SECONDS} s"
