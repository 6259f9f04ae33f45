# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rolling_maintenance's own cases, run for real against the mock IMDS on 127.0.0.1: failed drains,
timeouts, gate mode, bad variables, host patterns, summaries, shared and late events, policies.

They run with the newest ansible-core only (tests/harness/run_suites.py, CORE_INDEPENDENT_UNITS):
test_playbook_runs.py runs every playbook's main path on every supported core, and these cases
exercise the role's own decisions on top of the same tasks.
"""

import json
import re
import threading
import time

import pytest

from ansible_collections.azure_imds.scheduled_events.tests.unit.playbooks.test_playbook_runs import (  # pylint: disable=unused-import
    HOSTS, add_event, approvals, hosts_for, mock, status)


def test_a_failed_drain_stops_the_rollout_before_the_next_batch(mock, run_playbook, marks_tasks):
    first = add_event(mock, "web_0")
    failing = add_event(mock, "web_1", "Redeploy")
    untouched = add_event(mock, "web_2")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain", fail_on="web_1"),
    })
    assert run.rc != 0, run
    assert approvals(mock) == {"web_0": [first]}
    assert status(mock, failing) == status(mock, untouched) == "Scheduled"
    assert marks_tasks.read() == ["web_0 drain", "web_1 drain"]
    message = " ".join(run.output.split())
    assert "rolling_maintenance stopped at host web_1 (VM web_1), events Redeploy %s Scheduled, step 'drain'" \
        % failing in message, run
    assert "drain refused on purpose" in message
    assert "The host was left drained" not in message


def test_a_wait_that_times_out_names_its_step_and_says_the_host_is_drained(mock, run_playbook):
    long_reboot = add_event(mock, "web_0", duration=3600)
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"]), {
        "rolling_maintenance_complete_timeout": 0,
    })
    assert run.rc != 0, run
    message = " ".join(run.output.split())
    assert "step 'wait until completed'" in message, run
    assert "Timed out after" in message and long_reboot in message
    assert "The host was left drained" in message
    # web_1 (second batch) was never read: the play ended with the first batch.
    assert not [r for r in mock.control("GET", "audit")["requests"] if r["vm"] == "web_1"]


def test_a_host_that_cannot_be_read_stops_the_rollout_with_its_name(mock, run_playbook):
    later = add_event(mock, "web_1")
    hosts = hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"])
    # A VM the mock does not know answers 404 at once (no retry, no waiting).
    hosts["web_0"]["rolling_maintenance_imds_url"] = mock.vm_url("ghost")
    run = run_playbook("rolling_maintenance", hosts)
    assert run.rc != 0
    message = " ".join(run.output.split())
    assert "rolling_maintenance stopped at host web_0, step 'read events', before anything was done to it: " \
        "GET %s/metadata/instance/compute/name" % mock.vm_url("ghost") in message, run
    assert status(mock, later) == "Scheduled"
    assert approvals(mock) == {}


def test_gate_mode_handles_due_maintenance_first_and_runs_the_work_everywhere(mock, run_playbook, marks_tasks):
    due = add_event(mock, "web_0", notice=600)
    later = add_event(mock, "web_1", notice=7200)
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_mode": "gate",
        "rolling_maintenance_gate_window": 1800,
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_work_tasks": marks_tasks("work"),
    })
    assert run.rc == 0, run
    assert approvals(mock) == {"web_0": [due]}
    assert status(mock, later) == "Scheduled"
    assert marks_tasks.read() == ["web_0 drain", "web_0 work", "web_1 work", "web_2 work"]
    assert "not handled now (due later than the gate window of 1800 s): Reboot %s" % later in run.output


def test_gate_mode_without_work_is_refused_before_any_host_is_read(mock, run_playbook):
    add_event(mock, "web_0")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"),
                       {"rolling_maintenance_mode": "gate"})
    assert run.rc != 0
    assert "neither rolling_maintenance_work_tasks nor rolling_maintenance_work_role is set" in run.output, run
    assert mock.control("GET", "audit")["requests"] == []


@pytest.mark.parametrize("extra, expected", [
    ({"rolling_maintenance_mode": "rolling"}, "rolling_maintenance_mode"),
    ({"rolling_maintenance_gate_window": "soon"}, "rolling_maintenance_gate_window"),
    ({"rolling_maintenance_drain_tasks": "no/such/drain.yml"},
     "rolling_maintenance_drain_tasks names %s, which is not a file on the controller"),
])
def test_bad_variables_are_refused_with_their_name(mock, run_playbook, tmp_path, extra, expected):
    add_event(mock, "web_0")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), extra)
    assert run.rc != 0
    if "%s" in expected:
        expected %= tmp_path / "no" / "such" / "drain.yml"
    assert expected in " ".join(run.output.split()), run
    assert mock.control("GET", "audit")["requests"] == []


@pytest.mark.parametrize("extra, shown", [
    ({"rolling_maintenance_serial": "abc", "rolling_maintenance_max_fail_percentage": "x"}, ("abc", "x")),
    ({"rolling_maintenance_serial": [1, "150%"], "rolling_maintenance_max_fail_percentage": 101}, ("[1, '150%']", "101")),
    ({"rolling_maintenance_serial": True, "rolling_maintenance_max_fail_percentage": float("nan")}, ("True", "nan")),
])
def test_bad_play_level_variables_are_refused_before_the_play(mock, run_playbook, extra, shown):
    add_event(mock, "web_0")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), extra)
    assert run.rc != 0
    message = " ".join(run.output.split())
    assert "rolling_maintenance_serial must be a whole number of hosts from 1, a percentage from 1%% to 100%% such as " \
        "25%%, or a non-empty list of them; got %s." % shown[0] in message, run
    assert "rolling_maintenance_max_fail_percentage must be a number from 0 to 100 (0 stops the rollout at the first " \
        "failure); got %s." % shown[1] in message, run
    assert "Traceback" not in run.output
    assert mock.control("GET", "audit")["requests"] == []


# A pattern that matches nothing must not end in "skipping: no hosts matched" and exit status 0: a
# scheduled AWX job would report success while nothing was looked at.
@pytest.mark.parametrize("names, extra, options, expected", [
    # The rolling maintenance guide's command, against the inventory of the testing guide (no group web).
    (HOSTS, {"rolling_maintenance_hosts": "web"}, [],
     "rolling_maintenance_hosts is 'web', which matches no host of the inventory (hosts: web_0, web_1, web_2; "
     "groups: none but all and ungrouped). Set rolling_maintenance_hosts to a group or host pattern of the "
     "inventory (-e rolling_maintenance_hosts=...), or give the inventory that holds these hosts (-i)."),
    ((), {}, [],
     "rolling_maintenance_hosts is not set, so the play runs on 'all', which matches no host of the inventory "
     "(hosts: none; groups: none but all and ungrouped)."),
    (HOSTS, {"rolling_maintenance_hosts": "web_0:web_1"}, ["--limit", "web_2"],
     "rolling_maintenance_hosts is 'web_0:web_1', which matches web_0, web_1, but --limit 'web_2' leaves none of "
     "them. Choose a limit among these hosts, or another rolling_maintenance_hosts."),
])
def test_a_host_pattern_that_matches_nothing_fails_naming_it(mock, run_playbook, names, extra, options, expected):
    event = add_event(mock, "web_0")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", names), extra, options=options)
    assert run.rc != 0, run
    assert expected in " ".join(run.output.split()), run
    assert "Traceback" not in run.output
    assert mock.control("GET", "audit")["requests"] == []
    assert status(mock, event) == "Scheduled"


def test_a_limit_still_chooses_the_hosts_and_the_play_level_checks_still_run(mock, run_playbook):
    untouched = add_event(mock, "web_0")
    limited = add_event(mock, "web_2")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), options=["--limit", "web_2"])
    assert run.rc == 0, run
    assert approvals(mock) == {"web_2": [limited]}
    assert status(mock, untouched) == "Scheduled"
    # The check of the play-level variables ran on localhost only, so --limit skipped it (a traceback).
    refused = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"),
                           {"rolling_maintenance_serial": "abc"}, options=["--limit", "web_2"])
    assert refused.rc != 0
    assert "rolling_maintenance_serial must be a whole number of hosts from 1" in " ".join(refused.output.split()), refused
    assert "Traceback" not in refused.output


def test_relative_tasks_files_are_taken_from_the_working_directory(mock, run_playbook, marks_tasks, tmp_path):
    add_event(mock, "web_1")
    marks_tasks("drain")  # written to tmp_path/drain.yml, the working directory of the run
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"),
                       {"rolling_maintenance_drain_tasks": "drain.yml"}, cwd=tmp_path)
    assert run.rc == 0, run
    assert marks_tasks.read() == ["web_1 drain"]


def summary_lines(output, task):
    """The lines a debug task printed as its msg list (the default callback shows them as JSON)."""
    start = output.index("TASK [azure_imds.scheduled_events.rolling_maintenance : %s]" % task)
    begin = output.index('"msg": [', start) + len('"msg": ')
    end = output.index("\n    ]", begin) + len("\n    ]")
    return json.loads(output[begin:end])


STEP_LINE = re.compile(r"^  (?P<clock>\d\d:\d\d:\d\d)  \+(?P<offset>[0-9.hms]+)\s+(?P<step>[a-z]+(?: [a-z]+)*)(?:\s{2,}(?P<detail>.*))?$")


def steps_of(lines):
    return [dict(STEP_LINE.match(line).groupdict(), detail=STEP_LINE.match(line).group("detail") or "")
            for line in lines if STEP_LINE.match(line)]


def test_rolling_maintenance_ends_with_a_summary_per_host(mock, run_playbook, marks_tasks):
    reboot = add_event(mock, "web_0", "Reboot")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"]), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
    })
    assert run.rc == 0, run
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    assert lines[0] == "web_0 (VM web_0): Reboot %s Scheduled" % reboot, lines
    steps = steps_of(lines)
    assert [step["step"] for step in steps] == ["drain", "approve", "wait until started", "wait until completed",
                                                "wait for the connection", "recover", "health check", "done"], lines
    details = dict((step["step"], step["detail"]) for step in steps)
    # What the mock recorded is what the summary says was approved.
    assert approvals(mock) == {"web_0": [reboot]}
    assert details["approve"].startswith("approved %s; took " % reboot), details
    assert re.match(r"^started after \d+\.\ds; took \d+\.\ds$", details["wait until started"]), details
    assert re.match(r"^completed after \d+\.\ds; took \d+\.\ds$", details["wait until completed"]), details
    assert details["done"] == ""
    clocks = [step["clock"] for step in steps]
    assert clocks == sorted(clocks) and steps[0]["offset"] == "0.0s"
    assert re.match(r"^  drained in \d+\.\ds, waited \d+\.\ds, recovered in \d+\.\ds; \d+\.\ds in all$", lines[len(steps) + 1]), lines
    assert lines[len(steps) + 2:] == ["web_1 (VM web_1): no scheduled event, left alone"], lines


def test_a_user_reboot_the_policy_approved_is_reported_as_undrainable(mock, run_playbook, marks_tasks):
    # Azure publishes a user's Reboot already Started when the Scheduled Events Policy approves it
    # automatically. It lasts until the test moves the mock's clock, which it does once the wait's
    # own first read (the third GET: the round's read, the wait's read, its first watch) is in the audit.
    reboot = add_event(mock, "web_0", "Reboot", status="Started", event_source="User", duration=600)

    def gets():
        return [r for r in mock.control("GET", "audit?vm=web_0")["requests"]
                if r["method"] == "GET" and "scheduledevents" in r["path"]]

    def finish_when_watched():
        deadline = time.monotonic() + 120
        while len(gets()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        mock.control("POST", "time/advance", {"seconds": 600})

    helper = threading.Thread(target=finish_when_watched, daemon=True)
    helper.start()
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0"]), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
    })
    helper.join(10)
    assert run.rc == 0, run
    said = "web_0: Reboot %s (EventSource User) first seen Started: approved automatically by the Scheduled Events " \
           "Policy, no drain was possible." % reboot
    assert said in " ".join(run.output.split()), run.output
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    details = dict((step["step"], step["detail"]) for step in steps_of(lines))
    assert "%s approved automatically by the Scheduled Events Policy, no drain was possible" % reboot in \
        details["wait until completed"], lines
    assert approvals(mock) == {}


def test_a_host_that_failed_shows_its_steps_up_to_the_failure(mock, run_playbook, marks_tasks):
    failing = add_event(mock, "web_0", "Redeploy")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0"]), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain", fail_on="web_0"),
    })
    assert run.rc != 0, run
    lines = summary_lines(run.output, "Show what was done to this host before it stopped")
    assert lines[0] == "web_0 (VM web_0): Redeploy %s Scheduled" % failing
    steps = steps_of(lines)
    assert [(step["step"], step["detail"]) for step in steps] == [("drain", "STOPPED here")], lines
    assert lines[-1].startswith("  stopped at step 'drain' after "), lines
    assert "Show what was done to each host, and when (UTC)]" not in run.output


def queue_next_event_tasks(tmp_path, mock, recover_marks):
    """Recover tasks that queue this VM's next event on the mock, once per host, as Azure does when it
    moves on to the next fault domain; the event's id is kept in tmp_path/queued-<host>."""
    path = tmp_path / "recover_and_queue.yml"
    queued = str(tmp_path / "queued-{{ inventory_hostname }}")
    path.write_text(json.dumps([
        {"name": "Record the recovery", "ansible.builtin.include_tasks": recover_marks},
        {"name": "Queue the event of the next fault domain, once",
         "ansible.builtin.uri": {"url": mock.url + "/_mock/events", "method": "POST", "body_format": "json",
                                 "body": {"event_type": "Freeze", "resources": ["{{ inventory_hostname }}"],
                                          "duration": 0},
                                 "status_code": [201]},
         "register": "queued_event", "when": "'%s' is not exists" % queued},
        {"name": "Keep its id",
         "ansible.builtin.copy": {"content": "{{ queued_event.json.event_id }}", "dest": queued, "mode": "0644"},
         "when": "queued_event is not skipped"},
    ]))
    return str(path)


