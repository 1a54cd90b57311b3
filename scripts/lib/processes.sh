# Shell helpers shared by bench/run.sh and scripts/accuracy.sh: loopback
# ports, and starting and stopping the nginx and redis-server those scripts
# run. Needs $PYTHON, die and rcli (redis-cli on $REDIS_PORT) from the
# caller; start_redis sets $REDIS_PID, which stop_redis stops.

# The commit the module under test was built from, for the reports: with
# "-dirty" if files differ from it, other than the docs these scripts write.
source_commit() {
    local commit
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) || { echo unknown; return; }
    git -C "$ROOT" diff --quiet HEAD -- . ':(exclude)docs' 2>/dev/null || commit=$commit-dirty
    echo "$commit"
}

# A free TCP port on loopback.
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the nginx whose pid file is $1 and waits for it (a zombie counts as
# gone: the daemon's adoptive parent may be slow to reap it).
stop_nginx() {
    local pidfile=$1 pid i state
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
    for i in $(seq 200); do
        state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) || break
        [ "$state" = Z ] && break
        sleep 0.05
    done
    rm -f "$pidfile"
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
    local i
    [ -n "$REDIS_PID" ] || return 0
    kill -TERM "$REDIS_PID" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=
}
