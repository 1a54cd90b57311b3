#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Aggregates scripts/bench/run.sh's measurements: medians over rounds,
ratios to the same round's baseline, Redis commands per request for the
Redis-backed rows (strict and async), the project's targets for some of
them, and the keys a zone holds per MiB.

Writes a table on stdout and build/bench's results.md (each target with
"met" or "NOT met", for whoever runs the bench), and, with --docs, this
layout's section of docs/performance.md: the same figures with the
targets stated plainly, under a fixed text that says how to read them. The
file holds one section per CPU layout (--section); a run replaces its own
section and keeps the other's, so the file's structure does not depend on
which pass ran last."""

import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from tables import md_table, text_table  # noqa: E402

BASELINE = "none"
ORDER = ["none", "limit_req", "throttle_pass", "throttle_pass_authorized",
         "throttle_pass_delay", "throttle_pass_settle", "concurrent_pass",
         "throttle_pass_noheaders", "throttle_pass_no_counters",
         "throttle_pass_scraped", "api_pass",
         "strict_pass", "strict_api_pass", "strict_pass_settle",
         "strict_concurrent_pass",
         "throttle_reject", "strict_reject", "strict_flooded_key",
         "throttle_pass_hot", "async_pass_hot", "throttle_pass_distinct",
         "async_pass_distinct", "fixed_window_pass", "sliding_window_pass",
         "sliding_log_pass", "strict_fixed_window_pass",
         "strict_sliding_window_pass", "strict_sliding_log_pass",
         "strict_pass_distinct", "cluster_strict_pass",
         "cluster_strict_pass_distinct", "cluster_async_pass_hot"]
NOTES = {
    "none": "static file, no limiting",
    "limit_req": "limit_req, always passes (burst, nodelay)",
    "throttle_pass": "throttle, always passes, RateLimit headers",
    "throttle_pass_authorized": "as throttle_pass, phase=authorized (decided "
                                "after the access phase)",
    "throttle_pass_delay": "as throttle_pass, delay= that never makes a "
                           "request wait",
    "throttle_pass_settle": "as throttle_pass, settle= equal to the cost "
                            "(read when the request ends; nothing to move)",
    "concurrent_pass": "concurrent=, always a place free: taken when "
                       "admitted, freed when the request ends",
    "strict_concurrent_pass": "as concurrent_pass, the places in Redis: "
                              "the acquire script, then the release",
    "strict_pass_settle": "as strict_pass, settle= one unit more than the "
                          "cost: a second script (a charge) a request",
    "throttle_pass_noheaders": "as throttle_pass, throttle_headers off",
    "throttle_pass_no_counters": "as throttle_pass, on a second nginx whose "
                                 "module is built without the metrics "
                                 "counters",
    "throttle_pass_scraped": "as throttle_pass, while /metrics is scraped "
                             "every 100 ms",
    "api_pass": "throttle_api: GET ?zone=&key= of throttle_pass's policy, "
                "always passing, a JSON answer",
    "strict_api_pass": "as api_pass, the zone strict (as strict_pass)",
    "throttle_reject": "throttle, every request rejected: a 429, no file read",
    "strict_pass": "as throttle_pass, decided by Redis (strict mode)",
    "strict_reject": "as throttle_reject, Redis-backed: rejected from the "
                     "denial cache",
    "strict_flooded_key": "one key at 50r/s burst=10, flooded: a few "
                          "admitted, the rest rejected from the denial "
                          "cache or from the answer of the key's script "
                          "in flight",
    "throttle_pass_hot": "as throttle_pass, keyed on ?k=, %(hot)s keys "
                         "in turn (wrk Lua script)",
    "async_pass_hot": "as throttle_pass_hot, async mode (synced to Redis "
                      "every 100ms)",
    "throttle_pass_distinct": "as throttle_pass_hot with %(distinct)s keys",
    "async_pass_distinct": "as throttle_pass_distinct, async mode",
    "fixed_window_pass": "as throttle_pass, algorithm=fixed_window",
    "sliding_window_pass": "as throttle_pass, algorithm=sliding_window",
    "sliding_log_pass": "as throttle_pass, algorithm=sliding_log "
                        "(100,000 timestamps a key)",
    "strict_fixed_window_pass": "as strict_pass, algorithm=fixed_window",
    "strict_sliding_window_pass": "as strict_pass, algorithm=sliding_window",
    "strict_sliding_log_pass": "as strict_pass, algorithm=sliding_log "
                               "(a sorted set of 100,000 members)",
    "strict_pass_distinct": "as strict_pass, keyed on ?k=, %(distinct)s "
                            "keys in turn (wrk Lua script)",
    "cluster_strict_pass": "as strict_pass, on a 3-master Redis Cluster "
                           "(one key: one master)",
    "cluster_strict_pass_distinct": "as strict_pass_distinct, on the "
                                    "cluster (keys on every master)",
    "cluster_async_pass_hot": "as async_pass_hot, on the cluster (one "
                              "sync per hash-tag shard)",
}
# Every algorithm against GCRA in the same mode (a target: at least 0.9)
ALGORITHM_PAIRS = [
    ("fixed_window_pass", "throttle_pass"),
    ("sliding_window_pass", "throttle_pass"),
    ("sliding_log_pass", "throttle_pass"),
    ("strict_fixed_window_pass", "strict_pass"),
    ("strict_sliding_window_pass", "strict_pass"),
    ("strict_sliding_log_pass", "strict_pass"),
]
ALGORITHM_RATIO = 0.9
# Deciding after the access phase costs what deciding in preaccess does
PHASE_RATIO = 0.97
# So does delay= when no request has to wait: computing the wait
DELAY_RATIO = 0.97
# settle= equal to the cost: reading it when the request ends
SETTLE_RATIO = 0.97
# settle= that charges more in a strict zone: a second script a request
STRICT_SETTLE_RATIO = 0.6
# concurrent=: a place taken and freed costs what a rate's charge does
CONCURRENT_RATIO = 0.95
# The throttle_metrics counters, and scraping them, cost nearly nothing
COUNTERS_RATIO = 0.98
# Asking the decision endpoint costs about what a limited request does
API_RATIO = 0.9
# (numerator, denominator, what it tells)
PAIRS = [
    ("throttle_pass", "limit_req", "throttle vs limit_req, both passing"),
    ("throttle_pass_noheaders", "limit_req",
     "throttle without headers vs limit_req"),
    ("throttle_pass", "throttle_pass_noheaders",
     "cost of the RateLimit headers"),
    ("throttle_pass_authorized", "throttle_pass",
     "decided after the access phase vs in preaccess"),
    ("throttle_pass_delay", "throttle_pass",
     "delay= that never makes a request wait vs no delay="),
    ("throttle_pass_settle", "throttle_pass",
     "settle= equal to the cost vs no settle="),
    ("strict_pass_settle", "strict_pass",
     "settle= charging one unit more (a second script) vs no settle=, "
     "strict"),
    ("concurrent_pass", "throttle_pass",
     "a place held while in flight vs a rate, both passing"),
    ("strict_concurrent_pass", "strict_pass",
     "a place in Redis (acquire + release) vs a rate's one script"),
    ("throttle_pass", "throttle_pass_no_counters",
     "cost of the metrics counters"),
    ("throttle_pass_scraped", "throttle_pass",
     "cost of scraping /metrics every 100 ms"),
    ("api_pass", "throttle_pass",
     "a check asked of throttle_api vs a limited request, local"),
    ("strict_api_pass", "strict_pass",
     "a check asked of throttle_api vs a limited request, strict"),
    ("strict_pass", "throttle_pass", "strict vs local mode, both passing"),
    ("strict_reject", "throttle_reject",
     "strict vs local mode, both rejecting"),
    ("async_pass_hot", "throttle_pass_hot",
     "async vs local mode, hot keys, same requests"),
    ("async_pass_distinct", "throttle_pass_distinct",
     "async vs local mode, distinct keys, same requests"),
    ("fixed_window_pass", "throttle_pass", "fixed_window vs gcra, local"),
    ("sliding_window_pass", "throttle_pass",
     "sliding_window vs gcra, local"),
    ("sliding_log_pass", "throttle_pass", "sliding_log vs gcra, local"),
    ("strict_fixed_window_pass", "strict_pass",
     "fixed_window vs gcra, strict"),
    ("strict_sliding_window_pass", "strict_pass",
     "sliding_window vs gcra, strict"),
    ("strict_sliding_log_pass", "strict_pass", "sliding_log vs gcra, strict"),
    ("async_pass_hot", "throttle_pass",
     "async (hot keys, wrk Lua script) vs local (one key, no script)"),
    ("async_pass_distinct", "throttle_pass",
     "async (distinct keys, wrk Lua script) vs local (one key, no script)"),
    ("throttle_pass_hot", "throttle_pass",
     "local: hot keys with the wrk Lua script vs one key without"),
    ("throttle_pass_distinct", "throttle_pass",
     "local: distinct keys with the wrk Lua script vs one key without"),
    ("cluster_strict_pass", "strict_pass",
     "strict: cluster vs single Redis, one key"),
    ("cluster_strict_pass_distinct", "strict_pass_distinct",
     "strict: cluster vs single Redis, distinct keys"),
    ("strict_pass_distinct", "strict_pass",
     "strict: distinct keys with the wrk Lua script vs one key without"),
    ("cluster_async_pass_hot", "throttle_pass_hot",
     "async on the cluster vs local mode, hot keys, same requests"),
    ("cluster_async_pass_hot", "async_pass_hot",
     "async: cluster vs single Redis, hot keys"),
]
DENSITY_TARGET = 8000
# The targets for strict mode (set for 2 CPUs shared by wrk, nginx, Redis)
STRICT_PASS_RATIO = 0.5      # strict_pass >= 0.5 x throttle_pass
STRICT_REJECT_RATIO = 0.9    # strict_reject >= 0.9 x throttle_reject
STRICT_REJECT_CMDS = 0.01    # Redis commands per rejected request, at most
# The flooded key: at most this many scripts per admitted request, and
# admitted what one exact funnel (50r/s burst=10) admits in a run, give or
# take 0.1 s of timing
FLOODED_SCRIPTS_PER_ADMITTED = 4
FLOODED_RATE = 50
FLOODED_BURST = 10
# The targets for async mode
ASYNC_PASS_RATIO = 0.9       # async passing >= 0.9 x local passing
ASYNC_HOT_CMDS = 0.02        # Redis commands per request, hot keys, at most
# The targets for a 3-master Redis Cluster on the same CPUs
CLUSTER_STRICT_RATIO = 0.8   # cluster strict >= 0.8 x single-Redis strict
CLUSTER_REDIRECTS = 0.001    # MOVED + ASK per request, at most
CLUSTER_ASYNC_RATIO = 0.9    # cluster async >= 0.9 x local, hot keys
CLUSTER_ASYNC_SCRIPTS = 0.02  # scripts per request, hot keys, at most
CLUSTER_SHARE_SLACK = 0.02   # each master's share of a distinct-key run
                             # within this of 1 / masters
SYNC_INTERVAL_MS = 100       # the async zones' sync_interval in nginx.conf.in
DASH = "\u2014"
SHARES_TITLE = "Redis Cluster: each master's share of the scripts"


def optional_int(text):
    return None if text in (None, "", "-") else int(text)


def optional_by_node(text):
    return (None if text in (None, "", "-")
            else [int(x) for x in text.split("/")])


def load_runs(path):
    runs = {}
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            runs.setdefault(row["config"], {})[row["round"]] = {
                "rps": float(row["rps"]),
                "p99": float(row["p99_ms"]),
                "non2xx": int(row["non2xx"]),
                "errors": int(row["errors"]),
                "requests": int(row["requests"]),
                # strict rows only (None elsewhere, and in older files)
                "scripts": optional_int(row.get("redis_scripts")),
                "cmds": optional_int(row.get("redis_cmds")),
                "other": optional_int(row.get("redis_other")),
                "gets": optional_int(row.get("redis_gets")),
                # scripts not run (redirected), ASKING calls, MOVED and ASK
                # replies, CLUSTER SLOTS/SHARDS calls, and each master's
                # scripts ("/" between them)
                "rejected": optional_int(row.get("redis_rejected")),
                "asking": optional_int(row.get("redis_asking")),
                "moved": optional_int(row.get("redis_moved")),
                "ask": optional_int(row.get("redis_ask")),
                "map_reads": optional_int(row.get("redis_map_reads")),
                "by_node": optional_by_node(row.get("redis_by_node")),
                # throttle_pass_scraped only: scrapes of /metrics during
                # the run, and the CPU seconds the scraper used
                "scrapes": optional_int(row.get("scrapes")),
                "scraper_cpu": (None if row.get("scraper_cpu_s") in
                                (None, "", "-")
                                else float(row["scraper_cpu_s"])),
            }
    return runs


def redis_totals(runs, config):
    """(EVALSHA+EVAL calls, all commands, other commands, requests, GET
    calls or None) summed over the rounds, or None for a configuration that
    does not use Redis."""
    rs = [r for r in runs.get(config, {}).values() if r["scripts"] is not None]
    if not rs:
        return None
    gets = [r["gets"] for r in rs]
    return (sum(r["scripts"] for r in rs), sum(r["cmds"] for r in rs),
            sum(r["other"] for r in rs), sum(r["requests"] for r in rs),
            None if None in gets else sum(gets))


def per_request(count, requests):
    return "%.4f" % (count / requests) if requests else "-"


def ratio(runs, num, den):
    """Median over rounds of num's req/s / den's req/s in the same round."""
    rounds = sorted(set(runs.get(num, {})) & set(runs.get(den, {})))
    values = [runs[num][r]["rps"] / runs[den][r]["rps"] for r in rounds
              if runs[den][r]["rps"] > 0]
    return statistics.median(values) if values else None


def fmt_ratio(x):
    return "-" if x is None else "%.3f" % x


def table(headers, rows, aligns):
    """Plain-text and Markdown renderings of the same table (aligns: "l"
    or "r" per column)."""
    return text_table(headers, rows, aligns), md_table(headers, rows, aligns)


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
    access phase, or with delay=): at least `minimum` of its req/s, and
    always passing."""
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