def queued_event(tmp_path, host):
    return (tmp_path / ("queued-" + host)).read_text()


def test_an_event_that_comes_right_after_the_first_is_handled_in_the_same_run(mock, run_playbook, marks_tasks, tmp_path):
    first = add_event(mock, "web_0", "Reboot")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"]), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": queue_next_event_tasks(tmp_path, mock, marks_tasks("recover")),
    })
    assert run.rc == 0, run
    second = queued_event(tmp_path, "web_0")
    assert approvals(mock) == {"web_0": [first, second]}
    assert status(mock, first) == status(mock, second) == "removed"
    # web_1's recovery never ran, so nothing was queued for it.
    assert marks_tasks.read() == ["web_0 drain", "web_0 recover", "web_0 drain", "web_0 recover"]
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    assert lines[0] == "web_0 (VM web_0): Reboot %s Scheduled; then Freeze %s Scheduled" % (first, second), lines
    steps = steps_of(lines)
    assert [step["step"] for step in steps] == 2 * ["drain", "approve", "wait until started", "wait until completed",
                                                    "wait for the connection", "recover", "health check", "done"], lines
    assert steps[0]["detail"].startswith("round 1; took ") and steps[8]["detail"].startswith("round 2; took "), lines
    assert steps[9]["detail"].startswith("approved %s; took " % second), lines
    assert lines[-1] == "web_1 (VM web_1): no scheduled event, left alone", lines


