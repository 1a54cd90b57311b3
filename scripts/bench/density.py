#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Keys per MiB: how many distinct 16-byte keys a zone holds.

For a zone of a given size, keyed on $arg_k, with a policy under which a
second request for a key is rejected (throttle: rate=1r/d burst=0 -> 429;
limit_req: rate=1r/m, no burst -> 503):

  1. start a fresh nginx (clean zone),
  2. send K requests with distinct keys "%016d" % i, i = 0..K-1 (one
     keep-alive connection, pipelined: fast and strictly ordered),
  3. probe key 0 again: rejected -> key 0 is still held; passed -> the zone
     was full and evicted it (least recently used first).

The largest K for which key 0 is still held is the zone's capacity; it is
found by doubling then bisection. Prints one JSON object on stdout.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

KEY_LEN = 16

CONF = """\
load_module {module};
worker_processes  1;
pid               logs/nginx.pid;
error_log         logs/error.log warn;
events {{ worker_connections 64; }}
http {{
    default_type  text/plain;
    access_log    off;
    keepalive_requests  10000000;
    keepalive_timeout   60s;
    client_body_temp_path  temp/client_body;
    proxy_temp_path        temp/proxy;
    fastcgi_temp_path      temp/fastcgi;
    uwsgi_temp_path        temp/uwsgi;
    scgi_temp_path         temp/scgi;
    {zone}
    server {{
        listen  127.0.0.1:{port};
        root    html;
        location = /t {{
            {limit}
        }}
    }}
}}
"""

KINDS = {
    # (zone directive, location directive, status of a rejection)
    "throttle": ("throttle_zone $arg_k zone=d:{size} rate=1r/d burst=0;",
                 "throttle zone=d; throttle_log_level info;", 429),
    "limit_req": ("limit_req_zone $arg_k zone=d:{size} rate=1r/m;",
                  "limit_req zone=d; limit_req_log_level info;", 503),
}

STATUS_RE = re.compile(rb"HTTP/1\.1 (\d{3}) ")


def parse_size(text):
    m = re.fullmatch(r"(\d+)([kKmM]?)", text)
    if not m:
        raise ValueError("bad size " + text)
    n = int(m.group(1))
    unit = m.group(2).lower()
    return n * {"": 1, "k": 1024, "m": 1024 * 1024}[unit]


def alive(pid):
    """False once the process has exited, zombie included (nginx's master
    is a daemon: whoever adopts it may be slow to reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class Nginx:
    def __init__(self, binary, prefix, port):
        self.binary = binary
        self.prefix = prefix.rstrip("/") + "/"
        self.port = port
        self.pidfile = os.path.join(prefix, "logs", "nginx.pid")

    def cmd(self, *args):
        return [self.binary, "-p", self.prefix, "-c", "conf/nginx.conf",
                "-e", "logs/error.log", *args]

    def start(self):
        subprocess.run(self.cmd(), check=True)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("nginx did not start; see logs/error.log")

    def stop(self):
        try:
            with open(self.pidfile) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.time() + 10
        while time.time() < deadline:
            if not alive(pid):
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)


def send_keys(port, count):
    """Sends keys 0..count-1, then key 0 again; returns the statuses."""
    reqs = [b"GET /t?k=%016d HTTP/1.1\r\nHost: bench\r\n\r\n" % i
            for i in range(count)]
    reqs.append(b"GET /t?k=%016d HTTP/1.1\r\nHost: bench\r\n"
                b"Connection: close\r\n\r\n" % 0)
    payload = b"".join(reqs)

    sock = socket.create_connection(("127.0.0.1", port), 5)
    sock.settimeout(120)
    err = []

    def writer():
        try:
            sock.sendall(payload)
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=writer)
    t.start()
    chunks = []
    while True:
        data = sock.recv(1 << 20)
        if not data:
            break
        chunks.append(data)
    t.join()
    sock.close()
    if err:
        raise err[0]
    return [int(s) for s in STATUS_RE.findall(b"".join(chunks))]


def held(nginx, count, reject_status, log):
    """True if key 0 is still held after `count` distinct keys."""
    nginx.start()
    try:
        statuses = send_keys(nginx.port, count)
    finally:
        nginx.stop()
    if len(statuses) != count + 1:
        raise RuntimeError("expected %d responses, got %d"
                           % (count + 1, len(statuses)))
    bad = sum(1 for s in statuses[:-1] if s != 200)
    if bad:
        log("  K=%d: %d of the first requests were not 200 (e.g. %s)"
            % (count, bad, sorted(set(statuses[:-1]) - {200})))
    probe = statuses[-1]
    if probe not in (200, reject_status):
        raise RuntimeError("probe answered %d" % probe)
    return probe == reject_status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--module", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--size", default="1m")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    size = parse_size(args.size)
    zone, limit, reject_status = KINDS[args.kind]
    prefix = args.prefix
    for d in ("conf", "html", "logs", "temp"):
        os.makedirs(os.path.join(prefix, d), exist_ok=True)
    os.chmod(prefix, 0o755)
    with open(os.path.join(prefix, "conf", "nginx.conf"), "w") as f:
        f.write(CONF.format(module=args.module, port=args.port,
                            zone=zone.format(size=args.size), limit=limit))
    with open(os.path.join(prefix, "html", "t"), "w") as f:
        f.write("ok\n")
    os.chmod(os.path.join(prefix, "html"), 0o755)
    os.chmod(os.path.join(prefix, "html", "t"), 0o644)
    subprocess.run([args.nginx, "-p", prefix + "/", "-c", "conf/nginx.conf",
                    "-e", "logs/error.log", "-t", "-q"], check=True)

    nginx = Nginx(args.nginx, prefix, args.port)
    probes = 0

    def is_held(k):
        nonlocal probes
        probes += 1
        h = held(nginx, k, reject_status, log)
        if args.verbose:
            log("  %s %s K=%d: key 0 %s" % (args.kind, args.size, k,
                                              "held" if h else "evicted"))
        return h

    # lo: key 0 known held; hi: known evicted
    lo, hi = 0, max(1024, size // 256)
    while is_held(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if is_held(mid):
            lo = mid
        else:
            hi = mid

    mib = size / (1024 * 1024)
    with open(os.path.join(prefix, "logs", "error.log")) as f:
        errlog = f.read()
    print(json.dumps({
        "kind": args.kind,
        "size": args.size,
        "size_bytes": size,
        "key_len": KEY_LEN,
        "capacity": lo,
        "keys_per_mib": round(lo / mib),
        "bytes_per_key": round(size / lo, 1) if lo else None,
        "probes": probes,
        "zone_full_warnings": len(re.findall(r"is full|could not allocate",
                                         errlog)),
    }))


if __name__ == "__main__":
    main()
