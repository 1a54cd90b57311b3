#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The demo: two nginx with the throttle module, A and B, and one
# redis-server that both use, all on loopback, from conf/demo.conf.
#
#   scripts/demo/run.sh start   (re)start them, then show
#                               1. a local zone in A: a burst passing,
#                                  then 429s;
#                               2. one strict zone shared by A and B
#                                  through Redis, against limit_req in each;
#                               3. A's /metrics after that
#   scripts/demo/run.sh stop    stop what start started (idempotent)
#
# A listens on 127.0.0.1:8080 and B on 127.0.0.1:8081 when those ports are
# free, on free ports otherwise (start says which); redis-server on a free
# port of its own. Nothing else is touched: stop signals only the processes
# named by the pid files start left, and only if they are still an nginx
# or a redis-server.
#
# Environment: NGINX_BIN (default /usr/sbin/nginx), MODULE (default
# build/ngx_http_throttle_module.so), DEMO_PREFIX (default build/demo),
# REDIS_SERVER (redis-server), REDIS_CLI (redis-cli), PYTHON (python3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
PREFIX=${DEMO_PREFIX:-$ROOT/build/demo}
PREFIX=${PREFIX%/}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
PYTHON=${PYTHON:-python3}
ADDR=127.0.0.1
NODES=(a b)
declare -A WANT_PORT=([a]=8080 [b]=8081)
REDIS_DIR=$PREFIX/redis
REDIS_PIDFILE=$REDIS_DIR/redis.pid

# requests alice sends to the zone that A and B share
SHARED_REQUESTS=16

die() { echo "demo: $*" >&2; exit 1; }

# alive, wait_gone, free_port, check_nginx_and_module
. "$ROOT/scripts/lib/processes.sh"

node_name() { echo "${1^^}"; }
nginx_pidfile() { echo "$PREFIX/$1/logs/nginx.pid"; }

# nginx $1 (a or b) with its prefix, configuration and error log (-e: the
# compiled-in error log, under /var/log, is not touched).
ngx() {
    local node=$1
    shift
    "$NGINX_BIN" -p "$PREFIX/$node/" -c conf/nginx.conf -e logs/error.log "$@"
}

# The pid in pid file $1 if that process is alive and its command is $2: a
# pid file left from before a reboot may name some other process by now.
ours() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
    echo "$pid"
}

running() {
    local n
    for n in "${NODES[@]}"; do
        ours "$(nginx_pidfile "$n")" nginx >/dev/null && return 0
    done
    ours "$REDIS_PIDFILE" redis-server >/dev/null
}

# Stops the process of pid file $1 if it is still a $2 (SIGTERM, SIGKILL
# 10 s later), says so as $3, and removes the pid file.
STOPPED=0
stop_one() {
    local pidfile=$1 comm=$2 what=$3 pid
    if pid=$(ours "$pidfile" "$comm"); then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid" 200; then
            kill -KILL "$pid" 2>/dev/null || true
            wait_gone "$pid" 40 || true
        fi
        echo "demo: stopped $what (pid $pid)"
        STOPPED=1
    fi
    rm -f "$pidfile"
}

stop() {
    local n
    STOPPED=0
    for n in "${NODES[@]}"; do
        stop_one "$(nginx_pidfile "$n")" nginx "nginx $(node_name "$n")"
    done
    stop_one "$REDIS_PIDFILE" redis-server redis-server
    [ "$STOPPED" = 1 ] || echo "demo: not running"
}

port_busy() {
    (exec 3<>"/dev/tcp/$ADDR/$1") 2>/dev/null
}

# A free loopback port that is none of those given.
other_free_port() {
    local p
    while :; do
        p=$(free_port)
        [[ " $* " == *" $p "* ]] || { echo "$p"; return; }
    done
}

# Fills PORT[a], PORT[b] and REDIS_PORT: 8080 and 8081 for nginx unless
# another program listens there, free ports otherwise.
declare -A PORT
choose_ports() {
    local n want
    REDIS_PORT=$(other_free_port "${WANT_PORT[@]}")
    for n in "${NODES[@]}"; do
        want=${WANT_PORT[$n]}
        if port_busy "$want"; then
            PORT[$n]=$(other_free_port "${WANT_PORT[@]}" "$REDIS_PORT" "${PORT[@]}")
            echo "demo: port $want on $ADDR is in use by another program" \
                 "(ss -ltnp 'sport = :$want'); nginx $(node_name "$n") takes" \
                 "port ${PORT[$n]} instead"
        else
            PORT[$n]=$want
        fi
    done
}

