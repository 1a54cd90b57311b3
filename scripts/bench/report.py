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
which pass ran last.

The configurations, the targets and the figures over rounds are in
report_data.py, the checks against the targets in report_targets.py, both
beside this file; this one writes the tables and the docs."""

import argparse
import json
import os
import re
import statistics

from report_data import (
    BASELINE, DASH, DELAY_RATIO, DENSITY_OTHER_TARGET, DENSITY_TARGET,
    DISTINCT_RATIO, NOTES, ORDER, PAIRS, PHASE_RATIO, PLANS_RATIO,
    SHARES_TITLE, fmt_ratio, load_runs, per_request, ratio, redis_totals,
    table)
from report_targets import (
    algorithm_targets, api_targets, async_targets, cluster_note,
    cluster_shares, cluster_targets, concurrent_targets, flooded_targets,
    like_throttle_pass_targets, metrics_targets, plain, ratio_target,
    settle_targets, strict_targets, with_verdict)


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

**Keys per MiB.** How many distinct keys (of 16 and of 200 bytes) a
zone of a given size holds once it is full, for each algorithm and mode
of this module and for `limit_req`. The table of a local or strict zone
holds a fixed number of keys whatever their length; an async zone's nodes
and `limit_req`'s grow with the key.

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

REDIS_NOTE = (
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

DENSITY_WHAT = ("throttle: keys the zone holds once full (its "
                "nginx_throttle_zone_keys gauge when it stops growing; a "
                "strict zone's window keys are sent twice, as it keeps a "
                "key once Redis rejected it); limit_req: the largest number "
                "of distinct keys for which the first key is still held "
                "(binary search, fresh nginx per probe), exact for its "
                "LRU. ")


def parse_args():
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
    return ap.parse_args()


def perf_tables(runs, args):
    """The table of every configuration's medians, and that of the
    pairs' ratios ("" for both renderings if no pair ran)."""
    configs = [c for c in ORDER if c in runs] + sorted(set(runs) - set(ORDER))
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
    perf = table(
        ["configuration", "req/s", "p99 ms", "vs none", "non-2xx / requests",
         "socket errors", "Redis scripts/req", "Redis cmds/req", "what"],
        rows, "lrrrrrrrl")
    pair_rows = [["%s / %s" % (n, d), fmt_ratio(ratio(runs, n, d)), what]
                 for n, d, what in PAIRS if n in runs and d in runs]
    pairs = table(["req/s ratio", "median", "what"], pair_rows, "lrl")
    if not pair_rows:
        pairs = ("", "")
    return perf, pairs


def all_targets(runs, args):
    """Every group of targets: (title, targets), in the report's order."""
    return [
        ("Strict mode targets", strict_targets(runs, args.connections)
         + flooded_targets(runs, args.duration)),
        ("Async mode targets", async_targets(runs, args.duration)),
        ("Phase target (phase=authorized against the preaccess default)",
         like_throttle_pass_targets(runs, "throttle_pass_authorized",
                                    PHASE_RATIO)),
        ("Delay target (delay= that never makes a request wait, against "
         "no delay=)",
         like_throttle_pass_targets(runs, "throttle_pass_delay", DELAY_RATIO)),
        ("Plans target (rate= and burst= from a map per request, against "
         "constants)",
         like_throttle_pass_targets(runs, "throttle_pass_plans",
                                    PLANS_RATIO)),
        ("settle= targets (charging what the response says)",
         settle_targets(runs, args.connections)),
        ("concurrent= targets (requests in flight)",
         concurrent_targets(runs, args.connections)),
        ("Decision endpoint targets (throttle_api against the same policy "
         "limiting a request)", api_targets(runs, args.connections)),
        ("Metrics targets (what the throttle_metrics counters and scraping "
         "them cost)", metrics_targets(runs)),
        ("Distinct keys target (against limit_req on the same keys)",
         [t for t in [ratio_target(runs, "throttle_pass_distinct",
                                   "limit_req_distinct", DISTINCT_RATIO)]
          if t]),
        ("Algorithm targets (each against GCRA in the same mode)",
         algorithm_targets(runs)),
        ("Redis Cluster targets (3 masters on the same CPUs)",
         cluster_targets(runs, args.connections)),
    ]


