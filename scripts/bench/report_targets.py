# SPDX-License-Identifier: BSD-2-Clause
"""report.py's target checks: each row or pair of the bench against the
project's targets (report_data.py), as sentences that state the figure and
the target, and the Redis Cluster rows' per-master shares."""

from report_data import (
    ALGORITHM_PAIRS, ALGORITHM_RATIO, API_RATIO, ASYNC_HOT_CMDS,
    ASYNC_PASS_RATIO, CLUSTER_ASYNC_RATIO, CLUSTER_ASYNC_SCRIPTS,
    CLUSTER_REDIRECTS, CLUSTER_SHARE_SLACK, CLUSTER_STRICT_RATIO,
    CONCURRENT_RATIO, COUNTERS_RATIO, FLOODED_BURST, FLOODED_RATE,
    FLOODED_SCRIPTS_PER_ADMITTED, ORDER, SETTLE_RATIO, STRICT_PASS_RATIO,
    STRICT_REJECT_CMDS, STRICT_REJECT_RATIO, STRICT_SETTLE_RATIO,
    SYNC_INTERVAL_MS, per_request, ratio, redis_totals, table)


# A target is (sentence, ok): the sentence states the figure and ends with
# the target ("..., target >= 0.5"); ok says whether the figure meets it.
# with_verdict() is for whoever runs the bench, plain() for the docs.


def with_verdict(target):
    sentence, ok = target
    return "%s: %s" % (sentence, "met" if ok else "NOT met")


def plain(target):
    return target[0] + "."


def round_ratios(runs, num, den):
    """The per-round ratios whose median ratio() is, as text."""
    rounds = sorted(set(runs.get(num, {})) & set(runs.get(den, {})), key=int)
    return ", ".join("%.3f" % (runs[num][r]["rps"] / runs[den][r]["rps"])
                     for r in rounds if runs[den][r]["rps"] > 0)


def ratio_target(runs, num, den, minimum, note=""):
    """num / den's median ratio against its minimum, or None if either was
    not measured."""
    x = ratio(runs, num, den)
    if x is None:
        return None
    return ("%s / %s = %.3f (rounds: %s%s), target >= %g"
            % (num, den, x, round_ratios(runs, num, den),
               "; " + note if note else "", minimum), x >= minimum)


def non2xx_target(runs, config, why):
    rs = runs[config].values()
    non2xx = sum(r["non2xx"] for r in rs)
    return ("%s: %d non-2xx of %d (%s), target 0"
            % (config, non2xx, sum(r["requests"] for r in rs), why),
            non2xx == 0)


def scripts_target(runs, config, connections, per_request_wanted=1, why=""):
    """A strict row's EVALSHA/EVAL per request: exactly per_request_wanted
    (why: what they are), and no other commands (a cluster's slot map
    reads are counted apart)."""
    scripts, cmds, other, requests, _ = redis_totals(runs, config)
    # a request cut off when wrk stops may have been sent to Redis but is
    # not counted by wrk: at most one per connection and run (each with
    # all its scripts)
    slack = per_request_wanted * connections * len(runs[config])
    excess = scripts - per_request_wanted * requests
    return ("%s: %s EVALSHA/EVAL per request (%d for %d requests: %+d, "
            "where up to %d requests in flight when wrk stops may count; "
            "%d other commands), target exactly %d%s"
            % (config, per_request(scripts, requests), scripts, requests,
               excess, slack, other, per_request_wanted,
               ": " + why if why else ""),
            0 <= excess <= slack and other == 0)


def strict_targets(runs, connections):
    """The project's targets for the strict rows."""
    out = []
    t = ratio_target(runs, "strict_pass", "throttle_pass", STRICT_PASS_RATIO)
    if t:
        out.append(t)
    if redis_totals(runs, "strict_pass"):
        out.append(scripts_target(runs, "strict_pass", connections))
        out.append(non2xx_target(runs, "strict_pass",
                                 "a request Redis did not decide is denied "
                                 "there"))
    t = ratio_target(runs, "strict_reject", "throttle_reject",
                     STRICT_REJECT_RATIO)
    if t:
        out.append(t)
    redis = redis_totals(runs, "strict_reject")
    if redis:
        scripts, cmds, other, requests, _ = redis
        rs = runs["strict_reject"].values()
        passed = sum(r["requests"] - r["non2xx"] for r in rs)
        out.append((
            "strict_reject: %s Redis commands per request (%d commands, %d "
            "of them EVALSHA/EVAL, for %d requests), target <= %.2f"
            % (per_request(cmds, requests), cmds, scripts, requests,
               STRICT_REJECT_CMDS),
            requests > 0 and cmds / requests <= STRICT_REJECT_CMDS))
        out.append((
            "strict_reject: %d responses were not rejections (a request "
            "Redis did not decide passes there), target 0" % passed,
            passed == 0))
    return out


