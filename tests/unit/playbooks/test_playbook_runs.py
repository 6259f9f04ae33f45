# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks run for real against the mock IMDS on 127.0.0.1 (local connection hosts): each
playbook's main path, on every supported ansible-core (rolling_maintenance's own cases are in
test_rolling_maintenance_cases.py, newest core only).

Events are made to end as soon as they start (duration 0), so no run waits on a clock; the
molecule scenario extensions/molecule/rolling_maintenance covers the timed, ordered run.
"""

import json
import os
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import playbook_options

FLEET = {"default_vm": "web_0",
         "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}
HOSTS = ("web_0", "web_1", "web_2")


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle


def add_event(mock, vm, event_type="Reboot", **spec):
    spec.setdefault("duration", 0)
    spec.update(event_type=event_type, resources=[vm])
    return mock.control("POST", "events", spec)["event_id"]


def hosts_for(mock, prefix, names=HOSTS):
    return dict((name, {"%s_imds_url" % prefix: mock.vm_url(name)}) for name in names)


def approvals(mock):
    """{vm: [event ids]} of every approval the mock received."""
    found = {}
    for approval in mock.control("GET", "audit")["approvals"]:
        found.setdefault(approval["vm"], []).extend(approval["event_ids"])
    return found


def status(mock, event_id):
    return mock.control("GET", "events/%s" % event_id)["status"]


# -- rolling_maintenance ------------------------------------------------------------------------

def test_rolling_maintenance_handles_hosts_with_events_and_leaves_the_others(mock, run_playbook, marks_tasks):
    freeze = add_event(mock, "web_0", "Freeze")
    reboot = add_event(mock, "web_2", "Reboot", event_source="User")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
        "rolling_maintenance_health_tasks": marks_tasks("health"),
    })
    assert run.rc == 0, run
    assert approvals(mock) == {"web_0": [freeze], "web_2": [reboot]}
    assert status(mock, freeze) == status(mock, reboot) == "removed"
    # serial 1: each host is drained, recovered and checked before the next one starts.
    assert marks_tasks.read() == ["web_0 drain", "web_0 recover", "web_0 health",
                                  "web_2 drain", "web_2 recover", "web_2 health"]


WRONG_VALUES = {"int": "not-a-number", "float": "not-a-number", "bool": "maybe", "list": {"not": "a list"},
                "dict": "not a dict"}


# -- the other playbooks, and each playbook's variables --------------------------------------------

@pytest.mark.parametrize("name", ["rolling_maintenance", "report", "approve_user_events", "deploy_watcher", "fleet_maintenance"])
def test_the_playbooks_variables_reach_its_role(mock, run_playbook, tmp_path, name):
    wrong = dict((option, WRONG_VALUES[spec["type"]]) for option, spec in playbook_options(name).items()
                 if spec is not None and spec.get("type") in WRONG_VALUES)
    assert len(wrong) >= 2, wrong
    if name == "deploy_watcher":
        host, extra = watcher_host(mock, tmp_path, "web_0"), dict(wrong, deploy_watcher_become=False)
    else:
        host, extra = {"%s_imds_url" % name: mock.vm_url("web_0")}, wrong
    run = run_playbook(name, {"web_0": host}, extra)
    assert run.rc != 0, run
    assert "Validating arguments against arg spec 'main'" in run.output, run
    unnamed = [option for option in wrong if "'%s'" % option not in run.output]
    assert not unnamed, "%s: the role's validation did not name %s\n%r" % (name, unnamed, run)
    assert mock.control("GET", "audit")["requests"] == []


# -- approve_user_events ------------------------------------------------------------------------

def test_approve_user_events_approves_only_user_events(mock, run_playbook):
    user_reboot = add_event(mock, "web_1", "Reboot", event_source="User", duration=600)
    platform_freeze = add_event(mock, "web_0", "Freeze")
    user_redeploy = add_event(mock, "web_2", "Redeploy", event_source="User", duration=600)
    run = run_playbook("approve_user_events", hosts_for(mock, "approve_user_events"),
                       {"approve_user_events_event_types": ["Reboot"]})
    assert run.rc == 0, run
    assert approvals(mock) == {"web_1": [user_reboot]}
    assert status(mock, user_reboot) == "Started"
    assert status(mock, platform_freeze) == status(mock, user_redeploy) == "Scheduled"
    assert "web_1: approved Reboot %s" % user_reboot in run.output
    assert "web_0: no user event to approve" in run.output


# -- report ------------------------------------------------------------------------------------

def test_report_lists_each_event_once_with_the_hosts_it_affects(mock, run_playbook, tmp_path):
    shared = mock.control("POST", "events", {"event_type": "Freeze", "resources": ["web_0", "web_1"],
                                             "notice": 900})["event_id"]
    started = add_event(mock, "web_2", "Redeploy", status="Started", duration=600)
    hosts = hosts_for(mock, "report")
    hosts["lost"] = {"report_imds_url": mock.vm_url("lost"), "report_resource_name": "lost"}
    run = run_playbook("report", hosts, {"report_dir": "out"}, cwd=tmp_path)
    assert run.rc == 0, run
    with open(str(tmp_path / "out" / "scheduled_events.json")) as handle:
        report = json.load(handle)
    assert [e["event_id"] for e in report["events"]] == [started, shared]
    by_id = dict((e["event_id"], e) for e in report["events"])
    assert by_id[shared]["hosts"] == ["web_0", "web_1"]
    assert by_id[shared]["seen_by"] == ["web_0", "web_1", "web_2"]
    assert by_id[started]["time_left"] == "started"
    assert report["hosts_with_errors"] == ["lost"]
    markdown = (tmp_path / "out" / "scheduled_events.md").read_text()
    assert "| web_0, web_1 | `%s` | Freeze | Scheduled |" % shared in markdown
    assert "UNREAD lost: GET %s/metadata/scheduledevents?api-version=2020-07-01 failed with HTTP 404" \
        % mock.vm_url("lost") in run.output
    assert "Scheduled events seen by 4 hosts" in run.output


def test_report_can_fail_on_an_unreadable_host(mock, run_playbook):
    run = run_playbook("report", {"lost": {"report_imds_url": mock.vm_url("lost")}},
                       {"report_fail_on_error": True, "report_write_files": False})
    assert run.rc != 0
    # The failure itself, as every supported core prints it (2.17 does not show a failed module's warnings).
    assert "fatal: [lost]: FAILED!" in run.output
    assert "GET %s/metadata/scheduledevents?api-version=2020-07-01 failed with HTTP 404" % mock.vm_url("lost") \
        in run.output


# -- deploy_watcher ----------------------------------------------------------------------------

def watcher_host(mock, tmp_path, name):
    base = tmp_path / ("watcher-" + name)
    return {
        "watcher_service_manager": "process",
        "watcher_python": sys.executable,
        "watcher_install_dir": str(base / "lib"),
        "watcher_config_dir": str(base / "etc"),
        "watcher_state_dir": str(base / "state"),
        "watcher_command_path": str(base / "azure-imds-watcher"),
        "watcher_process_pid_file": str(base / "watcher.pid"),
        "watcher_process_log_file": str(base / "watcher.log"),
        "watcher_imds_url": mock.vm_url(name),
    }


def pid_in(pid_file):
    with open(pid_file) as handle:
        return int(handle.read().strip())


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def test_deploy_watcher_installs_runs_and_removes_the_daemon_on_the_hosts_asked_for(mock, run_playbook, tmp_path):
    hosts = dict((name, watcher_host(mock, tmp_path, name)) for name in ("web_0", "web_1"))
    web_1 = hosts["web_1"]
    run = run_playbook("deploy_watcher", hosts, {"deploy_watcher_become": False, "deploy_watcher_hosts": "web_1"})
    try:
        assert run.rc == 0, run
        pid = pid_in(web_1["watcher_process_pid_file"])
        assert alive(pid)
        with open(os.path.join(web_1["watcher_config_dir"], "config.json")) as handle:
            assert mock.vm_url("web_1") in handle.read()
        assert not os.path.exists(hosts["web_0"]["watcher_install_dir"])
    finally:
        removed = run_playbook("deploy_watcher", hosts, {"deploy_watcher_become": False, "watcher_state": "absent"})
    assert removed.rc == 0, removed
    assert not os.path.exists(web_1["watcher_install_dir"])
    assert not os.path.exists(web_1["watcher_process_pid_file"])
    assert not alive(pid)
