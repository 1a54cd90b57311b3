# SPDX-License-Identifier: BSD-2-Clause
# The Redis Cluster and the Sentinel setup of scripts/chaos/run.sh, and the
# faults that make them fail over. Sourced by run.sh, whose variables
# and functions they use: OUT, REDIS_SERVER, REDIS_CLI, PHASE, HOLD (from
# faults.sh), free_port, alive, set_epoch, record and die.
#
# The cluster: 3 masters and 3 replicas (redis-cli --cluster create),
# cluster-node-timeout CLUSTER_NODE_TIMEOUT ms, each node's bus on a port
# of its own (cluster-port), a replica may always take over and a dead
# master stops its own slots only. The Sentinel setup: a master, its
# replica and three Sentinels watching it as "chaos" (quorum 2,
# down-after-milliseconds SENTINEL_DOWN_AFTER ms).

CLUSTER_NODE_TIMEOUT=1000
SENTINEL_DOWN_AFTER=1000
SENTINEL_MASTER=chaos
HA_DIR=$OUT/ha
HA_PIDS=()

# redis-cli on 127.0.0.1:$1, then the command.
cli_at() {
    local port=$1
    shift
    "$REDIS_CLI" -h 127.0.0.1 -p "$port" "$@"
}

# Starts redis-server on 127.0.0.1:$1, its files in $HA_DIR/$1, with the
# configuration lines that follow (a Sentinel if one is "sentinel ..."),
# and waits until it answers PING.
start_ha_redis() {
    local port=$1 dir=$HA_DIR/$1 mode=() i
    shift
    mkdir -p "$dir"
    # a Sentinel rewrites its configuration file: one of its own each
    printf '%s\n' "bind 127.0.0.1" "port $port" "dir $dir" "logfile $dir/redis.log" \
        "daemonize no" "$@" >"$dir/redis.conf"
    if grep -q '^sentinel ' "$dir/redis.conf"; then
        mode=(--sentinel)
    else
        mode=(--save '' --appendonly no)
    fi
    "$REDIS_SERVER" "$dir/redis.conf" "${mode[@]}" </dev/null >"$dir/redis.out" 2>&1 &
    HA_PIDS+=($!)
    eval "HA_PID_$port=$!"
    for i in $(seq 50); do
        [ "$(cli_at "$port" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    die "redis-server on port $port did not answer; see $dir/redis.log"
}

# The pid of the redis-server started on port $1.
ha_pid() {
    local var=HA_PID_$1
    echo "${!var}"
}

# Stops every process start_ha_redis started.
stop_ha() {
    local pid
    for pid in "${HA_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${HA_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    HA_PIDS=()
}

# Waits until command $1 (a function) succeeds, for at most $2 x 50 ms.
wait_for() {
    local i
    for i in $(seq "$2"); do
        "$1" && return 0
        sleep 0.05
    done
    return 1
}

# --- the cluster ------------------------------------------------------------

CLUSTER_PORTS=()

start_cluster() {
    local i port addrs=()
    for i in $(seq 6); do
        port=$(free_port)
        start_ha_redis "$port" "cluster-enabled yes" "cluster-config-file nodes.conf" \
            "cluster-port $(free_port)" "cluster-node-timeout $CLUSTER_NODE_TIMEOUT" \
            "cluster-replica-validity-factor 0" "cluster-require-full-coverage no" \
            "repl-diskless-sync-delay 0"
        CLUSTER_PORTS+=("$port")
        addrs+=("127.0.0.1:$port")
    done
    "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
        >"$HA_DIR/cluster-create.out" 2>&1 \
        || die "redis-cli --cluster create failed; see $HA_DIR/cluster-create.out"
    wait_for cluster_settled 300 || die "the cluster did not settle in 15 s"
}

# CLUSTER NODES as node $1 sees it.
cluster_nodes() {
    cli_at "$1" CLUSTER NODES 2>/dev/null
}

# A live node of the cluster (the killed master is not).
cluster_live_port() {
    local port
    for port in "${CLUSTER_PORTS[@]}"; do
        alive "$(ha_pid "$port")" && { echo "$port"; return; }
    done
}

# The ports of the live masters, one a line.
cluster_masters() {
    cluster_nodes "$(cluster_live_port)" \
        | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }'
}

