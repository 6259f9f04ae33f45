# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 24's must-show playbook (extensions/demo/control_plane.yml) and the control-plane guide's
playbook, run for real by ansible-playbook against the mock's control-plane face over TLS, signed in
as AWX's Azure credential does it (AZURE_* variables, the cloud as the mock's https URL, the mock's
CA in REQUESTS_CA_BUNDLE). Three playbook runs in all: the demo twice (the second must change
nothing), the guide once; every test reads those runs."""

import copy
import json
import os
import re
import subprocess

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import (
    AWX_ENV, FLEET, PUBLISH, SUB1, SUB2, add_event, arm_audit, set_up)
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM, ROOT, PlaybookRun
from ansible_collections.azure_imds.scheduled_events.tests.unit.docs.pages import RST, code_blocks

DEMO = os.path.join(ROOT, "extensions", "demo", "control_plane.yml")
GUIDE = os.path.join(RST, "control_plane.rst")
# Events last an hour of the mock's time (its clock runs in real time here): they stay Started.
LONG = 3600


def playbook(path, handle, workdir, extra=None, inventory=None, options=()):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "AZURE_")))
    env.update(AWX_ENV, AZURE_CLOUD_ENVIRONMENT=handle.arm_url, REQUESTS_CA_BUNDLE=handle.ca_path,
               ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="false",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_LOCAL_TEMP=str(workdir / "ansible-tmp"), ANSIBLE_PYTHON_INTERPRETER="auto_silent")
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        env.pop(name, None)
    command = [os.path.join(BIN, "ansible-playbook"), path]
    if inventory is not None:
        inventory_path = workdir / "inventory.json"
        inventory_path.write_text(json.dumps(inventory))
        command += ["-i", str(inventory_path)]
    if extra:
        command += ["-e", json.dumps(extra)]
    proc = subprocess.run(command + list(options), cwd=str(workdir), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, check=False)
    return PlaybookRun(proc)


def recap(run):
    found = re.search(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", run.output, re.M)
    assert found, run
    return dict(zip(("ok", "changed", "unreachable", "failed"), (int(n) for n in found.groups())))


def acknowledgements(handle):
    return [r for r in arm_audit(handle) if r["path"].split("?")[0].endswith("/acknowledge")]


# -- the must-show playbook ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    handle = start_mock(arm=True, rate_limit=False, fleet=FLEET, tls_dir=str(workdir / "tls"))
    try:
        set_up(handle)
        events = {"web": add_event(handle, ["web0", "web1"], duration=LONG),
                  "api": add_event(handle, ["api0"], duration=LONG),
                  "db": add_event(handle, ["db0"], duration=LONG)}
        extra = {"control_plane_subscriptions": [SUB1, SUB2], "control_plane_mock_imds_url": handle.url}
        first = playbook(DEMO, handle, workdir, extra, options=["--diff"])
        acks_after_first = acknowledgements(handle)
        second = playbook(DEMO, handle, workdir, extra, options=["--diff"])
        yield {"mock": handle, "events": events, "first": first, "second": second, "acks": acks_after_first}
    finally:
        handle.stop()


def test_the_demo_sets_the_policy_with_a_diff_then_changes_nothing(demo):
    first, second = demo["first"], demo["second"]
    assert first.rc == 0 and second.rc == 0, (first, second)
    assert recap(first) == {"ok": 6, "changed": 2, "unreachable": 0, "failed": 0}, first
    # --diff shows the policy's change: publishing turned on, user reboots kept waiting.
    diff = first.output.split("TASK [Publish the set's events")[1].split("TASK [")[0]
    assert re.search(r'^\+\s+"enable": true,', diff, re.M), first
    assert re.search(r'^\+\s+"scheduledEventsApiVersion": "2020-07-01"', diff, re.M), first
    assert re.search(r'^\+\s+"automaticallyApprove": false', diff, re.M), first
    assert "changed: [localhost]" in diff
    # The second run: the same answers, nothing changed, no acknowledgement sent again.
    assert recap(second) == {"ok": 6, "changed": 0, "unreachable": 0, "failed": 0}, second
    assert not re.search(r"^[+-]\s", second.output, re.M), second
    policy = demo["mock"].control("GET", "arm")["policies"]
    assert policy["/subscriptions/%s/resourcegroups/rg-web/providers/microsoft.compute/availabilitysets/web-as" % SUB1] \
        == dict(PUBLISH, userInitiatedReboot={"automaticallyApprove": False})


def test_the_demo_lists_the_fleet_across_two_subscriptions(demo):
    for run in (demo["first"], demo["second"]):
        assert re.search(r'"msg": "2 subscriptions, 3 events: (\S+, ){2}\S+"', run.output), run
        for resources in ("web0+web1", "api0", "db0"):
            assert re.search(r'"msg": "2 subscriptions, 3 events:[^"]*\b%s\b' % re.escape(resources), run.output)
    graph = [r for r in arm_audit(demo["mock"]) if "Microsoft.ResourceGraph" in r["path"]]
    assert graph and all(r["status"] == 200 for r in graph)


def test_the_demo_approves_one_event_from_outside_and_each_of_its_vms_shows_it_started(demo):
    mock, web = demo["mock"], demo["events"]["web"]
    # One acknowledgement in the first run, for the availability set's event of web0 and web1.
    assert [(a["method"], a["path"].split("/scheduledevents/")[1], a["status"]) for a in demo["acks"]] == [
        ("POST", "%s/acknowledge?api-version=2025-11-01" % web, 200)]
    assert "/availabilitySets/web-as/providers/Microsoft.Maintenance/" in demo["acks"][0]["path"]
    assert acknowledgements(mock) == demo["acks"]
    for run in (demo["first"], demo["second"]):
        for vm in ("web0", "web1"):
            assert '"msg": "%s shows %s Started"' % (vm, web) in run.output, run
    imds = [r for r in mock.control("GET", "audit")["requests"] if r["path"].startswith("/metadata/scheduledevents")]
    assert sorted(set(r["vm"] for r in imds)) == ["web0", "web1"]
    assert mock.control("GET", "events/%s" % web)["status"] == "Started"
    for other in ("api", "db"):
        assert mock.control("GET", "events/%s" % demo["events"][other])["status"] == "Scheduled"
    approve = [run.output.split("TASK [Approve from outside")[1].split("TASK [")[0] for run in (demo["first"], demo["second"])]
    assert "changed: [localhost]" in approve[0] and "ok: [localhost]" in approve[1], approve


# -- the guide's playbook, pasted as it is --------------------------------------------------------

def guide_playbook():
    found = [block for block in code_blocks(GUIDE, "yaml") if "fleet_event_approve" in block and "hosts:" in block]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("guide")
    (workdir / "approve_drained.yml").write_text(guide_playbook())
    fleet = copy.deepcopy(FLEET)
    fleet["groups"][0]["scheduled_events_policy"] = PUBLISH  # web-as publishes: the guide sets nothing
    handle = start_mock(arm=True, rate_limit=False, fleet=fleet, tls_dir=str(workdir / "tls"))
    try:
        set_up(handle)
        events = {"db0": add_event(handle, ["db0"], duration=LONG),
                  "api0": add_event(handle, ["api0"], duration=LONG),
                  "web0+web1": add_event(handle, ["web0", "web1"], duration=LONG),
                  "db1": add_event(handle, ["db1"], duration=LONG)}
        drained = {"db0": True, "api0": True, "web0": True, "web1": False, "db1": False}
        hosts = dict(("%s.example.com" % vm, {"azure_vm_name": vm, "drained": flag}) for vm, flag in drained.items())
        hosts["web2.example.com"] = {"azure_vm_name": "web2"}  # no drained variable at all
        run = playbook(str(workdir / "approve_drained.yml"), handle, workdir,
                       inventory={"web": {"hosts": hosts}})
        yield {"mock": handle, "events": events, "run": run}
    finally:
        handle.stop()


def test_the_guides_playbook_approves_exactly_the_events_whose_vms_are_drained(guide):
    mock, events, run = guide["mock"], guide["events"], guide["run"]
    assert run.rc == 0, run
    assert recap(run)["changed"] == 1 and recap(run)["failed"] == 0, run
    acknowledged = sorted(a["path"].split("/scheduledevents/")[1].split("/")[0] for a in acknowledgements(mock))
    assert acknowledged == sorted([events["db0"], events["api0"]])
    status = dict((name, mock.control("GET", "events/%s" % event)["status"]) for name, event in events.items())
    assert status == {"db0": "Started", "api0": "Started", "web0+web1": "Scheduled", "db1": "Scheduled"}
    summary = run.output.split("TASK [Say what was approved and what still waits]")[1]
    assert summary.count("/scheduledevents/") == 2
    waiting = re.search(r'"waiting_for_a_drain": \[(.*?)\n\s*\]\n', summary, re.S).group(1)
    assert sorted(re.findall(r'"(\w+)"', waiting)) == ["db1", "web0", "web1"], summary
