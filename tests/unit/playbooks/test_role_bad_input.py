# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling_maintenance and fleet_maintenance roles refuse a bad number in any numeric variable
before any host is read; fleet_maintenance also refuses an event it is given that is no scheduled event.

The values are the bad-input table's (tests/unit/hardening/test_bad_input.py), plus one past each
variable's maximum. One playbook run per role holds every case, one inventory host each, the role in
a block whose rescue keeps the message: each case must be refused, by a message that names the
variable, with no traceback, and the mock IMDS must have seen no request at all. fleet_maintenance
would read Resource Graph next, signed in from AZURE_* variables: none is set, so a case it accepted
would end in a sign-in error that names no variable of the table.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.once_per_run import once_per_run
from ansible_collections.azure_imds.scheduled_events.tests.support.bad_input import NUMBER_VALUES
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM, load_yaml, one_case_per_host_playbook, role_options
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import ROLES as ROLES_DIR

ROLES = ("rolling_maintenance", "fleet_maintenance")
RANGES = dict((role, dict((item["name"], item) for item in load_yaml(os.path.join(ROLES_DIR, role, "vars", "main.yml"))[
    "_%s_numbers" % role])) for role in ROLES)
EVENT = {"id": "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg/providers/Microsoft.Compute/"
               "virtualMachines/vm0/providers/Microsoft.Maintenance/scheduledevents/C7061BAC-AFDC-4513-B24B-AA5F13A16123",
         "event_id": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "event_type": "Reboot", "event_status": "Scheduled",
         "resources": ["vm0"]}
# Events fleet_maintenance is given that it must refuse: (case id, the variable named, hostvars).
EVENT_CASES = [
    ("fleet_maintenance_event-list", "fleet_maintenance_event", {"fleet_maintenance_event": [EVENT]}),
    ("fleet_maintenance_event-no_id", "fleet_maintenance_event",
     {"fleet_maintenance_event": dict((k, v) for k, v in EVENT.items() if k != "id")}),
    ("fleet_maintenance_event-vm_id", "fleet_maintenance_event",
     {"fleet_maintenance_event": dict(EVENT, id=EVENT["id"].split("/providers/Microsoft.Maintenance", maxsplit=1)[0])}),
    ("fleet_maintenance_event-resources_text", "fleet_maintenance_event",
     {"fleet_maintenance_event": dict(EVENT, resources="vm0")}),
    ("ansible_eda-no_scheduled_event", "ansible_eda.event",
     {"ansible_eda": {"event": {"payload": {"EventId": EVENT["event_id"]}}}}),
]


def cases(role):
    """(case id, variable, hostvars) of every case of a role."""
    for name in sorted(RANGES[role]):
        zero_ok = RANGES[role][name]["minimum"] <= 0
        for label, value in NUMBER_VALUES:
            if not (label == "zero" and zero_ok):
                yield "%s-%s" % (name, label), name, {name: value}
        yield "%s-above_maximum" % name, name, {name: RANGES[role][name]["maximum"] + 1}
    if role == "fleet_maintenance":
        yield from EVENT_CASES


CASES = dict((role, list(cases(role))) for role in ROLES)
# One run of 80-odd hosts; the limit only bounds a hang on a busy machine.
RUN_LIMIT = 1800


def run_every_case(role, workdir):
    """The one playbook run of every case of a role: [outcomes by case id, the mock's requests, the output]."""
    workdir = pathlib.Path(workdir)
    with start_mock(rate_limit=False) as mock:
        hosts = {}
        for number, (case_id, _name, hostvars) in enumerate(CASES[role]):
            hosts["case%03d" % number] = dict(hostvars, case_id=case_id, rolling_maintenance_imds_url=mock.vm_url("vm0"))
        inventory = workdir / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "outcomes_file": str(workdir / "outcomes.json")}}}))
        playbook = workdir / "playbook.yml"
        playbook.write_text(yaml.safe_dump(one_case_per_host_playbook(
            "Bad variables of the %s role, one case per host" % role, role), sort_keys=False))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="false",
                   ANSIBLE_LOCAL_TEMP=str(workdir / "tmp"), ANSIBLE_HOME=str(workdir / "home"))
        for name in list(env):
            if name == "AZURE_IMDS_URL" or name.startswith(("AZURE_", "ANSIBLE_AZURE_")):
                env.pop(name)
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), "--forks", "8",
                               str(playbook)], cwd=str(workdir), env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=RUN_LIMIT, check=False)
        requests = mock.control("GET", "audit")["requests"]
    output = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, output[-6000:]
    with open(str(workdir / "outcomes.json"), encoding="utf-8") as handle:
        return [json.load(handle), requests, output]


def outcomes_of(role):
    # Once for every case of the run (ansible-test forks each test: see tests/support/once_per_run.py).
    return once_per_run("role-bad-input-%s" % role, lambda workdir: run_every_case(role, workdir))


ALL_CASES = [(role,) + case for role in ROLES for case in CASES[role]]


def test_every_numeric_variable_is_in_the_range_table():
    # A raw option whose default is null is a number that null switches off (the short-Freeze policy).
    for role, count in (("rolling_maintenance", 7), ("fleet_maintenance", 3)):
        numbers = sorted(name for name, spec in role_options(role).items()
                         if (isinstance(spec["default"], (int, float)) and not isinstance(spec["default"], bool))
                         or (spec["default"] is None and spec["type"] == "raw"))
        assert len(numbers) == count and numbers == sorted(RANGES[role]), role


@pytest.mark.parametrize("role, case_id, name, hostvars", ALL_CASES, ids=[case[1] for case in ALL_CASES])
def test_a_bad_variable_is_refused_by_name_before_any_request(role, case_id, name, hostvars):
    found, requests, output = outcomes_of(role)
    outcome = found[case_id]
    assert outcome["refused"], "%s: %r was accepted" % (case_id, hostvars)
    assert name in outcome["msg"], outcome
    assert "Traceback" not in outcome["msg"] and "Traceback" not in output
    assert requests == [], requests[:3]
