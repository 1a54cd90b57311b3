# SPDX-License-Identifier: BSD-2-Clause
# Shell helpers shared by the scripts that run nginx (the run.sh of bench,
# accuracy, chaos, soak, delay and demo, and deb/test.sh): loopback ports,
# starting, watching and stopping the nginx and redis-server they run,
# asking them their version, and what the reports need (the commit,
# gnuplot's terminal). Needs $PYTHON and die from the caller, and
# $REDIS_CLI and $REDIS_PORT for rcli; start_redis sets $REDIS_PID, which
# stop_redis stops.

# The commit the module under test was built from, for the reports: with
# "-dirty" if files differ from it, other than the docs these scripts write.
source_commit() {
    local commit
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) || { echo unknown; return; }
    git -C "$ROOT" diff --quiet HEAD -- . ':(exclude)docs' 2>/dev/null || commit=$commit-dirty
    echo "$commit"
}

# Checks that $NGINX_BIN runs and $MODULE exists, and makes $MODULE an
# absolute path (nginx loads it from its configuration, in its prefix).
check_nginx_and_module() {
    [ -x "$NGINX_BIN" ] || die "no nginx binary at $NGINX_BIN"
    [ -f "$MODULE" ] || die "no module at $MODULE (run: make build)"
    case $MODULE in /*) ;; *) MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE") ;; esac
}

# The version of $NGINX_BIN, e.g. "1.22.1".
nginx_version() {
    "$NGINX_BIN" -v 2>&1 | sed 's|.*nginx/||'
}

# The gnuplot terminal a plot.gp draws its PNG with (term=): pngcairo if
# this gnuplot has it, png otherwise.
png_terminal() {
    local term=pngcairo
    echo 'set terminal' | gnuplot 2>&1 | grep -qw pngcairo || term=png
    echo "$term"
}

# A free TCP port on loopback.
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the nginx whose pid file is $1 and waits for it (a zombie counts as
# gone: the daemon's adoptive parent may be slow to reap it).
stop_nginx() {
    local pidfile=$1 pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    wait_gone "$pid" 200 || true
    rm -f "$pidfile"
}

# Whether process $1 is alive; one that exited and waits to be reaped (a
# daemon's adoptive parent may be slow) is not.
alive() {
    local state
    state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) \
        || return 1
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# Waits until process $1 is gone, for at most $2 x 50 ms; fails if it is
# still alive then.
wait_gone() {
    local pid=$1 tries=$2 i
    for i in $(seq "$tries"); do
        alive "$pid" || return 0
        sleep 0.05
    done
    ! alive "$pid"
}

# The pids of nginx master $1's workers, one a line, in order.
nginx_workers() {
    ps -o pid= --ppid "$1" | tr -d ' ' | sort -n
}

# Waits until http://127.0.0.1:$1/$2 answers (any status), for at most
# 5 s; fails if it does not.
wait_http() {
    local i
    for i in $(seq 50); do
        curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/$2" && return 0
        sleep 0.1
    done
    return 1
}

# redis-cli on 127.0.0.1:$REDIS_PORT, then the command.
rcli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# The version of the redis-server that rcli asks (INFO server).
redis_version() {
    rcli INFO server | tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }'
}

# Starts $REDIS_SERVER on 127.0.0.1:$REDIS_PORT, without persistence, its
# files in $REDIS_DIR, prefixed by the command in $REDIS_PIN if any (e.g.
# taskset), and waits until it answers PING.
start_redis() {
    local i
    ${REDIS_PIN-} "$REDIS_SERVER" --bind 127.0.0.1 --port "$REDIS_PORT" \
        --save '' --appendonly no --daemonize no --dir "$REDIS_DIR" \
        --logfile "$REDIS_DIR/redis.log" </dev/null >"$REDIS_DIR/redis.out" 2>&1 &
    REDIS_PID=$!
    for i in $(seq 50); do
        [ "$(rcli PING 2>/dev/null)" = PONG ] && return 0
        kill -0 "$REDIS_PID" 2>/dev/null \
            || die "redis-server exited; see $REDIS_DIR/redis.log, redis.out"
        sleep 0.1
    done
    die "redis-server did not answer; see $REDIS_DIR/redis.log"
}

# Stops the redis-server in $REDIS_PID, a child of the calling script.
REDIS_PID=
stop_redis() {
    [ -n "$REDIS_PID" ] || return 0
    stop_child "$REDIS_PID"
    REDIS_PID=
}

# Stops child process $1: SIGTERM, then SIGKILL if it still runs 5 s
# later, and reaps it.
stop_child() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
