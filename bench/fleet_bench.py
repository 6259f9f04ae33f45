# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the control plane at fleet scale (issue 24, "Scale"), loopback only.

One mock (a subprocess, as the role runs it) with its control-plane face serves a fleet of --vms
VMs in three subscriptions (zonal VMs and availability sets of 5, every scope publishing to
Resource Graph) and --events events, loaded as one scenario document. Then:
  1. fleet_event_info lists every Scheduled or Started event of the three subscriptions, all pages,
     under a Resource Graph quota small enough to be spent (429 with x-ms-user-quota-resets-after);
  2. fleet_event_approve acknowledges --approve of the Scheduled ones, while the mock answers some
     acknowledges 429 with Retry-After (its ARM faults) and the quota keeps throttling the read;
  3. baseline for the ratio: the same fleet read VM by VM, one scheduled_event_info run per VM
     against the IMDS face, measured on --sample VMs spread over the fleet and extrapolated to all.
Each module runs as Ansible runs it on a host: a Python process of its own, arguments in a file,
the result as JSON on stdout; its peak memory is the child's ru_maxrss (wait4). Requests and 429s
come from the mock's audit log. A fourth run, fleet_event_info on a subscription without events,
gives the module's fixed memory as a baseline. Prints figures and ratios; asserts nothing timed.
Usage:
  python bench/fleet_bench.py [--events 10000] [--vms 3000] [--approve 500] [--sample 20]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

try:
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("fleet_bench.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the "
             "import path)" % missing)

MODULES = "ansible_collections.azure_imds.scheduled_events.plugins.modules."
SUBSCRIPTIONS = ("11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222",
                 "33333333-3333-3333-3333-333333333333")
