# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the EDA tests: ansible-rulebook runs (kept in tests/output/eda), a tasks file that marks hosts."""

import json
import os
import shutil

import pytest

from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import ROOT, Rulebook


@pytest.fixture
def rulebook(tmp_path, request):
    started = []

    def start(*args, **kwargs):
        run = Rulebook(tmp_path, *args, **kwargs)
        started.append(run)
        return run

    yield start
    # ansible-rulebook's own output is kept for the reader of a CI run (the rule that fired).
    kept = os.path.join(ROOT, "tests", "output", "eda")
    os.makedirs(kept, exist_ok=True)
    for number, run in enumerate(started):
        run.stop()
        shutil.copy(run.log_path, os.path.join(kept, "%s-%d.log" % (request.node.name, number)))


@pytest.fixture
def marks_tasks(tmp_path):
    """A tasks file that records "<host> <label>" in a marks file, and a reader of that file."""
    marks = tmp_path / "marks.txt"

    def make(label):
        path = tmp_path / ("%s.yml" % label)
        path.write_text(json.dumps([{
            "name": "Record %s" % label,
            "ansible.builtin.lineinfile": {"path": str(marks), "line": "{{ inventory_hostname }} %s" % label,
                                           "create": True, "mode": "0644"},
        }]))
        return str(path)

    def read():
        return marks.read_text().split("\n")[:-1] if marks.exists() else []

    make.read = read
    return make
