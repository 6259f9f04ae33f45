# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report role's templates, rendered by Ansible's own template lookup on fixed readings."""

import json
import os

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar

from ansible.template import trust_as_template

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import ROLES

TEMPLATES = os.path.join(ROLES, "report", "templates")

init_plugin_loader([])


def render(name, variables):
    """What `lookup('ansible.builtin.template', name)` gives inside the report role."""
    loader = DataLoader()
    loader.set_basedir(TEMPLATES)
    templar = Templar(loader=loader, variables=variables)
    return templar.template(trust_as_template("{{ lookup('ansible.builtin.template', '%s') }}"
                                              % os.path.join(TEMPLATES, name)))


def event(event_id, event_type="Reboot", status="Scheduled", resources=("web_0",), not_before="2026-01-01T10:15:00Z",
          seconds=900.0, source="Platform", description="", affects=False):
    return {"event_id": event_id, "event_type": event_type, "event_status": status, "resource_type": "VirtualMachine",
            "resources": list(resources), "not_before": None if status == "Started" else not_before,
            "description": description, "event_source": source, "duration_in_seconds": -1,
            "affects_this_host": affects, "seconds_to_not_before": None if status == "Started" else seconds}


def reading(host, vm, events, error=None):
    return {"report_reading": {"host": host, "resource_name": vm, "document_incarnation": None if error else 3,
                               "events": events, "error": error}}


def fleet(hostvars, hosts=None):
    variables = {"hostvars": hostvars, "report_host_list": hosts or sorted(hostvars),
                 "report_generated_at": "2026-01-01T10:00:00Z"}
    return json.loads(render("report_fleet.json.j2", variables))


SHARED = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
LATER = "2026-01-01T11:01:40Z"
AVSET = {
    # Every member of the availability set sees both events; IMDS may spell an id in another case.
    "web_0": reading("web_0", "web_0", [event(SHARED, "Freeze", resources=("web_0", "web_1"), seconds=840.9),
                                        event("AAAA0000-0000-0000-0000-000000000001", seconds=3700, resources=("web_2",), not_before=LATER)]),
    "web_1": reading("web_1", "web_1", [event(SHARED.lower(), "Freeze", resources=("web_0", "web_1"), seconds=838.2),
                                        event("AAAA0000-0000-0000-0000-000000000001", seconds=3699, resources=("web_2",), not_before=LATER)]),
    "web_2": reading("web_2", "web_2", [event(SHARED, "Freeze", resources=("web_0", "web_1"), seconds=845.0),
                                        event("AAAA0000-0000-0000-0000-000000000001", seconds=3701, resources=("web_2",), not_before=LATER)]),
}


def test_an_event_seen_by_every_member_is_one_row_with_the_hosts_it_names():
    report = fleet(AVSET)
    assert [e["event_id"] for e in report["events"]] == [SHARED, "AAAA0000-0000-0000-0000-000000000001"]
    shared = report["events"][0]
    assert shared["hosts"] == ["web_0", "web_1"]
    assert shared["seen_by"] == ["web_0", "web_1", "web_2"]
    assert shared["vms_not_in_inventory"] == []
    # The most cautious reading of the time left wins.
    assert shared["seconds_to_not_before"] == 838.2
    assert shared["time_left"] == "13m 58s"
    assert report["events"][1]["time_left"] == "1h 01m"


def test_started_events_come_first_then_by_not_before():
    readings = {"a": reading("a", "vm_a", [
        event("00000000-0000-0000-0000-00000000000C", not_before="2026-01-03T00:00:00Z", seconds=2 * 86400 + 3 * 3600),
        event("00000000-0000-0000-0000-00000000000B", status="Started"),
        event("00000000-0000-0000-0000-00000000000A", not_before="2026-01-01T10:05:00Z", seconds=-65),
    ])}
    report = fleet(readings)
    assert [(e["event_id"][-1], e["time_left"]) for e in report["events"]] == [
        ("B", "started"), ("A", "overdue 1m 05s"), ("C", "2d 03h")]


def test_vms_outside_the_inventory_and_unread_hosts_are_shown():
    readings = {"web_0": reading("web_0", "web_0", [event(SHARED, resources=("web_0", "db_9"))]),
                "lost": reading("lost", None, [], error="no Instance Metadata Service at http://127.0.0.1:9")}
    report = fleet(readings, ["web_0", "lost", "gone"])
    assert report["events"][0]["hosts"] == ["web_0"]
    assert report["events"][0]["vms_not_in_inventory"] == ["db_9"]
    assert report["hosts_with_errors"] == ["lost", "gone"]
    assert report["hosts"][2] == {"host": "gone", "resource_name": None, "document_incarnation": None,
                                  "events_seen": 0, "events_affecting": [],
                                  "error": "no reading: the host was unreachable"}


def test_the_table_lines_up_its_columns():
    report = fleet(AVSET)
    lines = render("report_table.txt.j2", {"report_fleet": report}).splitlines()
    assert lines[0] == "Scheduled events seen by 3 hosts at 2026-01-01T10:00:00Z: 2 events"
    header, first, second = lines[1:4]
    assert header.split() == ["HOSTS", "EVENT", "TYPE", "STATUS", "SOURCE", "NOT", "BEFORE", "(UTC)", "TIME", "LEFT"]
    assert first.startswith("web_0, web_1  %s  Freeze  Scheduled  Platform  2026-01-01T10:15:00Z  13m 58s" % SHARED)
    assert second.startswith("web_2         AAAA0000-0000-0000-0000-000000000001  Reboot  Scheduled  Platform  %s" % LATER)
    for column in ("EVENT", "TYPE", "STATUS", "SOURCE", "NOT BEFORE", "TIME LEFT"):
        start = header.index(column)
        assert first[start - 2:start] == "  " and first[start] != " ", column
    assert len(lines) == 4


def test_the_table_says_when_nothing_is_pending_and_lists_unread_hosts():
    report = fleet({"web_0": reading("web_0", "web_0", []), "lost": reading("lost", None, [], error="boom")})
    lines = render("report_table.txt.j2", {"report_fleet": report}).splitlines()
    assert lines[1:] == ["No pending events.", "UNREAD lost: boom"]


def test_markdown_escapes_pipes_and_lists_every_host():
    readings = {"web_0": reading("web_0", "web_0", [event(SHARED, description="Host | maintenance", affects=True)])}
    markdown = render("report.md.j2", {"report_fleet": fleet(readings)})
    assert "| web_0 | `%s` | Reboot | Scheduled | Platform | 2026-01-01T10:15:00Z | 15m 00s | web_0 | " \
           "Host \\| maintenance |" % SHARED in markdown
    assert "| web_0 | web_0 | 3 | 1 | %s |  |" % SHARED in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert all(line.count("|") - line.count("\\|") == rows[0].count("|") for line in rows[:3])


@pytest.mark.parametrize("seconds, expected", [(0, "0m 00s"), (59.6, "1m 00s"), (3599, "59m 59s"), (3600, "1h 00m"),
                                               (86399, "23h 59m"), (86400, "1d 00h"), (-3600, "overdue 1h 00m")])
def test_time_left_is_written_for_people(seconds, expected):
    report = fleet({"a": reading("a", "a", [event(SHARED, seconds=seconds)])})
    assert report["events"][0]["time_left"] == expected
