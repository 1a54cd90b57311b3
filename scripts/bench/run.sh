#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Benchmark: throughput and latency of the throttle module against no
# limiting and against nginx's limit_req, with wrk on loopback, in local and
# in Redis-backed (strict and async) mode, with Redis commands per request
# counted from Redis's own statistics; then the number of keys a zone holds
# per MiB. Measures, never asserts.
#
# The *_hot and *_distinct rows send each request with a key, "?k=<i>",
# cycling over BENCH_HOT_KEYS or BENCH_DISTINCT_KEYS values
# (scripts/bench/keys.lua); each async row has a local row with the same
# requests to compare with.
#
# The api_pass and strict_api_pass rows ask the decision endpoint
# (throttle_api) what throttle_pass and strict_pass decide for a request:
# GET ?zone=...&key=bench, always passing, answered with JSON.
#
# The cluster_* rows use a Redis Cluster of 3 masters (no replicas) started
# on loopback next to the single Redis, on the same CPUs: each is compared
# with the same row on the single Redis in the same run, and its Redis
# figures are summed over the masters, with the redirections (MOVED, ASK)
# and each master's share of the scripts.
#
# What the throttle_metrics counters cost (they are always on: atomic adds
# in shared memory on the request path) is measured by two rows of the
# throttle_pass location, interleaved with the others in every round:
# throttle_pass_no_counters asks a second nginx, started and stopped with
# the first, on a port of its own, with the same configuration but
# NO_COUNTERS_MODULE (built with -DNGX_HTTP_THROTTLE_COUNTERS=0, which adds
# nothing: its /metrics reports zeros, checked before measuring); and
# throttle_pass_scraped asks the first nginx while scripts/bench/scrape.py
# fetches its /metrics (throttle_metrics) every 100 ms over one keep-alive
# connection, each answer a 200 (the bench fails on another, or on a run
# without scrapes; the scrapes and the scraper's CPU time are reported).
#
# Environment (defaults in brackets):
#   NGINX_BIN [/usr/sbin/nginx]  MODULE [build/ngx_http_throttle_module.so]
#   NO_COUNTERS_MODULE [build/no-counters/ngx_http_throttle_module.so]
#                          the module without counters (make bench builds
#                          it); needed only for throttle_pass_no_counters
#   BENCH_ROUNDS [5]       rounds; each runs every configuration once,
#                          every other round in reverse order (the
#                          per-round ratios of this 2-core machine spread
#                          by 10-20%: the median of 5 holds still better)
#   BENCH_DURATION [4]     seconds per wrk run
#   BENCH_THREADS [1]      wrk threads
#   BENCH_CONNECTIONS [32] wrk connections
#   BENCH_WORKERS [auto]   nginx worker_processes
#   BENCH_NGINX_CPUS []    nginx worker_cpu_affinity (e.g. "auto", "01")
#   BENCH_WRK_CPUS []      CPUs to pin wrk to with taskset (e.g. "1")
#   BENCH_REDIS_CPUS []    CPUs to pin Redis to with taskset: with nginx and
#                          wrk on the others, the Redis-backed rows show
#                          nginx's own cost, as with Redis on another host
#   BENCH_LAYOUT [shared]  "shared": wrk, nginx and Redis share every CPU;
#                          "redis-apart": Redis on the last CPU, nginx's
#                          workers and wrk on the others (sets the three
#                          *_CPUS above unless given; output goes to
#                          build/bench/redis-apart/)
#   BENCH_CONFIGS [all]    the configurations to run, by name (e.g.
#                          "throttle_pass_distinct async_pass_distinct")
#   BENCH_DENSITY [1m 4m]  zone sizes for the keys-per-MiB probe ("" skips)
#   BENCH_HOT_KEYS [100]   distinct keys of the *_hot rows
#   BENCH_DISTINCT_KEYS [100000]  distinct keys of the *_distinct rows (their
#                          zones, 32m, hold about 260,000)
#   BENCH_DOCS [docs/performance.md]  the file whose section for this
#                          layout the report replaces ("" leaves it alone)
#   REDIS_SERVER [redis-server]  REDIS_CLI [redis-cli]  for the strict rows;
#                          a redis-server of its own is started on a free
#                          loopback port (--save '' --appendonly no) and
#                          stopped at exit; if the default one is missing,
#                          it is installed with scripts/lib/deps.sh; the
#                          cluster_* rows start 3 more, with
#                          --cluster-enabled yes, joined by redis-cli
#                          --cluster create --cluster-replicas 0
#
# Output: a table on stdout, the same as Markdown in build/bench/results.md
# (build/bench/redis-apart/ for that layout), raw wrk output in raw/ there
# (and what each run's scraper printed), nginx logs in nginx/logs/ (the
# second nginx's in nginx-no-counters/logs/), Redis's log in redis/; and
# the figures with a text on how to read them in BENCH_DOCS, whose section
# for this layout ("All CPUs shared" or "Redis on a CPU of its own") is
# replaced and the other kept: after make bench's two passes it holds both.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/scripts/bench
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
NO_COUNTERS_MODULE=${NO_COUNTERS_MODULE:-$ROOT/build/no-counters/ngx_http_throttle_module.so}
ROUNDS=${BENCH_ROUNDS:-5}
DURATION=${BENCH_DURATION:-4}
THREADS=${BENCH_THREADS:-1}
CONNECTIONS=${BENCH_CONNECTIONS:-32}
WORKERS=${BENCH_WORKERS:-auto}
DENSITY_SIZES=${BENCH_DENSITY-1m 4m}
HOT_KEYS=${BENCH_HOT_KEYS:-100}
DISTINCT_KEYS=${BENCH_DISTINCT_KEYS:-100000}
PYTHON=${PYTHON:-python3}
LAYOUT=${BENCH_LAYOUT:-shared}
DOCS=${BENCH_DOCS-$ROOT/docs/performance.md}
OUT=$ROOT/build/bench
case $LAYOUT in
shared) ;;
redis-apart)
    # Redis gets the last CPU to itself, as it would have on a host of its
    # own; nginx's workers and wrk share the others (worker_cpu_affinity
    # auto within a mask of them).
    NCPU=$(nproc)
    [ "$NCPU" -ge 2 ] || { echo "bench: BENCH_LAYOUT=redis-apart needs 2 CPUs" >&2; exit 1; }
    MASK=$(printf '1%.0s' $(seq $((NCPU - 1))))
    : "${BENCH_REDIS_CPUS=$((NCPU - 1))}"
    : "${BENCH_NGINX_CPUS=auto $MASK}"
    : "${BENCH_WRK_CPUS=0-$((NCPU - 2))}"
    OUT=$ROOT/build/bench/redis-apart
    ;;
