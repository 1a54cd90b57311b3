#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Keys per MiB: how many distinct keys a zone holds.

For a zone of a given size, keyed on $arg_k, with a policy under which a
second request for a key is rejected (throttle: rate=1r/d burst=0 -> 429,
of any --algorithm and --mode; limit_req: rate=1r/m, no burst -> 503), and
keys "%0<key-len>d" % i (--key-len, 16 by default), in one of two ways:

--method probe (limit_req's, and the only one it allows):
  1. start a fresh nginx (clean zone),
  2. send K requests with distinct keys, i = 0..K-1 (one keep-alive
     connection, pipelined: fast and strictly ordered),
  3. probe key 0 again: rejected -> key 0 is still held; passed -> the zone
     was full and evicted it (least recently used first).
  The largest K for which key 0 is still held is the zone's capacity; it is
  found by doubling then bisection. For an exact LRU (limit_req, and
  throttle's zones before the table) that is the number of keys held.

--method gauge (throttle's): one nginx, distinct keys sent in batches of
  size/64 until the zone's nginx_throttle_zone_keys gauge (throttle_metrics)
  stops growing: the keys a full zone holds. A set-associative table evicts
  a key when its own buckets are full, which can be before the whole table
  is, so key 0 of the probe can go early while most slots are still free;
  the gauge counts what the zone holds, as limit_req's probe does for it.

strict and async zones need a Redis (--redis-server starts one on
--redis-port, flushed before each nginx). Prints one JSON object on stdout.
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

REDIS_CONF = ("throttle_redis r server=127.0.0.1:{rport} timeout=1s "
              "keepalive=4;")

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
        location = /metrics {{
            {metrics}
        }}
    }}
}}
"""

KINDS = {
    # (zone directive, location directive, status of a rejection)
    "throttle": ("throttle_zone $arg_k zone=d:{size} rate=1r/d burst=0"
                 " algorithm={algorithm}{mode};",
                 "throttle zone=d; throttle_log_level info;", 429),
    "limit_req": ("limit_req_zone $arg_k zone=d:{size} rate=1r/m;",
                  "limit_req zone=d; limit_req_log_level info;", 503),
}

MODES = {"local": "", "strict": " redis=r sync=strict",
         "async": " redis=r sync=async sync_interval=100ms"}

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


def key(i):
    return b"%0*d" % (KEY_LEN, i)


def send_keys(port, count, first=0, probe=True, times=1):
    """Sends keys first..count-1 (each `times` in a row), then key 0 again
    if `probe`; returns the statuses."""
    reqs = [b"GET /t?k=" + key(i) + b" HTTP/1.1\r\nHost: bench\r\n\r\n"
            for i in range(first, count) for _ in range(times)]
    if probe:
        reqs.append(b"GET /t?k=" + key(0) + b" HTTP/1.1\r\nHost: bench\r\n"
                    b"Connection: close\r\n\r\n")
    else:
        reqs.append(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n"
                    b"Connection: close\r\n\r\n")
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
    body = b"".join(chunks)
    if not probe:
        m = re.search(rb'nginx_throttle_zone_keys\{zone="d"\} (\d+)', body)
        return [int(s) for s in STATUS_RE.findall(body)][:-1], int(m.group(1))
    return [int(s) for s in STATUS_RE.findall(body)]


def flush_redis(rport):
    if rport:
        subprocess.run(["redis-cli", "-p", str(rport), "flushall"],
                       check=True, stdout=subprocess.DEVNULL)


def gauge_capacity(nginx, size, rport, log, verbose, times):
    """The zone_keys gauge once it stops growing. A strict zone of a window
    algorithm keeps a key only once Redis rejected it: then each key is
    sent twice (times=2)."""
    flush_redis(rport)
    nginx.start()
    batch = max(1024, size // 64)
    sent, best, flat = 0, 0, 0
    try:
        while flat < 2:
            statuses, keys = send_keys(nginx.port, sent + batch, sent, False,
                                       times)
            bad = sum(1 for s in statuses[::times] if s != 200)
            if bad:
                log("  %d..%d: %d requests not 200" % (sent, sent + batch, bad))
            sent += batch
            flat = flat + 1 if keys <= best else 0
            best = max(best, keys)
            if verbose:
                log("  sent %d: zone_keys %d" % (sent, keys))
    finally:
        nginx.stop()
    return best


def held(nginx, count, reject_status, log, rport=None):
    """True if key 0 is still held after `count` distinct keys."""
    flush_redis(rport)
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
    ap.add_argument("--algorithm", default="gcra",
                    choices=["gcra", "fixed_window", "sliding_window",
                             "sliding_log"])
    ap.add_argument("--mode", default="local", choices=sorted(MODES))
    ap.add_argument("--key-len", type=int, default=16)
    ap.add_argument("--method", choices=["probe", "gauge"])
    ap.add_argument("--redis-port", type=int,
                    help="a redis-server there (strict and async modes)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    global KEY_LEN
    KEY_LEN = args.key_len
    method = args.method or ("gauge" if args.kind == "throttle" else "probe")
    if args.kind == "limit_req" and (method == "gauge" or args.mode != "local"
                                     or args.algorithm != "gcra"):
        ap.error("limit_req: --method probe, local, gcra only")
    rport = args.redis_port if args.mode != "local" else None
    if args.mode != "local" and not rport:
        ap.error("--mode %s needs --redis-port" % args.mode)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    size = parse_size(args.size)
    zone, limit, reject_status = KINDS[args.kind]
    prefix = args.prefix
    for d in ("conf", "html", "logs", "temp"):
        os.makedirs(os.path.join(prefix, d), exist_ok=True)
    os.chmod(prefix, 0o755)
    with open(os.path.join(prefix, "conf", "nginx.conf"), "w") as f:
        zone = zone.format(size=args.size, algorithm=args.algorithm,
                           mode=MODES[args.mode])
        if rport:
            zone = REDIS_CONF.format(rport=rport) + "\n    " + zone
        f.write(CONF.format(module=args.module, port=args.port, zone=zone,
                            limit=limit,
                            metrics="throttle_metrics;"
                            if args.kind == "throttle" else "return 404;"))
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
        h = held(nginx, k, reject_status, log, rport)
        if args.verbose:
            log("  %s %s K=%d: key 0 %s" % (args.kind, args.size, k,
                                              "held" if h else "evicted"))
        return h

    if method == "gauge":
        lo = gauge_capacity(nginx, size, rport, log, args.verbose,
                            2 if args.mode == "strict" else 1)
    else:
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
        "algorithm": args.algorithm,
        "mode": args.mode,
        "method": method,
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
