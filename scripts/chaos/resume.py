#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""How long after a fault each nginx decides from Redis again (for
scripts/chaos/run.sh).

    resume.py --phase P --redis-ports "N..." [--route /cluster]
              [--count-zone Z] [--slots 0-5460,...] --limit-ms MS
              a=PORT b=PORT <END

It starts before the fault and waits until the end of the fault, in ms
since the epoch, comes on its standard input: so that its own start takes
nothing from the figures.

Strict: requests to <route>/strict for fresh keys, each on a new
connection (so that they land on any worker), until three in a row are
PASSED, the last answers of each of --workers workers (X-Pid) among them. A fresh key is in no zone's memory of rejections, so PASSED means
Redis answered; while Redis cannot decide, the answer is ERROR_ALLOWED.
With --slots, only keys whose slot (Redis Cluster's) is in those ranges
are used: those of the master that was killed.

Async: one request to <route>/count right away, for the key
"<phase>.probe.<node>"; then Redis is read until that key holds its unit,
which a sync put there: on each of --redis-ports in turn (a cluster's
nodes: the one that owns the key's slot answers, the others say MOVED or
are down).

Prints "resume_strict_<node> <ms>" and "resume_async_<node> <ms>", counted
from the end of the fault, or "never" for
what did not resume within --limit-ms of it.
"""

import argparse
import http.client
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from redis_keys import async_key, crc16  # noqa: E402

SLOTS = 16384

IN_A_ROW = 3


def now_ms():
    return time.time() * 1000


def decision(port, path):
    """The X-Throttle and X-Pid of GET path, on a new connection; "" for
    what did not come."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.getheader("X-Throttle", ""), resp.getheader("X-Pid", "")
    except OSError:
        return "", ""
    finally:
        conn.close()


class Resumed:
    """One nginx's strict answers since the fault: decisions are back once
    IN_A_ROW in a row are PASSED and each of its workers has PASSED its
    last one (a worker can take longer than another to find Redis again)."""

    def __init__(self, workers):
        self.workers = workers
        self.in_a_row = 0
        self.last = {}

    def answer(self, status, pid):
        self.in_a_row = self.in_a_row + 1 if status == "PASSED" else 0
        self.last[pid] = status
        return (self.in_a_row >= IN_A_ROW and len(self.last) >= self.workers
                and all(s == "PASSED" for s in self.last.values()))


class Redis:
    """Just enough RESP for HGET on one connection."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("Redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def hget(self, key, field):
        args = [b"HGET", key.encode(), field.encode()]
        self.sock.sendall(b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        head = self._line()
        if head.startswith(b"-"):
            raise OSError(head[1:].decode())
        if head == b"$-1":
            return None
        return self._line().decode()


def hget_anywhere(ports, key, field):
    """HGET on each node in turn, on a new connection each: the first
    value found, or None (errors and dead nodes skipped)."""
    for port in ports:
        try:
            redis = Redis(port)
            try:
                value = redis.hget(key, field)
            finally:
                redis.sock.close()
        except OSError:
            continue
        if value is not None:
            return value
    return None


def in_ranges(slot, ranges):
    return any(lo <= slot <= hi for lo, hi in ranges)


def parse_ranges(text):
    """ "0-5460,6000" as [(0, 5460), (6000, 6000)]."""
    out = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def fresh_keys(phase, ranges):
    """Strict probe keys, each used once: "<phase>.probe.<n>", only those
    whose slot is in ranges if any are given."""
    n = 0
    while True:
        n += 1
        key = "%s.probe.%d" % (phase, n)
        if not ranges or in_ranges(crc16(key.encode()) % SLOTS, ranges):
            yield key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", required=True)
    ap.add_argument("--redis-ports", required=True,
                    help="the backend's nodes, separated by spaces")
    ap.add_argument("--route", default="")
    ap.add_argument("--count-zone", default="count")
    ap.add_argument("--slots", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit-ms", type=float, required=True)
    ap.add_argument("nodes", nargs="+", help="node=port")
    args = ap.parse_args()

    ports = dict(n.split("=", 1) for n in args.nodes)
    redis_ports = [int(p) for p in args.redis_ports.split()]
    keys = fresh_keys(args.phase, parse_ranges(args.slots))
    since = float(sys.stdin.readline())
    strict_ms, async_ms = {}, {}
    answers = {node: Resumed(args.workers) for node in ports}
    for node, port in ports.items():
        decision(port, "%s/count?k=%s.probe.%s&e=probe"
                 % (args.route, args.phase, node))

    while now_ms() - since < args.limit_ms:
        for node, port in ports.items():
            if node not in strict_ms:
                path = "%s/strict?k=%s&e=probe" % (args.route, next(keys))
                if answers[node].answer(*decision(port, path)):
                    strict_ms[node] = now_ms() - since
            key = async_key("throttle:", args.count_zone,
                            "%s.probe.%s" % (args.phase, node))
            if node not in async_ms and hget_anywhere(redis_ports, key, "n"):
                async_ms[node] = now_ms() - since
        if len(strict_ms) == len(ports) and len(async_ms) == len(ports):
            break
        time.sleep(0.01)

    for node in ports:
        for kind, got in (("strict", strict_ms), ("async", async_ms)):
            print("resume_%s_%s %s" % (kind, node, "%d" % got[node]
                                       if node in got else "never"))


if __name__ == "__main__":
    main()