*)
    echo "bench: BENCH_LAYOUT must be shared or redis-apart, not \"$LAYOUT\"" >&2
    exit 1
    ;;
esac
NGINX_CPUS=${BENCH_NGINX_CPUS-}
WRK_CPUS=${BENCH_WRK_CPUS-}
WRK_PIN=
[ -n "$WRK_CPUS" ] && WRK_PIN="taskset -c $WRK_CPUS"
REDIS_CPUS=${BENCH_REDIS_CPUS-}
REDIS_PIN=
[ -n "$REDIS_CPUS" ] && REDIS_PIN="taskset -c $REDIS_CPUS"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}

PREFIX=$OUT/nginx
PREFIX_NO_COUNTERS=$OUT/nginx-no-counters
RAW=$OUT/raw
RUNS=$OUT/runs.tsv
DENSITY=$OUT/density.jsonl
REDIS_DIR=$OUT/redis

ALL_CONFIGS="none limit_req throttle_pass throttle_pass_authorized
    throttle_pass_delay throttle_pass_settle throttle_pass_plans concurrent_pass
    throttle_pass_noheaders throttle_pass_no_counters throttle_pass_scraped
    api_pass strict_pass strict_api_pass strict_pass_settle
    strict_concurrent_pass
    throttle_reject strict_reject strict_flooded_key
    throttle_pass_hot async_pass_hot
    throttle_pass_distinct limit_req_distinct async_pass_distinct
    throttle_pass_million
    fixed_window_pass sliding_window_pass sliding_log_pass
    strict_fixed_window_pass strict_sliding_window_pass
    strict_sliding_log_pass strict_pass_distinct cluster_strict_pass
    cluster_strict_pass_distinct cluster_async_pass_hot"
