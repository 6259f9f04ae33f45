# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_maintenance playbook, run for real by ansible-playbook against the mock's control-plane
face over TLS, signed in as AWX's Azure credential does it (AZURE_* variables only: nothing set in the
play), over an inventory of local hosts that name their VMs. The drain, recover and health tasks files
mark each step with a request to the mock's IMDS face, so one audit sequence orders the steps, the
acknowledge calls and the events' transitions. Events last 0 seconds of the mock's time once started:
the first read of Resource Graph after the approval shows them Completed, so nothing waits. A
Canceled event is canceled by the drain tasks of its host, through the mock's control API.

Four runs against one mock: a discovery run (a scale set of three VMs, two at a time, spread over
zones and fault domains); an Event-Driven Ansible run whose drain fails; a given event canceled
during its drain; a discovery run with an event naming a VM outside the inventory and a wait that
times out."""

import json
import os
import re
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import PUBLISH, SUB1, add_event, set_up
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import PLAYBOOKS
from ansible_collections.azure_imds.scheduled_events.tests.unit.playbooks.test_control_plane import (
    acknowledgements, playbook)

PLAYBOOK = os.path.join(PLAYBOOKS, "fleet_maintenance.yml")
# Every host of a batch at once (the default of 5 forks would split the six hosts in two rounds).
FORKS = ["--forks", "8"]
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-fleet", "scheduled_events_policy": PUBLISH,
    "groups": [
        {"name": "api-ss", "kind": "scale_set", "vms": ["api0", "api1", "api2"], "zones": ["1", "2"]},
        {"name": "web-as", "kind": "availability_set", "vms": ["web0", "web1", "web2"]},
        {"name": "db", "kind": "zonal", "vms": ["db0"]},
    ],
}
SET_ID = "/subscriptions/%s/resourceGroups/rg-fleet/providers/Microsoft.Compute/%s/%s"
# Each step of the operator's tasks files: a request to the host's VM on the mock's IMDS face, at its
# start and at its end, so the audit orders it among the acknowledge calls and transitions.
MARK = """
- name: Mark the {step} start
  ansible.builtin.uri:
    url: "{{{{ mock_url }}}}/vm/{{{{ mark_vm }}}}/metadata/scheduledevents?api-version=2020-07-01&mark={step}-start"
    headers: {{Metadata: "true"}}
{extra}
- name: Mark the {step} end
  ansible.builtin.uri:
    url: "{{{{ mock_url }}}}/vm/{{{{ mark_vm }}}}/metadata/scheduledevents?api-version=2020-07-01&mark={step}-end"
    headers: {{Metadata: "true"}}
"""
DRAIN_EXTRA = """
- name: Cancel the event of this host now, as Azure may
  ansible.builtin.uri:
    url: "{{ mock_url }}/_mock/events/{{ cancel_event }}/cancel"
    method: POST
  when: cancel_event is defined

- name: Fail the drain when the test says so
  ansible.builtin.fail:
    msg: the load balancer refused to take {{ mark_vm }} out
  when: fail_drain | default(false) | bool
"""


def hosts(mock_url):
    """api0 carries azure.azcollection.azure_rm's hostvars (name, vmid, availability_zone) and the
    instance metadata's platform_fault_domain; the others the role's own hostvars."""
    found = {
        "api0.example.com": {"name": "api0", "vmid": "9f1c", "availability_zone": ["1"], "platform_fault_domain": 0},
        "api1.example.com": {"fleet_maintenance_vm_name": "API1", "fleet_maintenance_zone": "1",
                             "fleet_maintenance_fault_domain": "1"},
        "api2.example.com": {"fleet_maintenance_vm_name": "api2", "fleet_maintenance_zone": "2",
                             "fleet_maintenance_fault_domain": "0"},
        "web0.example.com": {"fleet_maintenance_vm_name": "web0"},
        "web1.example.com": {"fleet_maintenance_vm_name": "web1", "fail_drain": True},
        "db0.example.com": {"fleet_maintenance_vm_name": "db0"},
    }
    for name, hostvars in found.items():
        hostvars.update(mark_vm=name.split(".", maxsplit=1)[0], mock_url=mock_url, ansible_connection="local",
                        ansible_python_interpreter=sys.executable)
    return {"fleet": {"hosts": found}}


def steps(mock, since=0):
    """[(seq, vm, 'drain-start' ...)] from the mock's IMDS audit."""
    found = []
    for request in mock.control("GET", "/_mock/audit?since=%d" % since)["requests"]:
        mark = re.search(r"[?&]mark=([a-z-]+)", request["path"])
        if mark:
            found.append((request["seq"], request["vm"], mark.group(1)))
    return found


