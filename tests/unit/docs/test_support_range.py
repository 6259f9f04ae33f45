# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One supported range of ansible-core, said the same way everywhere.

The range starts at the oldest core `make test` tests (tests/harness/requirements-oldest-core.txt)
and its newest tested core is the one in tests/requirements.txt. meta/runtime.yml, the roles'
min_ansible_version, the execution environment and the AWX guide must agree
with those pins, and every command in the docs that installs ansible-core with pip pins the tested
range, so that a reader who pastes it gets a core this collection was tested with. README's and the
getting started guide's sentences about the range are checked in test_install_docs.py.
"""

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def pinned_core(path):
    found = re.search(r"^ansible-core==(\d+)\.(\d+)\.(\d+)\s*$", read(path), re.M)
    assert found, "%s pins no ansible-core" % path
    return tuple(int(part) for part in found.groups())


OLDEST = pinned_core("tests/harness/requirements-oldest-core.txt")
NEWEST = pinned_core("tests/requirements.txt")
OLDEST_MINOR = "%d.%d" % OLDEST[:2]
NEWEST_MINOR = "%d.%d" % NEWEST[:2]
# What a pip command in the docs must say: the tested range, as a pip specifier.
PIP_RANGE = "ansible-core>=%s,<%d.%d" % (OLDEST_MINOR, NEWEST[0], NEWEST[1] + 1)


def doc_files():
    return ["README.md"] + sorted(os.path.relpath(path, ROOT) for path in glob.glob(
        os.path.join(ROOT, "docs", "docsite", "rst", "**", "*.rst"), recursive=True))


def test_the_oldest_tested_core_is_the_oldest_supported_one():
    runtime = yaml.safe_load(read("meta/runtime.yml"))
    assert runtime["requires_ansible"] == ">=%s.0" % OLDEST_MINOR
    for meta in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "main.yml")):
        with open(meta, encoding="utf-8") as handle:
            info = yaml.safe_load(handle)["galaxy_info"]
        assert info["min_ansible_version"] == OLDEST_MINOR, meta


def test_the_tested_cores_are_in_life_and_distinct():
    # 2.19 is the oldest ansible-core with security support in November 2026 (2.18 ended then).
    assert OLDEST[:2] >= (2, 19)
    assert NEWEST[:2] > OLDEST[:2]


def test_the_execution_environment_and_the_awx_guide_carry_the_newest_core():
    ee = yaml.safe_load(read("extensions/ee/execution-environment.yml"))
    pin = "ansible-core==%d.%d.%d" % NEWEST
    assert ee["dependencies"]["ansible_core"]["package_pip"] == pin
    awx = read("docs/docsite/rst/awx.rst")
    assert "package_pip: %s" % pin in awx
    assert re.findall(r"ansible-core==[\d.]+", awx) == [pin] * len(re.findall(r"ansible-core==[\d.]+", awx))


def test_every_pip_install_of_ansible_core_in_the_docs_pins_the_tested_range():
    commands = []
    for path in doc_files():
        for number, line in enumerate(read(path).splitlines(), 1):
            if re.search(r"\bpip3?\b.*\binstall\b", line) and "ansible-core" in line:
                commands.append((path, number, line.strip()))
    assert commands, "no doc shows how to install ansible-core with pip"
    unpinned = [item for item in commands if PIP_RANGE not in item[2]]
    assert not unpinned, "pin %s in: %s" % (PIP_RANGE, unpinned)
