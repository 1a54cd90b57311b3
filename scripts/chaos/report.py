#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks and reports the chaos run (scripts/chaos/run.sh).

Reads, per phase: <raw>/<phase>.<node>.counts (scripts/lib/load.lua: answers by epoch,
location, status and X-Throttle, and wrk's summary), <phase>.record (what
run.sh and resume.py noted), <phase>.redis (units the count zone holds
in Redis per epoch) and <phase>.crashes (error-log lines of a crash).

Prints a table of faults and outcomes and every failed check, writes them
to --markdown and, with --docs, the chaos section of docs/reliability.md;
exits 1 if a check failed. The checks, per phase:

- no worker crashed: no error-log line "exited on signal", [alert] or
  [emerg] (nor [crit], listed with them);
- no wrk timeout (wrk --timeout 2s), no socket error but read errors in
  the reload and upgrade phases (see READ_ERRORS);
- no answer slower than the Redis timeout + 0.5 s (wrk's slowest);
- every answer as the policy says (ALLOWED);
- the fault took place (EFFECT);
- decisions resumed (resume.py) within --resume-ms;
- the count zone: Redis holds, per epoch, every unit nginx admitted (the
  200s of /count), no more, and fewer only where docs/modes.md says units
  may be lost (MAY_LOSE);
- the keep_* zones (reload, upgrade): see check_keep();
- the failovers of the cluster and the Sentinel setup: see
  check_failover().
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from reliability import report, write_section  # noqa: E402

FAULTS = {
    "steady": "none (the reference)",
    "stall": "Redis stopped (SIGSTOP) 2 s, then SIGCONT",
    "kill": "Redis killed (SIGKILL), restarted empty 2 s later",
    "script_flush": "SCRIPT FLUSH",
    "client_kill": "CLIENT KILL TYPE normal",
    "maxmemory": "maxmemory reached (noeviction) for 2 s",
    "reload": "each nginx reloaded (HUP) twice",
    "upgrade": "nginx a upgraded in place (USR2, WINCH, QUIT)",
    "cluster_kill": "Redis Cluster: a master killed (SIGKILL), its replica "
                    "promoted",
    "sentinel_failover": "Sentinels: SENTINEL FAILOVER",
    "sentinel_kill": "Sentinels: the master killed (SIGKILL), the replica "
                     "promoted",
}
# Phases on a backend that fails over (scripts/chaos/failover.sh), whose
# locations are under /cluster/ or /sentinel/.
FAILOVERS = {"cluster_kill", "sentinel_failover", "sentinel_kill"}
# How long after the promotion each nginx may take to decide again, where
# the promotion itself took the whole bound or more: while a master is
# gone, a worker reads the slot map every 100 ms (and t/redis_cluster.t
# holds a failover to 250 ms).
CATCH_UP_MS = 250

# What each location may answer: throttle_on_error allow (the default) at
# /strict, deny at /strict_deny; the local and async zones decide alone.
DECIDED = {("200", "PASSED"), ("429", "REJECTED")}
ALLOWED = {
    "/local": DECIDED,
    "/async": DECIDED,
    "/count": DECIDED,
    "/strict": DECIDED | {("200", "ERROR_ALLOWED")},
    "/strict_deny": DECIDED | {("429", "ERROR_DENIED")},
}
SHORT = {"PASSED": "P", "REJECTED": "R", "ERROR_ALLOWED": "EA",
         "ERROR_DENIED": "ED"}

# Epochs of the count zone compared with Redis ("end" is not: wrk stops
# before the answers to its last requests arrive).
EPOCHS = ["pre", "fault", "both", "post", "after"]
# Where docs/modes.md allows units to be lost, and why.
MAY_LOSE = {
    ("kill", "pre"): "Redis lost what it held when it was killed "
                     "(no persistence)",
    ("client_kill", "pre"): "a sync Redis had not read when it dropped "
                            "the connection is lost with it (docs/modes.md: "
                            "\"only if Redis lost such a batch\")",
    ("cluster_kill", "pre"): "the killed master had not yet passed its last "
                             "writes to its replica (replication is "
                             "asynchronous)",
    ("sentinel_kill", "pre"): "the killed master had not yet passed its "
                              "last writes to its replica (replication is "
                              "asynchronous)",
}
# SENTINEL FAILOVER leaves the old master up and writable: what it takes
# between the replica's promotion and the Sentinels' +switch-master, on
# which the module leaves it, is lost when it becomes a replica. Units
# charged before the fault may be synced in that window too.
# A failover phase's fault epoch starts EPOCH_LEAD_MS (100 ms) before the
# master is killed: syncs of what it admitted then may reach the master and
# die with it, as the pre epoch's do.
for _phase in ("cluster_kill", "sentinel_kill"):
    MAY_LOSE[(_phase, "fault")] = (
        "admitted in the moment the epoch starts before the kill, synced to "
        "the master, which had not yet passed them to its replica")
for _epoch in ("pre", "fault"):
    MAY_LOSE[("sentinel_failover", _epoch)] = (
        "the old master took syncs between the replica's promotion and the "
        "Sentinels' announcement of it (+switch-master), and dropped them "
        "when it became a replica")
# nginx closes idle keep-alive connections when a worker shuts down
# gracefully; a request wrk writes on one at that moment gets no answer.
READ_ERRORS = {"reload", "upgrade"}
# Redis faults that requests meet: strict answers must show them.
REDIS_DOWN = {"stall", "kill", "maxmemory"}


def load_phase(raw, phase, nodes):
    """Answers {(epoch, location, status, decision): n}, wrk's summary
    summed over nodes, the record, and Redis's units per epoch."""
    answers, summary = {}, None
    for node in nodes:
        with open(os.path.join(raw, "%s.%s.counts" % (phase, node))) as f:
            for line in f:
                w = line.split()
                if w[0] == "summary":
                    v = dict(zip(["requests", "us", "connect", "read", "write",
                                  "timeout", "max_us"], map(int, w[1:])))
                    if summary is None:
                        summary = v
                    else:
                        for k in v:
                            summary[k] = (max(summary[k], v[k])
                                          if k in ("us", "max_us")
                                          else summary[k] + v[k])
                    continue
                epoch = w[0].split(".", 1)[1] if "." in w[0] else w[0]
                key = (epoch, w[1], w[2], w[3])
                answers[key] = answers.get(key, 0) + int(w[4])
    record = {}
    with open(os.path.join(raw, phase + ".record")) as f:
        for line in f:
            name, _, value = line.rstrip("\n").partition(" ")
            record[name] = value
    units = {}
    with open(os.path.join(raw, phase + ".redis")) as f:
        for line in f:
            epoch, n = line.split()
            units[epoch] = int(n)
    crashes = []
    path = os.path.join(raw, phase + ".crashes")
    if os.path.exists(path):
        with open(path) as f:
            crashes = [line.strip() for line in f if line.strip()]
    return answers, summary, record, units, crashes


def base_location(loc):
    """The location as ALLOWED names it: "/cluster/strict@victim" is a
    /strict."""
    loc = loc.split("@", 1)[0]
    for route in ("/cluster/", "/sentinel/"):
        if loc.startswith(route):
            return "/" + loc[len(route):]
    return loc


def key_group(loc):
    """ "victim" or "other" for a cluster strict location, else None."""
    return loc.split("@", 1)[1] if "@" in loc else None


def admitted(answers):
    """Units the count zone admitted per epoch (its 200s)."""
    out = {}
    for (epoch, loc, status, _), n in answers.items():
        if base_location(loc) == "/count" and status == "200":
            out[epoch] = out.get(epoch, 0) + n
    return out


def check_answers(phase, answers, summary, record, crashes, args):
    fails = []
    if crashes:
        fails.append("%d error-log lines of a crash or worse, first: %s"
                     % (len(crashes), crashes[0]))
    if summary["timeout"]:
        fails.append("%d wrk timeouts" % summary["timeout"])
    socket = summary["connect"] + summary["write"] + (
        0 if phase in READ_ERRORS else summary["read"])
    if socket:
        fails.append("%d socket errors (connect %d, read %d, write %d)"
                     % (socket, summary["connect"], summary["read"],
                        summary["write"]))
    bound = 500 + (args.failover_timeout_ms if phase in FAILOVERS
                   else args.redis_timeout_ms)
    if summary["max_us"] > bound * 1000:
        fails.append("an answer took %.0f ms, more than %d ms"
                     % (summary["max_us"] / 1000, bound))
    for (epoch, loc, status, decision), n in sorted(answers.items()):
        if (status, decision) not in ALLOWED.get(base_location(loc), set()):
            fails.append("%d answers %s %s at %s (epoch %s), which the "
                         "policy does not give" % (n, status, decision, loc,
                                                   epoch))
    for key, value in sorted(record.items()):
        if key.startswith("resume_") and value == "never":
            fails.append("%s: decisions did not resume within %d ms"
                         % (key[len("resume_"):], args.resume_ms))
    return fails


def check_effect(phase, answers, record):
    """That the fault took place: what the run saw of it."""
    errors = sum(n for (epoch, _, _, d), n in answers.items()
                 if epoch == "fault" and d.startswith("ERROR"))
    if phase in REDIS_DOWN and errors == 0:
        return ["no strict answer met the fault (no ERROR_* while it lasted)"]
    if phase == "script_flush" and \
            int(record["noscript_after"]) <= int(record["noscript_before"]):
        return ["Redis answered no NOSCRIPT after the flush"]
    if phase == "client_kill" and int(record["clients_killed"]) < 1:
        return ["CLIENT KILL killed no connection"]
    if phase == "maxmemory" and \
            int(record["oom_after"]) <= int(record["oom_before"]):
        return ["Redis refused no command with OOM"]
    if phase == "upgrade" and record["new_master"] == record["old_master"]:
        return ["no new master after USR2"]
    return []


def failover_errors(answers):
    """ERROR_* answers of a failover phase: {(epoch, key group): n}."""
    out = {}
    for (epoch, loc, _, decision), n in answers.items():
        if decision.startswith("ERROR"):
            key = (epoch, key_group(loc))
            out[key] = out.get(key, 0) + n
    return out


def promoted_ms(record):
    """From the start of the fault (the kill, SENTINEL FAILOVER) to the new
    master (as the cluster or every Sentinel says)."""
    return int(record["fault_ms"]) - int(record.get("epoch_lead_ms", 0))


def decided_after_ms(record):
    """From the start of the fault to decisions from Redis again (strict,
    the slower nginx), or None if they did not come back."""
    vals = [v for k, v in record.items() if k.startswith("resume_strict")]
    if "never" in vals:
        return None
    return promoted_ms(record) + max(int(v) for v in vals)


def allowed_ms(record):
    """The bound on decided_after_ms: the phase's, or the promotion +
    CATCH_UP_MS if the promotion alone took longer."""
    return max(int(record["bound_ms"]), promoted_ms(record) + CATCH_UP_MS)


def check_failover(phase, answers, record):
    """A failover: ERROR_* only between the fault and the return of
    decisions (never before it, never once resume.py saw decisions
    again), in the cluster only for the killed master's keys; an
    ERROR_* met during the fault if it left a gap (SIGKILL); a new master;
    decisions back within the bound from the start of the fault."""
    if phase not in FAILOVERS:
        return []
    fails = []
    errors = failover_errors(answers)
    for (epoch, group), n in sorted(errors.items(), key=str):
        if epoch in ("pre", "after"):
            fails.append("%d ERROR_* answers in epoch %s (%s decisions "
                         "were given)" % (n, epoch, "before the fault, when"
                                          if epoch == "pre" else
                                          "after the failover, once"))
        if group == "other":
            fails.append("%d ERROR_* answers for keys of the masters still "
                         "up (epoch %s)" % (n, epoch))
    gap = sum(n for (epoch, group), n in errors.items()
              if epoch == "fault" and group in (None, "victim"))
    if phase.endswith("_kill") and gap == 0:
        fails.append("no strict answer met the dead master (no ERROR_* "
                     "during the fault)")
    if record.get("new_master", "") == record.get("old_master", "x") or \
            record.get("promoted_port", "x") == record.get("killed_port"):
        fails.append("no new master")
    took = decided_after_ms(record)
    if took is not None and took > allowed_ms(record):
        fails.append("decisions came back %d ms after the start of the "
                     "fault, more than %d ms" % (took, allowed_ms(record)))
    return fails


def failover_note(phase, answers, record):
    errors = failover_errors(answers)
    gap = sum(n for (epoch, _), n in errors.items() if epoch in ("fault",
                                                                  "post"))
    if phase == "cluster_kill":
        who = "master on port %s killed, replica on %s promoted %d ms later" \
            % (record["killed_port"], record["promoted_port"],
               promoted_ms(record))
    else:
        who = "master %s replaced by %s, named by every Sentinel %d ms " \
              "after the fault began" % (record["old_master"],
                                         record["new_master"],
                                         promoted_ms(record))
    bound = allowed_ms(record)
    why = ("" if bound == int(record["bound_ms"]) else
           ": the promotion + %d ms, more than the phase's %s ms"
           % (CATCH_UP_MS, record["bound_ms"]))
    took = decided_after_ms(record)
    after = ("" if took is None else
             ", %d ms after the new master" % (took - promoted_ms(record)))
    return "%s; decisions back %s ms after the start of the fault%s " \
           "(bound %d ms%s); %d strict answers ERROR_* in between" % (
               who, took, after, bound, why, gap)


def effect_note(phase, answers, record):
    """What the run saw of the fault, in words, for the notes."""
    errors = sum(n for (epoch, _, _, d), n in answers.items()
                 if epoch == "fault" and d.startswith("ERROR"))
    met = "%d strict answers ERROR_* while it lasted" % errors
    if phase == "stall":
        return met
    if phase == "kill":
        return "%s; Redis pid %s killed, %s started" % (
            met, record["killed_pid"], record["restarted_pid"])
    if phase == "maxmemory":
        return "%s; %s MiB of filler, %d OOM replies" % (
            met, record["filler_mib"],
            int(record["oom_after"]) - int(record["oom_before"]))
    if phase == "script_flush":
        return "%d NOSCRIPT replies after the flush" % (
            int(record["noscript_after"]) - int(record["noscript_before"]))
    if phase == "client_kill":
        return "%s connections killed" % record["clients_killed"]
    if phase == "upgrade":
        return "master %s replaced by %s" % (record["old_master"],
                                             record["new_master"])
    if phase in FAILOVERS:
        return failover_note(phase, answers, record)
    return None


def check_units(phase, answers, units, day_turned):
    """The count zone: Redis's units per epoch against the admitted ones.
    Returns failures, and notes on units lost as documented."""
    if day_turned:
        return [], ["not compared: the UTC day (the count zone's window) "
                    "turned during the run"]
    fails, notes = [], []
    got = admitted(answers)
    for epoch in EPOCHS:
        a, r = got.get(epoch, 0), units.get(epoch, 0)
        if r > a:
            fails.append("epoch %s: Redis holds %d units of the count zone, "
                         "%d were admitted: units charged twice"
                         % (epoch, r, a))
        elif r < a and (phase, epoch) in MAY_LOSE:
            notes.append("epoch %s: %d of %d units lost: %s"
                         % (epoch, a - r, a, MAY_LOSE[(phase, epoch)]))
        elif r < a:
            fails.append("epoch %s: %d units admitted, %d in Redis: %d lost"
                         % (epoch, a, r, a - r))
    return fails, notes


def check_keep(phase, record, nodes):
    """The keep_* zones: after reloads, every node's key is still limited
    (429) in every zone. After the upgrade of node a: node b's are; node
    a's strict one is (its state is in Redis); its async one is limited
    again once a sync brings Redis's state; its local one is as
    limit_req's: nginx keeps shared memory over a reload, not over a
    binary upgrade (the new master maps new zones), so both start afresh
    or neither does."""
    if phase not in ("reload", "upgrade"):
        return [], []
    fails, notes = [], []
    for node in nodes:
        for zone in ("local", "strict", "async", "limit_req"):
            got = record["keep_%s_%s" % (node, zone)]
            last = got.split(",")[-1]
            if phase == "upgrade" and node == "a" and zone in ("local",
                                                             "limit_req"):
                continue
            if phase == "upgrade" and node == "a" and zone == "async":
                if last != "429":
                    fails.append("nginx a, keep_async: %s after the upgrade, "
                                 "never limited again" % got)
                else:
                    notes.append("nginx a, keep_async: %s after the upgrade "
                                 "(re-learned from Redis)" % got)
                continue
            if got != "429":
                fails.append("nginx %s, keep_%s: %s after the %s, expected "
                             "429 (the zone kept the key)"
                             % (node, zone, got, phase))
    if phase == "upgrade":
        local, lr = record["keep_a_local"], record["keep_a_limit_req"]
        if local != lr:
            fails.append("nginx a: keep_local answered %s after the upgrade, "
                         "limit_req %s" % (local, lr))
        else:
            notes.append("nginx a: local zone and limit_req both answered %s "
                         "after the upgrade (%s)"
                         % (local, "kept" if local == "429" else
                            "started afresh: nginx does not carry shared "
                            "memory over a binary upgrade"))
    return fails, notes


def answers_cell(answers):
    counts = {}
    for (_, _, status, decision), n in answers.items():
        key = "%s %s" % (status, SHORT.get(decision, decision))
        counts[key] = counts.get(key, 0) + n
    order = ["200 P", "429 R", "200 EA", "429 ED"]
    keys = [k for k in order if k in counts] + sorted(set(counts) - set(order))
    return ", ".join("%s %s" % (k, "{:,}".format(counts[k])) for k in keys)


def resume_cell(record):
    def worst(kind):
        vals = [v for k, v in record.items() if k.startswith("resume_" + kind)]
        if "never" in vals:
            return "never"
        return "%d" % max(int(v) for v in vals)
    return "%s / %s" % (worst("strict"), worst("async"))


def units_cell(answers, units, day_turned):
    if day_turned:
        return "-"
    got = admitted(answers)
    a = sum(got.get(e, 0) for e in EPOCHS)
    r = sum(units.get(e, 0) for e in EPOCHS)
    return "{:,} / {:,}".format(a, r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--phases", required=True)
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--redis-timeout-ms", type=int, required=True)
    ap.add_argument("--failover-timeout-ms", type=int, required=True,
                    help="the timeout of the cluster and Sentinel backends")
    ap.add_argument("--resume-ms", type=int, required=True)
    ap.add_argument("--day-turned", choices=["yes", "no"], default="no")
    ap.add_argument("--setup", default="")
    ap.add_argument("--docs", help="docs/reliability.md: its chaos section")
    ap.add_argument("--date")
    ap.add_argument("--commit")
    args = ap.parse_args()
    nodes = args.nodes.split()
    day_turned = args.day_turned == "yes"

    header = ["fault", "what was done", "requests", "answers", "slowest ms",
              "socket errors", "resumed ms (strict / async)",
              "async units (admitted / in Redis)", "verdict"]
    align = ["l", "l", "r", "l", "r", "r", "r", "r", "l"]
    rows, failures, notes = [], [], []
    for phase in args.phases.split():
        answers, summary, record, units, crashes = load_phase(args.raw, phase,
                                                              nodes)
        fails = check_answers(phase, answers, summary, record, crashes, args)
        fails += check_effect(phase, answers, record)
        fails += check_failover(phase, answers, record)
        unit_fails, unit_notes = check_units(phase, answers, units, day_turned)
        keep_fails, keep_notes = check_keep(phase, record, nodes)
        fails += unit_fails + keep_fails
        failures += ["%s: %s" % (phase, f) for f in fails]
        effect = effect_note(phase, answers, record)
        notes += ["%s: %s" % (phase, n) for n in
                  ([effect] if effect else []) + unit_notes + keep_notes]
        rows.append([phase, FAULTS[phase], "{:,}".format(summary["requests"]),
                     answers_cell(answers), "%.0f" % (summary["max_us"] / 1000),
                     "%d/%d/%d/%d" % (summary["connect"], summary["read"],
                                      summary["write"], summary["timeout"]),
                     resume_cell(record),
                     units_cell(answers, units, day_turned),
                     "FAILED" if fails else "ok"])

    legend = ("Answers: status and X-Throttle (P PASSED, R REJECTED, EA "
              "ERROR_ALLOWED, ED ERROR_DENIED). Socket errors: connect/read/"
              "write/timeout, as wrk counts them.")
    md, lists = report("chaos", (header, rows, align), legend, notes,
                       failures, args.markdown)
    if args.docs:
        write_section(args.docs, "chaos", doc_section(args, md, legend, lists))
    return 1 if failures else 0


DOC_TEXT = """\
## Chaos

`make chaos` (`scripts/chaos/run.sh`) runs two nginx (2 workers each) and one
Redis on loopback, and loads both nginx with wrk at full speed
(`scripts/lib/load.lua`: every request goes to the next of five
locations, over 20 keys each, so that limits bite). The locations use a
local, a strict (`throttle_on_error allow`, and `deny` at `/strict_deny`)
and an async zone of 20 r/s, and an async `fixed_window` zone no load
fills (*count*), whose count in Redis is every unit synced. The faults
come one after the other, each in a phase of its own; the first phase has
none. A phase runs the load 1.5 s, starts the fault, ends it, waits until
decisions come from Redis again, runs the load 1.5 s more and reads what
Redis holds.

Each phase must pass every check; the run exits non-zero otherwise:

- **no crash**: no worker `exited on signal`, no `[alert]` or `[emerg]`
  in the error logs;
- **no timeout, no slow answer**: no wrk timeout (2 s), and wrk's slowest
  answer within the Redis `timeout` (50 ms) + 0.5 s; no socket error
  either, but read errors during reloads and the upgrade (nginx closes
  idle keep-alive connections as a worker shuts down, and a request sent
  on one at that moment gets no answer: nginx's doing, with or without
  the module);
- **answers as the policy says**: at `/local`, `/async` and the count
  zone 200 `PASSED` or 429 `REJECTED`; at `/strict` also 200
  `ERROR_ALLOWED`, at `/strict_deny` 429 `ERROR_DENIED` (the `X-Throttle`
  header carries `$throttle_status`); nothing else, ever;
- **the fault took place**: strict answers met it (`ERROR_*` while Redis
  was stalled, down or full), Redis answered `NOSCRIPT` after the flush,
  `CLIENT KILL` closed connections, a new master took over;
- **decisions resume**: after the fault, on each nginx, three strict
  requests in a row for fresh keys are `PASSED` by Redis, and a unit
  charged to the count zone reaches Redis (`scripts/chaos/resume.py`);
  *resumed ms* is the slower nginx, from the end of the fault (Redis
  answering again after a restart), with the probes' own time;
- **async units kept**: requests carry the epoch they were sent in
  (before, during and after the fault), and so do the count zone's keys;
  for each epoch Redis must hold exactly the units nginx admitted, never
  more (charged twice), and fewer only where
  [modes.md](modes.md#when-redis-is-down) says units may be lost: those
  Redis held when it was killed (it runs without persistence), and a sync
  Redis had not yet read when it dropped the connection;
- **zones kept**: a key limited (1 r/m) just before the reloads is still
  limited after them in the local, strict and async zones and in a
  `limit_req` zone. After the binary upgrade the strict zone's key is
  still limited (its state is in Redis), the async one is limited again
  after a sync, and the local zone is compared with `limit_req`: nginx
  maps new shared memory in the new master, so both start afresh.

The last three phases load the same zones (under `/cluster/` and
`/sentinel/`, Redis `timeout` 250 ms) on a Redis Cluster of 3 masters
and 3 replicas (`cluster-node-timeout` 1000 ms) and on a master, its
replica and three Sentinels (`down-after-milliseconds` 1000), made by
`scripts/chaos/failover.sh`, and make them fail over: the master that
serves slot 0 killed, `SENTINEL FAILOVER`, the Sentinels' master killed.
The fault lasts until the cluster, or every Sentinel, names the new
master; resume.py then probes the killed master's slots (in the cluster)
and needs every worker of each nginx to decide again. On top of the
checks above:

- **ERROR_\* only in the gap**: none before the fault, none once
  decisions are back, and in the cluster none for the keys of the two
  masters still up (`X-Path` says which of the 20 hot keys have their
  slot on the killed master); a SIGKILL must show a gap;
- **decisions back in time**: from the start of the fault, within
  `cluster-node-timeout` + 2 s (3 s) in the cluster and 5 s with
  Sentinels, or within 1 s of the promotion when the cluster or the
  Sentinels took longer than that to promote the replica;
- **units lost** only as replication allows: what a killed master had not
  passed to its replica, and, after `SENTINEL FAILOVER`, the syncs the old
  master took between the replica's promotion and the Sentinels'
  `+switch-master` (on which the module leaves it): Sentinel does not stop
  the old master's writers, and that master drops what it took when it
  becomes a replica. Never more units than admitted.
"""


def doc_section(args, md, legend, lists):
    return (DOC_TEXT + "\nRun %s, with the module built from commit %s: %s."
            "\n\n%s\n\n%s\n\n%s" % (args.date or "on an unrecorded date",
                                  args.commit or "unknown", args.setup, md,
                                  legend, lists))


if __name__ == "__main__":
    sys.exit(main())
