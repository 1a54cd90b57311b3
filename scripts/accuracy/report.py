#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Tables and per-second series of the accuracy run (scripts/accuracy/run.sh).

Reads, for each mode, <raw>/<mode>.csv (one line per request, written by
loadgen.py), <raw>/<mode>.json (loadgen's summary) and, if there,
<raw>/<mode>.redis (script calls Redis ran during the mode's load). Writes
into <out>:

  per_second.csv         second, limit, then admitted (200s) per mode
  per_second_detail.csv  mode, second, sent, admitted, rejected (429),
                         error_allowed, other
  per_100ms.csv          as per_second.csv in 100 ms bins
  results.md             the tables, in Markdown, with a verdict per mode

and prints the tables on stdout. With --docs, also writes the same figures
into that file (docs/accuracy.md) under a text that says how to read them,
with the bounds stated beside the figures instead of verdicts; the plot
it shows is accuracy.png beside it (scripts/accuracy/run.sh copies it there). A request counts in the second (since the
load started) it was sent in.

Ideal global limit (GCRA, rate R, burst B, T seconds of load): at most
R * T + B + 1 admitted in all; the first second may hold B + 1 more than R.

Bound stated for async mode (docs/modes.md): over-admission per sync interval of
at most about (nodes - 1) * (R * (interval + round trip) + B + 1), so over
T seconds an excess of at most
    (T / interval) * (nodes - 1) * (R * interval + B + 1).
"""

import argparse
import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from tables import md_table, text_table  # noqa: E402


def load_mode(raw, mode):
    rows = []
    with open(os.path.join(raw, mode + ".csv"), newline="") as f:
        for r in csv.DictReader(f):
            rows.append((float(r["sent"]), int(r["status"]), r["throttle_status"]))
    with open(os.path.join(raw, mode + ".json")) as f:
        summary = json.load(f)
    redis_calls = None
    p = os.path.join(raw, mode + ".redis")
    if os.path.exists(p):
        with open(p) as f:
            redis_calls = int(f.read().split()[0])
    return rows, summary, redis_calls


def interval_ms(mode):
    # "async_100ms" -> 100
    if mode.startswith("async_") and mode.endswith("ms"):
        return int(mode[len("async_"):-2])
    return None


def label(mode):
    ms = interval_ms(mode)
    return "async %d ms" % ms if ms is not None else mode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", required=True, help="comma-separated")
    ap.add_argument("--rate", type=float, required=True, help="limit, r/s")
    ap.add_argument("--burst", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--load", type=float, required=True, help="offered, req/s in all")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--setup", default="", help="Markdown lines describing the setup")
    ap.add_argument("--docs", help="docs/accuracy.md: write it too")
    ap.add_argument("--date", help="when the run started, for --docs")
    ap.add_argument("--commit", help="the module's source commit, for --docs")
    args = ap.parse_args()

    R, B, T, N = args.rate, args.burst, args.seconds, args.nodes
    ideal = int(math.floor(R * T)) + B + 1
    modes = args.modes.split(",")
    nsec = int(math.ceil(T))
    nbins = int(math.ceil(T * 10))

    data = {}
    for m in modes:
        data[m] = load_mode(args.raw, m)
        last = max(s for s, _, _ in data[m][0])
        nsec = max(nsec, int(math.floor(last)) + 1)
        nbins = max(nbins, int(math.floor(last * 10)) + 1)

    # --- per-second series ---------------------------------------------------
    per_sec = {}
    per_bin = {}
    detail = []
    for m in modes:
        rows = data[m][0]
        adm = [0] * nsec
        sent = [0] * nsec
        rej = [0] * nsec
        erra = [0] * nsec
        other = [0] * nsec
        binned = [0] * nbins
        for s, status, ts in rows:
            i = int(math.floor(s))
            sent[i] += 1
            if status == 200:
                adm[i] += 1
                binned[int(math.floor(s * 10))] += 1
                if ts.startswith("ERROR"):
                    erra[i] += 1
            elif status == 429:
                rej[i] += 1
            else:
                other[i] += 1
        per_sec[m] = adm
        per_bin[m] = binned
        for i in range(nsec):
            detail.append((m, i, sent[i], adm[i], rej[i], erra[i], other[i]))

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "per_second.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["second", "limit"] + modes)
        for i in range(nsec):
            w.writerow([i, "%g" % R] + [per_sec[m][i] for m in modes])
    with open(os.path.join(args.out, "per_second_detail.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "second", "sent", "admitted", "rejected_429",
                    "error_allowed", "other"])
        w.writerows(detail)
    with open(os.path.join(args.out, "per_100ms.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["start_s", "limit"] + modes)
        for i in range(nbins):
            w.writerow(["%.1f" % (i / 10.0), "%g" % (R / 10.0)]
                       + [per_bin[m][i] for m in modes])

    # --- the accuracy table --------------------------------------------------
    # round trip for the stated bound: strict mode's p99 latency (client to
    # nginx to Redis and back), an upper bound of nginx's round trip to Redis
    rtt = 0.0
    if "strict" in data:
        rtt = data["strict"][1]["latency_p99_ms"] / 1000.0

    acc_rows = []
    verdicts = []
    for m in modes:
        rows, summ, _ = data[m]
        admitted = sum(1 for _, st, _ in rows if st == 200)
        excess = admitted - ideal
        adm = per_sec[m]
        full = [adm[i] for i in range(nsec) if i < int(T)]
        max_any = max(adm)
        max_after = max(full[1:]) if len(full) > 1 else max_any
        # over-admission in any window: admitted requests i..j (by send time)
        # against the most one exact funnel admits in [t_i, t_j] whatever
        # came before, B + 1 + R (t_j - t_i); the largest over all i <= j
        times = sorted(s_ for s_, st, _ in rows if st == 200)
        peak, win, low, low_i = -float("inf"), (0, 0), float("inf"), 0
        for j, t in enumerate(times):
            if j - R * t < low:
                low, low_i = j - R * t, j
            e = (j + 1 - R * t) - low - (B + 1)
            if e > peak:
                peak, win = e, (low_i, j)
        if not times:
            peak = 0.0
        wdesc = ("%d admitted from %.3f s to %.3f s" % (win[1] - win[0] + 1, times[win[0]],
                                                       times[win[1]])) if times else "-"
        ms = interval_ms(m)
        if ms is None:
            total_bound = "exact (≤ 2)"
            moment_bound = "exact (≤ 2)"
            ok = excess <= 2 and peak <= 2
            within = "yes" if ok else "NO"
            verdicts.append(("strict", ok,
                             "strict: excess %+d over the ideal %d (admitted %d), largest "
                             "window over-admission %+.1f (%s): %s"
                             % (excess, ideal, admitted, peak, wdesc,
                                "exact within its timing rounding (≤ 2)" if ok
                                else "NOT exact (more than 2 over)")))
        else:
            iv = ms / 1000.0
            b_total = (T / iv) * (N - 1) * (R * iv + B + 1)
            b_moment = (N - 1) * (B + 1 + R * (iv + rtt))
            ok_total = excess <= b_total
            ok_moment = peak <= b_moment
            ok = ok_total and ok_moment
            total_bound = "%.0f" % b_total
            moment_bound = "%.1f" % b_moment
            within = "yes" if ok else ("NO (%s)" % ", ".join(
                x for x, bad in (("run", not ok_total), ("stated", not ok_moment)) if bad))
            line = ("async %d ms: excess %+d (%.1f%% of ideal) vs run bound %.0f "
                    "= (%g s / %g s) x (%d - 1) x (%g x %g + %d + 1): %s; largest window "
                    "over-admission %+.1f (%s) vs stated bound %.1f = (%d - 1) x (%d + 1 + "
                    "%g x (%g + %.4f)): %s"
                    % (ms, excess, 100.0 * excess / ideal, b_total, T, iv, N, R, iv, B,
                       "within" if ok_total else "OVER",
                       peak, wdesc, b_moment, N, B, R, iv, rtt,
                       "within" if ok_moment else "OVER"))
            verdicts.append(("async%d" % ms, ok, line))
        acc_rows.append([label(m), admitted, ideal, "%+d" % excess,
                         "%+.1f%%" % (100.0 * excess / ideal),
                         max_any, max_after, total_bound, "%+.1f" % peak,
                         moment_bound, within])

    acc_header = ["mode", "admitted", "ideal", "excess", "excess %",
                  "max/s", "max/s after 1st s", "run bound", "max window over-admission",
                  "stated bound", "within"]
    acc_align = ["l"] + ["r"] * 10

    # legend of the plot: each mode with its totals (plot.gp loads it)
    with open(os.path.join(args.raw, "plot_labels.gp"), "w") as f:
        f.write("array lbl[%d]\n" % len(modes))
        for i, (m, r) in enumerate(zip(modes, acc_rows)):
            f.write('lbl[%d] = "%s: %d admitted (excess %s)"\n' % (i + 1, label(m), r[1], r[3]))
        f.write('limit_label = "limit: %g/s (ideal %d in %g s)"\n' % (R, ideal, T))
        f.write("nsec = %d\n" % nsec)

    # --- the load table ------------------------------------------------------
    load_rows = []
    warnings = []
    for m in modes:
        rows, s, calls = data[m]
        n429 = sum(1 for _, st, _ in rows if st == 429)
        nerr = sum(1 for _, st, ts in rows if st == 200 and ts.startswith("ERROR"))
        nother = sum(1 for _, st, _ in rows if st not in (200, 429))
        load_rows.append([label(m), s["requests"],
                          "/".join(str(x) for x in s["per_target"]),
                          "%.1f" % s["offered_rate"],
                          "%.2f" % s["late_p99_ms"], "%.2f" % s["late_max_ms"],
                          "%.2f" % s["latency_p50_ms"], "%.2f" % s["latency_p99_ms"],
                          n429, nerr, nother,
                          "-" if calls is None else calls])
        if s["offered_rate"] < 0.95 * args.load:
            warnings.append("%s: offered %.1f req/s, under 95%% of the %g asked"
                            % (label(m), s["offered_rate"], args.load))
        if s["late_max_ms"] > 100:
            warnings.append("%s: a request went out %.0f ms after it was due"
                            % (label(m), s["late_max_ms"]))
        if nother:
            warnings.append("%s: %d answers were neither 200 nor 429 (%s)%s"
                            % (label(m), nother,
                               ", ".join("%s: %d" % kv for kv in sorted(s["statuses"].items())),
                               (" first errors: " + "; ".join(s["errors"])) if s["errors"] else ""))
        if nerr:
            warnings.append("%s: %d requests passed because Redis did not decide "
                            "them (ERROR_ALLOWED)" % (label(m), nerr))
    load_header = ["mode", "requests", "per nginx", "offered req/s",
                   "late p99 ms", "late max ms", "latency p50 ms",
                   "latency p99 ms", "429s", "ERROR_ALLOWED", "other", "Redis script calls"]
    load_align = ["l"] + ["r"] * 11

    # --- the async syncs (syncs.py, from Redis MONITOR) ----------------------
    sync_rows = []
    for m in modes:
        ms = interval_ms(m)
        p = os.path.join(args.raw, m + ".syncs.json")
        if ms is None or not os.path.exists(p):
            continue
        with open(p) as f:
            sy = json.load(f)
        admitted = sum(1 for _, st, _ in data[m][0] if st == 200)
        pn = sy["per_node"]
        names = sorted(pn)

        def fmt(key, scale=1000.0):
            return "/".join("-" if pn[n][key] is None else "%.0f" % (pn[n][key] * scale)
                            for n in names)

        expected = T * 1000.0 / ms
        sync_rows.append([label(m), "/".join(names) or "-",
                          "/".join(str(pn[n]["syncs"]) for n in names) or "0",
                          "%.0f" % expected, fmt("mean_gap_s"), fmt("max_gap_s"),
                          sy["units"], ideal - admitted])
        for n in names:
            g = pn[n]["mean_gap_s"]
            if g is not None and g > 1.1 * ms / 1000.0:
                warnings.append("%s: nginx %s synced every %.0f ms on average (max %.0f ms), "
                                "not every %d ms"
                                % (label(m), n, g * 1000, pn[n]["max_gap_s"] * 1000, ms))
    sync_header = ["mode", "nginx", "syncs", "expected each", "mean gap ms",
                   "max gap ms", "units synced", "shortfall (ideal - admitted)"]
    sync_align = ["l"] + ["r"] * 7
    sync_note = ("syncs of the mode's key per nginx, as Redis received them (MONITOR); "
                 "expected each = T / interval; gap = time between one nginx's syncs.")

    # --- output --------------------------------------------------------------
    head = ("Limit rate=%gr/s burst=%d, one key; %d nginx x 2 workers sharing one "
            "Redis; offered %g req/s (%.1fx the limit) for %g s, alternating "
            "between the nginx." % (R, B, N, args.load, args.load / R, T))
    ideal_note = ("ideal = R x T + B + 1 = %g x %g + %d + 1 = %d; excess = admitted - "
                  "ideal; max/s = most 200s in one second (the first second may "
                  "hold B + 1 = %d above R = %g)." % (R, T, B, ideal, B + 1, R))
    bound_note = ("run bound (async, on excess) = (T / interval) x (nodes - 1) x "
                  "(R x interval + B + 1): the per-interval bound summed over the run. "
                  "max window over-admission = the largest, over all runs of admitted "
                  "requests i..j (by send time t), of (j - i + 1) - (B + 1 + R x (t_j - "
                  "t_i)): how many more than one exact funnel can admit in that time, "
                  "whatever came before. stated bound (async, on it) = (nodes - 1) x "
                  "(B + 1 + R x (interval + round trip)), docs/modes.md's bound at any "
                  "moment; round trip = strict mode's p99 latency, %.1f ms. strict must "
                  "be exact (excess and window over-admission ≤ 2)." % (rtt * 1000))

    print(head)
    print()
    print(text_table(acc_header, acc_rows, acc_align))
    print()
    print(ideal_note)
    print(bound_note)
    print()
    print(text_table(load_header, load_rows, load_align))
    print()
    if sync_rows:
        print(text_table(sync_header, sync_rows, sync_align))
        print()
        print(sync_note)
        print()
    print("Admitted per second (the limit is %g/s):" % R)
    ps_header = ["second"] + [label(m) for m in modes]
    ps_rows = [[i] + [per_sec[m][i] for m in modes] for i in range(nsec)]
    print(text_table(ps_header, ps_rows, ["r"] * len(ps_header)))
    print()
    for _, ok, line in verdicts:
        print(line)
    gate = [v for v in verdicts if v[0] == "async100"]
    if gate:
        print("%s: async 100 ms within its stated bounds (run bound and stated bound)" % ("PASS" if gate[0][1] else "FAIL"))
    for w_ in warnings:
        print("WARNING: " + w_)

    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("# Accuracy: admitted requests against the global limit\n\n")
        f.write(head + "\n\n")
        f.write(md_table(acc_header, acc_rows, acc_align) + "\n\n")
        f.write(ideal_note + "\n" + bound_note + "\n\n")
        for _, ok, line in verdicts:
            f.write("- " + line + "\n")
        if gate:
            f.write("- **%s**: async 100 ms within its stated bounds (run bound and stated bound)\n"
                    % ("PASS" if gate[0][1] else "FAIL"))
        f.write("\n## Load\n\n")
        f.write(md_table(load_header, load_rows, load_align) + "\n\n")
        f.write("late: how long after it was due a request went out; latency: "
                "sent to answer read. ERROR_ALLOWED: 200s Redis did not decide "
                "(throttle_on_error allow); they count as admitted. Redis script "
                "calls: EVALSHA + EVAL from INFO commandstats over the mode's "
                "run.\n\n")
        if sync_rows:
            f.write("## Async syncs\n\n")
            f.write(md_table(sync_header, sync_rows, sync_align) + "\n\n")
            f.write(sync_note + "\n\n")
        for w_ in warnings:
            f.write("- WARNING: " + w_ + "\n")
        if warnings:
            f.write("\n")
        f.write("## Admitted per second\n\n")
        f.write(md_table(ps_header, ps_rows, ["r"] * len(ps_header)) + "\n\n")
        f.write("![admitted per second](accuracy.png)\n\n")
        if args.setup:
            f.write("## Setup\n\n" + args.setup + "\n")

    if args.docs:
        write_doc(args, ideal, rtt, modes,
                  md_table(acc_header[:-1], [r[:-1] for r in acc_rows],
                           acc_align[:-1]),
                  md_table(ps_header, ps_rows, ["r"] * len(ps_header)),
                  md_table(load_header, load_rows, load_align),
                  md_table(sync_header, sync_rows, sync_align)
                  if sync_rows else None, warnings)


def write_doc(args, ideal, rtt, modes, acc_md, ps_md, load_md, sync_md,
              notes):
    """docs/accuracy.md: the run's figures, and how to read them."""
    R, B, T, N = args.rate, args.burst, args.seconds, args.nodes
    out = []
    out.append("""\
# Accuracy

Written by `make accuracy` (`scripts/accuracy/run.sh`, then
`scripts/accuracy/report.py`); do not edit by hand. The
[README](../README.md#performance-and-accuracy) has a summary.

Measured %s, with the module built from commit %s: %d nginx
(2 workers each) sharing one Redis, limit `rate=%gr/s burst=%d`, offered
%g req/s (%.0f× the limit) for %g s per mode.

## How to read it

**What runs.** %d nginx with the module share one Redis on one machine.
Each mode has its own zone, with the same policy, and one constant key,
so every request competes for the same limit. The modes are %s. A load generator sends
a steady %g requests a second, alternating between the nginx, for %g s
per mode, and records every answer. The modes run one after the other.

**The ideal.** One exact funnel, seeing every request, admits at most
`R × T + B + 1` requests in `T` seconds: here %g × %g + %d + 1 = %d.
*excess* is what a mode admitted beyond that over the whole run. *max/s*
is the most requests admitted in one second; the first second may hold
`B + 1` more than the rate.

**Over-admission in a window.** Over the whole run, an over-admission is
paid back: Redis records every admitted unit, so afterwards the global
funnel is fuller and every node rejects until it has drained. The
sharper figure is the *max window over-admission*: over every span of the
run, how many more requests were admitted than one exact funnel could
have admitted in that span, whatever came before. Strict mode should be
exact (0, within the timing rounding of a request or two). Async mode
should stay within the *stated bound*, the one
[modes.md](modes.md#how-much-async-mode-over-admits) gives,
`(N − 1) × (B + 1 + R × (interval + round trip))`, with N = %d nginx and
the round trip taken as strict mode's p99 latency (%.1f ms). *run bound*
is that bound summed over the run, `(T / interval) × (N − 1) × (R ×
interval + B + 1)`: a much looser check of *excess*.

## Results

""" % (args.date or "on an unrecorded date", args.commit or "unknown",
       N, R, B, args.load, args.load / R, T,
       N, ", ".join(label(m) for m in modes), args.load, T,
       R, T, B, ideal, N, rtt * 1000))
    out.append(acc_md + "\n\n")
    out.append("![admitted per second for each mode against the limit]"
               "(accuracy.png)\n\n")
    out.append("## Admitted per second\n\n")
    out.append("A request counts in the second (since the load started) in "
               "which it was sent. The limit is %g a second.\n\n" % R)
    out.append(ps_md + "\n\n")
    out.append("## Load\n\n")
    out.append(load_md + "\n\n")
    out.append("*late*: how long after it was due a request went out; "
               "*latency*: from sending a request to reading its answer. "
               "*ERROR_ALLOWED*: 200s that Redis did not decide "
               "(`throttle_on_error allow`); they count as admitted. *Redis "
               "script calls*: EVALSHA + EVAL over the mode's run, from "
               "Redis's INFO commandstats.\n\n")
    if sync_md:
        out.append("## Async syncs\n\n")
        out.append(sync_md + "\n\n")
        out.append("The syncs of the mode's key per nginx, as Redis received "
                   "them (MONITOR). *expected each* = T / interval; *gap* = "
                   "the time between one nginx's syncs; *shortfall* = ideal "
                   "− admitted.\n\n")
    if notes:
        out.append("## Notes on this run\n\n")
        out.append("".join("- %s\n" % n for n in notes) + "\n")
    if args.setup:
        out.append("## Setup\n\n" + args.setup + "\n")
    tmp = args.docs + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(out))
    os.replace(tmp, args.docs)


if __name__ == "__main__":
    main()