read -r -a CONFIGS <<<"$(echo ${BENCH_CONFIGS:-$ALL_CONFIGS})"

die() { echo "bench: $*" >&2; exit 1; }

for tool in wrk curl "$PYTHON"; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
if ! command -v "$REDIS_SERVER" >/dev/null \
        || ! command -v "$REDIS_CLI" >/dev/null; then
    if [ "$REDIS_SERVER" = redis-server ] && [ "$REDIS_CLI" = redis-cli ]; then
        echo "bench: redis-server is not installed; the strict rows need" \
             "it: installing it (scripts/lib/deps.sh redis-server redis-tools)"
        "$ROOT/scripts/lib/deps.sh" redis-server redis-tools \
            || die "could not install redis-server; install it with:" \
                   "apt-get install redis-server"
    fi
    command -v "$REDIS_SERVER" >/dev/null \
        || die "$REDIS_SERVER is not installed (apt-get install redis-server)"
    command -v "$REDIS_CLI" >/dev/null \
        || die "$REDIS_CLI is not installed (apt-get install redis-tools)"
fi
# check_nginx_and_module, free_port, wait_http, rcli, redis_version,
# start_redis, stop_redis (and REDIS_PID), stop_nginx, stop_child,
# source_commit
. "$ROOT/scripts/lib/processes.sh"
check_nginx_and_module
# the second nginx runs only for the row that measures it
NO_COUNTERS=
if [[ " ${CONFIGS[*]} " == *" throttle_pass_no_counters "* ]]; then
    NO_COUNTERS=1
    [ -f "$NO_COUNTERS_MODULE" ] \
        || die "no module at $NO_COUNTERS_MODULE for throttle_pass_no_counters" \
               "(run: make bench, which builds it)"
    NO_COUNTERS_MODULE=$(cd "$(dirname "$NO_COUNTERS_MODULE")" && pwd)/$(basename "$NO_COUNTERS_MODULE")
fi
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "BENCH_DURATION must be a positive integer (seconds)"
for c in "${CONFIGS[@]}"; do
    [[ " $(echo $ALL_CONFIGS) " == *" $c "* ]] \
        || die "BENCH_CONFIGS: unknown configuration \"$c\" (known: $(echo $ALL_CONFIGS))"