# Whether every live node says cluster_state:ok, three live masters serve
# the slots, and every live replica's link to its master is up.
cluster_settled() {
    local port masters
    for port in "${CLUSTER_PORTS[@]}"; do
        alive "$(ha_pid "$port")" || continue
        cli_at "$port" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
    done
    masters=$(cluster_masters)
    [ "$(wc -w <<<"$masters")" -eq 3 ] || return 1
    for port in $masters; do
        alive "$(ha_pid "$port")" || return 1
    done
    for port in "${CLUSTER_PORTS[@]}"; do
        alive "$(ha_pid "$port")" || continue
        grep -qx "$port" <<<"$masters" && continue
        cli_at "$port" INFO replication | grep -q '^master_link_status:up' || return 1
    done
}

# The master that serves slot 0, whose death the cluster phase brings
# about ("the victim"): its port and its slot ranges ("0-5460").
cluster_victim() {
    cluster_nodes "$(cluster_live_port)" | awk '$3 ~ /master/ {
        split($2, a, "[:@]")
        for (i = 9; i <= NF; i++) if ($i ~ /^0(-|$)/) {
            ranges = $9; for (j = 10; j <= NF; j++) ranges = ranges "," $j
            print a[2], ranges
        }
    }'
}

# The keys among 0..$1 - 1 (the load's hot keys) whose slot is in the
# ranges $2 ("a-b,c-d"), as a regex alternation: "3|7|12".
keys_in_slots() {
    local count=$1 ranges=$2 key slot matching=()
    for key in $(seq 0 $(("$count" - 1))); do
        slot=$(cli_at "${CLUSTER_PORTS[0]}" CLUSTER KEYSLOT "$key")
        awk -v s="$slot" -v r="$ranges" 'BEGIN {
            n = split(r, part, ",")
            for (i = 1; i <= n; i++) {
                split(part[i], b, "-"); if (b[2] == "") b[2] = b[1]
                if (s >= b[1] && s <= b[2]) exit 0
            }
            exit 1
        }' && matching+=("$key")
    done
    local IFS='|'
    echo "${matching[*]}"
}

# --- the Sentinel setup -----------------------------------------------------

SENTINEL_PORTS=()

# Starts the Sentinel setup; await_sentinels waits until it is ready (the
# Sentinels find one another meanwhile, while the cluster is made).
start_sentinels() {
    local i port
    SENTINEL_DATA=("$(free_port)" "$(free_port)")
    start_ha_redis "${SENTINEL_DATA[0]}" "repl-diskless-sync-delay 0"
    start_ha_redis "${SENTINEL_DATA[1]}" "repl-diskless-sync-delay 0" \
        "replicaof 127.0.0.1 ${SENTINEL_DATA[0]}"
    for i in 1 2 3; do
        port=$(free_port)
        start_ha_redis "$port" "sentinel monitor $SENTINEL_MASTER 127.0.0.1 ${SENTINEL_DATA[0]} 2" \
            "sentinel down-after-milliseconds $SENTINEL_MASTER $SENTINEL_DOWN_AFTER" \
            "sentinel failover-timeout $SENTINEL_MASTER 3000"
        SENTINEL_PORTS+=("$port")
    done
}

await_sentinels() {
    wait_for sentinels_ready 300 || die "the Sentinels did not settle in 15 s"
}

# The master's port as the Sentinel on port $1 names it.
sentinel_master_port() {
    cli_at "$1" SENTINEL GET-MASTER-ADDR-BY-NAME "$SENTINEL_MASTER" 2>/dev/null | sed -n 2p
}

# Field $2 of SENTINEL MASTER as the Sentinel on port $1 sees it.
sentinel_field() {
    cli_at "$1" SENTINEL MASTER "$SENTINEL_MASTER" 2>/dev/null \
        | awk -v f="$2" 'NR % 2 { name = $0; next } name == f { print }'
}

# The data node (port) that is not the master the Sentinels name.
sentinel_replica() {
    local master
    master=$(sentinel_master_port "${SENTINEL_PORTS[0]}")
    if [ "$master" = "${SENTINEL_DATA[0]}" ]; then
        echo "${SENTINEL_DATA[1]}"
    else
        echo "${SENTINEL_DATA[0]}"
    fi
}