def seq_of(marks, vm, what):
    found = [seq for seq, name, mark in marks if name == vm and mark == what]
    assert len(found) == 1, (vm, what, marks)
    return found[0]


def transitions(mock, event_id):
    return [t for t in mock.control("GET", "audit")["transitions"] if t["event_id"] == event_id]


def acks_of(mock, event_id):
    return [a for a in acknowledgements(mock) if ("/scheduledevents/%s/" % event_id) in a["path"]]


def summary(run):
    """The summary's lines, as the debug task prints them."""
    part = run.output.split("TASK [azure_imds.scheduled_events.fleet_maintenance : Show what was done to each host")[1]
    return re.findall(r'^\s+"(.*)",?$', part.split("TASK [")[0], re.M)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fleet")
    for step in ("drain", "recover", "health"):
        (workdir / ("%s.yml" % step)).write_text("---" + MARK.format(step=step, extra=DRAIN_EXTRA if step == "drain" else ""))
    files = {"fleet_maintenance_drain_tasks": "drain.yml", "fleet_maintenance_recover_tasks": "recover.yml",
             "fleet_maintenance_health_tasks": "health.yml"}
    handle = start_mock(arm=True, rate_limit=False, fleet=FLEET, tls_dir=str(workdir / "tls"))
    try:
        set_up(handle, subscriptions=(SUB1,))
        inventory = hosts(handle.url)
        runs = {}
        # 1. Discovery: a scale set's event for three VMs, two at a time, the set shared on purpose.
        api = add_event(handle, ["api0", "api1", "api2"], duration=0)
        since = handle.control("GET", "audit")["last_seq"]
        runs["scale_set"] = (playbook(PLAYBOOK, handle, workdir, dict(
            files, fleet_maintenance_max_parallel=2, fleet_maintenance_allow_same_set=True), inventory=inventory, options=FORKS),
            steps(handle, since), api)
        # 2. The event of the event_grid source, as ansible-rulebook's run_playbook passes it: web1's drain fails.
        web = add_event(handle, ["web0", "web1"], duration=0)
        eda = {"type": "scheduled", "scheduled_event": {
            "id": (SET_ID % (SUB1, "availabilitySets", "web-as")) + "/providers/Microsoft.Maintenance/scheduledevents/" + web,
            "event_id": web, "event_type": "Reboot", "event_status": "Scheduled", "resources": ["web0", "web1"]}}
        since = handle.control("GET", "audit")["last_seq"]
        runs["failed_drain"] = (playbook(PLAYBOOK, handle, workdir, dict(files, ansible_eda={"event": eda}),
                                         inventory=inventory, options=FORKS), steps(handle, since), web)
        handle.control("POST", "events/%s/cancel" % web)  # not handled again by the next discovery
        # 3. A given event, canceled by Azure while its host drains.
        db = add_event(handle, ["db0"], duration=0)
        inventory["fleet"]["hosts"]["db0.example.com"]["cancel_event"] = db
        given = {"id": "/SUBSCRIPTIONS/%s/resourcegroups/rg-fleet/providers/Microsoft.Compute/virtualMachines/db0"
                       "/providers/microsoft.maintenance/scheduledevents/%s" % (SUB1, db),
                 "event_id": db, "event_type": "Reboot", "event_status": "Scheduled", "resources": ["db0"]}
        since = handle.control("GET", "audit")["last_seq"]
        runs["canceled"] = (playbook(PLAYBOOK, handle, workdir, dict(files, fleet_maintenance_event=given),
                                     inventory=inventory, options=FORKS), steps(handle, since), db)
        del inventory["fleet"]["hosts"]["db0.example.com"]["cancel_event"]
        # 4. Discovery: an event that also names web2 (no host of the inventory), and one that never
        # completes within a wait of 0 seconds.
        partly = add_event(handle, ["web0", "web2"], duration=0)
        slow = add_event(handle, ["db0"], duration=3600)
        since = handle.control("GET", "audit")["last_seq"]
        runs["refused_and_timeout"] = (playbook(PLAYBOOK, handle, workdir, dict(files, fleet_maintenance_wait_timeout=0),
                                                inventory=inventory, options=FORKS), steps(handle, since), (partly, slow))
        for name, found in runs.items():  # kept beside the test's other files, for a reader of a failure
            (workdir / ("%s.out" % name)).write_text(found[0].output)
        yield {"mock": handle, "runs": runs}
    finally:
        handle.stop()