done
[ ${#CONFIGS[@]} -gt 0 ] || die "BENCH_CONFIGS names no configuration"
[[ $HOT_KEYS =~ ^[1-9][0-9]*$ ]] || die "BENCH_HOT_KEYS must be a positive integer"
[[ $DISTINCT_KEYS =~ ^[1-9][0-9]*$ ]] || die "BENCH_DISTINCT_KEYS must be a positive integer"

# start_redis_cluster, cluster_seeds, stop_redis_cluster (and CLUSTER_PORTS)
. "$BENCH/redis_cluster.sh"
# redis_counters, redis_ports_of, redis_settle, per_node_difference
. "$BENCH/run_redis.sh"
# location_of, port_of, query_of, start_bench_nginx, check,
# check_locations, zone_requests, tp_passed, check_counters
. "$BENCH/run_nginx.sh"
# run_wrk, start_scraper, stop_scraper (and SCRAPER_PID), keys_of
. "$BENCH/run_wrk.sh"

cleanup() {
    local f
    [ -z "${SCRAPER_PID:-}" ] || stop_child "$SCRAPER_PID"
    stop_nginx "$PREFIX/logs/nginx.pid"
    stop_nginx "$PREFIX_NO_COUNTERS/logs/nginx.pid"
    for f in "$OUT"/density/*/logs/nginx.pid; do
        [ -e "$f" ] && stop_nginx "$f"
    done
    stop_redis
    stop_redis_cluster
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- output -----------------------------------------------------------------

rm -rf "$PREFIX" "$PREFIX_NO_COUNTERS" "$RAW" "$OUT/density" "$REDIS_DIR"
mkdir -p "$RAW" "$REDIS_DIR"
for p in "$PREFIX" "$PREFIX_NO_COUNTERS"; do
    mkdir -p "$p"/{conf,html,logs,temp}
    chmod 755 "$p" "$p/html"
done
chmod 755 "$OUT"

# --- the Redis of the strict rows -------------------------------------------

# Its port is taken before nginx's, so the two cannot collide.
REDIS_PORT=$(free_port)
start_redis
REDIS_VERSION=$(redis_version)
# and the cluster of the cluster_* rows (also before nginx's port)
CLUSTER_MASTERS=3
start_redis_cluster "$CLUSTER_MASTERS" "$REDIS_DIR/cluster"

# --- the nginx under test ---------------------------------------------------

PORT=$(free_port)
PORT_NO_COUNTERS=
[ -z "$NO_COUNTERS" ] || PORT_NO_COUNTERS=$(free_port)
if [ -n "$NGINX_CPUS" ]; then
    AFFINITY="worker_cpu_affinity $NGINX_CPUS;"
else
    AFFINITY="# worker_cpu_affinity: not set"
fi

start_bench_nginx "$PREFIX" "$MODULE" "$PORT"
[ -z "$NO_COUNTERS" ] \
    || start_bench_nginx "$PREFIX_NO_COUNTERS" "$NO_COUNTERS_MODULE" "$PORT_NO_COUNTERS"

# Every location must answer as intended, and the counters count as
# claimed, before anything is measured.
check_locations
check_counters

# --- throughput and latency -------------------------------------------------

# which run the report describes
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
COMMIT=$(source_commit)

printf 'config\tround\trps\tp99_ms\tnon2xx\terrors\trequests\tredis_scripts\tredis_cmds\tredis_other\tredis_gets\tredis_rejected\tredis_asking\tredis_moved\tredis_ask\tredis_map_reads\tredis_by_node\tscrapes\tscraper_cpu_s\n' >"$RUNS"
# wrk and nginx share the machine with whatever else runs: say how busy it is
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOAD_BEFORE" -v n="$(nproc)" 'BEGIN { exit !(l > n * 0.75) }'; then
    echo "bench: note: load average is $LOAD_BEFORE on $(nproc) CPUs;" \
         "other processes will add noise"
fi
echo "bench: nginx $WORKERS workers on 127.0.0.1:$PORT${NO_COUNTERS:+" (without counters: $PORT_NO_COUNTERS)"};" \
     "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s;" \
     "$ROUNDS rounds of ${#CONFIGS[@]} configurations;" \
     "keyed rows: $HOT_KEYS hot keys, $DISTINCT_KEYS distinct keys"
for c in "${CONFIGS[@]}"; do
    run_wrk "$c" warmup 1
done
# Every other round runs the configurations in reverse order, so that a
# pair's two members take turns going first: drift within a round, and
# whatever one run leaves to the next, weigh on both alike.
REVERSED=()
for ((i = ${#CONFIGS[@]} - 1; i >= 0; i--)); do
    REVERSED+=("${CONFIGS[i]}")
done
for round in $(seq "$ROUNDS"); do
    if ((round % 2)); then ORDER=("${CONFIGS[@]}"); else ORDER=("${REVERSED[@]}"); fi
    for c in "${ORDER[@]}"; do
        run_wrk "$c" "$round" "$DURATION"
        tail -n 1 "$RUNS" | awk -F'\t' '{
            printf "  round %s  %-28s %10.0f req/s  p99 %7.3f ms  non-2xx %d",
                   $2, $1, $3, $4, $5
            if ($8 != "-")
                printf "  Redis: %d EVALSHA/EVAL, %.4f commands/request",
                       $8, $7 ? $9 / $7 : 0
            if ($1 ~ /^cluster_/)
                printf ", %d redirected, per master %s", $12, $17
            if ($18 != "-")
                printf "  %d scrapes of /metrics (scraper CPU %.3f s)",
                       $18, $19
            printf "\n" }'
    done
done
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
# throttle_pass_delay measures delay= that never makes a request wait: say
# whether one waited
DELAY_ROW=
if [[ " ${CONFIGS[*]} " == *" throttle_pass_delay "* ]]; then
    DELAYED=$(zone_requests "$PORT" tpd delayed)
    DELAY_ROW="throttle_pass_delay: delay=1000 at 1 us a unit, $DELAYED of its requests waited ($(zone_requests "$PORT" tpd passed) went at once)"
    [ "$DELAYED" = 0 ] \
        || echo "bench: note: $DELAYED requests of throttle_pass_delay waited"
fi
stop_nginx "$PREFIX/logs/nginx.pid"
stop_nginx "$PREFIX_NO_COUNTERS/logs/nginx.pid"
stop_redis_cluster
# Redis failures (timeouts, error replies) are logged at "error"
NGINX_ERRORS=$(grep -cE '\[(error|crit|alert|emerg)\]' "$PREFIX/logs/error.log" || true)
if [ "$NGINX_ERRORS" -gt 0 ]; then
    echo "bench: note: $NGINX_ERRORS lines at error level or above in" \
         "$PREFIX/logs/error.log, e.g.:"
    grep -E '\[(error|crit|alert|emerg)\]' "$PREFIX/logs/error.log" \
        | sed -n 1,3p | sed 's/^/  /'
fi
# the first of them, for the report: "20:35:23 [error] <message>" (a
# Redis timeout explains the non-2xx of a strict row measured then)
NGINX_ERROR_LINES=$(grep -E '\[(error|crit|alert|emerg)\]' "$PREFIX/logs/error.log" \
    | sed -n 1,3p | sed -E 's/^[0-9]+\/[0-9]+\/[0-9]+ //; s/ [0-9]+#[0-9]+: / /' \
    | awk '{ printf "%s`%s`", (NR > 1 ? "; " : ""), $0 }' || true)
# an async zone that cannot sync with Redis, or a zone evicting keys that
# are still limited or due a sync, says so at "warn"
NGINX_WARNS=$(grep -c '\[warn\]' "$PREFIX/logs/error.log" || true)
if [ "$NGINX_WARNS" -gt 0 ]; then
    echo "bench: note: $NGINX_WARNS lines at warn level in" \
         "$PREFIX/logs/error.log, e.g.:"
    grep '\[warn\]' "$PREFIX/logs/error.log" | sed -n 1,3p | sed 's/^/  /'
fi
if [ -n "$NO_COUNTERS" ] && grep -qE '\[(warn|error|crit|alert|emerg)\]' \
        "$PREFIX_NO_COUNTERS/logs/error.log"; then
    echo "bench: note: the nginx without counters logged at warn or above" \
         "in $PREFIX_NO_COUNTERS/logs/error.log, e.g.:"
    grep -E '\[(warn|error|crit|alert|emerg)\]' "$PREFIX_NO_COUNTERS/logs/error.log" \
        | sed -n 1,3p | sed 's/^/  /'
fi

# --- keys per MiB -----------------------------------------------------------

: >"$DENSITY"
if [ -n "$DENSITY_SIZES" ]; then
    echo "bench: keys per MiB, zone sizes: $DENSITY_SIZES; keys of 16 and 200 bytes"
    DPORT=$(free_port)
    # every algorithm in every mode it has (strict and async on the bench's
    # Redis, which density.py flushes), and limit_req
    for size in $DENSITY_SIZES; do
        for len in 16 200; do
            for am in gcra:local gcra:strict gcra:async \
                      fixed_window:local fixed_window:strict fixed_window:async \
                      sliding_window:local sliding_window:strict \
                      sliding_window:async sliding_log:local sliding_log:strict \
                      limit_req; do
                case $am in
                    limit_req) args=(--kind limit_req) ;;
                    *) args=(--kind throttle --algorithm "${am%%:*}"
                             --mode "${am#*:}" --redis-port "$REDIS_PORT") ;;
                esac
                "$PYTHON" "$BENCH/density.py" --nginx "$NGINX_BIN" \
                    --module "$MODULE" --prefix "$OUT/density/${am/:/-}-$len-$size" \
                    --port "$DPORT" --size "$size" --key-len "$len" "${args[@]}" \
                    | tee -a "$DENSITY" | sed 's/^/  /'
            done
        done
    done
fi
# (the density probe's strict and async zones used it)
stop_redis

# --- report -----------------------------------------------------------------

if [ -n "$REDIS_CPUS$NGINX_CPUS$WRK_CPUS" ]; then
    LAYOUT_TEXT="Redis (the single one and the cluster's $CLUSTER_MASTERS masters) on CPU ${REDIS_CPUS:-any}, nginx's workers on ${NGINX_CPUS:-any} (worker_cpu_affinity), wrk on CPU ${WRK_CPUS:-any}"
else
    LAYOUT_TEXT="$(nproc) CPUs shared by wrk, nginx and Redis (the single one and the cluster's $CLUSTER_MASTERS masters)"
fi
NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | sed 's/^nginx version: //')
CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
WRK_VERSION=$( (wrk -v 2>&1 || true) | awk 'NR == 1 { print $2 }')

METRICS_ROWS=
[ -z "$NO_COUNTERS" ] || METRICS_ROWS="throttle_pass_no_counters on a second nginx, running alongside the first, with the same configuration and the module built with -DNGX_HTTP_THROTTLE_COUNTERS=0 (its /metrics checked to count nothing)"
if [[ " ${CONFIGS[*]} " == *" throttle_pass_scraped "* ]]; then
    METRICS_ROWS+="${METRICS_ROWS:+; }throttle_pass_scraped with scripts/bench/scrape.py fetching the first nginx's /metrics (throttle_metrics) every 100 ms over one keep-alive connection"
fi
DOCS_ARGS=()
[ -n "$DOCS" ] && DOCS_ARGS=(--docs "$DOCS" --section "$LAYOUT" \
    --date "on $RUN_DATE" --commit "$COMMIT")
"$PYTHON" "$BENCH/report.py" "${DOCS_ARGS[@]}" \
    --runs "$RUNS" --density "$DENSITY" --markdown "$OUT/results.md" \
    --connections "$CONNECTIONS" --duration "$DURATION" \
    --hot-keys "$HOT_KEYS" --distinct-keys "$DISTINCT_KEYS" \
    --setting "nginx: $NGINX_VERSION, worker_processes $WORKERS, keepalive, access_log off" \
    --setting "wrk $WRK_VERSION: -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency, $ROUNDS rounds, loopback" \
    --setting "redis: $REDIS_VERSION, on loopback, --save '' --appendonly no; throttle_redis defaults (timeout 50ms, keepalive 2 per worker); async zones sync_interval=100ms; nginx error log: $NGINX_ERRORS lines at error or above, $NGINX_WARNS at warn" \
    --setting "redis cluster: $CLUSTER_MASTERS masters, no replicas, the same redis-server with --cluster-enabled yes, joined by redis-cli --cluster create; throttle_redis cluster= defaults (timeout 50ms, keepalive 2 per worker and master, cluster_refresh 10s, max_redirects 5)" \
    --setting "keyed rows (*_hot, *_distinct): wrk -s scripts/bench/keys.lua, key ?k= cycling over $HOT_KEYS (hot) or $DISTINCT_KEYS (distinct) values; rate=1000000r/s burst=1000000 (always passing), zones 1m (hot) and 32m (distinct)" \
    ${NGINX_ERROR_LINES:+--setting "nginx error log, first lines at error or above: $NGINX_ERROR_LINES"} \
    ${METRICS_ROWS:+--setting "metrics rows: $METRICS_ROWS"} \
    ${DELAY_ROW:+--setting "$DELAY_ROW"} \
    --layout "$LAYOUT_TEXT" \
    --setting "layout: $LAYOUT_TEXT" \
    --setting "hardware: $(nproc) CPUs, ${CPU_MODEL:-unknown CPU}, Linux $(uname -r); load average $LOAD_BEFORE before, $LOAD_AFTER after (wrk, nginx and Redis included)"

echo
echo "bench: Markdown table in $OUT/results.md; raw wrk output in $RAW/"
[ -z "$DOCS" ] || echo "bench: section \"$LAYOUT\" of $DOCS written"
