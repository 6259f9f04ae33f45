# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A mixed inventory, two Linux hosts and one Windows host, through the report and rolling_maintenance
playbooks against the mock IMDS: two ansible-playbook runs.

No Windows host runs here. The Windows host is a local-connection host forced onto the Windows path
by its inventory variables (rolling_maintenance_imds_transport and report_imds_transport: win_uri),
so each of its IMDS requests is one run of the test stand-in of ansible.windows.win_uri
(tests/support/win_uri_standin, held to the real win_uri by test_win_uri_standin.py), whose log
shows which requests went that way; the Linux hosts run the collection's modules as always.

The drain, recover and health tasks files mark each step with a request to the host's VM on the mock
(from the controller, as a Windows drain that calls a load balancer's API would), so the mock's one
audit sequence orders the marks, the approvals and the events' transitions: each host drained,
approved, its event started and over, recovered and checked before the next host is drained.
"""

import json

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.unit.plugins.action.test_windows_path_targets import STANDIN

# The inventory's order is the rollout's (serial 1): the Windows host between the Linux ones.
HOSTS = ("web_0", "win_0", "web_1")
WINDOWS = "win_0"
FLEET = {"default_vm": "web_0", "groups": [{"name": "mixed", "kind": "availability_set", "vms": list(HOSTS)}]}
EVENT_TYPES = {"web_0": "Reboot", "win_0": "Redeploy", "web_1": "Freeze"}
STEPS = ("drain", "recover", "health")


def mark_tasks(tmp_path, step):
    path = tmp_path / ("%s.yml" % step)
    path.write_text(json.dumps([{
        "name": "Mark the %s of this host on the mock" % step,
        "ansible.builtin.uri": {
            "url": "{{ mark_url }}/metadata/scheduledevents?api-version=2020-07-01&mark=%s" % step,
            "headers": {"Metadata": "true"}},
        "delegate_to": "localhost",
    }]))
    return str(path)


def inventory(mock):
    hosts = {}
    for name in HOSTS:
        hosts[name] = {"rolling_maintenance_imds_url": mock.vm_url(name), "report_imds_url": mock.vm_url(name),
                       "mark_url": mock.vm_url(name)}
    hosts[WINDOWS].update(rolling_maintenance_imds_transport="win_uri", report_imds_transport="win_uri")
    return hosts


def standin_requests(log):
    """[(method, vm)] of the requests made through the win_uri stand-in."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        method, url = line.split(" ", 1)
        found.append((method, url.split("/vm/", 1)[1].split("/", 1)[0]))
    return found


def audit(mock, since):
    return mock.control("GET", "/_mock/audit?since=%d" % since)


def module_requests(mock, since, vm):
    """The mock's IMDS requests of this VM after since that are no mark of the tasks files."""
    return [r for r in audit(mock, since)["requests"] if r["vm"] == vm and "mark=" not in r["path"]]


def timeline(mock, since, events):
    """[(host, what)] of the marks, approvals and transitions after since, in the mock's order."""
    audit_log = audit(mock, since)
    by_event = dict((event_id, host) for host, event_id in events.items())
    found = []
    for request in audit_log["requests"]:
        if "mark=" in request["path"]:
            found.append((request["seq"], request["vm"], request["path"].rsplit("mark=", 1)[1]))
    for approval in audit_log["approvals"]:
        found.append((approval["seq"], approval["vm"], "approve " + " ".join(approval["event_ids"])))
    for change in audit_log["transitions"]:
        if change["event_id"] in by_event:
            found.append((change["seq"], by_event[change["event_id"]], change["to"]))
    return [(host, what) for _seq, host, what in sorted(found)]


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle


def test_a_mixed_inventory_is_reported_then_maintained_one_host_at_a_time(mock, run_playbook, tmp_path):
    events = dict((host, mock.control("POST", "events", {"event_type": EVENT_TYPES[host], "resources": [host],
                                                         "notice": 900, "duration": 0})["event_id"])
                  for host in HOSTS)
    hosts = inventory(mock)

    # 1. The report: every host read, the Windows one through win_uri, each event listed once.
    report_log = tmp_path / "report-win_uri.log"
    report = run_playbook("report", hosts, {"report_dir": "out"}, cwd=tmp_path,
                          env={"ANSIBLE_COLLECTIONS_PATH": [STANDIN], "WIN_URI_STANDIN_LOG": str(report_log)})
    assert report.rc == 0, report
    with open(str(tmp_path / "out" / "scheduled_events.json")) as handle:
        written = json.load(handle)
    assert written["hosts_with_errors"] == [], written
    listed = dict((event["event_id"], event) for event in written["events"])
    assert sorted(listed) == sorted(events.values()), written["events"]
    for host, event_id in events.items():
        assert listed[event_id]["hosts"] == [host], listed[event_id]
        assert listed[event_id]["event_type"] == EVENT_TYPES[host], listed[event_id]
        # An availability set's events are shown to each member: the Windows host read them too.
        assert listed[event_id]["seen_by"] == list(HOSTS), listed[event_id]
    assert "Scheduled events seen by 3 hosts" in report.output, report
    # Only the Windows host's reads went through win_uri; the Linux hosts' modules read for themselves.
    assert set(standin_requests(report_log)) == {("GET", WINDOWS)}, standin_requests(report_log)
    assert len(standin_requests(report_log)) == len(module_requests(mock, 0, WINDOWS))
    assert all(module_requests(mock, 0, vm) for vm in ("web_0", "web_1"))

    # 2. The rollout: serial 1, each host drained, approved, its event over, recovered, checked.
    since = mock.control("GET", "audit")["last_seq"]
    rollout_log = tmp_path / "rolling_maintenance-win_uri.log"
    files = dict(("rolling_maintenance_%s_tasks" % step, mark_tasks(tmp_path, step)) for step in STEPS)
    rollout = run_playbook("rolling_maintenance", hosts, files,
                           env={"ANSIBLE_COLLECTIONS_PATH": [STANDIN], "WIN_URI_STANDIN_LOG": str(rollout_log)})
    assert rollout.rc == 0, rollout
    expected = []
    for host in HOSTS:
        expected += [(host, "drain"), (host, "approve " + events[host]), (host, "Started"), (host, "removed"),
                     (host, "recover"), (host, "health")]
    assert timeline(mock, since, events) == expected
    for host, event_id in events.items():
        assert mock.control("GET", "events/%s" % event_id)["status"] == "removed", host
    # The Windows host's reads, approval and wait went through win_uri, and only its own.
    through_win_uri = standin_requests(rollout_log)
    assert set(through_win_uri) == {("GET", WINDOWS), ("POST", WINDOWS)}, through_win_uri
    assert len(through_win_uri) == len(module_requests(mock, since, WINDOWS))
    assert all(module_requests(mock, since, vm) for vm in ("web_0", "web_1"))
