# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The central Event Grid path end to end: the mock delivers like Event Grid (handshake, batches,
duplicates, retries on its clock) to the event_grid source over HTTPS with the mock's test CA, and

- the real ansible-rulebook runs central_event_grid.yml: one AWX job (the stand-in of awx_standin.py
  records launches) per scheduled event, never one per delivery, duplicate, status or VM;
- the real ansible-rulebook runs central_event_grid_playbook.yml: one run of the fleet_maintenance
  playbook for a scale set's Reboot delivered twice, signed in as AWX's Azure credential (AZURE_*
  variables) against the mock's Resource Manager; its drain, recover and health tasks mark each step
  with a request to the mock's IMDS face, so one audit sequence orders them among the acknowledge
  call and the event's transitions;
- the source alone (in this process, on its own event loop in a thread, so that it can be stopped
  and started again on the same port): both schemas' handshakes, a stale secret refused, a stopped
  receiver retried until it answers, and nothing lost: every notification the mock's audit shows
  delivered is on the rulebook's queue exactly once.

Time is the mock's (a FakeClock moved by /_mock/time/advance); the tests wait on the mock's audit
and the engine's output, never on real seconds."""

import asyncio
import copy
import json
import os
import re
import ssl
import threading
import urllib.request
import uuid

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
    FakeClock,
    MockControlError,
    start_mock,
)
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import AWX_ENV, PUBLISH, SUB1, set_up
from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import (
    PLAYBOOK_TIMEOUT,
    ROOT,
    wait_until,
)
from ansible_collections.azure_imds.scheduled_events.tests.unit.mock_imds.test_event_grid_delivery import Receiver
from ansible_collections.azure_imds.scheduled_events.tests.unit.playbooks.test_fleet_maintenance import (
    MARK, acks_of, seq_of, steps, transitions)

from .awx_standin import AwxStandIn
from .test_event_source import run_path

SOURCE = run_path(os.path.join(ROOT, "extensions", "eda", "plugins", "event_source", "event_grid.py"))
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-fleet", "location": "eastus", "scheduled_events_policy": PUBLISH,
    "groups": [{"name": "web-ss", "kind": "scale_set", "vms": ["web-ss_0", "web-ss_1", "web-ss_2"]}],
}
# Named as Azure names a scale set's instances (<set>_<instance id>).
VMS = ["web-ss_0", "web-ss_1", "web-ss_2"]
SECRET = "central-event-grid-secret-0123456789abcdef"
OLD_SECRET = "central-event-grid-secret-rotated-out-0000"
TEMPLATE = "Azure scheduled events - fleet maintenance"
JOB_RULE = "One fleet maintenance job per scheduled event"
ENGINE_PORT = 28631
PLAYBOOK_ENGINE_PORT = 28632
PLAYBOOK_RULE = "One fleet maintenance run per scheduled event"
MAINTENANCE_PLAY = "PLAY [Fleet maintenance driven by Azure scheduled events, from the controller]"
LIMIT = 60.0  # real seconds: a bound on a hung test only, never waited in a passing one


@pytest.fixture
def mock(tmp_path):
    handle = start_mock(arm=True, clock=FakeClock(), rate_limit=False, fleet=FLEET, tls_dir=str(tmp_path / "tls"),
                        start_time="2026-03-02T10:00:00Z")
    yield handle
    handle.control("DELETE", "eventgrid/subscribers")
    handle.stop()


def tls_files(mock):
    """The mock's server certificate (for 127.0.0.1, signed by its test CA): the source's certfile, keyfile."""
    return os.path.join(mock.mock.tls_dir, "server.pem"), os.path.join(mock.mock.tls_dir, "server-key.pem")


def add_event(mock, resources, event_type="Reboot", **spec):
    spec.update(event_type=event_type, resources=list(resources))
    return mock.control("POST", "events", spec)["event_id"]


def advance(mock, seconds):
    mock.control("POST", "time/advance", {"seconds": seconds})