def test_events_left_after_the_last_round_are_shown_and_left_alone(mock, run_playbook, marks_tasks, tmp_path):
    first = add_event(mock, "web_0", "Reboot")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0"]), {
        "rolling_maintenance_max_rounds": 1,
        "rolling_maintenance_recover_tasks": queue_next_event_tasks(tmp_path, mock, marks_tasks("recover")),
    })
    assert run.rc == 0, run
    second = queued_event(tmp_path, "web_0")
    assert approvals(mock) == {"web_0": [first]}
    assert status(mock, second) == "Scheduled"
    message = " ".join(run.output.split())
    assert "web_0: after 1 round(s) these events name it still, and are left for a later run: Freeze %s Scheduled. " \
        "Run the playbook again, or raise rolling_maintenance_max_rounds." % second in message, run
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    assert lines[0] == "web_0 (VM web_0): Reboot %s Scheduled" % first, lines
    assert lines[-1] == "  still named after 1 round(s), left for a later run: Freeze %s Scheduled" % second, lines


def test_events_without_interruption_are_approved_without_draining(mock, run_playbook, marks_tasks):
    no_interruption = add_event(mock, "web_0", "Freeze", duration_in_seconds=0)
    also_zero = add_event(mock, "web_1", "Freeze", duration_in_seconds=0)
    unknown = add_event(mock, "web_1", "Reboot", duration_in_seconds=-1)
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"]), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
        "rolling_maintenance_health_tasks": marks_tasks("health"),
    })
    assert run.rc == 0, run
    assert dict((vm, sorted(ids)) for vm, ids in approvals(mock).items()) == {
        "web_0": [no_interruption], "web_1": sorted([also_zero, unknown])}
    # One event of unknown length (-1) in the round is enough to drain.
    assert marks_tasks.read() == ["web_0 health", "web_1 drain", "web_1 recover", "web_1 health"]
    steps = steps_of(summary_lines(run.output, "Show what was done to each host, and when (UTC)"))
    details = dict((step["step"], step["detail"]) for step in steps[:8])
    assert details["drain"].startswith("not drained: DurationInSeconds 0, no interruption; took "), details
    assert details["wait for the connection"].startswith("skipped: DurationInSeconds 0, no interruption"), details
    assert details["recover"].startswith("nothing to recover: DurationInSeconds 0, no interruption"), details
    assert not steps[8]["detail"].startswith("not drained"), steps


