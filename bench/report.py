#!/usr/bin/env python3
"""Aggregates bench/run.sh's measurements into a table (stdout) and a
Markdown file: medians over rounds, ratios to the same round's baseline,
Redis commands per request for the Redis-backed rows (strict and async),
and the issues' targets for them."""

import argparse
import json
import statistics

BASELINE = "none"
ORDER = ["none", "limit_req", "throttle_pass", "throttle_pass_noheaders",
         "strict_pass", "throttle_reject", "strict_reject",
         "throttle_pass_hot", "async_pass_hot", "throttle_pass_distinct",
         "async_pass_distinct", "fixed_window_pass", "sliding_window_pass",
         "sliding_log_pass", "strict_fixed_window_pass",
         "strict_sliding_window_pass", "strict_sliding_log_pass"]
NOTES = {
    "none": "static file, no limiting",
    "limit_req": "limit_req, always passes (burst, nodelay)",
    "throttle_pass": "throttle, always passes, RateLimit headers",
    "throttle_pass_noheaders": "as throttle_pass, throttle_headers off",
    "throttle_reject": "throttle, every request rejected: a 429, no file read",
    "strict_pass": "as throttle_pass, decided by Redis (strict mode)",
    "strict_reject": "as throttle_reject, Redis-backed: rejected from the "
                     "denial cache",
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
}
# Every algorithm against GCRA in the same mode (issue 5's target)
ALGORITHM_PAIRS = [
    ("fixed_window_pass", "throttle_pass"),
    ("sliding_window_pass", "throttle_pass"),
    ("sliding_log_pass", "throttle_pass"),
    ("strict_fixed_window_pass", "strict_pass"),
    ("strict_sliding_window_pass", "strict_pass"),
    ("strict_sliding_log_pass", "strict_pass"),
]
ALGORITHM_RATIO = 0.9
# (numerator, denominator, what it tells)
PAIRS = [
    ("throttle_pass", "limit_req", "throttle vs limit_req, both passing"),
    ("throttle_pass_noheaders", "limit_req",
     "throttle without headers vs limit_req"),
    ("throttle_pass", "throttle_pass_noheaders",
     "cost of the RateLimit headers"),
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
]
DENSITY_TARGET = 8000
# The targets for strict mode (2 cores shared by wrk, nginx, Redis)
STRICT_PASS_RATIO = 0.5      # strict_pass >= 0.5 x throttle_pass
STRICT_REJECT_RATIO = 0.9    # strict_reject >= 0.9 x throttle_reject
STRICT_REJECT_CMDS = 0.01    # Redis commands per rejected request, at most
# The targets for async mode
ASYNC_PASS_RATIO = 0.9       # async passing >= 0.9 x local passing
ASYNC_HOT_CMDS = 0.02        # Redis commands per request, hot keys, at most
SYNC_INTERVAL_MS = 100       # the async zones' sync_interval in nginx.conf.in
DASH = "\u2014"


