# SPDX-License-Identifier: BSD-2-Clause
# The faults of scripts/chaos/run.sh, and what it looks at around them.
# Sourced by run.sh, whose variables they use: REDIS_PID, NODES, PORT,
# PREFIX, RAW, PHASE (the phase under way) and the functions set_epoch,
# now_ms, record and die, and rcli (scripts/lib/processes.sh).
#
# Each fault is two functions: fault_<name> starts it and lasts while it
# does (setting the epoch to "fault" when requests meet it), restore_<name>
# ends it and returns once it is over. They record in $RAW/$PHASE.record
# what shows that the fault took place, for the report.

HOLD=2 # seconds a lasting fault lasts: forty times the Redis timeout

# --- no fault: the reference ------------------------------------------------

fault_steady() { :; }
restore_steady() { :; }

# --- Redis stalled: SIGSTOP, then SIGCONT ------------------------------------

fault_stall() {
    kill -STOP "$REDIS_PID"
    set_epoch fault
    sleep "$HOLD"
}

restore_stall() {
    kill -CONT "$REDIS_PID"
}

# --- Redis killed (SIGKILL), and started again on the same port -----------

fault_kill() {
    record killed_pid "$REDIS_PID"
    kill -KILL "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
    set_epoch fault
    sleep "$HOLD"
}

restore_kill() {
    start_redis
    record restarted_pid "$REDIS_PID"
}

# --- SCRIPT FLUSH: the module's next EVALSHA is answered NOSCRIPT ----------

# How many replies of kind $1 (NOSCRIPT, OOM) Redis has sent so far.
redis_errors() {
    rcli INFO errorstats | tr -d '\r' \
        | awk -F'[:=,]' -v kind="errorstat_$1" '$1 == kind { n = $3 } END { print n + 0 }'
}

fault_script_flush() {
    NOSCRIPT_BEFORE=$(redis_errors NOSCRIPT)
    record noscript_before "$NOSCRIPT_BEFORE"
    rcli SCRIPT FLUSH >/dev/null
}

# Returns once Redis has answered NOSCRIPT (the module's next EVALSHA), at
# most 2 s after the flush.
restore_script_flush() {
    local i
    for i in $(seq 40); do
        [ "$(redis_errors NOSCRIPT)" -gt "$NOSCRIPT_BEFORE" ] && break
        sleep 0.05
    done
    record noscript_after "$(redis_errors NOSCRIPT)"
}

# --- CLIENT KILL TYPE normal: every nginx connection dropped by Redis -----

fault_client_kill() {
    record clients_killed "$(rcli CLIENT KILL TYPE normal)"
}

restore_client_kill() { :; }

# --- maxmemory reached: Redis refuses every write with OOM ----------------

MAXMEMORY_FILLER=chaos:filler

