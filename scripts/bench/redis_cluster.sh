# SPDX-License-Identifier: BSD-2-Clause
# Shell helpers for a Redis Cluster of real redis-server processes on
# loopback, masters only (no replicas): for run.sh's cluster rows. Needs
# $PYTHON, $REDIS_SERVER, $REDIS_CLI and die from the caller, and
# ${REDIS_PIN-} (e.g. taskset) like start_redis in scripts/lib/processes.sh.
# start_redis_cluster sets CLUSTER_PORTS and CLUSTER_PIDS (arrays, one
# entry a master), which stop_redis_cluster stops.

CLUSTER_PORTS=()
CLUSTER_PIDS=()

# $1 free TCP ports on loopback, on one line: every socket is held until
# all are bound, so that no port is given twice.
free_ports() {
    "$PYTHON" -c '
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# "127.0.0.1:P1,127.0.0.1:P2,..." for throttle_redis cluster=.
cluster_seeds() {
    local IFS=,
    echo "${CLUSTER_PORTS[*]/#/127.0.0.1:}"
}

# Starts $1 masters with their files under $2, joins them with redis-cli
# --cluster create (the slots split evenly among them), and waits until
# every master says cluster_state:ok and all give the same CLUSTER SLOTS.
# Each master has a cluster bus port of its own (cluster-port), so its
# client port plus 10000 need not be free.
start_redis_cluster() {
    local masters=$1 dir=$2 ports i port addrs=() slots first
    read -r -a ports <<<"$(free_ports $((2 * masters)))"
    for ((i = 0; i < masters; i++)); do
        port=${ports[i]}
        mkdir -p "$dir/$port"
        ${REDIS_PIN-} "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" \
            --cluster-enabled yes --cluster-port "${ports[masters + i]}" \
            --cluster-config-file "$dir/$port/nodes.conf" \
            --save '' --appendonly no --daemonize no --dir "$dir/$port" \
            --logfile "$dir/$port/redis.log" \
            </dev/null >"$dir/$port/redis.out" 2>&1 &
        CLUSTER_PIDS+=($!)
        CLUSTER_PORTS+=("$port")
        addrs+=("127.0.0.1:$port")
    done
    for ((i = 0; i < masters; i++)); do
        wait_cluster_node "${CLUSTER_PORTS[i]}" "${CLUSTER_PIDS[i]}" "$dir"
    done
    "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 0 \
        --cluster-yes >"$dir/create.out" 2>&1 \
        || die "redis-cli --cluster create failed; see $dir/create.out"
    for i in $(seq 100); do
        ((i == 1)) || sleep 0.1
        first=$(cluster_slots "${CLUSTER_PORTS[0]}")
        for port in "${CLUSTER_PORTS[@]}"; do
            slots=$(cluster_slots "$port")
            [ -n "$first" ] && [ "$slots" = "$first" ] \
                && "$REDIS_CLI" -p "$port" CLUSTER INFO | tr -d '\r' \
                    | grep -qx 'cluster_state:ok' || continue 2
        done
        return 0
    done
    die "the Redis Cluster did not agree on its slots within 10 s; see $dir"
}

# Waits until the master on port $1 (pid $2, files under $3/$1) answers
# PING.
wait_cluster_node() {
    local port=$1 pid=$2 dir=$3 i
    for i in $(seq 50); do
        [ "$("$REDIS_CLI" -p "$port" PING 2>/dev/null)" = PONG ] && return 0
        kill -0 "$pid" 2>/dev/null \
            || die "a cluster redis-server exited; see $dir/$port/redis.log"
        sleep 0.1
    done
    die "a cluster redis-server did not answer; see $dir/$port/redis.log"
}

# The slot ranges and their masters' ports as the master on port $1 sees
# them (CLUSTER NODES), one "range port" a line, sorted; empty if it cannot
# say.
cluster_slots() {
    "$REDIS_CLI" -p "$1" CLUSTER NODES 2>/dev/null | tr -d '\r' \
        | awk '$3 ~ /master/ {
                   split($2, addr, "[:@]")
                   for (i = 9; i <= NF; i++) print $i, addr[2]
               }' | sort
}

# Stops every master start_redis_cluster started (stop_child, from
# scripts/lib/processes.sh).
stop_redis_cluster() {
    local pid
    for pid in "${CLUSTER_PIDS[@]}"; do
        stop_child "$pid"
    done
    CLUSTER_PIDS=()
    CLUSTER_PORTS=()
}
