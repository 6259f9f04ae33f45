# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the playbook and role tests: a playbook run on local-connection hosts, a tasks file that marks hosts."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM, PlaybookRun


@pytest.fixture
def run_playbook(tmp_path):
    """run_playbook(name or a playbook's absolute path, hosts={host: vars}, extra={...}, options=[...], env={...})
    -> PlaybookRun; local connection for all; options are more ansible-playbook arguments (--limit ...), env
    more environment variables (ANSIBLE_COLLECTIONS_PATH: a list of directories put before the collection's own)."""

    def run(name, hosts, extra=None, cwd=None, timeout=300, options=(), env=None):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(json.dumps({"all": {
            "hosts": hosts,
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        }}))
        more = dict(env or {})
        collections = list(more.pop("ANSIBLE_COLLECTIONS_PATH", [])) + [FARM]
        env = dict(os.environ)
        env.pop("AZURE_IMDS_URL", None)
        env.update(ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(collections), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_RETRY_FILES_ENABLED="false",
                   ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_REMOTE_TEMP=str(tmp_path / "remote-tmp"))
        env.update(more)
        playbook = name if os.path.isabs(name) else "azure_imds.scheduled_events." + name
        command = [os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), playbook]
        if extra:
            command += ["-e", json.dumps(extra)]
        command += list(options)
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
        # Appended, not lineinfile: a host drained twice (two rounds) leaves two marks.
        tasks = [{
            "name": "Record %s" % label,
            "ansible.builtin.shell": "printf '%%s\\n' \"$MARK\" >> %s" % shlex.quote(str(marks)),
            "environment": {"MARK": "{{ inventory_hostname }} %s" % label},
            "delegate_to": "localhost",
            "changed_when": True,
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
