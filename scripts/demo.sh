#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The demo: nginx with the throttle module on 127.0.0.1:8080.
#
#   scripts/demo.sh start   (re)start it from conf/demo.conf, then show a
#                           burst of requests passing and being limited
#   scripts/demo.sh stop    stop it (idempotent)
#
# Environment: NGINX_BIN (default /usr/sbin/nginx), MODULE (default
# build/ngx_http_throttle_module.so), DEMO_PREFIX (default build/demo).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=${MODULE:-$ROOT/build/ngx_http_throttle_module.so}
PREFIX=${DEMO_PREFIX:-$ROOT/build/demo}
PREFIX=${PREFIX%/}
ADDR=127.0.0.1
PORT=8080
URL=http://$ADDR:$PORT
PIDFILE=$PREFIX/logs/nginx.pid

die() { echo "demo: $*" >&2; exit 1; }

# nginx with the demo's prefix, configuration and error log (-e: the
# compiled-in error log, under /var/log, is not touched).
ngx() {
    "$NGINX_BIN" -p "$PREFIX/" -c conf/nginx.conf -e logs/error.log "$@"
}

# alive, wait_gone
. "$ROOT/scripts/lib/processes.sh"

running_pid() {
    local pid
    [ -s "$PIDFILE" ] || return 1
    pid=$(cat "$PIDFILE")
    alive "$pid" || return 1
    echo "$pid"
}

stop() {
    local pid
    if ! pid=$(running_pid); then
        echo "demo: not running"
        return 0
    fi
    ngx -s quit 2>/dev/null || kill -QUIT "$pid"
    if ! wait_gone "$pid" 200; then
        kill -TERM "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PIDFILE"
    echo "demo: stopped nginx (pid $pid)"
}

port_busy() {
    (exec 3<>"/dev/tcp/$ADDR/$PORT") 2>/dev/null
}

# curl one request; prints "status|retry-after|ratelimit|ratelimit-policy"
request() {
    curl -s -o /dev/null -D - --max-time 5 "$@" "$URL/api/reply" \
        | tr -d '\r' \
        | awk -F': ' '
            NR == 1           { split($0, s, " "); status = s[2] }
            tolower($1) == "retry-after"      { ra = $2 }
            tolower($1) == "ratelimit"        { rl = $2 }
            tolower($1) == "ratelimit-policy" { rp = $2 }
            tolower($1) == "x-throttle-status" { ts = $2 }
            END { printf "%s|%s|%s|%s|%s\n", status, ra, rl, rp, ts }'
}

row() {
    local label=$1 line status ra rl rp ts
    shift
    line=$(request "$@")
    IFS='|' read -r status ra rl rp ts <<<"$line"
    printf '%-10s %-6s %-11s %-22s %-20s %s\n' \
        "$label" "${status:--}" "${ra:--}" "${rl:--}" "${rp:--}" "${ts:--}"
}

start() {
    local i

    command -v curl >/dev/null || die "curl is not installed"
    [ -x "$NGINX_BIN" ] || die "no nginx binary at $NGINX_BIN"
    [ -f "$MODULE" ] || die "no module at $MODULE (run: make build)"
    case $MODULE in /*) ;; *) MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE") ;; esac

    if running_pid >/dev/null; then
        echo "demo: a demo nginx is already running; restarting it"
        stop
    fi

    if port_busy; then
        die "port $PORT on $ADDR is already in use by another program" \
            "(see: ss -ltnp 'sport = :$PORT'); free it and run again"
    fi

    mkdir -p "$PREFIX"/{conf,html/api,logs,temp}
    sed -e "s|@MODULE@|$MODULE|g" "$ROOT/conf/demo.conf" \
        >"$PREFIX/conf/nginx.conf"
    printf '{"ok":true,"message":"reply posted"}\n' >"$PREFIX/html/api/reply"
    printf 'ngx_http_throttle_module demo: try %s/api/reply\n' "$URL" \
        >"$PREFIX/html/index.html"
    # nginx's workers run as an unprivileged user when started as root
    chmod -R a+rX "$PREFIX/html"

    echo "demo: nginx -t"
    ngx -t 2>&1 | sed 's/^/  /'
    ngx

    for i in $(seq 50); do
        curl -s -o /dev/null --max-time 1 "$URL/" && break
        [ "$i" -eq 50 ] && die "nginx did not answer on $URL;" \
            "see $PREFIX/logs/error.log"
        sleep 0.1
    done
    echo "demo: nginx $(running_pid) listening on $URL"
    echo

    echo "throttle_zone \$http_x_user_id zone=reply:10m rate=30r/m burst=15;"
    echo "20 requests back to back from user alice, then one from bob:"
    echo "  curl -H 'X-User-Id: alice' $URL/api/reply"
    echo
    printf '%-10s %-6s %-11s %-22s %-20s %s\n' \
        "request" "status" "Retry-After" "RateLimit" "RateLimit-Policy" \
        "X-Throttle-Status"
    for i in $(seq 20); do
        row "alice #$i" -H 'X-User-Id: alice'
    done
    row "bob #1" -H 'X-User-Id: bob'
    echo
    echo "alice gets 16 requests (burst=15, +1) then 429 with Retry-After;"
    echo "one more request every 2 s (30r/m) after that. bob has his own budget."
    echo
    echo "demo: still running on $URL (config: $PREFIX/conf/nginx.conf)"
    echo "demo: logs: $PREFIX/logs/access.log, $PREFIX/logs/error.log"
    echo "demo: stop it with: make demo-stop"
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
