# SPDX-License-Identifier: BSD-2-Clause
"""report.py's tables and figures: the bench's configurations in the order
of the report, what each row and pair measures, the project's targets
(ratios and limits), and the helpers that load runs.tsv and take medians,
ratios and Redis totals over its rounds."""

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from tables import md_table, text_table  # noqa: E402

BASELINE = "none"
ORDER = ["none", "limit_req", "throttle_pass", "throttle_pass_authorized",
         "throttle_pass_delay", "throttle_pass_settle", "throttle_pass_plans",
         "concurrent_pass",
         "throttle_pass_noheaders", "throttle_pass_no_counters",
         "throttle_pass_scraped", "api_pass",
         "strict_pass", "strict_api_pass", "strict_pass_settle",
         "strict_concurrent_pass",
         "throttle_reject", "strict_reject", "strict_flooded_key",
         "throttle_pass_hot", "async_pass_hot", "throttle_pass_distinct",
         "limit_req_distinct", "async_pass_distinct", "throttle_pass_million",
         "fixed_window_pass", "sliding_window_pass",
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
    "throttle_pass_plans": "as throttle_pass, rate= and burst= from a map "
                           "per request (plans; the policy from the "
                           "worker's cache)",
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
    "limit_req_distinct": "as limit_req, keyed on ?k=, the keys of "
                          "throttle_pass_distinct",
    "throttle_pass_million": "as throttle_pass_hot with 1,000,000 keys "
                             "into a 10m zone (about 400,000): evicting "
                             "all the time (rate=1r/m burst=1000000)",
    "fixed_window_pass": "as throttle_pass, algorithm=fixed_window",
    "sliding_window_pass": "as throttle_pass, algorithm=sliding_window",
    "sliding_log_pass": "as throttle_pass, algorithm=sliding_log, keyed "
                        "on the connection (10,000 timestamps a key)",
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
# Plans: rate= and burst= read per request cost evaluating them and a look
# in the worker's cache
PLANS_RATIO = 0.97
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
    ("throttle_pass_plans", "throttle_pass",
     "rate= and burst= from a map vs constants"),
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
    ("throttle_pass_distinct", "limit_req_distinct",
     "throttle vs limit_req, distinct keys, same requests"),
    ("throttle_pass_million", "throttle_pass_distinct",
     "evicting a live key each request vs keys the zone holds"),
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
# keys per MiB: GCRA local and strict; the window algorithms and async
# zones (sliding_log's ring counted in its slots)
DENSITY_TARGET = 32000
DENSITY_OTHER_TARGET = 16000
# throttle_pass_distinct >= 1.0 x limit_req_distinct
DISTINCT_RATIO = 1.0
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
