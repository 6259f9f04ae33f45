# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""extensions/demo/timeline.py: the check that the demo and the molecule scenario rely on must fail
when the order is wrong or two hosts overlap, and pass on a good run."""

import json

import pytest

from ansible_collections.azure_imds.scheduled_events.extensions.demo import timeline

IDS = {"web_0": "AAAAAAAA-0000-0000-0000-000000000000", "web_1": "BBBBBBBB-0000-0000-0000-000000000000"}


def at(second):
    return "2026-01-01T10:00:%06.3fZ" % second


def run(plan):
    """plan: {host: {step: second}} -> (audit, events, marks) as the mock and the marks file give them."""
    audit = {"approvals": [], "transitions": []}
    events, marks = [], []
    for host, steps in plan.items():
        event_id = IDS[host]
        events.append({"event_id": event_id, "event_type": "Reboot", "resources": [host], "event_source": "Platform"})
        for step, second in steps.items():
            if step == "approval":
                audit["approvals"].append({"time": at(second), "vm": host, "event_ids": [event_id]})
            elif step == "Started":
                audit["transitions"].append({"time": at(second), "event_id": event_id, "from": "Scheduled",
                                             "to": "Started", "cause": "approval"})
            elif step == "completed":
                audit["transitions"].append({"time": at(second), "event_id": event_id, "from": "Started",
                                             "to": "removed", "cause": "duration"})
            else:
                marks.append({"time": at(second), "when": timeline.parse_time(at(second)), "host": host, "vm": host,
                              "step": step})
    return audit, events, marks


GOOD = {"web_0": {"drain": 1, "approval": 2, "Started": 2, "completed": 5, "recover": 6, "health": 7},
        "web_1": {"drain": 8, "approval": 9, "Started": 9, "completed": 12, "recover": 13, "health": 14}}


def problems(plan, hosts=("web_0", "web_1", "web_2")):
    return timeline.check(timeline.build(*run(plan), hosts=list(hosts)), serial=1)


def test_a_good_run_has_no_problem_and_a_host_without_events_is_left_alone():
    timelines = timeline.build(*run(GOOD), hosts=["web_0", "web_1", "web_2"])
    assert timeline.check(timelines, serial=1) == []
    lines = timeline.render(timelines)
    assert lines[-1] == "web_2 (VM web_2): no scheduled event, left alone"
    assert lines[1].split()[1:3] == ["+", "0.00s"] and lines[1].split()[3] == "drain"


def test_an_approval_before_the_drain_is_reported():
    plan = json.loads(json.dumps(GOOD))
    plan["web_0"]["approval"] = 0.5
    assert problems(plan) == ["web_0: drain at 10:00:01.000 came after approval at 10:00:00.500"]


def test_a_recover_before_completion_is_reported():
    plan = json.loads(json.dumps(GOOD))
    plan["web_1"]["recover"] = 11
    assert problems(plan) == ["web_1: completed at 10:00:12.000 came after recover at 10:00:11.000"]


def test_two_hosts_in_maintenance_at_once_are_reported():
    plan = json.loads(json.dumps(GOOD))
    plan["web_1"] = {"drain": 4, "approval": 4.5, "Started": 4.5, "completed": 9, "recover": 10, "health": 11}
    found = problems(plan)
    assert found == ["web_0 and web_1 were in maintenance at once (web_1 began at 10:00:04.000, before web_0 ended "
                     "at 10:00:07.000)"]


def test_a_host_that_never_recovered_is_reported():
    plan = json.loads(json.dumps(GOOD))
    del plan["web_1"]["recover"], plan["web_1"]["health"]
    assert problems(plan) == ["web_1 never reached recover (saw: drain, approval, Started, completed)"]


def test_a_host_without_events_that_was_drained_is_reported():
    audit, events, marks = run(GOOD)
    marks.append({"time": at(20), "when": timeline.parse_time(at(20)), "host": "web_2", "vm": "web_2", "step": "drain"})
    found = timeline.check(timeline.build(audit, events, marks, ["web_2"]), serial=1)
    assert found == ["web_2 had no event but went through drain"]


def test_marks_file_errors_name_the_line(tmp_path):
    path = tmp_path / "marks.jsonl"
    path.write_text('{"time": "2026-01-01T10:00:00Z", "host": "a", "step": "drain"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not a mark"):
        timeline.read_marks(str(path))