def test_a_scale_set_drains_two_at_a_time_never_two_of_one_zone_or_fault_domain(fleet):
    run, marks, event = fleet["runs"]["scale_set"]
    assert run.rc == 0, run
    # api0 (zone 1, fault domain 0) shares a zone with api1 and a fault domain with api2: it drains
    # alone; api1 (zone 1, fault domain 1) and api2 (zone 2, fault domain 0) drain together.
    drains = dict((vm, (seq_of(marks, vm, "drain-start"), seq_of(marks, vm, "drain-end"))) for vm in ("api0", "api1", "api2"))

    def overlap(a, b):
        return drains[a][0] < drains[b][1] and drains[b][0] < drains[a][1]
    assert overlap("api1", "api2"), drains
    assert not overlap("api0", "api1") and not overlap("api0", "api2"), drains
    assert drains["api0"][1] < min(drains["api1"][0], drains["api2"][0]), drains
    assert "api0 + api1" not in run.output and "%s: api0.example.com, then api1.example.com + api2.example.com" % event \
        in run.output.replace("\n", " "), run


def test_the_event_is_approved_once_after_every_drain_and_recovered_after_completed(fleet):
    mock = fleet["mock"]
    run, marks, event = fleet["runs"]["scale_set"]
    acks = acks_of(mock, event)
    assert len(acks) == 1 and acks[0]["status"] == 200, acks
    assert "/virtualMachineScaleSets/api-ss/providers/Microsoft.Maintenance/" in acks[0]["path"]
    last_drain = max(seq_of(marks, vm, "drain-end") for vm in ("api0", "api1", "api2"))
    assert last_drain < acks[0]["seq"]
    changes = transitions(mock, event)
    # The mock's own word for an event that left the document, which Resource Graph shows Completed.
    completed = [t["seq"] for t in changes if t["to"] == "removed"]
    assert [t["to"] for t in changes][-2:] == ["Started", "removed"] and len(completed) == 1, changes
    for vm in ("api0", "api1", "api2"):
        assert completed[0] < seq_of(marks, vm, "recover-start") < seq_of(marks, vm, "recover-end") \
            < seq_of(marks, vm, "health-start"), (vm, marks)
    # The hosts of no event are left alone; nothing was done to them.
    assert not [m for m in marks if m[1] in ("web0", "web1", "db0")], marks


def test_the_summary_shows_each_step_of_each_host(fleet):
    run, _marks, event = fleet["runs"]["scale_set"]
    lines = summary(run)
    start = lines.index("api1.example.com (VM API1): Reboot %s Scheduled" % event)
    block = lines[start + 1:start + 8]
    step = re.compile(r"^  \d\d:\d\d:\d\d  \+\S+\s+(drain|approve|wait until completed|recover|health check|done)(  |$)")
    assert [step.match(line).group(1) for line in block[:6]] == [
        "drain", "approve", "wait until completed", "recover", "health check", "done"], block
    assert "batch 2 of 2 with api2.example.com" in block[0], block
    assert "approved, which starts it on api0, api1, api2" in block[1], block
    assert "Completed after 1 read(s) of Resource Graph" in block[2], block
    assert re.match(r"^  drained in \S+, waited \S+, recovered in \S+; \S+ in all$", block[6]), block
    for host in ("web0", "web1", "db0"):
        assert "%s.example.com (VM %s): no scheduled event, left alone" % (host, host) in lines, lines