def flooded_targets(runs, duration):
    """strict_flooded_key: scripts per admitted request, and what each
    round admitted against one exact funnel's floor and ceiling (the key
    drains between rounds, at most to a fresh key's burst + 1)."""
    redis = redis_totals(runs, "strict_flooded_key")
    if not redis:
        return []
    scripts, _, _, requests, _ = redis
    rs = runs["strict_flooded_key"]
    admitted = {r: v["requests"] - v["non2xx"] for r, v in rs.items()}
    total = sum(admitted.values())
    out = [(
        "strict_flooded_key: %s EVALSHA/EVAL per admitted request (%d "
        "scripts, %d admitted of %d requests), target <= %d"
        % (per_request(scripts, total), scripts, total, requests,
           FLOODED_SCRIPTS_PER_ADMITTED),
        total > 0 and scripts / total <= FLOODED_SCRIPTS_PER_ADMITTED)]
    if duration:
        floor = int(FLOODED_RATE * (duration - 0.1))
        ceiling = int(FLOODED_RATE * (duration + 0.1)) + FLOODED_BURST + 1
        each = ", ".join("%d" % admitted[r]
                         for r in sorted(admitted, key=int))
        out.append((
            "strict_flooded_key: admitted per round %s, target between "
            "%d and %d (one exact funnel over %g s)"
            % (each, floor, ceiling, duration),
            all(floor <= a <= ceiling for a in admitted.values())))
    return out


def async_targets(runs, duration):
    """The project's targets for the async rows, and what their syncs
    cost."""
    out = []
    for num, den, what in [
            ("async_pass_hot", "throttle_pass_hot", "same requests"),
            ("async_pass_distinct", "throttle_pass_distinct",
             "same requests"),
            ("async_pass_hot", "throttle_pass",
             "not like for like: one key, no wrk script"),
            ("async_pass_distinct", "throttle_pass",
             "not like for like: one key, no wrk script")]:
        t = ratio_target(runs, num, den, ASYNC_PASS_RATIO, what)
        if t:
            out.append(t)
    redis = redis_totals(runs, "async_pass_hot")
    if redis:
        scripts, cmds, other, requests, _ = redis
        seconds = len(runs["async_pass_hot"]) * duration
        # a sync writes each hot key once: 100 keys every 100 ms is 1000 a
        # second whatever the load, so per request it falls as load grows
        per_second = (", %.0f per second of wrk, whatever the load"
                      % (cmds / seconds) if seconds else "")
        out.append((
            "async_pass_hot: %s Redis commands per request (all commands "
            "Redis processed: %d, for %d requests%s), target <= %.2f"
            % (per_request(cmds, requests), cmds, requests, per_second,
               ASYNC_HOT_CMDS),
            requests > 0 and cmds / requests <= ASYNC_HOT_CMDS))
        out.append((
            "async_pass_hot: %s EVALSHA/EVAL per request (the commands "
            "nginx sends: %d), target <= %.2f"
            % (per_request(scripts, requests), scripts, ASYNC_HOT_CMDS),
            requests > 0 and scripts / requests <= ASYNC_HOT_CMDS))
    for c in ("async_pass_hot", "async_pass_distinct"):
        redis = redis_totals(runs, c)
        if not redis:
            continue
        scripts, cmds, other, requests, gets = redis
        seconds = len(runs[c]) * duration if duration else 0
        rate = ("; %.1f EVALSHA/EVAL per second of wrk (the syncs after "
                "each run included; one sync of up to 500 keys every "
                "%d ms is %.0f per second)"
                % (scripts / seconds, SYNC_INTERVAL_MS,
                   1000 / SYNC_INTERVAL_MS) if seconds else "")
        out.append(("%s: %s EVALSHA/EVAL and %s Redis commands per "
                    "request%s; %d other commands, target 0"
                    % (c, per_request(scripts, requests),
                       per_request(cmds, requests), rate, other),
                    other == 0))
    for c in ("throttle_pass_hot", "async_pass_hot",
              "throttle_pass_distinct", "async_pass_distinct"):
        if c in runs:
            out.append(non2xx_target(runs, c,
                                     "always passing; a request the zone "
                                     "cannot hold is denied"))
    return out


