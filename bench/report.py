#!/usr/bin/env python3
"""Aggregates bench/run.sh's measurements into a table (stdout) and a
Markdown file: medians over rounds, ratios to the same round's baseline."""

import argparse
import json
import statistics

BASELINE = "none"
ORDER = ["none", "limit_req", "throttle_pass", "throttle_pass_noheaders",
         "throttle_reject"]
NOTES = {
    "none": "static file, no limiting",
    "limit_req": "limit_req, always passes (burst, nodelay)",
    "throttle_pass": "throttle, always passes, RateLimit headers",
    "throttle_pass_noheaders": "as throttle_pass, throttle_headers off",
    "throttle_reject": "throttle, every request rejected: a 429, no file read",
}
# (numerator, denominator, what it tells)
PAIRS = [
    ("throttle_pass", "limit_req", "throttle vs limit_req, both passing"),
    ("throttle_pass_noheaders", "limit_req",
     "throttle without headers vs limit_req"),
    ("throttle_pass", "throttle_pass_noheaders",
     "cost of the RateLimit headers"),
]
DENSITY_TARGET = 8000


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
            }
    return runs


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--density")
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--setting", action="append", default=[])
    args = ap.parse_args()

    runs = load_runs(args.runs)
    configs = [c for c in ORDER if c in runs] + sorted(set(runs) - set(ORDER))
    nrounds = max(len(v) for v in runs.values())

    rows = []
    for c in configs:
        rs = runs[c].values()
        rows.append([
            c,
            "%.0f" % statistics.median(r["rps"] for r in rs),
            "%.2f" % statistics.median(r["p99"] for r in rs),
            fmt_ratio(ratio(runs, c, BASELINE)),
            "%d / %d" % (sum(r["non2xx"] for r in rs),
                         sum(r["requests"] for r in rs)),
            "%d" % sum(r["errors"] for r in rs),
            NOTES.get(c, ""),
        ])
    perf_txt, perf_md = table(
        ["configuration", "req/s", "p99 ms", "vs none", "non-2xx / requests",
         "socket errors", "what"],
        rows, "lrrrrrl")

    pair_rows = [["%s / %s" % (n, d), fmt_ratio(ratio(runs, n, d)), what]
                 for n, d, what in PAIRS if n in runs and d in runs]
    pair_txt, pair_md = table(["req/s ratio", "median", "what"], pair_rows,
                              "lrl")

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
    if dens_rows:
        print()
        print(dens_txt)
        print(verdict)
    print()
    print("\n".join(args.setting))

    with open(args.markdown, "w") as f:
        f.write("### Throughput and latency\n\n")
        f.write(perf_md + "\n\n" + pair_md + "\n\n" + medians + "\n\n")
        if dens_rows:
            f.write("### Keys per MiB of zone\n\n")
            f.write(dens_md + "\n\n")
            f.write("Largest number of distinct 16-byte keys for which the "
                    "first key is still held (binary search, fresh nginx "
                    "per probe). " + verdict + ".\n\n")
        f.write("Setup:\n\n" + settings + "\n")


if __name__ == "__main__":
    main()