EMPTY_SUBSCRIPTION = "44444444-4444-4444-4444-444444444444"
PUBLISH = {"scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {
    "enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
CLIENT, SECRET, TENANT = "fleet-bench", "bench-secret", "bench-tenant"
SET_SIZE = 5
# Resource Graph's quota in the mock: this many queries per window (seconds of the mock's clock,
# which runs at real speed here) and principal. Azure's is 15 per 5 s; a smaller one makes a
# 10-page listing spend it.
GRAPH_QUOTA = 3
GRAPH_WINDOW = 1
# Acknowledges answered 429 with Retry-After (ARM throttling), per subscription.
THROTTLED_ACKS = 2
ACK_RETRY_AFTER = 1


def fleet_and_events(vm_count, event_count, started_share=4):
    """The scenario document: vm_count VMs over three subscriptions (two resource groups each;
    a fifth of each subscription's VMs in availability sets of 5, the rest zonal) and event_count
    events spread round robin over the VMs; every started_share-th event is Started, the rest
    Scheduled a week ahead (nothing moves during the run)."""
    groups, vms = [], []
    per_sub = vm_count // len(SUBSCRIPTIONS)
    for s, sub in enumerate(SUBSCRIPTIONS):
        in_sets = (per_sub // 5) // SET_SIZE * SET_SIZE
        for n in range(in_sets // SET_SIZE):
            names = ["s%davs%03d_%d" % (s, n, i) for i in range(SET_SIZE)]
            groups.append({"name": "s%d-avset%03d" % (s, n), "kind": "availability_set", "vms": names,
                           "subscription_id": sub, "resource_group": "rg-sets-%d" % s})
            vms += names
        names = ["s%dvm%04d" % (s, i) for i in range(per_sub - in_sets)]
        groups.append({"name": "s%d-zonal" % s, "kind": "zonal", "vms": names, "subscription_id": sub,
                       "resource_group": "rg-vms-%d" % s, "zones": ["1", "2", "3"]})
        vms += names
    fleet = {"default_vm": vms[0], "location": "westeurope", "scheduled_events_policy": PUBLISH, "groups": groups}
    events = []
    for i in range(event_count):
        event = {"event_id": str(uuid.UUID(int=i + 1)).upper(), "event_type": ("Reboot", "Redeploy", "Freeze")[i % 3],
                 "resources": [vms[i % len(vms)]]}
        if i % started_share == started_share - 1:
            event.update(status="Started", duration=7 * 86400)
        else:
            event.update(notice=7 * 86400)
        events.append(event)
    return {"name": "fleet_bench", "fleet": fleet, "events": events}, vms


# Runs each module process and reaps it with wait4. A process of its own, started before the bench
# holds anything large: a child's ru_maxrss counts the memory of the process it was forked from
# (Linux keeps the old image's high-water mark across exec), so forking from the bench after it
# parsed a 10,000-event result would report the bench's size, not the module's.
LAUNCHER = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    with open(job["out"], "wb") as out:
        started = time.monotonic()
        process = subprocess.Popen(job["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env=job["env"], cwd=job["cwd"])
        _pid, status, usage = os.wait4(process.pid, 0)
    sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "max_rss_kib": usage.ru_maxrss,
                                 "elapsed": time.monotonic() - started}) + "\n")
    sys.stdout.flush()
"""


class Launcher(object):
    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, universal_newlines=True)

    def run(self, argv, env, cwd, out):
        self.process.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": cwd, "out": out}) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait()


class Run(object):
    """One module run as a process: wall time, peak RSS (MiB), the parsed result."""

    def __init__(self, launcher, name, args, env):
        workdir = tempfile.mkdtemp(prefix="fleet-bench-")
        path = os.path.join(workdir, "args.json")
        with open(path, "w") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
        out_path = os.path.join(workdir, "out")
        done = launcher.run([sys.executable, "-m", MODULES + name, path], env, workdir, out_path)
        self.elapsed = done["elapsed"]
        self.max_rss_mib = done["max_rss_kib"] / 1024.0
        with open(out_path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            self.result = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.result = None
        if not isinstance(self.result, dict) or self.result.get("failed"):
            sys.exit("fleet_bench.py: %s failed (rc %s): %s" % (name, done["rc"], text[-2000:]))


def audit_since(mock, seq):
    """ARM requests of the audit log after seq, and the new last seq."""
    requests = mock.control("GET", "audit")["arm_requests"]
    new = [r for r in requests if r["seq"] > seq]
    return new, max([seq] + [r["seq"] for r in requests])


def describe(requests):
    kinds = {"graph": 0, "acknowledge": 0, "sign-in": 0, "other": 0}
    for r in requests:
        path = r["path"].lower()
        kind = ("graph" if "resourcegraph" in path else "acknowledge" if path.split("?")[0].endswith("/acknowledge")
                else "sign-in" if path.startswith("/login/") or path.startswith("/metadata/") else "other")
        kinds[kind] += 1
    throttled = [r for r in requests if r["status"] == 429]
    failed = [r for r in requests if r["status"] >= 400 and r["status"] != 429]
    return kinds, throttled, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--vms", type=int, default=3000, help="VMs over the three subscriptions (at most 4999)")
    parser.add_argument("--approve", type=int, default=500)
    parser.add_argument("--sample", type=int, default=20, help="VMs read one by one for the baseline")
    opts = parser.parse_args()
    scenario, vms = fleet_and_events(opts.vms, opts.events)
    workdir = tempfile.mkdtemp(prefix="fleet-bench-")
    scenario_path = os.path.join(workdir, "scenario.json")
    with open(scenario_path, "w") as handle:
        json.dump(scenario, handle)
    launcher = Launcher()
    started = time.monotonic()
    mock = spawn_mock(["--scenario", scenario_path, "--no-rate-limit", "--quiet"], timeout=120, arm=True)
    try:
        load_seconds = time.monotonic() - started
        mock.control("POST", "arm/principals", {"client_id": CLIENT, "secret": SECRET, "tenant": TENANT})
        for sub in SUBSCRIPTIONS:
            mock.control("POST", "arm/grants", {"principal": CLIENT, "role": "ScheduledEventContributor",
                                                "scope": "/subscriptions/" + sub})
        mock.control("POST", "arm/config", {"graph_quota": GRAPH_QUOTA, "graph_window": GRAPH_WINDOW})
        env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
        env["REQUESTS_CA_BUNDLE"] = mock.ca_path
        auth = {"auth_source": "env", "client_id": CLIENT, "secret": SECRET, "tenant": TENANT,
                "subscription_id": SUBSCRIPTIONS[0], "cloud_environment": mock.arm_url}
        print("fleet: %d VMs (%d in availability sets of %d), %d events in 3 subscriptions, loaded as one scenario "
              "in %.1f s" % (len(vms), sum(1 for v in vms if "avs" in v), SET_SIZE, len(scenario["events"]),
                             load_seconds))
        print("Resource Graph quota: %d queries per %d s; %d acknowledges per subscription answered 429 "
              "(Retry-After: %d)" % (GRAPH_QUOTA, GRAPH_WINDOW, THROTTLED_ACKS, ACK_RETRY_AFTER))
        print()

        seq = 0
        _skipped, seq = audit_since(mock, seq)
        listing = Run(launcher, "fleet_event_info", dict(auth, subscriptions=list(SUBSCRIPTIONS)), env)
        list_requests, seq = audit_since(mock, seq)
        events = listing.result["events"]
        scheduled = [e["id"] for e in events if e["event_status"] == "Scheduled"]
        step = max(1, len(scheduled) // max(1, opts.approve))
        chosen = scheduled[::step][:opts.approve]

        for sub in SUBSCRIPTIONS:
            mock.control("POST", "arm/faults", {"kind": "status", "status": 429, "code": "TooManyRequests",
                                                "retry_after": ACK_RETRY_AFTER, "count": THROTTLED_ACKS,
                                                "methods": ["POST"], "paths": ["/subscriptions/" + sub + "/"]})
        approving = Run(launcher, "fleet_event_approve", dict(auth, ids=chosen), env)
        approve_requests, seq = audit_since(mock, seq)
        approved = approving.result["approved"]

        empty = Run(launcher, "fleet_event_info", dict(auth, subscriptions=[EMPTY_SUBSCRIPTION]), env)
        _skipped, seq = audit_since(mock, seq)

        # The baseline: VM by VM through IMDS, on a sample spread over the fleet.
        sample = [vms[int(i * len(vms) / opts.sample)] for i in range(opts.sample)]
        per_vm, per_vm_requests, seen = [], 0, set()
        before = len(mock.control("GET", "audit")["requests"])
        for vm in sample:
            run = Run(launcher, "scheduled_event_info", {"imds_url": mock.vm_url(vm), "resource_name": vm}, env)
            per_vm.append(run)
            seen.update(e["event_id"] for e in run.result["events"])
        per_vm_requests = len(mock.control("GET", "audit")["requests"]) - before
    finally:
        mock.stop()
        launcher.close()
        shutil.rmtree(workdir, ignore_errors=True)

    def row(label, run, requests, extra=""):
        kinds, throttled, failed = describe(requests)
        print("%-22s %8.1f %9d %6d %6d %10.1f  %s" % (
            label, run.elapsed, len(requests), kinds["graph"], kinds["acknowledge"], run.max_rss_mib,
            "%d x 429 honoured%s%s" % (len(throttled), ", %d other errors" % len(failed) if failed else "", extra)))
        return throttled

    print("%-22s %8s %9s %6s %6s %10s" % ("run", "wall_s", "requests", "graph", "acks", "peak_MiB"))
    row("fleet_event_info", listing, list_requests, "; %d events listed" % len(events))
    row("fleet_event_approve", approving, approve_requests,
        "; %d approved, %d already" % (len(approved), len(approving.result["already"])))
    print("%-22s %8.1f %9s %6s %6s %10.1f  (baseline: the module's fixed memory)" % (
        "fleet_event_info, empty", empty.elapsed, "", "", "", empty.max_rss_mib))
    mean = sum(r.elapsed for r in per_vm) / len(per_vm)
    peak = max(r.max_rss_mib for r in per_vm)
    vm_by_vm = mean * len(vms)
    print("%-22s %8.1f %9d %6s %6s %10.1f  measured on %d of %d VMs (mean %.2f s, %.1f requests per VM), "
          "extrapolated" % ("scheduled_event_info", vm_by_vm, round(per_vm_requests / float(len(per_vm)) * len(vms)),
                            "", "", peak, len(per_vm), len(vms), mean, per_vm_requests / float(len(per_vm))))
    print()
    print("ratio listing / VM by VM, wall time:  %.4f  (%.1f s against %.0f s)" % (
        listing.elapsed / vm_by_vm, listing.elapsed, vm_by_vm))
    print("ratio listing / VM by VM, requests:   %.4f" % (
        len(list_requests) / (per_vm_requests / float(len(per_vm)) * len(vms))))
    print("listing's peak memory over the module's fixed memory: %.1f MiB for %d events (ratio %.2f)" % (
        listing.max_rss_mib - empty.max_rss_mib, len(events), listing.max_rss_mib / empty.max_rss_mib))
    print("events the sample's VMs saw in IMDS: %d (of them in the listing: %d)" % (
        len(seen), len(seen & set(e["event_id"] for e in events))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