def cluster_totals(runs, config):
    """(MOVED replies, ASK replies, scripts not run, ASKING calls, slot
    map reads, each master's scripts) summed over the rounds, or None if
    not measured."""
    rs = [r for r in runs.get(config, {}).values()
          if r["by_node"] is not None]
    if not rs:
        return None
    return (sum(r["moved"] for r in rs), sum(r["ask"] for r in rs),
            sum(r["rejected"] for r in rs), sum(r["asking"] for r in rs),
            sum(r["map_reads"] for r in rs),
            [sum(col) for col in zip(*(r["by_node"] for r in rs))])


def redirect_target(runs, config):
    moved, ask, rejected, asking, _, _ = cluster_totals(runs, config)
    requests = redis_totals(runs, config)[3]
    return ("%s: %s redirections per request (MOVED replies %d and ASK "
            "replies %d from INFO errorstats, for %d requests; scripts "
            "received but not run %d, ASKING calls %d), target <= %.3f"
            % (config, per_request(moved + ask, requests), moved, ask,
               requests, rejected, asking, CLUSTER_REDIRECTS),
            requests > 0 and (moved + ask) / requests <= CLUSTER_REDIRECTS)


def cluster_targets(runs, connections):
    """The project's targets for the cluster rows."""
    out = []
    for num, den in [("cluster_strict_pass", "strict_pass"),
                     ("cluster_strict_pass_distinct",
                      "strict_pass_distinct")]:
        t = ratio_target(runs, num, den, CLUSTER_STRICT_RATIO)
        if t:
            out.append(t)
        if cluster_totals(runs, num):
            out.append(scripts_target(runs, num, connections))
            out.append(redirect_target(runs, num))
            out.append(non2xx_target(runs, num,
                                     "a request the cluster did not decide "
                                     "is denied there"))
    c = "cluster_async_pass_hot"
    t = ratio_target(runs, c, "throttle_pass_hot", CLUSTER_ASYNC_RATIO,
                     "same requests")
    if t:
        out.append(t)
    if cluster_totals(runs, c):
        scripts, cmds, other, requests, _ = redis_totals(runs, c)
        out.append((
            "%s: %s EVALSHA/EVAL per request (%d for %d requests; %s Redis "
            "commands per request, %d other commands), target <= %.2f"
            % (c, per_request(scripts, requests), scripts, requests,
               per_request(cmds, requests), other, CLUSTER_ASYNC_SCRIPTS),
            requests > 0 and scripts / requests <= CLUSTER_ASYNC_SCRIPTS))
        out.append(redirect_target(runs, c))
        out.append(non2xx_target(runs, c, "always passing; a request the "
                                 "zone cannot hold is denied"))
    c = "cluster_strict_pass_distinct"
    if cluster_totals(runs, c):
        by_node = cluster_totals(runs, c)[5]
        total = sum(by_node)
        even = 1 / len(by_node)
        shares = [n / total for n in by_node] if total else []
        out.append((
            "%s: each master's share of the EVALSHA/EVAL: %s (of %d), "
            "target %.3f each, within %.2f"
            % (c, ", ".join("%.3f" % x for x in shares), total, even,
               CLUSTER_SHARE_SLACK),
            bool(shares) and all(abs(x - even) <= CLUSTER_SHARE_SLACK
                                 for x in shares)))
    return out


def cluster_shares(runs):
    """Plain-text and Markdown tables of each master's share of the
    scripts, one row per cluster configuration; None if none ran."""
    rows = []
    for c in ORDER:
        totals = cluster_totals(runs, c)
        if not totals or not c.startswith("cluster_"):
            continue
        by_node = totals[5]
        total = sum(by_node)
        rows.append([c, "{:,}".format(total)] +
                    ["%.3f" % (n / total if total else 0) for n in by_node])
    if not rows:
        return None
    masters = len(rows[0]) - 2
    return table(["configuration", "EVALSHA/EVAL"] +
                 ["master %d" % (i + 1) for i in range(masters)],
                 rows, "lr" + "r" * masters)


