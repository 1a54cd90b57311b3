#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What the async syncs did during one mode's load (scripts/accuracy/run.sh).

Reads <mode>.monitor (redis-cli MONITOR during the load) and <mode>.clients
("<client port> <node>" lines: which nginx each Redis connection belongs
to) and writes <mode>.syncs.json: per nginx the number of syncs of the
mode's key and the time between them, and the units synced.
"""

import json
import re
import sys

LINE = re.compile(r'^([0-9.]+) \[\d+ [^\]]*:(\d+)\] "(EVALSHA|EVAL)" "(.*)"$')


def main():
    prefix, zone_key = sys.argv[1], sys.argv[2]
    nodes = {}
    try:
        with open(prefix + ".clients") as f:
            for line in f:
                port, node = line.split()
                nodes[port] = node
    except FileNotFoundError:
        pass

    calls = []  # (time, port, units, T)
    with open(prefix + ".monitor", errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m or zone_key not in line:
                continue
            t, port, cmd, rest = m.groups()
            args = rest.split('" "')
            # EVALSHA sha numkeys key T grace units age (gcra_sync.lua)
            try:
                nkeys = int(args[1])
            except (ValueError, IndexError):
                continue
            if nkeys != 1:
                continue  # the accuracy run has one key per zone
            T, units = int(args[3]), int(args[5])
            calls.append([float(t), port, units, T, cmd])

    # an EVALSHA answered NOSCRIPT is sent again as EVAL with the same
    # arguments on the same connection: count that sync once
    syncs = []
    for c in calls:
        if (c[4] == "EVAL" and syncs and syncs[-1][1] == c[1]
                and syncs[-1][4] == "EVALSHA" and syncs[-1][2] == c[2]
                and c[0] - syncs[-1][0] < 0.05):
            syncs[-1] = c
            continue
        syncs.append(c)

    out = {"syncs": len(syncs), "per_node": {}, "units": 0}
    if not syncs:
        json.dump(out, open(prefix + ".syncs.json", "w"))
        return

    last = {}
    gaps = {}
    count = {}
    for t, port, units, _, _ in syncs:
        node = nodes.get(port, "?")
        count[node] = count.get(node, 0) + 1
        if node in last:
            gaps.setdefault(node, []).append(t - last[node])
        last[node] = t
        out["units"] += units
    for node in sorted(count):
        g = gaps.get(node, [])
        out["per_node"][node] = {
            "syncs": count[node],
            "mean_gap_s": sum(g) / len(g) if g else None,
            "max_gap_s": max(g) if g else None,
        }
    with open(prefix + ".syncs.json", "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
