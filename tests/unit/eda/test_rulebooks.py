# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rulebooks of extensions/eda/rulebooks run by the real ansible-rulebook (Java, drools,
ansible-runner) against the mock IMDS on 127.0.0.1, and, for run_job_template, a stand-in of the
AWX job launch API (awx_standin.py: it is not AWX, only the calls ansible-rulebook makes).

The rule that fired is read from ansible-rulebook's own output (-vv: "Calling rule <name>" and
"Creating action task action::<action>::<ruleset>::<rule>").
"""

import importlib
import json
import re
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event, _imds, _transitions
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import ENGINE_START_TIMEOUT, PLAYBOOK_TIMEOUT, wait_until

from .awx_standin import AwxStandIn

FLEET = {"default_vm": "web_1",
         "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}
VM_RULESET = "Scheduled events of this VM start its rolling maintenance"
MAINTENANCE_RULE = "Maintenance for an event scheduled for this VM"
FREEZE_RULE = "Short Freeze started, only logged"
CENTRAL_RULE = "One maintenance job per event and affected VM"
PLAYBOOK_PLAY = "PLAY [Rolling maintenance driven by Azure scheduled events]"
WEBHOOK_PORT = 28610
TOKEN = "central-webhook-test-token"


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET) as handle:
        yield handle


def fired(run, rule):
    """How many times ansible-rulebook says it called the rule."""
    return len(re.findall(r"Calling rule %s in session" % re.escape(rule), run.output))


def event_left(run, event_id):
    """Wait until the source's transition saying the event is gone has reached the rule engine:
    every event the source put on the queue before it has been matched by then."""
    run.wait_for(r"Posting data to ruleset .*'type': '(?:ended|cancelled)', 'scheduled_event': \{'event_id': '%s'"
                 % re.escape(event_id), timeout=PLAYBOOK_TIMEOUT)


def add_event(mock, **spec):
    return mock.control("POST", "events", spec)["event_id"]


def vm_host(mock, marks_tasks, name="web_1"):
    return {name: {"rolling_maintenance_imds_url": mock.vm_url(name),
                   "rolling_maintenance_drain_tasks": marks_tasks("drain"),
                   "rolling_maintenance_recover_tasks": marks_tasks("recover"),
                   "rolling_maintenance_health_tasks": marks_tasks("health"),
                   "rolling_maintenance_poll_interval": 1}}


def test_vm_local_a_reboot_scheduled_for_web_1_runs_rolling_maintenance_once(mock, rulebook, marks_tasks):
    run = rulebook("vm_local.yml", vm_host(mock, marks_tasks), env={"AZURE_IMDS_URL": mock.vm_url("web_1")})
    run.wait_for(r"scheduled_events: watching .*/vm/web_1/metadata/scheduledevents.* as web_1 every 1 s")
    reboot = add_event(mock, event_type="Reboot", resources=["web_1"], duration=5)

    run.wait_for(r"^PLAY RECAP", timeout=PLAYBOOK_TIMEOUT)
    event_left(run, reboot)
    output = run.stop()

    assert fired(run, MAINTENANCE_RULE) == 1, run.tail()
    assert fired(run, FREEZE_RULE) == 0
    assert "Creating action task action::run_playbook::%s::%s" % (VM_RULESET, MAINTENANCE_RULE) in output
    assert output.count(PLAYBOOK_PLAY) == 1, run.tail()
    assert re.search(r"^web_1\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", output, re.M), run.tail()
    # Drained, approved (the approval POST is in the mock's audit), waited, recovered.
    assert marks_tasks.read() == ["web_1 drain", "web_1 recover", "web_1 health"]
    audit = mock.control("GET", "audit")
    assert [(a["vm"], a["event_ids"]) for a in audit["approvals"]] == [("web_1", [reboot])]
    assert mock.control("GET", "events/%s" % reboot)["status"] == "removed"
    assert "scheduled_events: scheduled %s (Reboot)" % reboot in output


def test_vm_local_a_freeze_of_5_seconds_runs_no_playbook_and_is_logged(mock, rulebook, marks_tasks):
    run = rulebook("vm_local.yml", vm_host(mock, marks_tasks), env={"AZURE_IMDS_URL": mock.vm_url("web_1")})
    run.wait_for(r"scheduled_events: watching .* as web_1 every 1 s")
    # The document says 5 s (DurationInSeconds); the mock keeps it Started for 60 simulated
    # seconds, so that the source sees it Started however busy the machine is.
    freeze = add_event(mock, event_type="Freeze", resources=["web_1"], duration=60, duration_in_seconds=5, notice=600)
    run.wait_for(r"scheduled_events: scheduled %s \(Freeze\)" % freeze)
    # Nothing approves it: the platform starts it at NotBefore, which the simulated clock reaches now.
    mock.control("POST", "time/advance", {"seconds": 601})
    run.wait_for(r"Freeze %s of 5 s started on web_1: logged only, no maintenance" % freeze)
    mock.control("POST", "time/advance", {"seconds": 60})
    event_left(run, freeze)
    output = run.stop()

    assert fired(run, FREEZE_RULE) == 1, run.tail()
    assert fired(run, MAINTENANCE_RULE) == 0, run.tail()
    assert "Creating action task action::debug::%s::%s" % (VM_RULESET, FREEZE_RULE) in output
    assert PLAYBOOK_PLAY not in output and "action::run_playbook" not in output
    assert marks_tasks.read() == []
    assert mock.control("GET", "audit")["approvals"] == []


# -- central: the watchers' notifications through the webhook -----------------------------------

def watcher_notify():
    """The watcher's notify module, as the daemon imports it, for the body it POSTs."""
    return importlib.import_module(
        "ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.notify")