def optional_int(text):
    return None if text in (None, "", "-") else int(text)


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
    """Plain-text and Markdown renderings of the same table."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]

    def line(cells):
        out = []
        for c, w, a in zip(cells, widths, aligns):
            out.append(str(c).rjust(w) if a == "r" else str(c).ljust(w))
        return "  ".join(out).rstrip()

    text = [line(headers), line(["-" * w for w in widths])]
    text += [line(r) for r in rows]
    md = ["| " + " | ".join(headers) + " |",
          "|" + "|".join("---:" if a == "r" else ":---" for a in aligns) + "|"]
    md += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(text), "\n".join(md)


def met(ok):
    return "met" if ok else "NOT met"


def round_ratios(runs, num, den):
    """The per-round ratios whose median ratio() is, as text."""
    rounds = sorted(set(runs.get(num, {})) & set(runs.get(den, {})), key=int)
    return ", ".join("%.3f" % (runs[num][r]["rps"] / runs[den][r]["rps"])
                     for r in rounds if runs[den][r]["rps"] > 0)


def strict_targets(runs, connections):
    """The issue's targets for the strict rows, one sentence each."""
    out = []
    x = ratio(runs, "strict_pass", "throttle_pass")
    if x is not None:
        out.append("strict_pass / throttle_pass = %.3f (rounds: %s), "
                   "target >= %.1f: %s"
                   % (x, round_ratios(runs, "strict_pass", "throttle_pass"),
                      STRICT_PASS_RATIO, met(x >= STRICT_PASS_RATIO)))
    redis = redis_totals(runs, "strict_pass")
    if redis:
        scripts, cmds, other, requests, _ = redis
        nruns = len(runs["strict_pass"])
        # a request cut off when wrk stops may have been sent to Redis but
        # is not counted by wrk: at most one per connection and run
        slack = connections * nruns
        excess = scripts - requests
        ok = 0 <= excess <= slack and other == 0
        non2xx = sum(r["non2xx"] for r in runs["strict_pass"].values())
        out.append(
            "strict_pass: %s EVALSHA/EVAL per request (%d for %d requests: "
            "%+d, where up to %d requests in flight when wrk stops may "
            "count; %d other commands), target exactly 1: %s"
            % (per_request(scripts, requests), scripts, requests, excess,
               slack, other, met(ok)))
        out.append("strict_pass: %d non-2xx (a request Redis did not decide "
                   "is denied there), target 0: %s" % (non2xx,
                                                       met(non2xx == 0)))
    x = ratio(runs, "strict_reject", "throttle_reject")
    if x is not None:
        out.append("strict_reject / throttle_reject = %.3f (rounds: %s), "
                   "target >= %.1f: %s"
                   % (x, round_ratios(runs, "strict_reject",
                                      "throttle_reject"),
                      STRICT_REJECT_RATIO, met(x >= STRICT_REJECT_RATIO)))
    redis = redis_totals(runs, "strict_reject")
    if redis:
        scripts, cmds, other, requests, _ = redis
        rs = runs["strict_reject"].values()
        passed = sum(r["requests"] - r["non2xx"] for r in rs)
        ok = requests > 0 and cmds / requests <= STRICT_REJECT_CMDS
        out.append(
            "strict_reject: %s Redis commands per request (%d commands, %d "
            "of them EVALSHA/EVAL, for %d requests), target <= %.2f: %s"
            % (per_request(cmds, requests), cmds, scripts, requests,
               STRICT_REJECT_CMDS, met(ok)))
        out.append("strict_reject: %d responses were not rejections (a "
                   "request Redis did not decide passes there), target 0: %s"
                   % (passed, met(passed == 0)))
    return out


def async_targets(runs, duration):
    """The issue's targets for the async rows, and what their syncs cost,
    one sentence each."""
    out = []
    for num, den, what in [
            ("async_pass_hot", "throttle_pass_hot", "same requests"),
            ("async_pass_distinct", "throttle_pass_distinct",
             "same requests"),
            ("async_pass_hot", "throttle_pass",
             "not like for like: one key, no wrk script"),
            ("async_pass_distinct", "throttle_pass",
             "not like for like: one key, no wrk script")]:
        x = ratio(runs, num, den)
        if x is None:
            continue
        out.append("%s / %s = %.3f (rounds: %s; %s), target >= %.1f: %s"
                   % (num, den, x, round_ratios(runs, num, den), what,
                      ASYNC_PASS_RATIO, met(x >= ASYNC_PASS_RATIO)))
    redis = redis_totals(runs, "async_pass_hot")
    if redis:
        scripts, cmds, other, requests, _ = redis
        ok = requests > 0 and cmds / requests <= ASYNC_HOT_CMDS
        ok_sent = requests > 0 and scripts / requests <= ASYNC_HOT_CMDS
        seconds = len(runs["async_pass_hot"]) * duration
        # a sync writes each hot key once: 100 keys every 100 ms is 1000 a
        # second whatever the load, so per request it falls as load grows
        per_second = (", %.0f per second of wrk, whatever the load"
                      % (cmds / seconds) if seconds else "")
        out.append(
            "async_pass_hot: %s Redis commands per request (all commands "
            "Redis processed: %d, for %d requests%s), target <= %.2f: %s; "
            "counting only the commands nginx sends (EVALSHA/EVAL: %d): "
            "%s per request: %s"
            % (per_request(cmds, requests), cmds, requests, per_second,
               ASYNC_HOT_CMDS, met(ok), scripts,
               per_request(scripts, requests), met(ok_sent)))
    for c in ("async_pass_hot", "async_pass_distinct"):
        redis = redis_totals(runs, c)
        if not redis:
            continue
        scripts, cmds, other, requests, gets = redis
        rs = runs[c].values()
        seconds = len(rs) * duration if duration else 0
        keys = ""  # gcra_sync.lua's calls per key vary (see the note above)
        rate = ("%.1f EVALSHA/EVAL per second of wrk (the syncs after "
                "each run included; one a sync of up to 500 keys every "
                "%d ms is %.0f per second), "
                % (scripts / seconds, SYNC_INTERVAL_MS,
                   1000 / SYNC_INTERVAL_MS) if seconds else "")
        out.append("%s: %s EVALSHA/EVAL and %s Redis commands per request; "
                   "%s%s%d other commands (target 0: %s)"
                   % (c, per_request(scripts, requests),
                      per_request(cmds, requests), rate, keys, other,
                      met(other == 0)))
    for c in ("throttle_pass_hot", "async_pass_hot",
              "throttle_pass_distinct", "async_pass_distinct"):
        if c not in runs:
            continue
        rs = runs[c].values()
        non2xx = sum(r["non2xx"] for r in rs)
        out.append("%s: %d non-2xx of %d (always passing; a request the "
                   "zone cannot hold is denied), target 0: %s"
                   % (c, non2xx, sum(r["requests"] for r in rs),
                      met(non2xx == 0)))
    return out


