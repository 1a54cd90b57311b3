#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
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
# The last three phases load the same zones on a Redis Cluster (3 masters,
# 3 replicas) and on a Sentinel setup (a master, its replica, three
# Sentinels) instead, and make them fail over: a master of the cluster
# killed, SENTINEL FAILOVER, the Sentinels' master killed
# (scripts/chaos/failover.sh). Decisions must come back within a bound
# from the start of the fault, and ERROR_* answers come only between the
# fault and the decisions' return, and in the cluster only for the keys of
# the killed master's slots.
#
# The run is a sequence of phases, one per fault (and "steady", without
# one, first). In each, wrk loads both nginx (scripts/lib/load.lua: every
# limited location in turn, at full speed); the fault starts after
# LEAD seconds and lasts about 2 s (or is instantaneous); once it is over,
# the script waits for decisions to come from Redis again, lets the load
# run TAIL seconds more, stops it and reads from Redis what the async
# zone synced. Requests and answers are told apart by epoch: "pre" (before
# the fault), "fault", "post" (after it, until decisions come back),
# "after" (once they have) and "end" (the last 0.3 s, whose requests wrk
# may stop before their answers arrive: not compared).
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
# and nginx-b/ (prefixes, error logs), redis/ (log), ha/ (the cluster's and
# the Sentinel setup's files and logs), results.md (the table).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
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
PHASES=(steady stall kill script_flush client_kill maxmemory reload upgrade
        cluster_kill sentinel_failover sentinel_kill)
# How long decisions may take to come back, from the start of the fault:
# cluster-node-timeout + 2 s on the cluster, a few seconds with Sentinels.
CLUSTER_BOUND_MS=3000
SENTINEL_BOUND_MS=5000

die() { echo "chaos: $*" >&2; exit 1; }

[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || die "CHAOS_CONNECTIONS must be a positive integer"
[[ $RESUME_MS =~ ^[1-9][0-9]*$ ]] || die "CHAOS_RESUME_MS must be a positive integer (ms)"
for tool in wrk curl "$PYTHON" "$REDIS_SERVER" "$REDIS_CLI"; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make chaos installs it)"
done

# check_nginx_and_module, free_port, rcli, redis_version, nginx_version,
# start_redis, stop_redis, stop_nginx, wait_gone, nginx_workers, wait_http,
# source_commit
. "$ROOT/scripts/lib/processes.sh"
check_nginx_and_module
# fault_* and restore_*, keep_limit, keep_check
. "$HERE/faults.sh"
# the cluster and the Sentinel setup, and their faults
. "$HERE/failover.sh"

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
    stop_ha
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$RAW" "$REDIS_DIR" "$HA_DIR"
mkfifo "$OUT/resume.fifo"
# the interpreter itself, not a shim that finds it anew at each start
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')

now_ms() { date +%s%3N; }
# One "name value" line in this phase's record, for the report.
record() { echo "$1 $2" >>"$RAW/$PHASE.record"; }
set_epoch() { echo "$PHASE.$1" >"$EPOCH_FILE.tmp" && mv "$EPOCH_FILE.tmp" "$EPOCH_FILE"; }

# --- Redis and the two nginx ------------------------------------------------

REDIS_PORT=$(free_port)
start_redis
REDIS_VERSION=$(redis_version)
start_sentinels
start_cluster
await_sentinels
read -r CLUSTER_VICTIM VICTIM_SLOTS < <(cluster_victim)
VICTIM_KEYS=$(keys_in_slots "$HOT_KEYS" "$VICTIM_SLOTS")
[ -n "$VICTIM_KEYS" ] || die "no hot key has its slot on master $CLUSTER_VICTIM"
CLUSTER_SEEDS=$(printf '127.0.0.1:%s,' "${CLUSTER_PORTS[@]}")
SENTINELS=$(printf '127.0.0.1:%s,' "${SENTINEL_PORTS[@]}")

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
        -e "s|@PORT@|${PORT[$n]}|g" -e "s|@CLUSTER_SEEDS@|${CLUSTER_SEEDS%,}|g" \
        -e "s|@SENTINELS@|${SENTINELS%,}|g" -e "s|@SENTINEL_MASTER@|$SENTINEL_MASTER|g" \
        -e "s/@VICTIM_KEYS@/$VICTIM_KEYS/g" "$HERE/nginx.conf.in" >"$p/conf/nginx.conf"
    "$NGINX_BIN" -p "$p/" -c conf/nginx.conf -e logs/error.log \
        || die "nginx $n did not start; see $p/logs/error.log"
    wait_http "${PORT[$n]}" health || die "nginx $n does not answer on 127.0.0.1:${PORT[$n]}"
done
NGINX_VERSION=$(nginx_version)
echo "chaos: redis-server $REDIS_VERSION on 127.0.0.1:$REDIS_PORT; nginx $NGINX_VERSION" \
     "on 127.0.0.1:${PORT[a]} (a) and 127.0.0.1:${PORT[b]} (b), 2 workers each;" \
     "wrk -c$CONNECTIONS on each; a cluster of 3 + 3 on ports ${CLUSTER_PORTS[*]}" \
     "(hot keys $VICTIM_KEYS on master $CLUSTER_VICTIM, slots $VICTIM_SLOTS);" \
     "Sentinels on ${SENTINEL_PORTS[*]} watching ${SENTINEL_DATA[*]}"