class Observer(object):
    """What one VM's watcher notifies: each transition the shared rule finds, in the body the
    watcher's notify action POSTs (observer, notification_id, ...)."""

    def __init__(self, mock, name):
        self.name = name
        self.client = _imds.ImdsClient(mock.vm_url(name), retry_timeout=0)
        self.tracker = _transitions.TransitionTracker(name)
        self.sent = []

    def notifications(self):
        document = self.client.get_scheduled_events()
        events = _event.annotate_events(document.events, self.name)
        transitions = self.tracker.observe({"incarnation": document.incarnation, "events": events})
        bodies = [watcher_notify().body_of(t, self.name, "0.1.0", time.time()) for t in transitions]
        self.sent.extend(bodies)
        return bodies


def post(url, body, token=TOKEN):
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer %s" % token})

    def sent():
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.URLError as exc:
            if isinstance(exc, urllib.error.HTTPError):
                return exc.code
            return None     # not listening yet: the engine is still starting its sources

    return wait_until("the webhook at %s to answer" % url, sent, ENGINE_START_TIMEOUT, interval=0.5)


def test_central_webhook_runs_one_job_template_per_event_and_affected_vm(mock, rulebook):
    awx = AwxStandIn(TOKEN, ["Azure scheduled events - rolling maintenance", "Another template"]).start()
    try:
        run = rulebook("central_webhook.yml", {"web_0": {}, "web_1": {}, "web_2": {}}, variables={
            "central_webhook_host": "127.0.0.1", "central_webhook_port": WEBHOOK_PORT,
            "central_webhook_token": TOKEN,
        }, args=["--controller-url", awx.url, "--controller-token", TOKEN])
        url = "http://127.0.0.1:%d/scheduled-events" % WEBHOOK_PORT
        # One event for web_1, seen by the three VMs of its availability set, and a Freeze of 60 s
        # broadcast to web_0 and web_2.
        reboot = add_event(mock, event_type="Reboot", resources=["web_1"])
        freeze = add_event(mock, event_type="Freeze", resources=["web_0", "web_2"], duration_in_seconds=60)
        observers = [Observer(mock, name) for name in ("web_0", "web_1", "web_2")]
        sent = []
        for observer in observers:
            for notification in observer.notifications():
                assert post(url, notification) == 200
                sent.append((notification["observer"], notification["scheduled_event"]["event_id"]))
        assert sorted(sent) == sorted((o, e) for o in ("web_0", "web_1", "web_2") for e in (reboot, freeze))
        # web_1's watcher sends its notification again after a restart (at least once).
        [again] = [body for body in observers[1].sent if body["scheduled_event"]["event_id"] == reboot]
        assert again["notification_id"] == "web_1/%s/scheduled" % reboot.lower()
        assert post(url, again) == 200
        # A last event: once its job is launched, every notification before it has been through
        # the rules (one ruleset, sequential actions).
        last = add_event(mock, event_type="Redeploy", resources=["web_2"])
        for notification in observers[2].notifications():
            assert post(url, notification) == 200
        wait_until("the job of the last event", lambda: any(
            body["extra_vars"]["ansible_eda"]["event"]["payload"]["scheduled_event"]["event_id"] == last
            for _name, body in awx.launched()), PLAYBOOK_TIMEOUT, describe=run.tail)
        output = run.stop()
    finally:
        awx.stop()

    launched = [(body["limit"], body["extra_vars"]["ansible_eda"]["event"]["payload"]["scheduled_event"]["event_id"])
                for _name, body in awx.launches]
    assert launched == [("web_0", freeze), ("web_1", reboot), ("web_2", freeze), ("web_2", last)], run.tail()
    assert [name for name, _body in awx.launches] == ["Azure scheduled events - rolling maintenance"] * 4
    assert [body["extra_vars"]["rolling_maintenance_hosts"] for _name, body in awx.launches] == [
        "web_0", "web_1", "web_2", "web_2"]
    _name, body = awx.launches[1]
    eda = body["extra_vars"]["ansible_eda"]
    assert eda["rule"] == CENTRAL_RULE
    assert eda["event"]["payload"]["observer"] == "web_1"
    assert eda["event"]["payload"]["notification_id"] == "web_1/%s/scheduled" % reboot.lower()
    assert eda["event"]["payload"]["type"] == "scheduled"
    assert eda["event"]["payload"]["affects_this_host"] is True
    assert eda["event"]["payload"]["scheduled_event"]["resources"] == ["web_1"]
    assert eda["event"]["meta"]["endpoint"] == "scheduled-events"
    assert fired(run, CENTRAL_RULE) == 4, run.tail()
    assert output.count("Creating action task action::run_job_template::") == 4
    assert ("GET", "/api/v2/config/") in [(m, p) for m, p, _q, _b in awx.requests]
