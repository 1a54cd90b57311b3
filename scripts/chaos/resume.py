#!/usr/bin/env python3
"""How long after a fault each nginx decides from Redis again (for
scripts/chaos.sh).

    resume.py --phase P --redis-port N --limit-ms MS a=PORT b=PORT <END

It starts before the fault and waits until the end of the fault, in ms
since the epoch, comes on its standard input: so that its own start takes
nothing from the figures.

Strict: requests to /strict for fresh keys, each on a new connection (so
that they land on any worker), until three in a row are PASSED. A fresh
key is in no zone's memory of rejections, so PASSED means Redis answered;
while Redis cannot decide, the answer is ERROR_ALLOWED.

Async: one request to /count right away, for the key "<phase>.probe.<node>";
then Redis is read until that key holds its unit, which a sync put there.

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
from redis_keys import async_key  # noqa: E402

IN_A_ROW = 3


def now_ms():
    return time.time() * 1000


def decision(port, path):
    """The X-Throttle of GET path, on a new connection; "" if none came."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.getheader("X-Throttle", "")
    except OSError:
        return ""
    finally:
        conn.close()


class Redis:
    """Just enough RESP for HGET on one connection."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--limit-ms", type=float, required=True)
    ap.add_argument("nodes", nargs="+", help="node=port")
    args = ap.parse_args()

    ports = dict(n.split("=", 1) for n in args.nodes)
    since = float(sys.stdin.readline())
    redis = Redis(args.redis_port)
    strict_ms, async_ms, in_a_row = {}, {}, dict.fromkeys(ports, 0)
    for node, port in ports.items():
        decision(port, "/count?k=%s.probe.%s&e=probe" % (args.phase, node))

    sent = 0
    while now_ms() - since < args.limit_ms:
        for node, port in ports.items():
            if node not in strict_ms:
                sent += 1
                path = "/strict?k=%s.probe.%d&e=probe" % (args.phase, sent)
                in_a_row[node] = (in_a_row[node] + 1
                                  if decision(port, path) == "PASSED" else 0)
                if in_a_row[node] == IN_A_ROW:
                    strict_ms[node] = now_ms() - since
            key = async_key("throttle:", "count",
                            "%s.probe.%s" % (args.phase, node))
            if node not in async_ms and redis.hget(key, "n"):
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
