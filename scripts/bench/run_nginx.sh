# SPDX-License-Identifier: BSD-2-Clause
# Shell helpers for run.sh's nginx under test: which location, port and
# query string a configuration's row asks, starting an nginx from
# scripts/bench/nginx.conf.in, the checks that every location answers as
# intended before anything is measured, and a zone's requests from
# /metrics. Need $NGINX_BIN, $BENCH, $WORKERS, $AFFINITY, $ALL_CONFIGS,
# $PORT, $PORT_NO_COUNTERS, $NO_COUNTERS, $NO_COUNTERS_MODULE, $PREFIX,
# $REDIS_PORT, CLUSTER_PORTS, cluster_seeds (scripts/bench/redis_cluster.sh),
# wait_http (scripts/lib/processes.sh), redis_counters and redis_settle
# (scripts/bench/run_redis.sh) and die from the caller.

# The location a configuration's row measures, and the port of the nginx
# that serves it: the two metrics rows measure throttle_pass's.
location_of() {
    case $1 in
        throttle_pass_no_counters|throttle_pass_scraped) echo throttle_pass ;;
        *) echo "$1" ;;
    esac
}
port_of() {
    case $1 in
        throttle_pass_no_counters) echo "$PORT_NO_COUNTERS" ;;
        *) echo "$PORT" ;;
    esac
}
# The query string of a row's requests: the decision endpoint's check.
query_of() {
    case $1 in
        api_pass)        echo "?zone=ap&key=bench" ;;
        strict_api_pass) echo "?zone=sap&key=bench" ;;
    esac
}

# Renders scripts/bench/nginx.conf.in into prefix $1 with module $2 and port $3,
# and starts that nginx.
start_bench_nginx() {
    local prefix=$1 module=$2 port=$3 c
    sed -e "s|@MODULE@|$module|g" -e "s|@WORKERS@|$WORKERS|g" \
        -e "s|@AFFINITY@|$AFFINITY|g" \
        -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
        -e "s|@CLUSTER_SEEDS@|$(cluster_seeds)|g" \
        -e "s|@PORT@|$port|g" "$BENCH/nginx.conf.in" >"$prefix/conf/nginx.conf"
    for c in $ALL_CONFIGS; do
        # a small static file per location (every one: the checks below
        # visit them all, whichever are measured)
        c=$(location_of "$c")
        printf '{"ok":true}\n' >"$prefix/html/$c"
        chmod 644 "$prefix/html/$c"
    done
    "$NGINX_BIN" -p "$prefix/" -c conf/nginx.conf -e logs/error.log -t -q \
        || die "nginx -t failed for $prefix/conf/nginx.conf"
    "$NGINX_BIN" -p "$prefix/" -c conf/nginx.conf -e logs/error.log
    wait_http "$port" none || die "nginx did not answer; see $prefix/logs/error.log"
}