def delivered(records):
    """(Event Grid id, EventId, status) of each notification delivered, duplicate copies included."""
    return [(i, e, s) for r in records if r["kind"] == "notification" and r["outcome"] == "delivered"
            for i, e, s in zip(r["ids"], r["event_ids"], r["statuses"])]


def wait_delivered(mock, sid, count):
    """Wait until count notifications (not deliveries: a batch carries several) reached sid."""
    wait_until("%d notifications delivered to %s" % (count, sid),
               lambda: len(delivered(mock.eventgrid_deliveries(subscriber=sid))) >= count, LIMIT,
               describe=lambda: json.dumps(mock.eventgrid_deliveries(subscriber=sid))[:4000])


def generated(records):
    """Every notification the mock tried to deliver, once: {Event Grid id: (EventId, status)}."""
    return dict((i, (e, s)) for r in records if r["kind"] == "notification"
                for i, e, s in zip(r["ids"], r["event_ids"], r["statuses"]))


# -- the real ansible-rulebook with central_event_grid.yml ---------------------------------------

def posted(run):
    """The Event Grid ids of the events the engine posted to the ruleset (ansible-rulebook -vv)."""
    return re.findall(r"Posting data to ruleset .*'event_grid': \{'id': '([0-9a-fA-F-]+)'", run.output)


def launched_event_ids(awx):
    return [body["extra_vars"]["fleet_maintenance_event"]["event_id"] for _name, body in awx.launched()]


def resend_with_a_new_id(url, ca_path, body):
    """Event Grid's notification of an event, again, with another Event Grid id: what a source whose
    memory of ids was lost (a restart without dedup_file) would queue once more."""
    again = copy.deepcopy(body)
    again[0]["id"] = str(uuid.uuid4())
    request = urllib.request.Request(url, data=json.dumps(again).encode("utf-8"), method="POST", headers={
        "Content-Type": "application/json", "aeg-event-type": "Notification", "aeg-delivery-count": "0"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca_path)))
    with opener.open(request, timeout=LIMIT) as answer:
        return answer.status, json.loads(answer.read().decode("utf-8")), again[0]["id"]


def start_central(mock, rulebook, name, hosts, port, env=None, args=()):
    """ansible-rulebook on the rulebook name, its event_grid source serving HTTPS on port with the
    mock's server certificate; once it listens, the URL of its webhook with the secret."""
    certfile, keyfile = tls_files(mock)
    run = rulebook(name, hosts, variables={
        "central_event_grid_host": "127.0.0.1", "central_event_grid_port": port,
        "central_event_grid_secret": [SECRET], "central_event_grid_certfile": certfile,
        "central_event_grid_keyfile": keyfile,
    }, env=env, args=args)
    run.wait_for(r"event_grid: listening on https://127\.0\.0\.1:%d/eventgrid \(secret checked" % port)
    return run, "https://127.0.0.1:%d/eventgrid?code=%s" % (port, SECRET)