def density_table(path):
    """The keys-per-MiB probes of density.jsonl: (rows, table, target);
    rows is empty, and target None, without probes."""
    dens = []
    if path:
        with open(path) as f:
            dens = [json.loads(line) for line in f if line.strip()]
    dens_rows = [[d["kind"], d.get("algorithm", "gcra")
                  if d["kind"] == "throttle" else DASH,
                  d.get("mode", "local"), d["size"], d.get("key_len", 16),
                  d["capacity"], d["keys_per_mib"], d["bytes_per_key"]]
                 for d in dens]
    dens_table = table(
        ["zone", "algorithm", "mode", "size", "key bytes", "keys held",
         "keys/MiB", "bytes/key"],
        dens_rows, "llllrrrr")
    gcra = [d["keys_per_mib"] for d in dens if d["kind"] == "throttle"
            and d.get("algorithm", "gcra") == "gcra"
            and d.get("mode", "local") != "async"]
    other = [d["keys_per_mib"] for d in dens if d["kind"] == "throttle"
             and (d.get("algorithm", "gcra") != "gcra"
                  or d.get("mode") == "async")]
    dens_target = None
    if gcra:
        dens_target = (
            "throttle, gcra local and strict: %d keys/MiB at worst, target "
            ">= %d; the others (windows, async): %s at worst, target >= %d"
            % (min(gcra), DENSITY_TARGET,
               min(other) if other else DASH, DENSITY_OTHER_TARGET),
            min(gcra) >= DENSITY_TARGET
            and (not other or min(other) >= DENSITY_OTHER_TARGET))
    return dens_rows, dens_table, dens_target


def print_report(args, perf_txt, pair_txt, medians, uses_redis, targets,
                 shares, shares_note, dens_rows, dens_txt, dens_target):
    """The report on stdout, each target with its verdict."""
    print()
    print(perf_txt)
    if pair_txt:
        print()
        print(pair_txt)
    print()
    print(medians)
    if uses_redis:
        print()
        print(REDIS_NOTE)
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


def write_markdown(args, perf_md, pair_md, medians, uses_redis, targets,
                   shares, shares_note, dens_rows, dens_md, dens_target,
                   settings):
    """The report as Markdown in --markdown, each target with its
    verdict."""
    with open(args.markdown, "w") as f:
        f.write("### Throughput and latency\n\n")
        f.write(perf_md + "\n\n" + (pair_md + "\n\n" if pair_md else "") +
                medians + "\n\n")
        if uses_redis:
            f.write(REDIS_NOTE + "\n\n")
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
            f.write(DENSITY_WHAT + with_verdict(dens_target) + ".\n\n")
        f.write("Setup:\n\n" + settings + "\n")


def main():
    args = parse_args()
    runs = load_runs(args.runs)
    nrounds = max(len(v) for v in runs.values())
    (perf_txt, perf_md), (pair_txt, pair_md) = perf_tables(runs, args)
    targets = all_targets(runs, args)
    shares = cluster_shares(runs)
    shares_note = cluster_note(runs, args.duration) if shares else None
    uses_redis = any(redis_totals(runs, c) for c in runs)
    dens_rows, (dens_txt, dens_md), dens_target = density_table(args.density)
    medians = ("Medians over %d round%s; \"vs none\" and the ratios are "
               "medians of per-round ratios (each configuration against "
               "the same round's run)." % (nrounds, "" if nrounds == 1 else "s"))
    settings = "\n".join("- " + s for s in args.setting)

    print_report(args, perf_txt, pair_txt, medians, uses_redis, targets,
                 shares, shares_note, dens_rows, dens_txt, dens_target)
    write_markdown(args, perf_md, pair_md, medians, uses_redis, targets,
                   shares, shares_note, dens_rows, dens_md, dens_target,
                   settings)
    if args.docs:
        write_doc(args.docs, args.section, doc_body(
            args, nrounds, perf_md, pair_md, medians,
            REDIS_NOTE if uses_redis else None, targets,
            (shares[1] + "\n\n" + shares_note) if shares else None,
            dens_md if dens_rows else None,
            DENSITY_WHAT + plain(dens_target) if dens_rows else None,
            settings))


if __name__ == "__main__":
    main()