# Whether every Sentinel names the same master, which says ROLE master,
# sees its replica and the two other Sentinels, and the replica's link is
# up: a failover can start.
sentinels_ready() {
    local port master=
    for port in "${SENTINEL_PORTS[@]}"; do
        [ -n "$master" ] || master=$(sentinel_master_port "$port")
        [ "$(sentinel_master_port "$port")" = "$master" ] || return 1
        [ "$(sentinel_field "$port" flags)" = master ] || return 1
        [ "$(sentinel_field "$port" num-slaves)" = 1 ] || return 1
        [ "$(sentinel_field "$port" num-other-sentinels)" = 2 ] || return 1
    done
    [ "$(cli_at "$master" ROLE 2>/dev/null | head -1)" = master ] || return 1
    cli_at "$(sentinel_replica)" INFO replication | grep -q '^master_link_status:up'
}

# --- the faults ---------------------------------------------------------------

# How long a failover may take before the run gives up on it (the
# Sentinels retry an election that failed after twice failover-timeout).
FAILOVER_WAIT=400 # x 50 ms

# Sets the epoch to "fault" a moment before the fault starts: wrk reads it
# every 64 requests, and a request sent after a kill must not count as one
# sent before it. The report takes the moment off the fault's duration.
EPOCH_LEAD_MS=100
fault_epoch_first() {
    set_epoch fault
    sleep "$(printf '0.%03d' "$EPOCH_LEAD_MS")"
    record epoch_lead_ms "$EPOCH_LEAD_MS"
}

# A master of the cluster killed (SIGKILL): the fault lasts until the
# cluster has promoted its replica (every live node agreeing on three
# live masters).
fault_cluster_kill() {
    local pid
    pid=$(ha_pid "$CLUSTER_VICTIM")
    record killed_port "$CLUSTER_VICTIM"
    fault_epoch_first
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    wait_for cluster_settled "$FAILOVER_WAIT" \
        || die "the cluster promoted no replica of the killed master in time"
    record promoted_port "$(cluster_nodes "$(cluster_live_port)" \
        | awk '$3 ~ /master/ && $3 !~ /fail/ && / 0-/ { split($2, a, "[:@]"); print a[2] }')"
}

restore_cluster_kill() { :; }

# Whether every Sentinel names $SENTINEL_PROMOTED as the master, and it
# says ROLE master.
sentinels_switched() {
    local port
    for port in "${SENTINEL_PORTS[@]}"; do
        [ "$(sentinel_master_port "$port")" = "$SENTINEL_PROMOTED" ] || return 1
    done
    [ "$(cli_at "$SENTINEL_PROMOTED" ROLE 2>/dev/null | head -1)" = master ]
}

# The master of the Sentinel setup is about to change: records the old
# and the new one (the replica).
sentinel_switch_begins() {
    SENTINEL_OLD=$(sentinel_master_port "${SENTINEL_PORTS[0]}")
    SENTINEL_PROMOTED=$(sentinel_replica)
    record old_master "$SENTINEL_OLD"
    record new_master "$SENTINEL_PROMOTED"
}

# The fault lasts until every Sentinel names the new master.
sentinel_switch_ends() {
    wait_for sentinels_switched "$FAILOVER_WAIT" \
        || die "the Sentinels named no new master in time"
}

# SENTINEL FAILOVER: the old master stays up, and writable until it is
# made a replica of the new one (tidy_sentinel_failover).
fault_sentinel_failover() {
    local reply
    sentinel_switch_begins
    fault_epoch_first
    reply=$(cli_at "${SENTINEL_PORTS[0]}" SENTINEL FAILOVER "$SENTINEL_MASTER")
    [ "$reply" = OK ] || die "SENTINEL FAILOVER: $reply"
    sentinel_switch_ends
}

restore_sentinel_failover() { :; }

# Once the load has stopped: the old master made a replica of the new one
# (what the Sentinels would do themselves within 10 s), so that the next
# phase has a replica to promote.
tidy_sentinel_failover() {
    cli_at "$SENTINEL_OLD" REPLICAOF 127.0.0.1 "$SENTINEL_PROMOTED" >/dev/null
    wait_for sentinels_ready "$FAILOVER_WAIT" \
        || die "the old master did not become the new one's replica in time"
}

# The Sentinels' master killed (SIGKILL): the fault lasts until they have
# agreed that it is down (down-after-milliseconds) and promoted the replica.
fault_sentinel_kill() {
    local pid
    sentinel_switch_begins
    pid=$(ha_pid "$SENTINEL_OLD")
    fault_epoch_first
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    sentinel_switch_ends
}

restore_sentinel_kill() { :; }
