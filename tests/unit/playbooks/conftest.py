# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the tests of the playbooks, the demo, the docs and the AWX definitions.

Playbook runs find the collection where tests/harness/collection_path.py puts it (this checkout
itself, or a symlink farm pointing at it), so what is tested is this checkout, and talk only to a mock IMDS on 127.0.0.1 named in the inventory.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import collection_path  # noqa: E402  pylint: disable=wrong-import-position

FARM = collection_path.collections_dir(ROOT)
BIN = os.path.dirname(sys.executable)
PLAYBOOKS = os.path.join(ROOT, "playbooks")
PLAYBOOK_NAMES = ("rolling_maintenance", "approve_user_events", "report", "deploy_watcher")


def load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def argument_spec(name):
    """The options of playbooks/argument_specs/<name>.yml."""
    return load_yaml(os.path.join(PLAYBOOKS, "argument_specs", name + ".yml"))["argument_specs"][name]["options"]


class PlaybookRun:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.output = proc.stdout.decode("utf-8", "replace")

    def __repr__(self):
        return "PlaybookRun(rc=%d)\n%s" % (self.rc, self.output[-6000:])


@pytest.fixture
def run_playbook(tmp_path):
    """run_playbook(name, hosts={host: vars}, extra={...}) -> PlaybookRun; local connection for all."""

    def run(name, hosts, extra=None, cwd=None, timeout=300):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(json.dumps({"all": {
            "hosts": hosts,
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        }}))
        env = dict(os.environ)
        env.pop("AZURE_IMDS_URL", None)
        env.update(ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="false",
                   ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_REMOTE_TEMP=str(tmp_path / "remote-tmp"))
        command = [os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), "azure_imds.scheduled_events." + name]
        if extra:
            command += ["-e", json.dumps(extra)]
        proc = subprocess.run(command, cwd=str(cwd or tmp_path), env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        return PlaybookRun(proc)

    return run


@pytest.fixture
def marks_tasks(tmp_path):
    """A tasks file that records "<host> <label>" in a marks file, and a reader of that file."""
    marks = tmp_path / "marks.txt"

    def make(label, fail_on=None):
        path = tmp_path / ("%s.yml" % label)
        tasks = [{
            "name": "Record %s" % label,
            "ansible.builtin.lineinfile": {"path": str(marks), "line": "{{ inventory_hostname }} %s" % label,
                                           "create": True, "mode": "0644"},
            "delegate_to": "localhost",
        }]
        if fail_on:
            tasks.append({"name": "Fail the %s of %s" % (label, fail_on),
                          "ansible.builtin.fail": {"msg": "%s refused on purpose" % label},
                          "when": "inventory_hostname == %r" % fail_on})
        path.write_text(json.dumps(tasks))
        return str(path)

    def read():
        return marks.read_text().split("\n")[:-1] if marks.exists() else []

    make.read = read
    return make
