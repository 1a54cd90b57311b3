#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks and reports the soak run (scripts/soak/run.sh).

Reads the samples (scripts/soak/sample.py's series.csv) and the answers per
sample (scripts/lib/load.lua's counts); prints the series and the checks,
writes them to --markdown, the data gnuplot plots to --plot-data and, with
--docs, the soak section of docs/reliability.md; exits 1 if a check failed.

Flat, for a figure: no sample after the warm-up exceeds the sample at the
end of the warm-up by more than GROWTH (5%) or SLACK_KB (512 kB), whichever
is larger. A leak of one byte in five requests, at the 15,000 to 25,000
requests a second of this machine, passes 512 kB within five minutes. The
warm-up is long (five minutes of ten) because the workers' heap takes
minutes to reach its high-water mark (see DOC_TEXT). The checks:

- each worker's VmRSS and RssAnon flat (RssAnon is its private memory,
  where a leak would grow; VmRSS adds the shared pages it has touched);
- each zone's resident pages flat and within its size;
- the same two workers throughout, no crash in the error log;
- no zone without room for a key after evicting (error-log lines "did not
  free room", answers ERROR_* at the local and async locations);
- no wrk timeout;
- every zone full and evicting: a warning that it evicted keys still
  limited (otherwise eviction was not exercised).
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from reliability import report, write_section  # noqa: E402

GROWTH = 0.05
SLACK_KB = 512
WORKERS = 2


def load_counts(path):
    """Answers per sample {k: {(location, status, decision): n}}, and
    wrk's summary."""
    per, summary = {}, None
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "summary":
                summary = dict(zip(["requests", "us", "connect", "read",
                                    "write", "timeout", "max_us"],
                                   map(int, w[1:])))
                continue
            if not w[0].isdigit():
                continue
            key = (w[1], w[2], w[3])
            k = int(w[0])
            per.setdefault(k, {})[key] = per.get(k, {}).get(key, 0) + int(w[4])
    return per, summary


def flat(values, warm):
    """None if values (those after the warm-up) stay flat against warm,
    else the largest."""
    worst = max(values)
    return None if worst <= warm + max(warm * GROWTH, SLACK_KB) else worst


def check(rows, zones, warmup, per, summary):
    fails, notes = [], []
    warm_row = next(r for r in rows if int(r["t"]) >= warmup)
    after = [r for r in rows if int(r["t"]) > int(warm_row["t"])]
    for i in range(1, WORKERS + 1):
        for field, what in (("rss", "VmRSS"), ("anon", "RssAnon")):
            name = "%s_%d" % (field, i)
            warm = int(warm_row[name])
            worst = flat([int(r[name]) for r in after], warm)
            if worst is not None:
                fails.append("worker %d: %s grew from %d kB at %s s to %d kB"
                             % (i, what, warm, warm_row["t"], worst))
    for zone, size in zones:
        name = "zone_" + zone
        warm = int(warm_row[name])
        worst = flat([int(r[name]) for r in after], warm)
        if worst is not None:
            fails.append("zone %s: resident pages grew from %d kB at %s s to "
                         "%d kB" % (zone, warm, warm_row["t"], worst))
        if max(int(r[name]) for r in rows) > size:
            fails.append("zone %s: more resident than its size" % zone)
    if len({r["pids"] for r in rows}) != 1 or \
            len(rows[0]["pids"].split("/")) != WORKERS:
        fails.append("the workers changed: %s" % " ".join(
            sorted({r["pids"] for r in rows})))
    last = rows[-1]
    if int(last["crashes"]):
        fails.append("%s error-log lines of a crash" % last["crashes"])
    if int(last["full"]):
        fails.append("%s error-log lines: a zone full even after evicting"
                     % last["full"])
    no_room = sum(n for k in per for (loc, _, d), n in per[k].items()
                  if loc in ("/local", "/async") and d.startswith("ERROR"))
    if no_room:
        fails.append("%d answers ERROR_* at /local or /async: a zone had no "
                     "room" % no_room)
    strict_errors = sum(n for k in per for (loc, _, d), n in per[k].items()
                        if loc == "/strict" and d.startswith("ERROR"))
    if strict_errors:
        notes.append("%d strict answers ERROR_ALLOWED (Redis did not answer "
                     "within its timeout, 50 ms, on the loaded machine)"
                     % strict_errors)
    if summary["timeout"]:
        fails.append("%d wrk timeouts" % summary["timeout"])
    # one warning a minute per zone at most, and a zone that never filled
    # gives none
    if int(last["evicting"]) < len(zones):
        fails.append("only %s warnings of zones evicting keys still limited, "
                     "for %d zones: eviction was not exercised"
                     % (last["evicting"], len(zones)))
    return fails, notes, warm_row


def series_rows(rows, zones, per, interval):
    out = []
    for r in rows:
        k = int(r["t"]) // interval
        answers = per.get(k, {})
        out.append([r["t"], "{:,.0f}".format(sum(answers.values()) / interval)]
                   + ["%.1f / %.1f" % (int(r["rss_%d" % i]) / 1024,
                                       int(r["anon_%d" % i]) / 1024)
                      for i in range(1, WORKERS + 1)]
                   + [r["zone_" + z] for z, _ in zones]
                   + ["%.1f" % (int(r["redis_kb"]) / 1024), r["evicting"]])
    return out


def write_plot_data(path, rows, zones, per, interval):
    with open(path, "w") as f:
        f.write("# t req/s " + " ".join("rss_%d anon_%d" % (i, i)
                                        for i in range(1, WORKERS + 1))
                + " " + " ".join("zone_" + z for z, _ in zones) + " (MiB)\n")
        for r in rows:
            k = int(r["t"]) // interval
            vals = [int(r["t"]), sum(per.get(k, {}).values()) / interval]
            for i in range(1, WORKERS + 1):
                vals += [int(r["rss_%d" % i]) / 1024,
                         int(r["anon_%d" % i]) / 1024]
            vals += [int(r["zone_" + z]) / 1024 for z, _ in zones]
            f.write(" ".join("%g" % v for v in vals) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", required=True)
    ap.add_argument("--counts", required=True)
    ap.add_argument("--zones", required=True, help="name=kB,...")
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--interval", type=int, required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--plot-data", required=True)
    ap.add_argument("--setup", default="")
    ap.add_argument("--docs", help="docs/reliability.md: its soak section")
    ap.add_argument("--date")
    ap.add_argument("--commit")
    args = ap.parse_args()
    zones = [(n, int(kb)) for n, kb in
             (z.split("=") for z in args.zones.split(","))]

    with open(args.series) as f:
        rows = list(csv.DictReader(f))
    per, summary = load_counts(args.counts)
    fails, notes, warm_row = check(rows, zones, args.warmup, per, summary)
    write_plot_data(args.plot_data, rows, zones, per, args.interval)

    header = (["t (s)", "req/s"] +
              ["worker %d MiB (RSS / anon)" % i for i in range(1, WORKERS + 1)]
              + ["zone %s kB (of %d)" % (z, kb) for z, kb in zones]
              + ["Redis MiB", "evicting warnings"])
    align = ["r"] * len(header)
    table = series_rows(rows, zones, per, args.interval)
    summary_line = (
        "{:,} requests in {:.0f} s ({:,.0f} req/s), slowest answer {:.0f} ms; "
        "flat from {} s on: growth at most {:.0f}% or {} kB".format(
            summary["requests"], summary["us"] / 1e6,
            summary["requests"] / (summary["us"] / 1e6),
            summary["max_us"] / 1000, warm_row["t"], GROWTH * 100, SLACK_KB))
    md, lists = report("soak", (header, table, align), summary_line + ".",
                       notes, fails, args.markdown)
    if args.docs:
        write_section(args.docs, "soak", DOC_TEXT + (
            "\nRun %s, with the module built from commit %s: %s.\n\n"
            "![worker memory and zone pages over the soak run](soak.png)\n\n"
            "%s\n\n%s\n%s\n" % (args.date or "on an unrecorded date",
                                 args.commit or "unknown", args.setup,
                                 summary_line + ".", lists, md)))
    return 1 if fails else 0


DOC_TEXT = """\
## Soak

`make soak` (`scripts/soak/run.sh`) runs one nginx (2 workers) and one Redis
on loopback for ten minutes. wrk sends every request with a new key
(`scripts/lib/load.lua`, `distinct`), twice each, in turn to a local, a
strict and an async zone of 1, 2 and 3 MiB at 6 r/m: the second request
of a key is rejected (so the strict zone stores Redis's rejection), and a
key stays limited for 10 s, so each zone is full within seconds and then
evicts keys still limited all the time (the warning says so once a
minute per zone).

Every 10 s `scripts/soak/sample.py` reads, from outside:

- each worker's `VmRSS` and `RssAnon` (`/proc/PID/status`): RssAnon is
  the worker's private memory, where a leak would show; VmRSS adds the
  shared pages it has touched, the zones' among them;
- each zone's resident pages: the `Rss` of the zone's shared mapping in
  `/proc/PID/smaps`, the most over the workers. It counts the pages of
  the zone ever used, so it can only grow up to the zone's size: it shows
  the zone filling, not how full it is after. That the zone keeps finding
  room is checked instead by the absence of the error-log line "is full
  and evicting ... did not free room" and of `ERROR_*` answers at the
  local and async locations.

The run fails unless every worker's VmRSS and RssAnon and every zone's
pages stay flat after a five-minute warm-up (no later sample more than 5%
or 512 kB above the one at 300 s), the same two workers serve throughout,
no worker crashes and no wrk request times out. A leak of one byte in
five requests would break that. The warm-up is long because the workers'
heap rises for minutes before it settles. We put that down to glibc's
malloc: once it has raised its mmap threshold, the large, short-lived
buffers of async syncs (up to 20,000 keys a round) come from the heap,
and a bigger round, after a slow moment, raises the high-water mark a
step. In the runs made while writing this check, RssAnon rose by about
1 MB between the second and the sixth minute and then by 50 kB in the
last five; with `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072` (a
fixed threshold) it rose by 0.25 MB, settled within two minutes, and took
one step of 0.2 to 0.3 MB in five.

The table lists every sample: the requests answered in the 10 s before
it, each worker's memory, each zone's resident kB, Redis's `used_memory`
(its keys expire 10 s after their last request: it follows the request
rate), and the evicting warnings so far.
"""


if __name__ == "__main__":
    sys.exit(main())
