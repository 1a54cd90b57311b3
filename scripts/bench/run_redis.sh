# SPDX-License-Identifier: BSD-2-Clause
# Shell helpers that read the Redis of run.sh's rows: their counters
# (summed over the masters for a cluster), the ports a row's counters are
# read on, waiting until an async row's last syncs have landed, and what
# each master ran between two readings. Need $REDIS_CLI, $REDIS_PORT,
# $REDIS_DIR, CLUSTER_PORTS (scripts/bench/redis_cluster.sh) and die from
# the caller.

# Reads the counters of the Redis on each port given (default: the single
# Redis), summed over them, into RC_TOTAL (commands processed, from INFO
# stats: commands run inside scripts included), RC_INFO (INFO calls),
# RC_SCRIPTS (EVALSHA + EVAL calls run), RC_NESTED (calls of the commands
# scripts run: TIME, GET, SET, DEL; the window algorithms' HMGET, HSET,
# HINCRBY, PEXPIRE; sliding_log's ZREMRANGEBYSCORE, ZCARD, ZADD, ZRANGE,
# ZREM) and RC_GETS (GET calls: one per key in a sync script), from INFO
# commandstats. INFO does not count itself in the figures it reports, so
# the INFO calls between two readings are the difference of RC_INFO.
# For a cluster, also RC_REJECTED (EVALSHA + EVAL a master received but
# did not run: rejected_calls, a MOVED or ASK redirection, not in
# RC_TOTAL), RC_ASKING (ASKING calls: one per ASK followed), RC_MOVED and
# RC_ASK (INFO errorstats: MOVED and ASK replies sent), RC_MAP_READS
# (CLUSTER SLOTS and CLUSTER SHARDS calls: the slot map read) and
# RC_BY_NODE (EVALSHA + EVAL run on each port, in order, "/" between them).
redis_counters() {
    local port info=
    for port in "${@:-$REDIS_PORT}"; do
        info+="port:$port"$'\n'
        info+=$("$REDIS_CLI" -h 127.0.0.1 -p "$port" \
                INFO stats commandstats errorstats) \
            || die "redis-cli INFO failed on port $port; see $REDIS_DIR/"
        info+=$'\n'
    done
    read -r RC_TOTAL RC_INFO RC_SCRIPTS RC_NESTED RC_GETS RC_REJECTED \
        RC_ASKING RC_MOVED RC_ASK RC_MAP_READS RC_BY_NODE < <(tr -d '\r' <<<"$info" \
        | awk -F'[:,=]' '
            $1 == "port"                             { node++ }
            $1 == "total_commands_processed"        { total += $2; seen++ }
            $1 == "cmdstat_info"                     { info += $3 }
            $1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" {
                scripts += $3; by_node[node] += $3; rejected += $9 }
            $1 ~ /^cmdstat_(time|get|set|del|hmget|hset|hincrby|pexpire|zremrangebyscore|zcard|zadd|zrange|zrem)$/ { nested += $3 }
            $1 == "cmdstat_get"                      { gets += $3 }
            $1 == "cmdstat_asking"                   { asking += $3 }
            $1 == "errorstat_MOVED"                  { moved += $3 }
            $1 == "errorstat_ASK"                    { ask += $3 }
            $1 == "cmdstat_cluster|slots" || $1 == "cmdstat_cluster|shards" {
                map_reads += $3 }
            END {
                if (seen != node) exit 1
                for (i = 1; i <= node; i++)
                    nodes = nodes (i > 1 ? "/" : "") (by_node[i] + 0)
                printf "%d %d %d %d %d %d %d %d %d %d %s\n", total, info,
                       scripts, nested, gets, rejected, asking, moved, ask,
                       map_reads, nodes }') \
        || die "no total_commands_processed in INFO stats"
}

# The ports of the Redis whose counters a configuration's row reads.
redis_ports_of() {
    case $1 in
        cluster_*) echo "${CLUSTER_PORTS[*]}" ;;
        *)         echo "$REDIS_PORT" ;;
    esac
}

# Async zones send what they charged at their next sync (every 100ms), and
# each key once more a sync later: after an async run, waits 0.3 s, then
# until Redis has processed nothing but INFO for 0.3 s (at most 6 s more),
# and leaves the counters read last in RC_*. So the syncs of a run count
# in its row, and none of them lands in the next row's counters. The ports
# of the Redis to watch follow $1 (default: the single Redis).
redis_settle() {
    local what=$1 last i
    shift
    sleep 0.3
    redis_counters "$@"
    for i in $(seq 20); do
        last=$((RC_TOTAL - RC_INFO))
        sleep 0.3
        redis_counters "$@"
        [ $((RC_TOTAL - RC_INFO)) -eq "$last" ] && return 0
    done
    echo "bench: note: Redis still busy 6 s after $what; its counters" \
         "are read anyway"
}

# "a/b/c" less "x/y/z", term by term: what each master ran in between.
per_node_difference() {
    awk -v before="$1" -v after="$2" 'BEGIN {
        n = split(before, b, "/"); split(after, a, "/")
        for (i = 1; i <= n; i++)
            printf "%s%d", (i > 1 ? "/" : ""), a[i] - b[i]
        printf "\n" }'
}