def cluster_note(runs, duration):
    """How often the cluster rows' workers read the slot map, as text."""
    cs = [c for c in runs if c.startswith("cluster_") and
          cluster_totals(runs, c)]
    reads = sum(cluster_totals(runs, c)[4] for c in cs)
    seconds = sum(len(runs[c]) for c in cs) * duration
    return ("Each master's share of the EVALSHA/EVAL it ran, summed over "
            "the rounds (the slots are split evenly among the masters; a "
            "strict key's slot is that of its hash tag, an async shard's "
            "that of {zone:n}). Slot map reads (CLUSTER SLOTS or SHARDS: "
            "each worker reads the map every cluster_refresh, 10 s, and "
            "after a MOVED, at most once in 100 ms) in the cluster rows: "
            "%d in %g s of wrk%s; they are not among the \"other "
            "commands\" above." % (reads, seconds,
                                   ", %.2f a second" % (reads / seconds)
                                   if seconds else ""))


def like_throttle_pass_targets(runs, config, minimum):
    """A passing row that costs what throttle_pass does (decided after the
    access phase, with delay=, or with plans): at least `minimum` of its
    req/s, and always passing."""
    t = ratio_target(runs, config, "throttle_pass", minimum)
    if t is None:
        return []
    return [t, non2xx_target(runs, config, "always passing")]


def settle_targets(runs, connections):
    """settle=: equal to the cost, it costs what throttle_pass does; in a
    strict zone charging more, a second script a request, at least 0.6 of
    strict_pass, always passing."""
    out = like_throttle_pass_targets(runs, "throttle_pass_settle",
                                     SETTLE_RATIO)
    t = ratio_target(runs, "strict_pass_settle", "strict_pass",
                     STRICT_SETTLE_RATIO)
    if t is None:
        return out
    out.append(t)
    if redis_totals(runs, "strict_pass_settle"):
        out.append(scripts_target(runs, "strict_pass_settle", connections, 2,
                                  "the decision and the settle"))
    out.append(non2xx_target(runs, "strict_pass_settle", "always passing"))
    return out


def concurrent_targets(runs, connections):
    """concurrent=: a local zone's place costs what throttle_pass does
    (at least 0.95 of it); a strict zone's is two scripts a request (the
    acquire and the release), reported against strict_pass; both always
    passing."""
    out = like_throttle_pass_targets(runs, "concurrent_pass",
                                     CONCURRENT_RATIO)
    if redis_totals(runs, "strict_concurrent_pass"):
        out.append(scripts_target(runs, "strict_concurrent_pass",
                                  connections, 2,
                                  "the acquire and the release"))
    if runs.get("strict_concurrent_pass"):
        out.append(non2xx_target(runs, "strict_concurrent_pass",
                                 "always passing"))
    return out


def api_targets(runs, connections):
    """The decision endpoint against a limited static file, in local and
    strict mode: at least 0.9, always passing, and in strict mode one
    script a check."""
    out = []
    for num, den in [("api_pass", "throttle_pass"),
                     ("strict_api_pass", "strict_pass")]:
        t = ratio_target(runs, num, den, API_RATIO)
        if t is None:
            continue
        out.append(t)
        if redis_totals(runs, num):
            out.append(scripts_target(runs, num, connections))
        out.append(non2xx_target(runs, num, "always passing"))
    return out


def metrics_targets(runs):
    """The counters against a module built without them, and scraping
    against not scraping: each at least 0.98 and always passing."""
    out = []
    t = ratio_target(runs, "throttle_pass", "throttle_pass_no_counters",
                     COUNTERS_RATIO)
    if t:
        out += [t, non2xx_target(runs, "throttle_pass_no_counters",
                                 "always passing")]
    c = "throttle_pass_scraped"
    rs = [runs[c][r] for r in sorted(runs.get(c, {}), key=int)]
    scraped = ("scrapes of /metrics per run: %s; the scraper's CPU time "
               "while wrk ran: %.3f s a run at most"
               % (", ".join(str(r["scrapes"]) for r in rs),
                  max(r["scraper_cpu"] for r in rs))
               if rs and None not in [r["scrapes"] for r in rs] else "")
    t = ratio_target(runs, c, "throttle_pass", COUNTERS_RATIO, scraped)
    if t:
        out += [t, non2xx_target(runs, c, "always passing")]
    return out


def algorithm_targets(runs):
    """Every algorithm at least 0.9 x GCRA's throughput in the same mode,
    and always passing."""
    out = []
    for num, den in ALGORITHM_PAIRS:
        t = ratio_target(runs, num, den, ALGORITHM_RATIO)
        if t is None:
            continue
        out.append(t)
        non2xx = sum(r["non2xx"] for r in runs[num].values())
        if non2xx:
            why = ("always passing; a request Redis did not decide is "
                   "denied there" if num.startswith("strict_")
                   else "always passing")
            out.append(non2xx_target(runs, num, why))
    return out