# An event's Resources can name several VMs (an availability set): approving it from one VM starts it
# on all of them. With one host per batch, web_0's approval froze web_2 undrained, and the summary
# said web_2 was left alone.
def add_shared_event(mock, vms, event_type="Freeze", **spec):
    spec.setdefault("duration", 0)
    spec.update(event_type=event_type, resources=list(vms))
    return mock.control("POST", "events", spec)["event_id"]


def test_an_event_naming_a_host_of_another_batch_stops_the_rollout_before_any_drain(mock, run_playbook, marks_tasks):
    shared = add_shared_event(mock, ["web_0", "web_2"], duration_in_seconds=30)
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
    })
    assert run.rc != 0, run
    assert approvals(mock) == {}
    assert status(mock, shared) == "Scheduled"
    assert marks_tasks.read() == []
    message = " ".join(run.output.split())
    assert "rolling_maintenance stopped at host web_0 (VM web_0) before draining it: Freeze %s also names web_2 " \
        "(VM web_2), a host of this play in another batch." % shared in message, run
    assert "nothing was done to web_0" in message
    assert "rolling_maintenance_freeze_max_duration" in message


def test_an_event_naming_several_hosts_of_one_batch_is_approved_once_all_are_drained(mock, run_playbook, marks_tasks):
    shared = add_shared_event(mock, ["web_0", "web_2"], "Reboot")
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_serial": 3,
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
    })
    assert run.rc == 0, run
    assert status(mock, shared) == "removed"
    audit = mock.control("GET", "audit")
    marks = marks_tasks.read()
    # Both drained before the first approval reached the mock, both recovered after.
    assert sorted(marks[:2]) == ["web_0 drain", "web_2 drain"] and sorted(marks[2:]) == ["web_0 recover", "web_2 recover"], marks
    assert audit["approvals"] and set(approvals(mock)) <= {"web_0", "web_2"}
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    approve = [step["detail"] for step in steps_of(lines) if step["step"] == "approve"]
    # Both approve in the same task: the second may find the event Started already.
    notes = [detail.split("; took ")[0] for detail in approve]
    assert len(notes) == 2 and "approved %s, which touches web_0, web_2" % shared in notes, lines
    assert set(notes) <= {"approved %s, which touches web_0, web_2" % shared, "nothing to approve (already Started)"}, lines
    assert "web_1 (VM web_1): no scheduled event, left alone" in lines


