#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Scrapes a throttle_metrics location as Prometheus would, for
scripts/bench/run.sh's throttle_pass_scraped row: a GET every --interval
seconds (on a fixed schedule, not a pause after each answer) over one
keep-alive connection, until SIGTERM. Touches --ready after the first
answer, so that the measurement starts with the scraping already under way.

Each answer must be a 200 holding nginx_throttle_requests_total; anything
else, or a connection nginx closed, ends it with an error (exit 1). On
SIGTERM it prints "<scrapes> <CPU seconds>" and exits 0, the CPU time
being what it used from its first answer on, while wrk ran (Python's
start-up comes before): the bench reports both, so that a row whose
scraper did nothing, or took CPU from nginx, shows."""

import argparse
import http.client
import signal
import sys
import time

EXPECTED = b"nginx_throttle_requests_total"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/metrics")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--ready", required=True,
                    help="file touched after the first answer")
    args = ap.parse_args()

    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)

    # auto_open=0: a connection nginx closed is an error, not a silent
    # second connection
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=5)
    conn.connect()
    conn.auto_open = 0
    scrapes = 0
    cpu_at_ready = 0.0
    due = time.monotonic()
    while not stopping:
        try:
            conn.request("GET", args.path)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            sys.exit("scrape.py: GET %s after %d scrapes: %r"
                     % (args.path, scrapes, e))
        if resp.status != 200 or EXPECTED not in body:
            sys.exit("scrape.py: GET %s answered %d (%d bytes), expected "
                     "200 with %s" % (args.path, resp.status, len(body),
                                      EXPECTED.decode()))
        scrapes += 1
        if scrapes == 1:
            cpu_at_ready = time.process_time()
            open(args.ready, "w").close()
        # a late answer moves the schedule on instead of bursting to catch up
        now = time.monotonic()
        due = max(due + args.interval, now)
        time.sleep(due - now)
    print(scrapes, "%.3f" % (time.process_time() - cpu_at_ready))


if __name__ == "__main__":
    main()
