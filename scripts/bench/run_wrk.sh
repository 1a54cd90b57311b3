# SPDX-License-Identifier: BSD-2-Clause
# Shell helpers for run.sh's measurements: one wrk run of a configuration,
# appended to $RUNS, with the Redis figures around it and, for
# throttle_pass_scraped, the scraper of /metrics (scripts/bench/scrape.py)
# running alongside. Need the settings and paths of run.sh, its nginx and
# Redis helpers (scripts/bench/run_nginx.sh, scripts/bench/run_redis.sh) and
# die from the caller.

# Runs wrk once; appends "config round req/s p99_ms non2xx errors requests
# redis_scripts redis_cmds redis_other redis_gets redis_rejected
# redis_asking redis_moved redis_ask redis_map_reads redis_by_node" to
# $RUNS. For the
# strict_*, async_* and cluster_* runs the Redis figures are differences of
# Redis's counters around the run (summed over the masters for cluster_*;
# for async ones, until their last syncs have landed: redis_settle):
# EVALSHA + EVAL calls run; all commands processed but the INFO calls
# reading them (which includes the TIME, GET and SET run inside each
# script); the commands that are none of these nor slot map reads
# (nothing else talks to these Redis: 0 unless the module sends something
# besides its scripts); the GET calls (in a sync script, one per key
# synced); the scripts received but not run (redirected), the ASKING
# calls, the MOVED and ASK replies, the slot map reads (CLUSTER SLOTS or
# SHARDS), and the scripts run on each master ("/" between them). "-" for other runs. The *_hot and *_distinct runs
# send their keys with scripts/bench/keys.lua. Then "scrapes scraper_cpu_s": for
# throttle_pass_scraped, the scrapes of /metrics made from just before wrk
# started to just after it ended, and the CPU seconds the scraper used in
# that time; "-" for other runs.
run_wrk() {
    local config=$1 round=$2 duration=$3 raw ports
    local before=() cmds redis="-\t-\t-\t-\t-\t-\t-\t-\t-\t-" script=() args=()
    local scraped="-\t-"
    raw=$RAW/$config.$round.txt
    read -r -a ports <<<"$(redis_ports_of "$config")"
    case $config in *_hot|*_distinct|*_million)
        script=(-s "$BENCH/keys.lua")
        args=(-- "$(keys_of "$config")")
        ;;
    esac
    case $config in strict_*|async_*|cluster_*)
        redis_counters "${ports[@]}"
        before=("$RC_TOTAL" "$RC_INFO" "$RC_SCRIPTS" "$RC_NESTED" "$RC_GETS"
                "$RC_REJECTED" "$RC_ASKING" "$RC_MOVED" "$RC_ASK"
                "$RC_MAP_READS" "$RC_BY_NODE")
        ;;
    esac
    [ "$config" != throttle_pass_scraped ] || start_scraper "$RAW/$config.$round.scrape.txt"
    $WRK_PIN wrk -t"$THREADS" -c"$CONNECTIONS" -d"${duration}s" --latency \
        "${script[@]}" "http://127.0.0.1:$(port_of "$config")/$(location_of "$config")$(query_of "$config")" \
        "${args[@]}" >"$raw" 2>&1 \
        || die "wrk failed, see $raw"
    if [ "$config" = throttle_pass_scraped ]; then
        stop_scraper "$RAW/$config.$round.scrape.txt" "$config (round $round)"
        scraped=$(printf '%d\t%s' "$SCRAPES" "$SCRAPER_CPU")
    fi
    case $config in
        strict_*|cluster_strict_*)
            # requests cut off when wrk stopped may still have a command
            # on its way: let Redis see it before reading the counters
            sleep 0.2
            redis_counters "${ports[@]}"
            ;;
        async_*|cluster_async_*)
            redis_settle "$config (round $round)" "${ports[@]}"
            ;;
    esac
    if [ ${#before[@]} -gt 0 ]; then
        cmds=$((RC_TOTAL - before[0] - (RC_INFO - before[1])))
        redis=$(printf '%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s' \
                $((RC_SCRIPTS - before[2])) "$cmds" \
                $((cmds - (RC_SCRIPTS - before[2]) - (RC_NESTED - before[3]) \
                  - (RC_MAP_READS - before[9]))) \
                $((RC_GETS - before[4])) $((RC_REJECTED - before[5])) \
                $((RC_ASKING - before[6])) $((RC_MOVED - before[7])) \
                $((RC_ASK - before[8])) $((RC_MAP_READS - before[9])) \
                "$(per_node_difference "${before[10]}" "$RC_BY_NODE")")
    fi
    [ "$round" = warmup ] && return 0
    awk -v config="$config" -v round="$round" -v redis="$redis" \
        -v scraped="$scraped" '
        function ms(v) {
            if (v ~ /us$/) return v / 1000
            if (v ~ /ms$/) return v + 0
            if (v ~ /m$/)  return v * 60000
            if (v ~ /s$/)  return v * 1000
            return v
        }
        $1 == "99%"                     { p99 = ms($2) }
        /requests in/                   { requests = $1 }
        /^Requests\/sec:/               { rps = $2 }
        /Non-2xx or 3xx responses:/     { non2xx = $NF }
        /Socket errors:/ {
            gsub(/,/, "")
            errors = $4 + $6 + $8 + $10
        }
        END {
            if (rps == "" || p99 == "") exit 1
            printf "%s\t%s\t%s\t%.3f\t%d\t%d\t%d\t%s\t%s\n", config, round,
                   rps, p99, non2xx, errors, requests, redis, scraped
        }' "$raw" >>"$RUNS" || die "could not parse $raw"
}

# Starts scripts/bench/scrape.py on the first nginx's /metrics, writing to
# $1, and returns once it has had its first answer: the scraping is under
# way before wrk starts.
SCRAPER_PID=
start_scraper() {
    local out=$1 i
    rm -f "$out.ready"
    "$PYTHON" "$BENCH/scrape.py" --port "$PORT" --path /metrics \
        --interval 0.1 --ready "$out.ready" >"$out" 2>&1 &
    SCRAPER_PID=$!
    for i in $(seq 50); do
        [ -e "$out.ready" ] && return 0
        kill -0 "$SCRAPER_PID" 2>/dev/null || break
        sleep 0.1
    done
    die "the scraper of /metrics did not start scraping; see $out"
}

# Stops the scraper, which wrote to $1 during the run $2; fails if it
# failed or made no scrape. Leaves what it printed in SCRAPES and
# SCRAPER_CPU.
stop_scraper() {
    local out=$1 run=$2 pid=$SCRAPER_PID
    SCRAPER_PID=
    kill -TERM "$pid"
    wait "$pid" || die "the scraper of /metrics failed during $run: $(cat "$out")"
    rm -f "$out.ready"
    read -r SCRAPES SCRAPER_CPU <"$out" || true
    [[ ${SCRAPES:-} =~ ^[0-9]+$ ]] && [ "$SCRAPES" -gt 0 ] \
        || die "no scrape of /metrics during $run; see $out"
}

# The number of distinct keys a keyed row's requests cycle over.
keys_of() {
    case $1 in
        *_hot)      echo "$HOT_KEYS" ;;
        *_distinct) echo "$DISTINCT_KEYS" ;;
        *_million)  echo 1000000 ;;
    esac
}
