# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: latency of the Event Grid path (source azure_imds.scheduled_events.event_grid) beside the
IMDS source's (azure_imds.scheduled_events.scheduled_events), in one run, loopback only.

One mock (its control-plane face on, a fleet whose scope publishes to Event Grid) serves both, one
after the other, each under its own ansible-rulebook (Java, drools, ansible-runner) whose rule runs a
one-task playbook for each scheduled event (bench/eda_latency.py's rulebook, callback and timing):
  1. IMDS: the source polls the VM's document every second (this_host_only, poll_interval 1);
  2. Event Grid: the source serves HTTPS (the mock's server certificate, secret in ?code=); the mock
     delivers to it as Event Grid delivers to a subscription's webhook (Event Grid schema, one
     event a delivery).
--events times (10) each, the bench adds a Reboot for the VM through the mock's control API and
waits for the playbook's first task before the next. Measured from just before that control call,
and from the event's appearance in the mock's audit (its transition, millisecond stamps), to the
source's log line and to the start of the playbook's first task. Prints median, min and max; for
Event Grid also when the mock's audit shows the delivery answered.

The mock's delivery thread is woken when a notification is queued, so an event added through the
control API is sent at once; a transition that falls due as the mock's time passes (NotBefore
reached, say) waits for the thread's next 50 ms tick: 0 to 50 ms (25 ms on average) of the mock's
own pacing, not measured here. Azure's own delay from a change to Event Grid's delivery is not in
these figures (Microsoft does not state it). Prints figures; asserts nothing timed. Usage:
  tests/harness/loopback-only .venv/bin/python bench/event_grid_latency.py [--events 10]
"""

import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time

try:
    from ansible_collections.azure_imds.scheduled_events.bench import eda_latency
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("event_grid_latency.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the "
             "import path)" % missing)

SECRET = "event-grid-latency-bench-secret"
PUBLISH = {"scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {
    "enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
FLEET = {"default_vm": eda_latency.VM, "scheduled_events_policy": PUBLISH,
         "groups": [{"name": "web", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def delivered_at(mock, event_id):
    """When the mock's audit shows the event's first notification answered 200 by the source."""
    for record in mock.eventgrid_deliveries():
        if event_id in record["event_ids"] and record["outcome"] == "delivered":
            return eda_latency.audit_time(record["time"])
    return None


def measure(mock, workdir, source, ready, seen_line, events, subscribe=None):
    """One ansible-rulebook on the source; once ready is in its log (and subscribe() done), events
    timed as eda_latency.timed_events does."""
    eda_latency.write_files(workdir, source)
    env = eda_latency.environment(workdir, mock)
    engine = eda_latency.Engine(workdir, env)
    try:
        # Until the rule engine's session is up, the engine's start holds the event loop that the
        # source runs in: measured from then on, the figures are the steady state.
        eda_latency.wait_for("the source and the rule engine to start",
                             lambda: ready in engine.log() and "Waiting for events, ruleset" in engine.log())
        if subscribe is not None:
            subscribe()
        return eda_latency.timed_events(mock, engine, env, events, seen_line)
    finally:
        engine.stop()


def spread(values):
    return "median %.2f s, min %.2f s, max %.2f s" % (statistics.median(values), min(values), max(values))


def report(name, figures, extra=None):
    print("%s, %d events:" % (name, len(figures)))
    print("  control call -> playbook's first task:        %s" % spread([f[3] - f[0] for f in figures]))
    print("  event in the mock's audit -> first task:      %s" % spread([f[3] - f[1] for f in figures]))
    print("  control call -> the source's log line:        %s" % spread([f[2] - f[0] for f in figures]))
    if extra:
        print("  control call -> the mock's delivery answered: %s" % spread(extra))
    print("  each (source's line, first task): %s" % ", ".join("%.2f/%.2f" % (f[2] - f[0], f[3] - f[0]) for f in figures))


def main():
    options = eda_latency.command_line("event_grid_latency", __doc__)
    workdir = tempfile.mkdtemp(prefix="event_grid_latency_")
    fleet_file = os.path.join(workdir, "fleet.json")
    with open(fleet_file, "w") as handle:
        json.dump(FLEET, handle)
    load = os.getloadavg()[0]
    mock = spawn_mock(["--fleet", fleet_file, "--quiet"], arm=True)
    try:
        imds = measure(mock, os.path.join(workdir, "imds"), eda_latency.RULEBOOK[0]["sources"][0],
                       "scheduled_events: watching", "scheduled_events: scheduled %s (Reboot)", options.events)
        port = free_port()
        tls = os.path.dirname(mock.ca_path)
        source = {"name": "The Event Grid subscription's webhook", "azure_imds.scheduled_events.event_grid": {
            "host": "127.0.0.1", "port": port, "path": "/eventgrid", "secret": [SECRET],
            "certfile": os.path.join(tls, "server.pem"), "keyfile": os.path.join(tls, "server-key.pem")}}

        def subscribe():
            mock.add_eventgrid_subscriber("https://127.0.0.1:%d/eventgrid?code=%s" % (port, SECRET),
                                          ca_file=mock.ca_path, name="bench")
        grid = measure(mock, os.path.join(workdir, "event_grid"), source, "event_grid: listening on",
                       "event_grid: scheduled '%s' ('Reboot')", options.events, subscribe)
        answered = [delivered_at(mock, figure[4]) - figure[0] for figure in grid]
    finally:
        mock.stop()
        if os.environ.get("EDA_BENCH_KEEP") is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report("IMDS source (poll interval %g s), event -> playbook" % eda_latency.POLL_INTERVAL, imds)
    report("Event Grid source (the mock's delivery over HTTPS), event -> playbook", grid, answered)
    print("  of which the mock's delivery pacing: 0 s on this path (a queued notification wakes its delivery thread);"
          " a transition due as time passes waits up to 50 ms (its tick), 25 ms on average")
    print("  not included: Azure's own delay from a change to Event Grid's delivery (Microsoft does not state it)")
    print("median Event Grid / IMDS, control call -> first task: %.2f s / %.2f s (%s; load average %.1f before, %.1f after,"
          " on %d cores)" % (statistics.median([f[3] - f[0] for f in grid]), statistics.median([f[3] - f[0] for f in imds]),
                             time.strftime("%Y-%m-%d"), load, os.getloadavg()[0], os.cpu_count()))


if __name__ == "__main__":
    main()
