#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Open-loop load generator for the accuracy run (scripts/accuracy/run.sh).

Sends GET <path> at a steady total rate for a number of seconds, spread
evenly over several nginx instances (request i goes to target i mod n, so
they alternate), over HTTP/1.1 keep-alive connections. Request i is due at
t0 + i / rate; each connection owns the requests i = k, k + C, k + 2C, ...
(C connections in all) and sends each when it is due, or at once if the
previous answer came late (it never skips one). Nothing is pipelined.

Writes one CSV line per request: index, target, due, sent, done (seconds
since t0, monotonic clock), HTTP status (0: no answer, the connection
failed), X-Throttle-Status. Prints a JSON summary on stdout: the offered
rate actually achieved, how late requests went out, latencies, statuses.
"""

import argparse
import asyncio
import csv
import json
import sys
import time


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[i]


class Conn:
    """One keep-alive connection to one target; reconnects when closed."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, raw):
        """Sends one request; returns (status, x-throttle-status)."""
        if self.writer is None:
            await self.open()
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close, tstatus, chunked = 0, False, "", False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.lower() == "close":
                close = True
            elif name == "x-throttle-status":
                tstatus = value
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        elif length:
            await self.reader.readexactly(length)
        if close:
            self.close()
        return status, tstatus


async def run(args):
    targets = []
    for t in args.targets.split(","):
        host, _, port = t.rpartition(":")
        targets.append((host, int(port)))
    ntargets = len(targets)
    total = int(round(args.rate * args.seconds))
    nconns = args.connections
    # a multiple of the targets: connection k always talks to target k mod n
    nconns = max(ntargets, nconns - nconns % ntargets)
    requests = [
        ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: throttle-accuracy\r\n\r\n"
         % (args.path, h, p)).encode()
        for h, p in targets
    ]
    results = [None] * total
    loop = asyncio.get_running_loop()

    conns = [Conn(*targets[k % ntargets]) for k in range(nconns)]
    # connect before the clock starts, so no request pays for a handshake
    await asyncio.gather(*(c.open() for c in conns))

    t0 = loop.time() + 0.2
    errors = []

    async def worker(k):
        conn = conns[k]
        target = k % ntargets
        for i in range(k, total, nconns):
            due = t0 + i / args.rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = loop.time()
            try:
                status, tstatus = await conn.request(requests[target])
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
                conn.close()
                status, tstatus = 0, ""
                if len(errors) < 5:
                    errors.append("%s: %r" % (targets[target], e))
            done = loop.time()
            results[i] = (i, target, due - t0, sent - t0, done - t0, status, tstatus)

    wall0 = time.monotonic()
    await asyncio.gather(*(worker(k) for k in range(nconns)))
    wall = time.monotonic() - wall0
    for c in conns:
        c.close()

    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["index", "target", "due", "sent", "done", "status", "throttle_status"])
        for r in results:
            w.writerow([r[0], r[1], "%.6f" % r[2], "%.6f" % r[3], "%.6f" % r[4], r[5], r[6]])

    sent = sorted(r[3] for r in results)
    late = sorted(r[3] - r[2] for r in results)
    lat = sorted(r[4] - r[3] for r in results)
    span = sent[-1] - sent[0] if total > 1 else 0.0
    statuses = {}
    for r in results:
        statuses[str(r[5])] = statuses.get(str(r[5]), 0) + 1
    tstat = {}
    for r in results:
        tstat[r[6] or "-"] = tstat.get(r[6] or "-", 0) + 1
    per_target = [sum(1 for r in results if r[1] == t) for t in range(ntargets)]
    summary = {
        "path": args.path,
        "target_rate": args.rate,
        "seconds": args.seconds,
        "requests": total,
        "connections": nconns,
        "per_target": per_target,
        "first_sent": sent[0],
        "last_sent": sent[-1],
        # (n - 1) gaps between the first and the last request sent
        "offered_rate": (total - 1) / span if span > 0 else 0.0,
        "late_p50_ms": 1000 * percentile(late, 50),
        "late_p99_ms": 1000 * percentile(late, 99),
        "late_max_ms": 1000 * late[-1],
        "latency_p50_ms": 1000 * percentile(lat, 50),
        "latency_p99_ms": 1000 * percentile(lat, 99),
        "latency_max_ms": 1000 * lat[-1],
        "statuses": statuses,
        "throttle_statuses": tstat,
        "errors": errors,
        "wall_seconds": wall,
    }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", required=True, help="host:port[,host:port...]")
    ap.add_argument("--path", required=True)
    ap.add_argument("--rate", type=float, required=True, help="requests per second, in all")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--connections", type=int, default=24, help="in all")
    ap.add_argument("--out", required=True, help="CSV, one line per request")
    args = ap.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or args.connections <= 0:
        ap.error("rate, seconds and connections must be positive")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