# --- docs/performance.md ------------------------------------------------------

# The sections of docs/performance.md, in their order: --section's value,
# the heading, and what the section is (fixed text, before the figures).
SECTIONS = [
    ("shared", "All CPUs shared",
     "The full `make bench`: every configuration, with wrk, nginx and Redis "
     "sharing the machine's CPUs. Redis's CPU time is taken from nginx's, "
     "as when Redis runs on the same host as nginx."),
    ("redis-apart", "Redis on a CPU of its own",
     "The second pass of `make bench` (`BENCH_LAYOUT=redis-apart`): only "
     "the rows whose Redis works hardest, with Redis (the single one and "
     "the cluster's three masters) pinned to the last CPU and nginx's "
     "workers and wrk sharing the others, as when Redis runs on a host of "
     "its own. nginx has one CPU fewer, so req/s are lower than "
     "in the section above and \"vs none\" is not measured (\"-\"): compare "
     "the ratios, not the req/s."),
]
BEGIN = "<!-- bench section %s: written by scripts/bench/report.py -->"
END = "<!-- end of bench section %s -->"

DOC_HEAD = """\
# Performance

Written by `make bench` (`scripts/bench/run.sh`, then
`scripts/bench/report.py`); do not edit by hand. Each section below says
which run produced it. The [README](../README.md#performance-and-accuracy) has a summary.

## How to read the tables

**The setup.** One nginx (2 workers) with the module (and a second one
for one row, see the metrics rows below), one Redis, and a Redis Cluster of 3 masters (no replicas) run on the same machine, a
virtual machine with 2 CPUs: wrk, nginx's workers, the single Redis and
the cluster's three masters all compete for the same two cores (in the
second section below, the Redis processes get one of them to
themselves). Each *configuration* is a location of
`scripts/bench/nginx.conf.in` serving the same small static file. wrk sends
requests to one location at a time over loopback, for a few seconds, with
keep-alive. The configurations run in rounds: every round runs each of
them once, and every other round runs them in reverse order, so that a
slow moment of the machine weighs on all of them alike.

**The rows.** The name of a configuration says what limits it:

- `none` serves the file with no limiting; `limit_req` uses nginx's own
  `limit_req`, set so that every request passes.
- `throttle_*` rows use a local zone; `strict_*` rows ask Redis for every
  decision; `async_*` rows decide locally and sync with Redis every
  100 ms. See [modes.md](modes.md).
- `*_pass` rows have a limit so high that every request passes, so they
  measure what a decision costs. `*_reject` rows reject every request
  (a 429 without reading the file).
- `*_hot` and `*_distinct` rows take the key from `?k=`, which wrk's
  `scripts/bench/keys.lua` cycles over 100 (hot) or 100,000 (distinct) values;
  every async row has a local row with the very same requests.
- `fixed_window_*`, `sliding_window_*` and `sliding_log_*` rows use that
  algorithm; the others use GCRA. See [algorithms.md](algorithms.md).
- `cluster_*` rows are the row of the same name without the prefix, on
  the Redis Cluster instead of the single Redis (`throttle_redis ...
  cluster=`), and are compared with it in the same round. Their Redis
  figures are summed over the three masters; the redirections (MOVED and
  ASK replies, from `INFO errorstats`, and the scripts a master received
  but did not run, `rejected_calls`) and each master's share of the
  scripts are listed apart.
- `throttle_pass_no_counters` and `throttle_pass_scraped` measure the
  `throttle_pass` location again, for the metrics (below).
- `api_pass` and `strict_api_pass` ask the decision endpoint
  (`throttle_api`, [api.md](api.md)) what `throttle_pass` and
  `strict_pass` decide for a request: `GET ?zone=...&key=bench`, answered
  with JSON instead of the file; each is compared with its row (target:
  0.9), and the strict one must send one script per check.

**The columns.** *req/s* and *p99 ms* are medians over the rounds.
*vs none* is the row's req/s divided by `none`'s in the same round (the
median of those per-round ratios). *non-2xx / requests* should be 0 for
the `*_pass` rows and everything for the `*_reject` rows. The strict and
keyed rows deny a request that could not be decided
(`throttle_on_error deny`), so a Redis timeout shows up there; Setup gives
the number of lines in nginx's error log and its first errors. *Redis
scripts/req* counts the EVALSHA/EVAL commands nginx sends (its round
trips to Redis); *Redis cmds/req* counts every command Redis ran,
including the calls inside each script (listed under each table).

**The ratios.** A ratio such as `strict_pass / throttle_pass` compares
two configurations measured in the same round, and the table gives the
median over the rounds. On the 2-CPU virtual machine these figures come
from, the per-round ratios of one pair spread by 10 to 25% (the Targets
lists show each round's), so differences of a few percent between two
medians are noise.

**The metrics rows.** The counters `throttle_metrics` reports are always
on: every decision adds to a few counters in the zone's shared memory
(atomic adds). `throttle_pass / throttle_pass_no_counters` is what they
cost: the no-counters row asks a second nginx, running alongside the
first with the same configuration, whose module was built with
`-DNGX_HTTP_THROTTLE_COUNTERS=0` (its `/metrics` is checked to count
nothing before anything is measured). `throttle_pass_scraped /
throttle_pass` is what being scraped costs: the first nginx while
`scripts/bench/scrape.py` fetches its `/metrics` every 100 ms over one
keep-alive connection, ten times as often as a usual Prometheus, on the same
CPUs; the scrapes per run and the scraper's own CPU time are listed with the
target. The target for both is 0.98. Read them as the other ratios: a
median near 1 with rounds on either side of it means a cost below what
this machine can tell apart, while a ratio below 0.98 in every round
would be a real cost.

**The two CPU layouts.** In the first section wrk, nginx and Redis share
all CPUs: work Redis does is CPU taken from nginx. The second section runs
the rows whose Redis works hardest again with Redis on a CPU of its own:
what is left is nginx's own cost of a mode or an algorithm.

**Targets.** The project set targets for some figures (for example strict
passing at least half as fast as local passing, on shared CPUs). Each is
listed with the measured figure and each round's value; a figure that
falls short is shown as measured, like the others.

**Keys per MiB.** How many distinct 16-byte keys a zone of a given size
holds before it must evict one, for this module and for `limit_req`.

**Why the Redis-backed rows cost what they do.**

- Strict mode makes one round trip per admitted request, and none per
  rejected one: the zone remembers Redis's rejections (the denial cache).
- Async mode with hot keys sends one EVALSHA per zone, interval and 500
  keys; inside it Redis writes each key once. That is a cost per second,
  not per request, so per request it falls as the load grows.
- Async mode with distinct keys must still record every key in Redis (a
  unit Redis never records would let the nginx together exceed the limit
  without bound): one `SET ... GET` per key and sync, so Redis runs about
  one command per request, and the zone holds each key until it is synced.
  When Redis shares the CPUs, that work is taken from nginx.
- `sliding_log` in strict mode runs five calls on a sorted set of up to
  `limit` members, against GCRA's three calls on a string.
- On the cluster, a strict request is still one EVALSHA, sent to the
  master of its key's slot (`throttle:<zone>:{<key>}`): `cluster_strict_pass`
  has one key, so one master does all the work, while
  `cluster_strict_pass_distinct`'s keys are spread over the three. An async
  zone sends one script per hash-tag shard (`{<zone>:<n>}`, 16 shards) and
  interval instead of one per 500 keys, so up to 16 scripts per 100 ms
  instead of 1. Three Redis processes and a connection per worker and
  master cost CPU and context switches that, here, are taken from nginx on
  the same two cores: on hosts of their own, masters add capacity instead.
  A redirection should not happen once the workers have read the slot
  map; the bench moves no slot. A master that does not answer within
  `timeout` (50 ms; on a loaded 2-CPU machine, a master not scheduled for
  that long) backs off for 25 to 50 ms, and its slots' requests get
  `throttle_on_error` meanwhile (non-2xx here; Setup lists the timeouts
  in nginx's error log). Only when none of its connections is left does
  one request per 100 ms go to another master instead, in case a replica
  has taken its slots over: a MOVED back to the same master each.

**Running it.** `make bench` runs `scripts/bench/run.sh` twice, once per layout.
Its knobs (`BENCH_ROUNDS`, `BENCH_DURATION`, `BENCH_CONFIGS`, the CPU
pinning...) are described at the top of `scripts/bench/run.sh`. Raw wrk
output and the same tables, with a verdict per target, are in
`build/bench/`.
"""