def test_central_event_grid_runs_one_job_template_per_event(mock, rulebook):
    awx = AwxStandIn(SECRET, [TEMPLATE, "Another template"]).start()
    recorder = Receiver()
    try:
        run, url = start_central(mock, rulebook, "central_event_grid.yml", dict((vm, {}) for vm in VMS), ENGINE_PORT,
                                 args=["--controller-url", awx.url, "--controller-token", SECRET])
        sid = mock.add_eventgrid_subscriber(url, ca_file=mock.ca_path, max_events_per_batch=10, name="fleet-hook")["id"]
        # A second subscription records the bodies Event Grid sends (for the resend below).
        recorder_sid = mock.add_eventgrid_subscriber(recorder.url(), name="recorder")["id"]

        # A Reboot of the whole scale set (one EventId for its three VMs), its notification sent twice.
        mock.control("POST", "eventgrid/duplicate", {"count": 1})
        reboot = add_event(mock, VMS, notice=600, duration=300)
        mock.wait_eventgrid(2, sid, outcome="delivered")
        # Two events that appear together: one delivery of both (max_events_per_batch 10).
        freeze = add_event(mock, [VMS[0]], "Freeze", at=60, notice=300, duration=60, duration_in_seconds=30)
        redeploy = add_event(mock, [VMS[2]], "Redeploy", at=60, notice=300, duration=60)
        advance(mock, 60)
        batch = mock.wait_eventgrid(3, sid, outcome="delivered")[2]
        assert (batch["event_ids"], batch["statuses"]) == ([freeze, redeploy], ["Scheduled", "Scheduled"])
        # The Reboot's Scheduled notification once more under a new Event Grid id: the source cannot
        # tell it from a new notification, the rulebook's throttle keeps it from a second job.
        mock.wait_eventgrid(1, recorder_sid, outcome="delivered")
        [first] = [r["body"] for r in recorder.notifications() if r["body"][0]["data"]["resourceInfo"]["name"] == reboot][:1]
        status, answer, resent_id = resend_with_a_new_id(url, mock.ca_path, first)
        assert (status, answer) == (200, {"queued": 1, "duplicates": 0, "skipped": 0})
        # Every event starts and completes: more notifications, no more jobs.
        advance(mock, 600)
        advance(mock, 300)
        # A last event: once its job is launched, everything before it has been through the rule.
        last = add_event(mock, [VMS[1]], "Redeploy", notice=600)
        wait_until("the job of the last event", lambda: last in launched_event_ids(awx), PLAYBOOK_TIMEOUT,
                   describe=run.tail)
        records = mock.eventgrid_deliveries(subscriber=sid)
        output = run.stop()
    finally:
        awx.stop()
        recorder.close()

    # Exactly one job per event, in the order the events were scheduled.
    assert launched_event_ids(awx) == [reboot, freeze, redeploy, last], run.tail()
    assert [name for name, _body in awx.launches] == [TEMPLATE] * 4
    _name, body = awx.launches[0]
    event = body["extra_vars"]["fleet_maintenance_event"]
    assert (event["event_type"], event["event_status"], event["resources"]) == ("Reboot", "Scheduled", VMS)
    scale_set = "/subscriptions/%s/resourceGroups/rg-fleet/providers/Microsoft.Compute/virtualMachineScaleSets/web-ss" % SUB1
    assert event["scope_id"] == scale_set
    assert event["virtual_machine_ids"] == [scale_set + "/virtualMachines/%d" % n for n in range(3)]
    eda = body["extra_vars"]["ansible_eda"]
    assert eda["rule"] == JOB_RULE and eda["event"]["type"] == "scheduled"
    assert eda["event"]["scheduled_event"] == event
    assert eda["event"]["event_grid"]["schema"] == "EventGridSchema"
    assert eda["event"]["event_grid"]["eventType"] == "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"

    # The mock's audit: every notification answered 200 at the first attempt, the duplicate too.
    sent = delivered(records)
    assert all(r["attempt"] == 1 and r["status"] == 200 for r in records if r["kind"] == "notification")
    statuses = sorted((e, s) for _i, e, s in sent)
    every = [(e, s) for e in (reboot, freeze, redeploy) for s in ("Scheduled", "Started", "Completed")]
    assert statuses == sorted([(reboot, "Scheduled")] + every + [(last, "Scheduled")])
    # Nothing lost, nothing twice: each Event Grid id reached the rules once (the duplicate copy
    # was dropped by the source), and so did the resent one.
    ids = [i for i, _e, _s in sent]
    assert len(set(ids)) == len(ids) - 1
    assert sorted(posted(run)) == sorted(set(ids) | {resent_id}), run.tail()
    assert "was queued before" in output and "dropped as a duplicate" in output
    # Five Scheduled notifications matched the rule (one of them resent); four jobs.
    assert output.count("Calling rule %s in session" % JOB_RULE) == 4, run.tail()
    assert output.count("Creating action task action::run_job_template::") == 4