# redis-server on $REDIS_PORT, daemonized (it outlives this script until
# stop), with no persistence and its files in $REDIS_DIR.
start_redis_daemon() {
    local i
    mkdir -p "$REDIS_DIR"
    "$REDIS_SERVER" --bind "$ADDR" --port "$REDIS_PORT" --save '' \
        --appendonly no --daemonize yes --pidfile "$REDIS_PIDFILE" \
        --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" </dev/null \
        || die "redis-server did not start; see $REDIS_DIR/redis.log"
    for i in $(seq 50); do
        if [ "$("$REDIS_CLI" -h "$ADDR" -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ] \
                && ours "$REDIS_PIDFILE" redis-server >/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    die "redis-server does not answer on $ADDR:$REDIS_PORT; see $REDIS_DIR/redis.log"
}

# nginx $1 from conf/demo.conf, on PORT[$1]; waits until it answers.
start_nginx() {
    local n=$1 p=$PREFIX/$1 f
    mkdir -p "$p"/{conf,html/api,logs,temp}
    sed -e "s|@MODULE@|$MODULE|g" -e "s|@PORT@|${PORT[$n]}|g" \
        -e "s|@REDIS_PORT@|$REDIS_PORT|g" "$ROOT/conf/demo.conf" \
        >"$p/conf/nginx.conf"
    for f in reply shared limit_req; do
        printf '{"ok":true,"message":"reply posted"}\n' >"$p/html/api/$f"
    done
    printf 'ngx_http_throttle_module demo: try http://%s:%s/api/reply\n' \
        "$ADDR" "${PORT[$n]}" >"$p/html/index.html"
    # nginx's workers run as an unprivileged user when started as root
    chmod -R a+rX "$p/html"

    echo "demo: nginx $(node_name "$n"): nginx -t"
    ngx "$n" -t 2>&1 | sed 's/^/  /'
    ngx "$n" || die "nginx $(node_name "$n") did not start; see $p/logs/error.log"
    wait_http "${PORT[$n]}" "" \
        || die "nginx $(node_name "$n") does not answer on $ADDR:${PORT[$n]};" \
               "see $p/logs/error.log"
}

# curl one request to URL $1 (more curl arguments after it); prints
# "status|retry-after|ratelimit|ratelimit-policy|x-throttle-status"
request() {
    local url=$1
    shift
    curl -s -o /dev/null -D - --max-time 5 "$@" "$url" \
        | tr -d '\r' \
        | awk -F': ' '
            NR == 1           { split($0, s, " "); status = s[2] }
            tolower($1) == "retry-after"      { ra = $2 }
            tolower($1) == "ratelimit"        { rl = $2 }
            tolower($1) == "ratelimit-policy" { rp = $2 }
            tolower($1) == "x-throttle-status" { ts = $2 }
            END { printf "%s|%s|%s|%s|%s\n", status, ra, rl, rp, ts }'
}

# The columns of part 1's table, and of part 2's.
local_columns() { printf '%-10s %-6s %-11s %-22s %-20s %s\n' "$@"; }
shared_columns() { printf '%-10s %-6s %-7s %-12s %-22s %s\n' "$@"; }

# Part 1's row: request $2... to nginx A's /api/reply, labelled $1.
row() {
    local label=$1 line status ra rl rp ts
    shift
    line=$(request "http://$ADDR:${PORT[a]}/api/reply" "$@")
    IFS='|' read -r status ra rl rp ts <<<"$line"
    local_columns "$label" "${status:--}" "${ra:--}" "${rl:--}" "${rp:--}" "${ts:--}"
}

local_zone() {
    local i url=http://$ADDR:${PORT[a]}
    echo "1. One nginx (A), a local zone"
    echo
    echo "throttle_zone \$http_x_user_id zone=reply:10m rate=30r/m burst=15;"
    echo "20 requests back to back from user alice, then one from bob:"
    echo "  curl -H 'X-User-Id: alice' $url/api/reply"
    echo
    local_columns "request" "status" "Retry-After" "RateLimit" "RateLimit-Policy" \
        "X-Throttle-Status"
    for i in $(seq 20); do
        row "alice #$i" -H 'X-User-Id: alice'
    done
    row "bob #1" -H 'X-User-Id: bob'
    echo
    echo "alice gets 16 requests (burst=15, +1) then 429 with Retry-After;"
    echo "one more request every 2 s (30r/m) after that. bob has his own budget."
}

shared_zone() {
    local i n url line status ra rl rp ts lr burst limit
    local thr_passed=0 lr_passed=0 conf=$PREFIX/a/conf/nginx.conf
    burst=$(sed -nE 's/^ *throttle_zone .* zone=shared:.* burst=([0-9]+).*/\1/p' "$conf")
    [ -n "$burst" ] || die "no burst= in the shared zone of $conf"
    limit=$((burst + 1))
    echo "2. Two nginx, one limit: a strict zone in Redis, against limit_req"
    echo
    # the lines of the configuration that make the two limits
    grep -E '^ *(throttle_redis |throttle_zone .* zone=shared:|limit_req_zone |limit_req )' \
        "$conf" | sed -E 's/^ +//; s/ +/ /g'
    echo "$SHARED_REQUESTS requests from user alice, alternating between nginx A" \
         "($ADDR:${PORT[a]})"
    echo "and B ($ADDR:${PORT[b]}), each to /api/shared (throttle), then to" \
         "/api/limit_req"
    echo "of the same nginx:"
    echo "  curl -H 'X-User-Id: alice' http://$ADDR:${PORT[a]}/api/shared"
    echo
    printf '%-17s %-43s %s\n' "" "throttle zone=shared (Redis)" "limit_req"
    shared_columns "request" "nginx" "status" "Retry-After" "RateLimit" "status"
    for i in $(seq "$SHARED_REQUESTS"); do
        if [ $((i % 2)) -eq 1 ]; then n=a; else n=b; fi
        url=http://$ADDR:${PORT[$n]}/api
        line=$(request "$url/shared" -H 'X-User-Id: alice')
        IFS='|' read -r status ra rl rp ts <<<"$line"
        lr=$(request "$url/limit_req" -H 'X-User-Id: alice')
        lr=${lr%%|*}
        [ "$status" = 200 ] && thr_passed=$((thr_passed + 1))
        [ "$lr" = 200 ] && lr_passed=$((lr_passed + 1))
        shared_columns "alice #$i" "$(node_name "$n")" "${status:--}" "${ra:--}" \
            "${rl:--}" "${lr:--}"
    done
    echo
    echo "admitted: throttle $thr_passed of $SHARED_REQUESTS," \
         "limit_req $lr_passed of $SHARED_REQUESTS"
    echo "The shared zone gives alice burst + 1 = $limit in all, whichever nginx"
    echo "she asks; limit_req counts in each nginx apart: $limit in each, twice as many."
    if [ "$thr_passed" -ne "$limit" ] || [ "$lr_passed" -ne $((2 * limit)) ]; then
        echo
        die "expected throttle $limit and limit_req $((2 * limit)) admitted;" \
            "see $PREFIX/a/logs/error.log and $PREFIX/b/logs/error.log"
    fi
}

metrics() {
    local url=http://$ADDR:${PORT[a]}/metrics
    echo "3. nginx A's /metrics after that: requests passed and rejected, each zone"
    echo
    echo "  curl $url"
    echo
    curl -s --max-time 5 "$url" \
        | grep -E '^nginx_throttle_requests_total\{.*result="(passed|rejected)"' \
        | sed 's/^/  /' \
        || die "no nginx_throttle_requests_total in $url"
    echo
    echo "Each nginx counts what it decided: A had alice's odd requests to"
    echo "/api/shared, B the even ones (curl http://$ADDR:${PORT[b]}/metrics)."
    echo "perip counts the requests to / that waited for nginx to start."
}

start() {
    local n

    command -v curl >/dev/null || die "curl is not installed"
    command -v "$REDIS_SERVER" >/dev/null \
        || die "$REDIS_SERVER is not installed (make demo installs redis-server)"
    command -v "$REDIS_CLI" >/dev/null || die "$REDIS_CLI is not installed"
    command -v "$PYTHON" >/dev/null || die "$PYTHON is not installed"
    check_nginx_and_module

    if running; then
        echo "demo: the demo is already running; restarting it"
        stop
    fi

    # Whatever fails from here on, nothing of the demo is left running.
    trap 'stop >/dev/null' EXIT

    choose_ports
    start_redis_daemon
    for n in "${NODES[@]}"; do
        start_nginx "$n"
    done
    echo "demo: nginx A (pid $(cat "$(nginx_pidfile a)")) on http://$ADDR:${PORT[a]}," \
         "nginx B (pid $(cat "$(nginx_pidfile b)")) on http://$ADDR:${PORT[b]}"
    echo "demo: redis-server (pid $(cat "$REDIS_PIDFILE")) on $ADDR:$REDIS_PORT," \
         "the demo's own"
    echo

    local_zone
    echo
    shared_zone
    echo
    metrics
    echo

    trap - EXIT
    echo "demo: still running: nginx A on http://$ADDR:${PORT[a]}," \
         "nginx B on http://$ADDR:${PORT[b]}, redis-server on $ADDR:$REDIS_PORT"
    echo "demo: config: $PREFIX/a/conf/nginx.conf; logs: $PREFIX/{a,b}/logs/," \
         "$REDIS_DIR/redis.log"
    echo "demo: stop them with: make demo-stop"
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