def doc_placeholder(section):
    return ("Not measured yet: `make bench` writes this section.\n"
            if section == "shared" else
            "Not measured yet: the second pass of `make bench` "
            "(`BENCH_LAYOUT=redis-apart`) writes this section.\n")


def read_sections(path):
    """The bodies of the sections an existing docs file holds."""
    bodies = {}
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return bodies
    for sid, _, _ in SECTIONS:
        m = re.search(re.escape(BEGIN % sid) + r"\n(.*?)" +
                      re.escape(END % sid), text, re.S)
        if m:
            bodies[sid] = m.group(1)
    return bodies


def write_doc(path, section, body):
    """Rewrites path with `body` as `section`, keeping the other
    sections' bodies as they were."""
    bodies = read_sections(path)
    bodies[section] = body
    out = [DOC_HEAD]
    for sid, heading, what in SECTIONS:
        out.append("\n## %s\n\n%s\n\n%s\n%s%s\n"
                   % (heading, what, BEGIN % sid,
                      bodies.get(sid, doc_placeholder(sid)), END % sid))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(out))
    os.replace(tmp, path)


def doc_body(args, nrounds, perf_md, pair_md, medians, redis_note, targets,
             shares, dens_md, dens_note, settings):
    """This layout's section of docs/performance.md."""
    out = ["Measured %s, with the module built from commit %s: %d "
           "round%s of %g s per configuration; %s.\n"
           % (args.date or "on an unrecorded date", args.commit or "unknown",
              nrounds, "" if nrounds == 1 else "s", args.duration,
              args.layout)]
    out.append("\n### Throughput and latency\n\n" + perf_md + "\n\n" +
               (pair_md + "\n\n" if pair_md else "") + medians + "\n")
    if redis_note:
        out.append("\n" + redis_note + "\n")
    for title, ts in targets:
        if ts:
            out.append("\n### %s\n\n" % title)
            out.append("\n".join("- " + plain(t) for t in ts) + "\n")
    if shares:
        out.append("\n### %s\n\n%s\n" % (SHARES_TITLE, shares))
    if dens_md:
        out.append("\n### Keys per MiB of zone\n\n" + dens_md + "\n\n" +
                   dens_note + "\n")
    out.append("\n### Setup\n\n" + settings + "\n")
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--density")
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--setting", action="append", default=[])
    ap.add_argument("--layout", default="CPUs shared by wrk, nginx and Redis",
                    help="where wrk, nginx and Redis ran, for the headings")
    ap.add_argument("--connections", type=int, default=0,
                    help="wrk connections: requests in flight when wrk stops")
    ap.add_argument("--duration", type=float, default=0,
                    help="seconds per wrk run")
    ap.add_argument("--hot-keys", type=int, default=100)
    ap.add_argument("--distinct-keys", type=int, default=100000)
    ap.add_argument("--docs",
                    help="docs/performance.md: write this layout's section")
    ap.add_argument("--section", choices=[s[0] for s in SECTIONS],
                    default="shared", help="the section of --docs")
    ap.add_argument("--date", help="when the run started, for --docs")
    ap.add_argument("--commit", help="the module's source commit, for --docs")
    args = ap.parse_args()

    runs = load_runs(args.runs)
    configs = [c for c in ORDER if c in runs] + sorted(set(runs) - set(ORDER))
    nrounds = max(len(v) for v in runs.values())

    rows = []
    for c in configs:
        rs = runs[c].values()
        redis = redis_totals(runs, c)
        rows.append([
            c,
            "%.0f" % statistics.median(r["rps"] for r in rs),
            "%.2f" % statistics.median(r["p99"] for r in rs),
            fmt_ratio(ratio(runs, c, BASELINE)),
            "%d / %d" % (sum(r["non2xx"] for r in rs),
                         sum(r["requests"] for r in rs)),
            "%d" % sum(r["errors"] for r in rs),
            per_request(redis[0], redis[3]) if redis else DASH,
            per_request(redis[1], redis[3]) if redis else DASH,
            NOTES.get(c, "") % {"hot": "{:,}".format(args.hot_keys),
                                "distinct": "{:,}".format(args.distinct_keys)},
        ])
    perf_txt, perf_md = table(
        ["configuration", "req/s", "p99 ms", "vs none", "non-2xx / requests",
         "socket errors", "Redis scripts/req", "Redis cmds/req", "what"],
        rows, "lrrrrrrrl")
    redis_note = (
        "Redis scripts/req: EVALSHA + EVAL calls (the commands nginx sends) "
        "per request wrk counted; Redis cmds/req: all commands Redis "
        "processed (INFO stats total_commands_processed, less the INFO calls "
        "reading it), which also counts the calls each script runs inside "
        "Redis (gcra.lua: TIME, GET and SET, so 4 per request Redis admits, "
        "3 per request it rejects; fixed_window.lua and sliding_window.lua: "
        "TIME, HMGET and HINCRBY, so 4; sliding_log.lua: TIME, "
        "ZREMRANGEBYSCORE, ZCARD, ZADD and PEXPIRE, so 6); an async sync "
        "script runs TIME once, and per key with "
        "units one SET GET (which also says what Redis held), and a second "
        "SET if what Redis held had not drained when the units began, and "
        "per key read again after its use (unless drained on the node) a "
        "GET. Both from Redis's counters read before "
        "and after each run (after an async run, once Redis has been idle "
        "for 0.3 s, so that its last syncs count), summed over the rounds.")

    pair_rows = [["%s / %s" % (n, d), fmt_ratio(ratio(runs, n, d)), what]
                 for n, d, what in PAIRS if n in runs and d in runs]
    pair_txt, pair_md = table(["req/s ratio", "median", "what"], pair_rows,
                              "lrl")
    if not pair_rows:
        pair_txt = pair_md = ""

    targets = [
        ("Strict mode targets", strict_targets(runs, args.connections)
         + flooded_targets(runs, args.duration)),
        ("Async mode targets", async_targets(runs, args.duration)),
        ("Phase target (phase=authorized against the preaccess default)",
         like_throttle_pass_targets(runs, "throttle_pass_authorized",
                                    PHASE_RATIO)),
        ("Delay target (delay= that never makes a request wait, against "
         "no delay=)",
         like_throttle_pass_targets(runs, "throttle_pass_delay", DELAY_RATIO)),
        ("settle= targets (charging what the response says)",
         settle_targets(runs, args.connections)),
        ("concurrent= targets (requests in flight)",
         concurrent_targets(runs, args.connections)),
        ("Decision endpoint targets (throttle_api against the same policy "
         "limiting a request)", api_targets(runs, args.connections)),
        ("Metrics targets (what the throttle_metrics counters and scraping "
         "them cost)", metrics_targets(runs)),
        ("Algorithm targets (each against GCRA in the same mode)",
         algorithm_targets(runs)),
        ("Redis Cluster targets (3 masters on the same CPUs)",
         cluster_targets(runs, args.connections)),
    ]
    shares = cluster_shares(runs)
    shares_note = cluster_note(runs, args.duration) if shares else None
    uses_redis = any(redis_totals(runs, c) for c in runs)

    dens = []
    if args.density:
        with open(args.density) as f:
            dens = [json.loads(line) for line in f if line.strip()]
    dens_rows = [[d["kind"], d["size"], d["capacity"], d["keys_per_mib"],
                  d["bytes_per_key"]] for d in dens]
    dens_txt, dens_md = table(
        ["zone", "size", "16-byte keys held", "keys/MiB", "bytes/key"],
        dens_rows, "llrrr")
    throttle = [d["keys_per_mib"] for d in dens if d["kind"] == "throttle"]
    dens_target = None
    if throttle:
        dens_target = ("throttle: %d keys/MiB at worst, target >= %d"
                       % (min(throttle), DENSITY_TARGET),
                       min(throttle) >= DENSITY_TARGET)
    dens_what = ("Largest number of distinct 16-byte keys for which the "
                 "first key is still held (binary search, fresh nginx per "
                 "probe). ")

    medians = ("Medians over %d round%s; \"vs none\" and the ratios are "
               "medians of per-round ratios (each configuration against "
               "the same round's run)." % (nrounds, "" if nrounds == 1 else "s"))
    settings = "\n".join("- " + s for s in args.setting)

    print()
    print(perf_txt)
    if pair_txt:
        print()
        print(pair_txt)
    print()
    print(medians)
    if uses_redis:
        print()
        print(redis_note)
    for title, ts in targets:
        if ts:
            print()
            print("%s (%s):" % (title, args.layout))
            print("\n".join("  " + with_verdict(t) for t in ts))
    if shares:
        print()
        print(shares[0])
        print(shares_note)
    if dens_rows:
        print()
        print(dens_txt)
        print(with_verdict(dens_target))
    print()
    print("\n".join(args.setting))

    with open(args.markdown, "w") as f:
        f.write("### Throughput and latency\n\n")
        f.write(perf_md + "\n\n" + (pair_md + "\n\n" if pair_md else "") +
                medians + "\n\n")
        if uses_redis:
            f.write(redis_note + "\n\n")
        for title, ts in targets:
            if ts:
                f.write("%s (%s):\n\n" % (title, args.layout))
                f.write("\n".join("- " + with_verdict(t) for t in ts) +
                        "\n\n")
        if shares:
            f.write("### %s\n\n%s\n\n%s\n\n"
                    % (SHARES_TITLE, shares[1], shares_note))
        if dens_rows:
            f.write("### Keys per MiB of zone\n\n")
            f.write(dens_md + "\n\n")
            f.write(dens_what + with_verdict(dens_target) + ".\n\n")
        f.write("Setup:\n\n" + settings + "\n")

    if args.docs:
        write_doc(args.docs, args.section, doc_body(
            args, nrounds, perf_md, pair_md, medians,
            redis_note if uses_redis else None, targets,
            (shares[1] + "\n\n" + shares_note) if shares else None,
            dens_md if dens_rows else None,
            dens_what + plain(dens_target) if dens_rows else None,
            settings))


if __name__ == "__main__":
    main()