def test_central_event_grid_playbook_runs_fleet_maintenance_once_per_event(mock, rulebook, tmp_path):
    set_up(mock, subscriptions=(SUB1,))
    files = {}
    for step in ("drain", "recover", "health"):
        path = tmp_path / ("%s.yml" % step)
        path.write_text("---" + MARK.format(step=step, extra=""))
        files["fleet_maintenance_%s_tasks" % step] = str(path)
    # The hosts are named as their VMs; each marks its steps as a request of its VM to the IMDS face.
    hosts = dict((vm, dict(files, mark_vm=vm, mock_url=mock.url)) for vm in VMS)
    env = dict(AWX_ENV, AZURE_CLOUD_ENVIRONMENT=mock.arm_url, REQUESTS_CA_BUNDLE=mock.ca_path)
    run, url = start_central(mock, rulebook, "central_event_grid_playbook.yml", hosts, PLAYBOOK_ENGINE_PORT, env=env)
    sid = mock.add_eventgrid_subscriber(url, ca_file=mock.ca_path, name="fleet-hook")["id"]
    since = mock.control("GET", "audit")["last_seq"]

    # A Reboot of the whole scale set, its Scheduled notification sent twice. It lasts 0 seconds of
    # the mock's time once approved: the first read of Resource Graph after the approval shows it
    # Completed, so nothing waits.
    mock.control("POST", "eventgrid/duplicate", {"count": 1})
    reboot = add_event(mock, VMS, notice=600, duration=0)
    run.wait_for(r"^PLAY RECAP", timeout=PLAYBOOK_TIMEOUT)
    # Scheduled twice, Started, Completed: every notification delivered and through the rules.
    wait_delivered(mock, sid, 4)
    records = mock.eventgrid_deliveries(subscriber=sid)
    ids = set(i for i, _e, _s in delivered(records))
    wait_until("every notification posted to the rules", lambda: set(posted(run)) >= ids, LIMIT, describe=run.tail)
    output = run.stop()

    # One playbook run: the duplicate was dropped by the source, the Started and Completed
    # notifications matched no rule.
    assert sorted((e, s) for _i, e, s in delivered(records)) == [
        (reboot, "Completed"), (reboot, "Scheduled"), (reboot, "Scheduled"), (reboot, "Started")]
    assert sorted(posted(run)) == sorted(ids) and len(ids) == 3, run.tail()
    assert "dropped as a duplicate" in output
    assert output.count("Calling rule %s in session" % PLAYBOOK_RULE) == 1, run.tail()
    assert output.count("Creating action task action::run_playbook::") == 1, run.tail()
    assert output.count(MAINTENANCE_PLAY) == 1 and output.count("PLAY RECAP") == 1, run.tail()
    for vm in VMS:
        assert re.search(r"^%s\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0" % re.escape(vm), output, re.M), run.tail()

    # Drained, approved once from outside after every drain, Completed before every recover.
    marks = steps(mock, since)
    acks = acks_of(mock, reboot)
    assert len(acks) == 1 and acks[0]["status"] == 200, acks
    assert "/virtualMachineScaleSets/web-ss/providers/Microsoft.Maintenance/" in acks[0]["path"]
    assert all(seq_of(marks, vm, "drain-start") < seq_of(marks, vm, "drain-end") < acks[0]["seq"] for vm in VMS), marks
    changes = transitions(mock, reboot)
    # The mock's own word for an event that left the document, which Resource Graph shows Completed.
    completed = [t["seq"] for t in changes if t["to"] == "removed"]
    assert [t["to"] for t in changes][-2:] == ["Started", "removed"] and len(completed) == 1, changes
    assert acks[0]["seq"] < completed[0]
    for vm in VMS:
        assert completed[0] < seq_of(marks, vm, "recover-start") < seq_of(marks, vm, "recover-end") \
            < seq_of(marks, vm, "health-start"), (vm, marks)
    # Signed in as the principal of the AZURE_* variables, for every Resource Manager request.
    arm = [r for r in mock.control("GET", "audit")["arm_requests"] if "/login/" not in r["path"]]
    assert arm and all(r.get("principal") in (None, "app-fleet") for r in arm), arm[:3]