# maxmemory a few MiB above what Redis uses, then values of 1 MiB until
# Redis refuses one: from then on the module's scripts, which write, are
# refused too.
fault_maxmemory() {
    local used i reply
    used=$(rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    rcli CONFIG SET maxmemory-policy noeviction >/dev/null
    rcli CONFIG SET maxmemory $((used + 4 * 1024 * 1024)) >/dev/null
    record oom_before "$(redis_errors OOM)"
    for i in $(seq 64); do
        reply=$(rcli SETRANGE "$MAXMEMORY_FILLER:$i" 1048575 x 2>&1)
        [[ $reply == *OOM* ]] && break
    done
    [[ $reply == *OOM* ]] || die "Redis took 64 MiB over maxmemory without refusing a write"
    record filler_mib "$((i - 1))"
    set_epoch fault
    sleep "$HOLD"
}

restore_maxmemory() {
    record oom_after "$(redis_errors OOM)"
    rcli CONFIG SET maxmemory 0 >/dev/null
    rcli --scan --pattern "$MAXMEMORY_FILLER:*" | xargs -r "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" DEL >/dev/null
}

# --- nginx reloaded (HUP) twice, each of them ------------------------------

# Sends HUP to nginx $1's master and waits until the workers it had are
# gone and as many new ones serve.
reload_nginx() {
    local node=$1 master old pid i
    master=$(cat "$PREFIX/$node/logs/nginx.pid")
    old=$(nginx_workers "$master")
    kill -HUP "$master"
    for pid in $old; do
        wait_gone "$pid" 200 || die "nginx $node: worker $pid still running 10 s after a reload"
    done
    for i in $(seq 100); do
        [ "$(nginx_workers "$master" | wc -l)" -eq 2 ] && return 0
        sleep 0.05
    done
    die "nginx $node: no 2 workers 5 s after a reload"
}

fault_reload() {
    local node
    keep_limit reload
    set_epoch fault
    for node in "${NODES[@]}"; do
        reload_nginx "$node"
        reload_nginx "$node"
    done
}

restore_reload() {
    keep_check reload
}

# --- nginx a upgraded in place: USR2, WINCH, QUIT ---------------------------

UPGRADED=a

# The binary upgrade: USR2 makes the master start a new master from the
# binary (here the same one: what is tested is the hand-over), which takes
# over the pid file, the old one's becoming nginx.pid.oldbin; both serve
# until WINCH stops the old workers; QUIT ends the old master.
fault_upgrade() {
    local logs=$PREFIX/$UPGRADED/logs old new pids pid i
    keep_limit upgrade
    old=$(cat "$logs/nginx.pid")
    kill -USR2 "$old"
    for i in $(seq 200); do
        new=$(cat "$logs/nginx.pid" 2>/dev/null || true)
        if [ -s "$logs/nginx.pid.oldbin" ] && [ -n "$new" ] && [ "$new" != "$old" ] \
            && [ "$(nginx_workers "$new" | wc -l)" -eq 2 ]; then
            break
        fi
        [ "$i" -eq 200 ] && die "nginx $UPGRADED: no new master with 2 workers 10 s after USR2"
        sleep 0.05
    done
    record old_master "$old"
    record new_master "$new"
    set_epoch both
    sleep 1
    # the new master is a child of the old one too
    pids=$(nginx_workers "$old" | grep -vx "$new" || true)
    kill -WINCH "$old"
    for pid in $pids; do
        wait_gone "$pid" 200 || die "nginx $UPGRADED: old worker $pid still running 10 s after WINCH"
    done
    set_epoch fault
    kill -QUIT "$old"
    wait_gone "$old" 200 || die "nginx $UPGRADED: old master $old still running 10 s after QUIT"
}

restore_upgrade() {
    keep_check upgrade
}

# --- what a reload or an upgrade keeps ------------------------------------

KEEP_ZONES="local strict async limit_req"

# The status of GET /$2 on node $1.
status_of() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${PORT[$1]}/$2"
}

# Uses the key "<phase>-<node>" once in every keep_* zone of every node:
# the first request passes and the second is limited, for a minute, as
# long as the zone remembers the key.
keep_limit() {
    local phase=$1 node zone got
    for node in "${NODES[@]}"; do
        for zone in $KEEP_ZONES; do
            got="$(status_of "$node" "keep_$zone?k=$phase-$node") $(status_of "$node" "keep_$zone?k=$phase-$node")"
            [ "$got" = "200 429" ] \
                || die "nginx $node: /keep_$zone answered $got to a fresh key, expected 200 429"
        done
    done
}

# Records, for every keep_* zone of every node, the status the key limited
# by keep_limit gets now, after the reload or upgrade: "429" if the zone
# kept it; for an async zone that did not, the statuses until Redis's view
# limits it again (at most 2 s).
keep_check() {
    local phase=$1 node zone got i statuses
    for node in "${NODES[@]}"; do
        for zone in $KEEP_ZONES; do
            statuses=
            for i in $(seq 40); do
                got=$(status_of "$node" "keep_$zone?k=$phase-$node")
                statuses="${statuses:+$statuses,}$got"
                if [ "$got" = 429 ] || [ "$zone" != async ]; then break; fi
                sleep 0.05
            done
            record "keep_${node}_$zone" "$statuses"
        done
    done
}