def test_a_failed_drain_is_never_approved_and_the_drained_hosts_are_recovered(fleet):
    mock = fleet["mock"]
    run, marks, event = fleet["runs"]["failed_drain"]
    assert run.rc == 2, run
    assert re.search(r"^web0\.example\.com\s*:.*failed=1", run.output, re.M), run
    assert re.search(r"^web1\.example\.com\s*:.*failed=1", run.output, re.M), run
    assert re.search(r"^api0\.example\.com\s*:.*failed=0", run.output, re.M), run
    assert acks_of(mock, event) == []
    # Never started: the test canceled it after the run, so that later runs do not meet it again.
    assert [t["to"] for t in transitions(mock, event)][-1:] == ["cancelled"], transitions(mock, event)
    assert "Started" not in [t["to"] for t in transitions(mock, event)]
    # One availability set: one host at a time. web1's drain started and failed before its end mark.
    assert seq_of(marks, "web0", "drain-end") < seq_of(marks, "web1", "drain-start")
    assert not [m for m in marks if m[1] == "web1" and m[2] == "drain-end"], marks
    for vm in ("web0", "web1"):
        assert seq_of(marks, "web1", "drain-start") < seq_of(marks, vm, "recover-start"), marks
        assert not [m for m in marks if m[1] == vm and m[2].startswith("health")], marks
    assert "the load balancer refused to take web1 out" in run.output
    assert "Reboot %s was not approved: not approved, since web1.example.com was not drained for it" % event in run.output
    lines = summary(run)
    web1 = lines[lines.index("web1.example.com (VM web1): Reboot %s Scheduled" % event) + 1:][:3]
    assert re.search(r"  drain  .*batch 2 of 2; FAILED \(task 'Fail the drain when the test says so'\): the load balancer "
                     r"refused to take web1 out; took \S+$", web1[0]), web1
    assert "  recover  " in web1[1] and web1[2].startswith("  stopped after "), web1
    web0 = lines[lines.index("web0.example.com (VM web0): Reboot %s Scheduled" % event) + 1:][:3]
    assert [line.split()[2] for line in web0[:2]] == ["drain", "recover"], web0
    assert re.match(r"^  stopped after \S+: not approved, since web1.example.com was not drained for it$", web0[2]), web0


def test_a_canceled_event_is_recovered_without_waiting(fleet):
    mock = fleet["mock"]
    run, marks, event = fleet["runs"]["canceled"]
    assert run.rc == 0, run
    assert acks_of(mock, event) == []  # fleet_event_approve read it Canceled: nothing to acknowledge
    canceled = [t["seq"] for t in transitions(mock, event) if t["to"] == "cancelled"]  # Canceled in Resource Graph
    assert len(canceled) == 1
    assert seq_of(marks, "db0", "drain-start") < canceled[0] < seq_of(marks, "db0", "recover-start") \
        < seq_of(marks, "db0", "health-start"), marks
    assert any("Canceled after 1 read(s) of Resource Graph" in line for line in summary(run)), summary(run)


def test_an_event_naming_a_vm_outside_the_inventory_is_refused_and_a_wait_times_out(fleet):
    mock = fleet["mock"]
    run, marks, (partly, slow) = fleet["runs"]["refused_and_timeout"]
    assert run.rc == 2, run
    assert acks_of(mock, partly) == [] and mock.control("GET", "events/%s" % partly)["status"] == "Scheduled"
    assert not [m for m in marks if m[1] == "web0"], marks
    assert "Reboot %s was not drained nor approved: it also names web2, which is no host of this play" % partly \
        in run.output.replace("\n", " ")
    # The wait: approved, still Started after 0 seconds, the host left drained (no recover).
    assert len(acks_of(mock, slow)) == 1
    assert mock.control("GET", "events/%s" % slow)["status"] == "Started"
    assert [m[2] for m in marks if m[1] == "db0"] == ["drain-start", "drain-end"], marks
    assert "still Started in Resource Graph after fleet_maintenance_wait_timeout (0 seconds)" in run.output
    assert "The host was left drained" in run.output
    lines = summary(run)
    db0 = lines[lines.index("db0.example.com (VM db0): Reboot %s Scheduled" % slow) + 1:][:4]
    assert [line.split()[2] for line in db0[:3]] == ["drain", "approve", "wait"], db0
    assert db0[3].startswith("  stopped after ") and "still Started in Resource Graph" in db0[3], db0
    assert "web0.example.com (VM web0): Reboot %s Scheduled NOT HANDLED: it also names web2, which is no host of this " \
        "play and cannot be drained" % partly in lines, lines


def test_the_sign_in_came_from_the_environment_alone(fleet):
    # AWX's credential sets only AZURE_* variables: every Azure request of the runs was signed in as
    # the service principal of those variables.
    arm = [r for r in fleet["mock"].control("GET", "audit")["arm_requests"] if "/login/" not in r["path"]]
    assert arm and all(r.get("principal") in (None, "app-fleet") for r in arm), arm[:3]
    assert json.dumps(arm).count("Microsoft.ResourceGraph") >= 4