# -- the source alone: handshakes, a stale secret, retries, nothing lost ------------------------

class SourceThread(object):
    """The event_grid source's coroutine on an event loop of its own thread; the rulebook's queue."""

    def __init__(self, args):
        options, _warnings = SOURCE["check_args"](args)
        self.options = options
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.queue = self.call(self._queue())
        self.task = None
        self.port = None

    @staticmethod
    async def _queue():
        return asyncio.Queue()

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(LIMIT)

    def start(self, port=0, **changed):
        """Serve (again) with the options changed as given, on port (0: a free one, then the same)."""
        options = dict(self.options, port=port or self.port or 0, **changed)
        bound = threading.Event()

        def started(address):
            self.port = address[1]
            bound.set()

        async def spawn():
            return asyncio.ensure_future(SOURCE["run"](self.queue, options, started=started))

        self.task = self.call(spawn())
        if not bound.wait(LIMIT):
            raise AssertionError("the source did not start: %r" % (self.task.exception() if self.task.done() else None))

    def stop(self):
        """Cancel the source as ansible-rulebook does at shutdown, and wait until it has closed its port."""
        async def cancel():
            self.task.cancel()
            await asyncio.wait([self.task])
        self.call(cancel())

    def taken(self):
        async def drain():
            events = []
            while not self.queue.empty():
                events.append(self.queue.get_nowait())
            return events
        return self.call(drain())

    def close(self):
        if self.task is not None and not self.task.done():
            self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(LIMIT)
        self.loop.close()


