#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Samples the soak run's nginx and Redis every --interval seconds for
--seconds (scripts/soak/run.sh), from outside: /proc, INFO, the error log.

    sample.py --pid-file F --error-log F --epoch-file F --redis-port N \\
        --zones local=1024,strict=2048,async=3072 --seconds S --interval I \\
        --out series.csv

Sample k is taken k x interval seconds after the start, from k = 0 (as the
load starts). Just before it, the epoch file gets k + 1, so that the load
tags its requests with the sample whose interval they were sent in
(scripts/lib/load.lua).

One CSV row per sample:
- t: seconds since the start;
- pids: the workers, "pid/pid" (a worker that died and was replaced shows
  as a new pid);
- rss_<i>, anon_<i>, shmem_<i>: worker i's VmRSS, RssAnon (its own heap
  and stacks: what a leak would grow) and RssShmem (the shared memory it
  has touched), kB, from /proc/PID/status;
- zone_<name>: the resident kB of that zone's mapping (/proc/PID/smaps:
  a shared anonymous mapping of the zone's size), the most over the
  workers: the pages of the zone ever used, at most its size;
- redis_kb: Redis's used_memory, kB;
- evicting, full, crashes: error-log lines so far telling that a zone
  evicted keys still limited (at most one a minute), that evicting did not
  free room for a key, and that a worker crashed (exited on signal, alert,
  emerg).
"""

import argparse
import csv
import os
import re
import socket
import time

WORKERS = 2


def workers(master):
    """The master's children: its workers."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == master:
            out.append(int(pid))
    return sorted(out)


def status_kb(pid):
    """VmRSS, RssAnon and RssShmem of pid, kB."""
    got = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssShmem"):
                got[name] = int(value.split()[0])
    return got["VmRSS"], got["RssAnon"], got["RssShmem"]


def zone_kb(pid, sizes):
    """{size in kB: Rss in kB} of pid's shared anonymous mappings whose
    size is one of sizes (nginx maps each zone as /dev/zero, shared)."""
    out, size = {}, None
    shared = False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                shared = "/dev/zero" in line and line.split()[1][3] == "s"
            elif shared and line.startswith("Size:"):
                size = int(line.split()[1])
            elif shared and line.startswith("Rss:") and size in sizes:
                out[size] = int(line.split()[1])
    return out


def redis_used_kb(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        data = b""
        while b"used_memory:" not in data or not data.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    m = re.search(rb"used_memory:(\d+)", data)
    return int(m.group(1)) // 1024 if m else -1


def log_counts(path):
    text = open(path, errors="replace").read()
    return (text.count("is full: evicting keys that are still limited"),
            text.count("did not free room for one more"),
            len(re.findall(r"exited on signal|\[(?:alert|emerg)\]", text)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid-file", required=True)
    ap.add_argument("--error-log", required=True)
    ap.add_argument("--epoch-file", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--zones", required=True, help="name=kB,...")
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--interval", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    zones = [(n, int(kb)) for n, kb in
             (z.split("=") for z in args.zones.split(","))]
    master = int(open(args.pid_file).read())
    header = (["t", "pids"] +
              ["%s_%d" % (m, i) for i in range(1, WORKERS + 1)
               for m in ("rss", "anon", "shmem")] +
              ["zone_" + n for n, _ in zones] +
              ["redis_kb", "evicting", "full", "crashes"])
    start = time.monotonic()
    with open(args.out, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        for k in range(args.seconds // args.interval + 1):
            time.sleep(max(0.0, start + k * args.interval - time.monotonic()))
            with open(args.epoch_file + ".tmp", "w") as e:
                e.write("%d\n" % (k + 1))
            os.replace(args.epoch_file + ".tmp", args.epoch_file)
            pids = workers(master)
            row = [k * args.interval, "/".join(map(str, pids))]
            resident = {}
            for pid in pids[:WORKERS]:
                row += status_kb(pid)
                for size, kb in zone_kb(pid, {s for _, s in zones}).items():
                    resident[size] = max(resident.get(size, 0), kb)
            row += [""] * (3 * (WORKERS - min(len(pids), WORKERS)))
            row += [resident.get(s, 0) for _, s in zones]
            row += [redis_used_kb(args.redis_port)]
            row += list(log_counts(args.error_log))
            out.writerow(row)
            f.flush()


if __name__ == "__main__":
    main()
