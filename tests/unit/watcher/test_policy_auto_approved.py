"""An event the Scheduled Events Policy approved automatically, as the watcher reports it.

With userInitiatedReboot / userInitiatedRedeploy automaticallyApprove on, Azure publishes a user's
Reboot or Redeploy already Started: no drain can run. The watcher says so once per event (a log
line and events_auto_approved_total), from what its state file says it saw: a restart mid-event
says nothing again, an event it saw Scheduled first is no automatic approval, and a Platform
event first seen Started only started before it was seen. The mock adds each case through its
control API; every step is the real program (`run --once`)."""

import re

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from .test_e2e_mock import FLEET, Vm

POLICY_WORDS = "approved automatically by the Scheduled Events Policy, no drain was possible"
METRIC = "azure_imds_watcher_events_auto_approved_total"


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle


def counted(textfile, event_type):
    match = re.search(r'^%s\{event_type="%s"\} (\S+)$' % (METRIC, event_type), textfile.read_text(), re.M)
    assert match, textfile.read_text()
    return float(match.group(1))


def test_user_reboot_first_seen_started_is_reported_once_across_a_restart(tmp_path, mock):
    textfile = tmp_path / "watcher.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    eid = vm.event(event_type="Reboot", resources=["web_0"], status="Started", event_source="User")
    out = vm.once()
    lines = [line for line in out.splitlines() if POLICY_WORDS in line]
    assert len(lines) == 1, out
    assert eid in lines[0] and "Reboot with EventSource User was first seen Started" in lines[0]
    assert "azure_imds.scheduled_events.scheduled_events_policy" in lines[0]
    assert counted(textfile, "Reboot") == 1 and counted(textfile, "Redeploy") == 0
    # The started handlers run as for any Started event; nothing is approved (nothing could be).
    assert vm.lines() == ["started %s" % eid] and vm.approvals() == []
    # A new process on the same state directory: the watcher restarted while the event runs.
    out = vm.once()
    assert POLICY_WORDS not in out and "first seen Started" not in out
    assert counted(textfile, "Reboot") == 0


def test_user_event_seen_scheduled_then_started_is_no_automatic_approval(tmp_path, mock):
    mock.control("POST", "config", {"approval_mode": "not_before"})   # the watcher's approval starts nothing
    textfile = tmp_path / "watcher.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    eid = vm.event(event_type="Redeploy", resources=["web_0"], event_source="User")
    vm.once()
    mock.control("POST", "events/%s/start" % eid)
    out = vm.once()
    assert vm.status_of(eid) == "Started"
    assert "Scheduled -> Started" in out
    assert POLICY_WORDS not in out and "first seen Started" not in out
    assert counted(textfile, "Redeploy") == 0


def test_platform_event_first_seen_started_only_started_before_it_was_seen(tmp_path, mock):
    textfile = tmp_path / "watcher.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    eid = vm.event(event_type="Reboot", resources=["web_0"], status="Started", event_source="Platform")
    out = vm.once()
    line = [line for line in out.splitlines() if "first seen Started" in line]
    assert len(line) == 1 and eid in line[0]
    assert "started before it was seen, no drain was possible" in line[0]
    assert "Scheduled Events Policy" not in out
    assert counted(textfile, "Reboot") == 0


def test_the_mocks_policy_publishes_a_user_reboot_started_and_the_watcher_says_so(tmp_path):
    """The same report when the event comes from the mock's Scheduled Events Policy (the fleet's
    availability set auto-approves user reboots), not from an event added Started: the user's
    Reboot is asked for like any other and IMDS never shows it Scheduled."""
    policy = {"userInitiatedReboot": {"automaticallyApprove": True}}
    fleet = {"default_vm": FLEET["default_vm"],
             "groups": [dict(FLEET["groups"][0], scheduled_events_policy=policy)]}
    with start_mock(fleet=fleet, rate_limit=False) as handle:
        textfile = tmp_path / "watcher.prom"
        vm = Vm(tmp_path, handle, metrics_textfile=str(textfile))
        eid = vm.event(event_type="Reboot", resources=["web_0"], event_source="User")
        assert vm.status_of(eid) == "Started"
        out = vm.once()
        lines = [line for line in out.splitlines() if POLICY_WORDS in line]
        assert len(lines) == 1 and eid in lines[0], out
        assert counted(textfile, "Reboot") == 1
        assert vm.approvals() == []
        # The mock's own record: the policy, not an approval, started it.
        causes = [t["cause"] for t in handle.control("GET", "audit")["transitions"] if t["event_id"] == eid]
        assert causes == ["policy"], causes