def test_handshakes_a_stale_secret_retries_and_nothing_lost_through_the_source(mock):
    certfile, keyfile = tls_files(mock)
    source = SourceThread({"host": "127.0.0.1", "port": 8443, "path": "/eventgrid", "secret": [SECRET, OLD_SECRET],
                           "certfile": certfile, "keyfile": keyfile})
    try:
        source.start()
        url = "https://127.0.0.1:%d/eventgrid?code=%%s" % source.port
        # Both schemas' handshakes, answered by the source (the mock validates the subscription).
        egs = mock.add_eventgrid_subscriber(url % SECRET, ca_file=mock.ca_path, max_events_per_batch=10, name="eg-hook")
        ces = mock.add_eventgrid_subscriber(url % SECRET, ca_file=mock.ca_path, schema="CloudEventSchemaV1_0", name="ce-hook")
        # A subscription still on the secret the rotation below removes.
        stale = mock.add_eventgrid_subscriber(url % OLD_SECRET, ca_file=mock.ca_path, name="stale-hook")
        # Without a valid secret the handshake is refused: 401, the subscription fails, gets nothing.
        with pytest.raises(MockControlError) as refused:
            mock.add_eventgrid_subscriber(url % "not-the-secret", ca_file=mock.ca_path, name="nosecret-hook")
        assert refused.value.status == 400
        handshakes = dict((r["name"], r) for r in mock.eventgrid_deliveries() if r["kind"] == "handshake")
        names = ("eg-hook", "ce-hook", "stale-hook", "nosecret-hook")
        assert [(handshakes[n]["method"], handshakes[n]["status"], handshakes[n]["outcome"]) for n in names] == [
            ("POST", 200, "validated"), ("OPTIONS", 200, "validated"), ("POST", 200, "validated"), ("POST", 401, "failed")]
        subscribers = (egs["id"], ces["id"], stale["id"])

        # A Reboot of the scale set, its notification sent twice; two events together (a batch).
        mock.control("POST", "eventgrid/duplicate", {"count": 1})
        reboot = add_event(mock, VMS, notice=600, duration=300)
        for sid in subscribers:
            wait_delivered(mock, sid, 2)
        freeze = add_event(mock, [VMS[0]], "Freeze", at=60, notice=300, duration=60)
        redeploy = add_event(mock, [VMS[2]], "Redeploy", at=60, notice=300, duration=60)
        advance(mock, 60)
        for sid in subscribers:
            wait_delivered(mock, sid, 4)
        # The receiver stops: the next notifications fail to connect and are retried on the mock's clock.
        source.stop()
        advance(mock, 600)    # the Freeze and Redeploy start and complete, the Reboot starts
        for sid in subscribers:
            mock.wait_eventgrid(1, sid, outcome="retry")
        # It comes back with only the new secret (the rotation is done), on the same port.
        source.start(secret=[SECRET])
        advance(mock, 10)     # Event Grid's first retry, 10 s after the failed attempt
        advance(mock, 300)    # the Reboot completes
        for sid in subscribers[:2]:
            wait_delivered(mock, sid, 10)     # 9 notifications, the Reboot's Scheduled one twice
        mock.wait_eventgrid(1, stale["id"], outcome="dropped")
        wait_until("the stale subscription's queue to empty", lambda: mock.control(
            "GET", "eventgrid/subscribers/" + stale["id"])["queued"] == 0 and not mock.control(
            "GET", "eventgrid/subscribers/" + stale["id"])["in_flight"], LIMIT)
        queued = source.taken()
    finally:
        source.close()

    records = dict((sid, mock.eventgrid_deliveries(subscriber=sid)) for sid in subscribers)
    notes = generated(records[egs["id"]])
    # The mock generated 9 notifications (3 events x Scheduled, Started, Completed), the same for
    # every subscriber; both healthy subscriptions had each delivered, after retries.
    assert sorted(notes.values()) == sorted((e, s) for e in (reboot, freeze, redeploy)
                                            for s in ("Scheduled", "Started", "Completed"))
    for sid in subscribers[:2]:
        assert generated(records[sid]) == notes
        assert set(i for i, _e, _s in delivered(records[sid])) == set(notes)
        retried = [r for r in records[sid] if r["outcome"] == "retry"]
        assert retried and all(r["error"] == "SocketError" for r in retried)
        assert any(r["attempt"] > 1 and r["outcome"] == "delivered" for r in records[sid])
    # The Event Grid schema's batch: the two events that appeared together, in one delivery.
    assert any(r["event_ids"] == [freeze, redeploy] and r["outcome"] == "delivered" for r in records[egs["id"]])
    # The stale secret: delivered before the rotation, refused 401 and dropped after it, never retried.
    dropped = [r for r in records[stale["id"]] if r["outcome"] == "dropped"]
    assert dropped and all((r["status"], r["reason"]) == (401, "Unauthorized") for r in dropped)
    counters = mock.control("GET", "eventgrid/subscribers/" + stale["id"])["counters"]
    assert counters["dropped"] == sum(len(r["ids"]) for r in dropped) and counters["dropped"] > 0
    # Nothing lost, nothing twice: the rulebook's queue holds each notification exactly once,
    # though each came through two subscriptions and the Reboot's Scheduled one twice more.
    assert sorted(e["event_grid"]["id"] for e in queued) == sorted(notes)
    assert dict((e["event_grid"]["id"], (e["scheduled_event"]["event_id"], e["scheduled_event"]["event_status"]))
                for e in queued) == notes
    assert sorted((e["scheduled_event"]["event_id"], e["type"]) for e in queued) == sorted(
        (e, t) for e in (reboot, freeze, redeploy) for t in ("scheduled", "started", "ended"))
    # What the mock's audit counted, for a reader of `pytest -s` (the closing notes quote it).
    for name, sid in (("eg-hook", egs["id"]), ("ce-hook", ces["id"]), ("stale-hook", stale["id"])):
        counters = mock.control("GET", "eventgrid/subscribers/" + sid)["counters"]
        print("event grid audit: %s %s" % (name, " ".join("%s=%s" % kv for kv in sorted(counters.items()))))
    print("event grid audit: handshakes %s; %d notifications generated, %d queued by the source"
          % (", ".join("%s %s %s" % (n, handshakes[n]["status"], handshakes[n]["outcome"]) for n in names),
             len(notes), len(queued)))
