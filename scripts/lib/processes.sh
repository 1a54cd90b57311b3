# Shell helpers shared by bench/run.sh and scripts/accuracy.sh: loopback
# ports, and stopping the nginx and redis-server those scripts start.
# Needs $PYTHON; stop_redis stops the process in $REDIS_PID.

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