# Every location must answer as intended before anything is measured.
check() {
    local path=$1 want=$2 got
    got=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$path")
    [ "$got" = "$want" ] || die "/$path answered $got, expected $want"
}
check_locations() {
    for c in none limit_req throttle_pass throttle_pass_authorized \
             throttle_pass_delay throttle_pass_settle throttle_pass_plans \
             concurrent_pass \
             throttle_pass_noheaders \
             "api_pass$(query_of api_pass)" \
             "throttle_pass_hot?k=1" "throttle_pass_distinct?k=1" \
             fixed_window_pass sliding_window_pass sliding_log_pass \
             strict_fixed_window_pass strict_sliding_window_pass \
             strict_sliding_log_pass; do
        check "$c" 200
    done
    check throttle_reject 200   # the one request a day
    check throttle_reject 429
    redis_counters
    calls_before=$RC_SCRIPTS
    check strict_pass 200
    check strict_pass_settle 200
    check strict_concurrent_pass 200
    check "strict_api_pass$(query_of strict_api_pass)" 200
    check strict_reject 200     # the one request a day, granted by Redis
    check strict_reject 429     # refused by Redis, which fills the denial cache
    check strict_flooded_key 200  # the key's first request
    redis_counters
    # at least 4 (a first EVALSHA answered NOSCRIPT is followed by an EVAL)
    [ $((RC_SCRIPTS - calls_before)) -ge 4 ] \
        || die "the strict locations sent $((RC_SCRIPTS - calls_before))" \
               "EVALSHA/EVAL to Redis for 4 requests, expected at least 4"
    check "strict_pass_distinct?k=1" 200
    # the cluster's strict locations: one key, and keys whose slots fall on
    # every master (12 keys: the map is read at nginx's start, so they are
    # sent to their masters at once)
    redis_counters "${CLUSTER_PORTS[@]}"
    calls_before=$RC_SCRIPTS
    check cluster_strict_pass 200
    for k in $(seq 12); do
        check "cluster_strict_pass_distinct?k=$k" 200
    done
    redis_counters "${CLUSTER_PORTS[@]}"
    [ $((RC_SCRIPTS - calls_before)) -ge 13 ] \
        || die "the cluster's strict locations ran $((RC_SCRIPTS - calls_before))" \
               "EVALSHA/EVAL on the masters for 13 requests, expected at least" \
               "13; see $PREFIX/logs/error.log"
    [[ "/$RC_BY_NODE/" != */0/* ]] \
        || die "a master of the cluster ran no script for 13 requests" \
               "(EVALSHA/EVAL per master: $RC_BY_NODE)"
    # the async locations answer at once (with RateLimit-Policy, as every
    # limited request: the keyed rows with ?k=), and their next sync reaches
    # Redis
    redis_counters
    calls_before=$RC_SCRIPTS
    check "async_pass_hot?k=1" 200
    check "async_pass_distinct?k=1" 200
    for c in throttle_pass "throttle_pass_hot?k=2" "async_pass_hot?k=2" \
             "throttle_pass_distinct?k=2" "async_pass_distinct?k=2"; do
        headers=$(curl -s -D - -o /dev/null "http://127.0.0.1:$PORT/$c")
        grep -qi '^RateLimit-Policy:' <<<"$headers" \
            || die "/$c sent no RateLimit-Policy"
    done
    redis_settle "the async checks"
    # one sync per zone, and the same keys once more (the first EVALSHA of a
    # fresh Redis is answered NOSCRIPT and followed by an EVAL)
    [ $((RC_SCRIPTS - calls_before)) -ge 2 ] \
        || die "the async locations sent $((RC_SCRIPTS - calls_before))" \
               "EVALSHA/EVAL to Redis after a request each, expected at least" \
               "2 (one sync per zone); see $PREFIX/logs/error.log"
    redis_counters "${CLUSTER_PORTS[@]}"
    calls_before=$RC_SCRIPTS
    check "cluster_async_pass_hot?k=1" 200
    redis_settle "the cluster's async check" "${CLUSTER_PORTS[@]}"
    [ $((RC_SCRIPTS - calls_before)) -ge 1 ] \
        || die "the cluster's async location had no sync run on the masters" \
               "after a request; see $PREFIX/logs/error.log"
    headers=$(curl -s -D - -o /dev/null "http://127.0.0.1:$PORT/throttle_pass_noheaders")
    if grep -qi '^RateLimit' <<<"$headers"; then
        die "/throttle_pass_noheaders sent RateLimit headers"
    fi
}

# The requests zone $2 counted with result $3, from the /metrics of the
# nginx on port $1.
zone_requests() {
    local text
    text=$(curl -sf "http://127.0.0.1:$1/metrics") \
        || die "/metrics on port $1 did not answer 200"
    awk -v series="nginx_throttle_requests_total{zone=\"$2\",result=\"$3\"}" '
         $1 == series { print $2; found = 1 }
         END { exit !found }' <<<"$text" \
        || die "/metrics on port $1 has no $3 requests of zone $2"
}
tp_passed() {
    zone_requests "$1" tp passed
}

# The first nginx counts (the checks of check_locations passed
# throttle_pass at least twice); the second, the same requests later,
# counts nothing: its row measures the module without counters, as it
# claims.
check_counters() {
    [ "$(tp_passed "$PORT")" -ge 2 ] \
        || die "/metrics counted $(tp_passed "$PORT") passed requests of" \
               "throttle_pass, expected at least 2"
    if [ -n "$NO_COUNTERS" ]; then
        for i in 1 2 3; do
            got=$(curl -s -o /dev/null -w '%{http_code}' \
                  "http://127.0.0.1:$PORT_NO_COUNTERS/throttle_pass")
            [ "$got" = 200 ] || die "/throttle_pass of the nginx without" \
                                    "counters answered $got, expected 200"
        done
        [ "$(tp_passed "$PORT_NO_COUNTERS")" = 0 ] \
            || die "the module without counters ($NO_COUNTERS_MODULE) counted" \
                   "$(tp_passed "$PORT_NO_COUNTERS") passed requests, expected 0"
    fi
}
