# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tests of the playbooks, the roles, the AWX definitions and the EE read from playbooks and
roles: their options and variables, and a play that runs a role once per host.

Playbook runs find the collection where tests/harness/collection_path.py puts it (this checkout
itself, or a symlink farm pointing at it), so what is tested is this checkout, and talk only to a
mock IMDS on 127.0.0.1 named in the inventory.
"""

import os
import re
import sys

import yaml

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

ROOT = collection_path.ROOT
FARM = collection_path.collections_dir(ROOT)
BIN = os.path.dirname(sys.executable)
PLAYBOOKS = os.path.join(ROOT, "playbooks")
ROLES = os.path.join(ROOT, "roles")
PLAYBOOK_NAMES = ("rolling_maintenance", "approve_user_events", "report", "deploy_watcher", "fleet_maintenance")
COLLECTION = "azure_imds.scheduled_events."
PLAY_KEYWORDS = ("hosts", "serial", "max_fail_percentage", "become")
JINJA_NAME = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)")


def load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def role_options(role, entry_point="main"):
    """The options of an entry point of roles/<role>/meta/argument_specs.yml."""
    specs = load_yaml(os.path.join(ROLES, role, "meta", "argument_specs.yml"))["argument_specs"]
    return specs[entry_point].get("options") or {}


def one_case_per_host_playbook(title, role):
    """A play that runs a collection role once on each inventory host (one case each, named by its
    case_id variable) in a block whose rescue keeps the refusal, then writes
    {case_id: {"refused": bool, "msg": ..., "task": ...}} as JSON to the file in outcomes_file."""
    return [{
        "name": title,
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {"name": "Run the role with this host's variables", "block": [
                {"name": "Run the role", "ansible.builtin.include_role": {"name": COLLECTION + role}},
                {"name": "Keep the outcome", "ansible.builtin.set_fact": {"case_outcome": {"refused": False}}},
            ], "rescue": [
                {"name": "Keep the refusal", "ansible.builtin.set_fact": {"case_outcome": {
                    "refused": True, "msg": "{{ ansible_failed_result.msg | default('') | string }}",
                    "task": "{{ ansible_failed_task.name | default('') | string }}"}}},
            ]},
            {"name": "Write every outcome", "run_once": True, "delegate_to": "localhost",
             "ansible.builtin.copy": {"dest": "{{ outcomes_file }}", "mode": "0600", "content": (
                 "{{ dict(ansible_play_hosts_all | map('extract', hostvars, 'case_id')"
                 " | zip(ansible_play_hosts_all | map('extract', hostvars, 'case_outcome'))) | to_json }}")}},
        ],
    }]


def roles_of(playbook):
    """The collection roles whose main entry point a collection playbook runs, in order."""
    found = []
    for play in load_yaml(os.path.join(PLAYBOOKS, playbook + ".yml")):
        for entry in play.get("roles", []):
            found.append(entry["role"] if isinstance(entry, dict) else entry)
        for task in play.get("pre_tasks", []) + play.get("tasks", []):
            for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                if action in task and task[action].get("tasks_from", "main") == "main":
                    found.append(task[action]["name"])
    return [role[len(COLLECTION):] if role.startswith(COLLECTION) else role for role in found]


def play_variables(playbook):
    """The variables a collection playbook reads in its play keywords (which no role can hold)."""
    names = set()
    for play in load_yaml(os.path.join(PLAYBOOKS, playbook + ".yml")):
        for keyword in PLAY_KEYWORDS:
            names.update(JINJA_NAME.findall(str(play.get(keyword, ""))))
    return names


def playbook_options(playbook):
    """{variable: spec} of what a playbook reads: its roles' options and its play keywords' variables
    (whose spec is None: no role can check them)."""
    options = dict((name, None) for name in play_variables(playbook))
    for role in roles_of(playbook):
        options.update(role_options(role))
    return options


class PlaybookRun:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.output = proc.stdout.decode("utf-8", "replace")

    def __repr__(self):
        return "PlaybookRun(rc=%d)\n%s" % (self.rc, self.output[-6000:])
