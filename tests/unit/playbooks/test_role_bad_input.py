# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling_maintenance role refuses a bad number in any numeric variable before any host is read.

The values are the bad-input table's (tests/unit/hardening/test_bad_input.py), plus one past each
variable's maximum. One playbook run holds every case, one inventory host each, the role in a
block whose rescue keeps the message: each case must be refused, by a message that names the
variable, with no traceback, and the mock IMDS must have seen no request at all.
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
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM, ROLES, load_yaml, one_case_per_host_playbook, role_options

ROLE = "rolling_maintenance"
RANGES = dict((item["name"], item) for item in load_yaml(os.path.join(ROLES, ROLE, "vars", "main.yml"))[
    "_rolling_maintenance_numbers"])
NUMERIC = sorted(RANGES)


def cases():
    for name in NUMERIC:
        zero_ok = RANGES[name]["minimum"] <= 0
        for label, value in NUMBER_VALUES:
            if not (label == "zero" and zero_ok):
                yield "%s-%s" % (name, label), name, value
        yield "%s-above_maximum" % name, name, RANGES[name]["maximum"] + 1


CASES = list(cases())
PLAYBOOK = one_case_per_host_playbook("Bad numbers of the rolling_maintenance role, one case per host", ROLE)
# One run of 80-odd hosts; the limit only bounds a hang on a busy machine.
RUN_LIMIT = 1800


def run_every_case(workdir):
    """The one playbook run of every case: [outcomes by case id, the mock's requests, the output]."""
    workdir = pathlib.Path(workdir)
    with start_mock(rate_limit=False) as mock:
        hosts = {}
        for number, (case_id, name, value) in enumerate(CASES):
            hosts["case%03d" % number] = {"case_id": case_id, name: value,
                                          "rolling_maintenance_imds_url": mock.vm_url("vm0")}
        inventory = workdir / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "outcomes_file": str(workdir / "outcomes.json")}}}))
        playbook = workdir / "playbook.yml"
        playbook.write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="false",
                   ANSIBLE_LOCAL_TEMP=str(workdir / "tmp"), ANSIBLE_HOME=str(workdir / "home"))
        env.pop("AZURE_IMDS_URL", None)
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), "--forks", "8",
                               str(playbook)], cwd=str(workdir), env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=RUN_LIMIT, check=False)
        requests = mock.control("GET", "audit")["requests"]
    output = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, output[-6000:]
    with open(str(workdir / "outcomes.json"), encoding="utf-8") as handle:
        return [json.load(handle), requests, output]


@pytest.fixture
def outcomes():
    # Once for every case of the run (ansible-test forks each test: see tests/support/once_per_run.py).
    return once_per_run("role-bad-input", run_every_case)


def test_every_numeric_variable_is_in_the_range_table():
    # A raw option whose default is null is a number that null switches off (the short-Freeze policy).
    numbers = sorted(name for name, spec in role_options(ROLE).items()
                     if (isinstance(spec["default"], (int, float)) and not isinstance(spec["default"], bool))
                     or (spec["default"] is None and spec["type"] == "raw"))
    assert len(numbers) == 7 and numbers == NUMERIC


@pytest.mark.parametrize("case_id, name, value", CASES, ids=[case[0] for case in CASES])
def test_a_bad_number_is_refused_by_name_before_any_request(outcomes, case_id, name, value):
    found, requests, output = outcomes
    outcome = found[case_id]
    assert outcome["refused"], "%s = %r was accepted" % (name, value)
    assert name in outcome["msg"], outcome
    assert "Traceback" not in outcome["msg"] and "Traceback" not in output
    assert requests == [], requests[:3]