# --- what a phase loads ------------------------------------------------------

# The backend phase $PHASE loads (BACKEND: single, cluster or sentinel),
# its locations (ROUTE: "", /cluster or /sentinel, before /strict...), its
# count zone, the slots of the keys resume.py probes (PROBE_SLOTS: the
# killed master's in the cluster, any elsewhere) and the most decisions
# may take to come back from the start of the fault (BOUND_MS, or none).
select_backend() {
    case $PHASE in
        cluster_* | sentinel_*)
            BACKEND=${PHASE%%_*}
            ROUTE=/$BACKEND
            LOCATIONS=$ROUTE/strict,$ROUTE/strict_deny,$ROUTE/async,$ROUTE/count
            COUNT_ZONE=${BACKEND}_count
            if [ "$BACKEND" = cluster ]; then
                PROBE_SLOTS=$VICTIM_SLOTS
                BOUND_MS=$CLUSTER_BOUND_MS
            else
                PROBE_SLOTS=
                BOUND_MS=$SENTINEL_BOUND_MS
            fi
            ;;
        *)
            BACKEND=single
            ROUTE=
            LOCATIONS=/local,/strict,/strict_deny,/async,/count
            COUNT_ZONE=count
            PROBE_SLOTS=
            BOUND_MS=
            ;;
    esac
}

# The ports of the backend's masters now: where its keys are.
backend_masters() {
    case $BACKEND in
        cluster) cluster_masters ;;
        sentinel) sentinel_master_port "${SENTINEL_PORTS[0]}" ;;
        *) echo "$REDIS_PORT" ;;
    esac
}

# The ports of every node of the backend, masters and replicas.
backend_nodes() {
    case $BACKEND in
        cluster) echo "${CLUSTER_PORTS[@]}" ;;
        sentinel) echo "${SENTINEL_DATA[@]}" ;;
        *) echo "$REDIS_PORT" ;;
    esac
}

# --- the load ---------------------------------------------------------------

start_load() {
    local n
    WRK_PIDS=()
    for n in "${NODES[@]}"; do
        wrk -t1 -c"$CONNECTIONS" -d10m --timeout 2s -s "$ROOT/scripts/lib/load.lua" \
            "http://127.0.0.1:${PORT[$n]}" -- "$EPOCH_FILE" "$RAW/$PHASE.$n.counts" \
            "$HOT_KEYS" "$LOCATIONS" \
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
    "$PYTHON" "$HERE/resume.py" --phase "$PHASE" --redis-ports "$(backend_nodes)" \
        --route "$ROUTE" --count-zone "$COUNT_ZONE" ${PROBE_SLOTS:+--slots "$PROBE_SLOTS"} \
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
# in Redis for its keys ("<phase>.<epoch>.<i>"), on every master of the
# backend (redis-cli prints an empty array as an empty line).
redis_epochs() {
    local port
    for port in $(backend_masters); do
        cli_at "$port" EVAL "local out = {}
            for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
                out[#out + 1] = key
                out[#out + 1] = redis.call('HGET', key, 'n') or '0'
            end
            return out" 0 "throttle:{$COUNT_ZONE:*}:$PHASE.*"
    done | awk 'NF == 0 { next }
                !value { split($0, part, "."); epoch = part[2]; value = 1; next }
                { units[epoch] += $0; value = 0 }
                END { for (e in units) print e, units[e] }' | sort
}

# Units the load's answers say the count zone admitted (200, PASSED) in
# the compared epochs, both nginx together.
admitted_units() {
    cat "$RAW/$PHASE".*.counts \
        | awk -v count="$ROUTE/count" \
            '$2 == count && $3 == 200 && $1 !~ /\.(end|probe)$/ { n += $5 } END { print n + 0 }'
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
    select_backend
    : >"$RAW/$PHASE.record"
    [ -z "$BOUND_MS" ] || record bound_ms "$BOUND_MS"
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
    set_epoch after
    sleep "$TAIL"
    set_epoch end
    sleep 0.3
    stop_load
    settle_units
    log_check
    if declare -F "tidy_$PHASE" >/dev/null; then "tidy_$PHASE"; fi
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
    --redis-timeout-ms 50 --failover-timeout-ms 250 --resume-ms "$RESUME_MS" --day-turned "$DAY_TURNED" \
    --setup "2 nginx $NGINX_VERSION (2 workers each), redis-server $REDIS_VERSION (--save '' --appendonly no), then a Redis Cluster of 3 masters + 3 replicas and a master, a replica and 3 Sentinels of the same, loopback; wrk -t1 -c$CONNECTIONS --timeout 2s on each nginx, at full speed; $(nproc) CPUs shared by all; phases run in ${RUN_SECONDS} s"