def test_a_host_of_the_batch_that_does_not_drain_for_a_shared_event_blocks_its_approval(mock, run_playbook, marks_tasks):
    shared = add_shared_event(mock, ["web_0", "web_1"], duration_in_seconds=30)
    hosts = hosts_for(mock, "rolling_maintenance", ["web_0", "web_1"])
    hosts["web_1"]["rolling_maintenance_event_types"] = ["Reboot"]
    run = run_playbook("rolling_maintenance", hosts, {
        "rolling_maintenance_serial": 2, "rolling_maintenance_drain_tasks": marks_tasks("drain")})
    assert run.rc != 0, run
    assert approvals(mock) == {}
    assert status(mock, shared) == "Scheduled"
    assert marks_tasks.read() == []
    assert "Freeze %s also names web_1 (VM web_1), which is in this batch but does not handle it now" % shared \
        in " ".join(run.output.split()), run


def test_a_short_freeze_under_the_chosen_policy_is_approved_undrained_and_the_summary_names_every_host(
        mock, run_playbook, marks_tasks):
    shared = add_shared_event(mock, ["web_0", "web_2"], duration_in_seconds=5)
    run = run_playbook("rolling_maintenance", hosts_for(mock, "rolling_maintenance"), {
        "rolling_maintenance_freeze_max_duration": 8,
        "rolling_maintenance_drain_tasks": marks_tasks("drain"),
        "rolling_maintenance_recover_tasks": marks_tasks("recover"),
        "rolling_maintenance_health_tasks": marks_tasks("health"),
    })
    assert run.rc == 0, run
    assert approvals(mock) == {"web_0": [shared]}
    assert status(mock, shared) == "removed"
    assert marks_tasks.read() == ["web_0 health"]
    lines = summary_lines(run.output, "Show what was done to each host, and when (UTC)")
    steps = steps_of(lines)
    details = dict((step["step"], step["detail"]) for step in steps)
    policy = "a Freeze of 5s, within rolling_maintenance_freeze_max_duration (8)"
    assert details["drain"].startswith("not drained: %s; took " % policy), details
    assert details["approve"].startswith("approved %s, which touches web_0, web_2; took " % shared), details
    web_2 = lines.index("web_2 (VM web_2): no scheduled event left when read")
    assert lines[web_2 + 1] == "  touched: Freeze %s was started here by the approval of web_0 (round 1); not drained: %s" \
        % (shared, policy), lines
    assert not [line for line in lines if line.startswith("web_2") and "left alone" in line], lines


# Every option of a playbook's role whose type can be wrong (a str option takes any value as text),
# given a wrong value in one run: the role's argument spec must refuse each by name, before any host is read.