def algorithm_targets(runs):
    """Issue 5's target: every algorithm at least 0.9 x GCRA's throughput
    in the same mode, one sentence each."""
    out = []
    for num, den in ALGORITHM_PAIRS:
        x = ratio(runs, num, den)
        if x is None:
            continue
        out.append("%s / %s = %.3f (rounds: %s), target >= %.1f: %s"
                   % (num, den, x, round_ratios(runs, num, den),
                      ALGORITHM_RATIO, met(x >= ALGORITHM_RATIO)))
        non2xx = sum(r["non2xx"] for r in runs[num].values())
        if non2xx:
            out.append("%s: %d non-2xx (always passing), target 0: NOT met"
                       % (num, non2xx))
    return out


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

    targets = strict_targets(runs, args.connections)
    atargets = async_targets(runs, args.duration)
    algtargets = algorithm_targets(runs)

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
    verdict = ""
    if throttle:
        verdict = ("throttle: %d keys/MiB at worst, target >= %d: %s"
                   % (min(throttle), DENSITY_TARGET,
                      "met" if min(throttle) >= DENSITY_TARGET else "NOT met"))

    medians = ("Medians over %d rounds; \"vs none\" and the ratios are "
               "medians of per-round ratios (each configuration against "
               "the same round's run)." % nrounds)
    settings = "\n".join("- " + s for s in args.setting)

    print()
    print(perf_txt)
    print()
    print(pair_txt)
    print()
    print(medians)
    if targets or atargets:
        print()
        print(redis_note)
    if targets:
        print()
        print("Strict mode targets (%s):" % args.layout)
        print("\n".join("  " + t for t in targets))
    if atargets:
        print()
        print("Async mode targets (%s):" % args.layout)
        print("\n".join("  " + t for t in atargets))
    if algtargets:
        print()
        print("Algorithm targets (each against GCRA in the same mode; %s):"
              % args.layout)
        print("\n".join("  " + t for t in algtargets))
    if dens_rows:
        print()
        print(dens_txt)
        print(verdict)
    print()
    print("\n".join(args.setting))

    with open(args.markdown, "w") as f:
        f.write("### Throughput and latency\n\n")
        f.write(perf_md + "\n\n" + pair_md + "\n\n" + medians + "\n\n")
        if targets or atargets:
            f.write(redis_note + "\n\n")
        if targets:
            f.write("Strict mode targets (%s):\n\n" % args.layout)
            f.write("\n".join("- " + t for t in targets) + "\n\n")
        if atargets:
            f.write("Async mode targets (%s):\n\n" % args.layout)
            f.write("\n".join("- " + t for t in atargets) + "\n\n")
        if algtargets:
            f.write("Algorithm targets (each against GCRA in the same "
                    "mode; %s):\n\n" % args.layout)
            f.write("\n".join("- " + t for t in algtargets) + "\n\n")
        if dens_rows:
            f.write("### Keys per MiB of zone\n\n")
            f.write(dens_md + "\n\n")
            f.write("Largest number of distinct 16-byte keys for which the "
                    "first key is still held (binary search, fresh nginx "
                    "per probe). " + verdict + ".\n\n")
        f.write("Setup:\n\n" + settings + "\n")


if __name__ == "__main__":
    main()
