# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the watcher daemon (roles/watcher/files/scheduled_events_watcher/), loopback only.

Runs the real daemon (`run`, as the service does) against the mock IMDS (a subprocess), and:
  1. reaction: --events events, one at a time, each created at a random moment of the poll cycle:
     from the event's creation in the mock to the start of the first drain handler, and from the
     last drain handler's exit to the approval's arrival at the mock (the mock's audit log);
  2. footprint: --soak-seconds of idle polling: the daemon's resident memory (peak VmRSS) and CPU
     time, and its request rate as the mock's audit counts it;
  3. metrics: --metrics-soak-seconds of idle polling by a fresh daemon without metrics, then by one
     with them on (the textfile written at every poll and /metrics served on 127.0.0.1, scraped
     every --scrape-interval seconds): CPU and peak RSS of each, and the ratio on/off.
Baselines measured in the same run: the IMDS round trip of the shared client against the mock, and
the resident memory of a bare Python interpreter. Prints figures, targets and ratios; asserts
nothing.

    python3 bench/watcher_bench.py                                 # about 12 min
    python3 bench/watcher_bench.py --events 30 --soak-seconds 30   # about 2.5 min
    python3 bench/watcher_bench.py --metrics-only                  # about 2 min
"""

import argparse
import calendar
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The daemon as the service runs it (python3 -m scheduled_events_watcher), by the collection's name:
# tests/harness/loopback-only (make bench) puts this checkout on PYTHONPATH, which the daemon inherits.
DAEMON = [sys.executable, "-m", "ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher"]

try:
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _imds
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("watcher_bench.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the import path)" % missing)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

DRAIN = """#!/bin/sh
date +%s.%N > "{marks}/$SE_EVENT_ID.start"
date +%s.%N > "{marks}/$SE_EVENT_ID.end"
"""
RECOVER = """#!/bin/sh
: > "{marks}/$SE_EVENT_ID.recovered"
"""


def audit_epoch(iso):
    base, millis = iso.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(millis) / 1000.0


def percentile(values, fraction):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def read_float(path):
    with open(path) as handle:
        return float(handle.read().strip())


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise RuntimeError("timed out after %ss waiting for %s" % (timeout, what))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(CLOCK_TICKS)


def setup(workdir, url, interval, **extra):
    marks = os.path.join(workdir, "marks")
    handlers = os.path.join(workdir, "handlers")
    for path in (marks, os.path.join(handlers, "drain"), os.path.join(handlers, "recover")):
        os.makedirs(path)
    for phase, body in (("drain", DRAIN), ("recover", RECOVER)):
        path = os.path.join(handlers, phase, "10-mark")
        with open(path, "w") as handle:
            handle.write(body.format(marks=marks))
        os.chmod(path, 0o755)
    config = os.path.join(workdir, "config.json")
    with open(config, "w") as handle:
        json.dump(dict({"imds_url": url, "state_dir": os.path.join(workdir, "state"), "handlers_dir": handlers,
                        "poll_interval": interval}, **extra), handle)
    return config, marks


def baseline_round_trip(url, count=12):
    """Median time of one keep-alive GET through the shared client (paced under the 5/s limit)."""
    client = _imds.ImdsClient(base_url=url, retry_timeout=0)
    client.get_scheduled_events()
    times = []
    for dummy in range(count):
        time.sleep(0.25)
        start = time.perf_counter()
        client.get_scheduled_events()
        times.append(time.perf_counter() - start)
    client.close()
    return statistics.median(times)


def baseline_rss():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        return rss_kib(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def last_poll(mock, vm, since):
    """(arrival time of the daemon's latest GET, audit position)."""
    audit = mock.control("GET", "audit?vm=%s&since=%d" % (vm, since))
    gets = [r for r in audit["requests"] if r["method"] == "GET"]
    return (audit_epoch(gets[-1]["time"]) if gets else None), audit["last_seq"]


def reaction(mock, vm, marks, events, interval):
    """Each event is created a chosen time d before one of the daemon's polls (read from the mock's
    audit), with d spread evenly over the poll interval: the figures are those of events arriving
    uniformly over the poll cycle, without the sampling noise of random arrival times. The
    daemon's own share is what it adds after the poll that sees the event."""
    to_start, to_approval, overhead = [], [], []
    offsets = [(k + 0.5) / events * interval for k in range(events)]
    random.shuffle(offsets)
    seen, since = None, 0
    for number, offset in enumerate(offsets):
        while seen is None:
            seen, since = last_poll(mock, vm, since)
        poll_at = seen + interval
        while poll_at - offset < time.time() + 0.02:
            poll_at += interval
        time.sleep(poll_at - offset - time.time())
        created = time.time()
        event_id = mock.control("POST", "events", {"event_type": "Reboot", "resources": [vm], "notice": 900,
                                                   "duration": 0})["event_id"]
        start_file = os.path.join(marks, event_id + ".start")
        end_file = os.path.join(marks, event_id + ".end")
        wait_for(lambda: os.path.exists(end_file) and os.path.getsize(end_file) > 0, 30, "the drain of %s" % event_id)

        def approval():
            for item in mock.control("GET", "audit?vm=%s&since=%d" % (vm, since))["approvals"]:
                if event_id in item["event_ids"]:
                    return audit_epoch(item["time"])
            return None

        approved = wait_for(approval, 30, "the approval of %s" % event_id)
        started = read_float(start_file)
        to_start.append(started - created)
        overhead.append(started - poll_at)
        to_approval.append(approved - read_float(end_file))
        wait_for(lambda: os.path.exists(os.path.join(marks, event_id + ".recovered")), 30,
                 "the recover of %s" % event_id)
        seen, since = last_poll(mock, vm, since)
        if (number + 1) % 10 == 0:
            print("  %d/%d events" % (number + 1, events), flush=True)
    return to_start, to_approval, overhead


def soak(mock, vm, pid, seconds, every_second=None):
    since = mock.control("GET", "audit?vm=%s" % vm)["last_seq"]
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    peak = rss_kib(pid)
    while time.monotonic() - wall_before < seconds:
        time.sleep(min(1.0, seconds))
        peak = max(peak, rss_kib(pid))
        if every_second is not None:
            every_second()
    elapsed = time.monotonic() - wall_before
    cpu = cpu_seconds(pid) - cpu_before
    requests = len(mock.control("GET", "audit?vm=%s&since=%d" % (vm, since))["requests"])
    return peak, cpu / elapsed, requests / elapsed, elapsed


def start_daemon(workdir, config):
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    env.pop("NOTIFY_SOCKET", None)
    with open(os.path.join(workdir, "watcher.log"), "wb") as log:
        daemon = subprocess.Popen(DAEMON + ["run", "--config", config], stdout=log,
                                  stderr=subprocess.STDOUT, env=env)
    wait_for(lambda: os.path.exists(os.path.join(workdir, "state", "state.json")), 30, "the watcher to start")
    return daemon


def metrics_footprint(mock, vm, workdir, interval, seconds, scrape_interval):
    """{off|on: (peak RSS KiB, CPU share, requests/s)}: one fresh daemon each, one after the other."""
    figures = {}
    for name in ("off", "on"):
        directory = os.path.join(workdir, "metrics-" + name)
        os.makedirs(directory)
        extra, scrape = {}, None
        if name == "on":
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            extra = {"metrics_textfile": os.path.join(directory, "azure_imds_watcher.prom"), "metrics_port": port}
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            ticks = {"n": 0}

            def scrape():
                ticks["n"] += 1
                if ticks["n"] % max(1, int(scrape_interval)) == 0:
                    opener.open("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
        config = setup(directory, mock.vm_url(vm), interval, **extra)[0]
        daemon = start_daemon(directory, config)
        try:
            peak, cpu_share, rate, _elapsed = soak(mock, vm, daemon.pid, seconds, scrape)
        finally:
            daemon.terminate()
            daemon.wait(30)
        figures[name] = (peak, cpu_share, rate)
    return figures


def print_metrics_footprint(figures, seconds, scrape_interval):
    print()
    print("metrics off vs on (%gs of idle polling each; on: textfile every poll, /metrics scraped every %gs)"
          % (seconds, scrape_interval))
    print("%-40s %10s %10s %7s" % ("figure", "off", "on", "ratio"))
    rows = [("resident memory (peak VmRSS), MB", figures["off"][0] / 1024.0, figures["on"][0] / 1024.0),
            ("CPU, % of a core", figures["off"][1] * 100, figures["on"][1] * 100),
            ("requests per second (mock audit)", figures["off"][2], figures["on"][2])]
    for name, off, on in rows:
        print("%-40s %10.2f %10.2f %7.2f" % (name, off, on, on / off if off else float("nan")))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100, help="events for the reaction figures (default 100)")
    parser.add_argument("--soak-seconds", type=float, default=300.0, help="idle polling to measure (default 300)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="the daemon's poll_interval (default 1)")
    parser.add_argument("--metrics-soak-seconds", type=float, default=60.0,
                        help="idle polling per daemon for metrics off vs on (default 60)")
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="seconds between /metrics scrapes "
                        "(default 15, Prometheus's usual)")
    parser.add_argument("--metrics-only", action="store_true", help="only the metrics off vs on figures")
    args = parser.parse_args(argv)
    interval = args.poll_interval
    workdir = tempfile.mkdtemp(prefix="watcher_bench_")
    vm = "vm0"
    if args.metrics_only:
        with spawn_mock(["--quiet"]) as mock:
            figures = metrics_footprint(mock, vm, workdir, interval, args.metrics_soak_seconds, args.scrape_interval)
        shutil.rmtree(workdir, ignore_errors=True)
        print_metrics_footprint(figures, args.metrics_soak_seconds, args.scrape_interval)
        return 0
    with spawn_mock(["--quiet"]) as mock:
        config, marks = setup(workdir, mock.vm_url(vm), interval)
        print("baseline: IMDS round trip of the shared client against the mock: median %.2f ms"
              % (baseline_round_trip(mock.vm_url("vm0")) * 1000))
        bare_rss = baseline_rss()
        print("baseline: resident memory of a bare Python interpreter: %.1f MB" % (bare_rss / 1024.0))
        daemon = start_daemon(workdir, config)
        try:
            print("reaction: %d events, poll interval %gs" % (args.events, interval), flush=True)
            to_start, to_approval, overhead = reaction(mock, vm, marks, args.events, interval)
            print("soak: %gs of idle polling" % args.soak_seconds, flush=True)
            peak, cpu_share, rate, elapsed = soak(mock, vm, daemon.pid, args.soak_seconds)
        finally:
            daemon.terminate()
            daemon.wait(30)
        print("metrics: off vs on, %gs each" % args.metrics_soak_seconds, flush=True)
        figures = metrics_footprint(mock, vm, workdir, interval, args.metrics_soak_seconds, args.scrape_interval)
    shutil.rmtree(workdir, ignore_errors=True)

    start_median, start_p99 = statistics.median(to_start), percentile(to_start, 0.99)
    approval_median, approval_p99 = statistics.median(to_approval), percentile(to_approval, 0.99)
    targets = [
        ("event shown -> first drain handler starts, median", start_median * 1000, (interval / 2 + 0.05) * 1000, "ms"),
        ("event shown -> first drain handler starts, p99", start_p99 * 1000, (interval + 0.1) * 1000, "ms"),
        ("last drain handler exits -> approval at the mock, median", approval_median * 1000, 100.0, "ms"),
        ("last drain handler exits -> approval at the mock, p99", approval_p99 * 1000, 100.0, "ms"),
        ("resident memory (peak VmRSS)", peak / 1024.0, 25.0, "MB"),
        ("CPU over %.0fs of polling" % elapsed, cpu_share * 100, 1.0, "% of a core"),
        ("requests per second (mock audit)", rate, 1.0, "req/s"),
    ]
    print()
    print("%-58s %10s %10s %7s" % ("figure", "measured", "target", "ratio"))
    for name, value, target, unit in targets:
        print("%-58s %10.2f %10.2f %7.2f  %s" % (name, value, target, value / target, unit))
    share = (statistics.median(overhead) * 1000, percentile(overhead, 0.99) * 1000, max(overhead) * 1000)
    print("daemon's own share of the drain start (after the poll that sees the event): median %.1f ms, "
          "p99 %.1f ms, max %.1f ms" % share)
    extra = ((peak - bare_rss) / 1024.0, peak / float(bare_rss))
    print("resident memory over a bare interpreter: %.1f MB (ratio %.2f)" % extra)
    held = all(row[1] <= row[2] for row in targets)
    print("all targets %s" % ("hold" if held else "DO NOT hold"))
    print_metrics_footprint(figures, args.metrics_soak_seconds, args.scrape_interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
