# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Playbooks are thin plays over roles, and each role's variables are written once.

A role's meta/argument_specs.yml is what Ansible validates before the role runs and what the
reference pages are generated from; defaults/main.yml is the only place a default is set. A
playbook keeps only what no role can hold (its play keywords), listed once in its header.
test_playbook_runs.py shows with real runs that the variables reach the roles.
"""

import os
import re

import pytest

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import (
    PLAYBOOK_NAMES, PLAYBOOKS, ROLES, load_yaml, play_variables, playbook_options, role_options, roles_of)

# The roles the playbooks were made of; watcher and mock_imds have their own tests.
PLAYBOOK_ROLES = ("rolling_maintenance", "report", "approve_user_events", "fleet_maintenance")
ROLE_READING_DIRS = ("tasks", "handlers", "templates", "vars")


def header(name):
    """The comment block at the top of playbooks/<name>.yml."""
    with open(os.path.join(PLAYBOOKS, name + ".yml"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return "\n".join(line for line in lines[1:] if line.startswith("#"))


def role_files(role):
    for sub in ROLE_READING_DIRS:
        for dirpath, _dirs, names in os.walk(os.path.join(ROLES, role, sub)):
            for name in sorted(names):
                yield os.path.join(dirpath, name)


def test_each_playbook_runs_one_role():
    assert dict((name, roles_of(name)) for name in PLAYBOOK_NAMES) == {
        "rolling_maintenance": ["rolling_maintenance"], "report": ["report"],
        "approve_user_events": ["approve_user_events"], "deploy_watcher": ["watcher"],
        "fleet_maintenance": ["fleet_maintenance"]}


@pytest.mark.parametrize("name", PLAYBOOK_NAMES)
def test_the_header_lists_the_playbooks_own_variables_and_no_role_option(name):
    own = play_variables(name)
    assert own, "playbooks/%s.yml reads no variable in its play keywords: the scan is broken" % name
    top = header(name)
    for variable in own:
        assert variable.startswith(name + "_"), variable
        assert re.search(r"^#\s+%s\s" % variable, top, re.M), "%s is not listed at the top of playbooks/%s.yml" % (
            variable, name)
    for role in roles_of(name):
        shared = own & set(role_options(role))
        assert not shared, "%s are play keywords of playbooks/%s.yml and options of role %s" % (shared, name, role)
    # Role options are documented by the role: the header names none of them in its variable list.
    listed = set(re.findall(r"^#\s+(%s_\w+)\s{2,}" % name, top, re.M))
    assert listed == own, listed


def test_play_keyword_variables_are_found():
    assert play_variables("rolling_maintenance") == {
        "rolling_maintenance_hosts", "rolling_maintenance_serial", "rolling_maintenance_max_fail_percentage"}
    assert play_variables("deploy_watcher") == {"deploy_watcher_hosts", "deploy_watcher_become"}
    assert playbook_options("report")["report_hosts"] is None
    assert playbook_options("report")["report_dir"]["type"] == "str"


@pytest.mark.parametrize("role", PLAYBOOK_ROLES)
def test_every_entry_point_is_documented(role):
    specs = load_yaml(os.path.join(ROLES, role, "meta", "argument_specs.yml"))["argument_specs"]
    assert "main" in specs
    for entry_point, spec in specs.items():
        for key in ("short_description", "description", "version_added", "author"):
            assert spec.get(key), "%s entry point %s has no %s" % (role, entry_point, key)
        assert str(spec["version_added"]) == "0.1.0"
        for option, doc in (spec.get("options") or {}).items():
            assert option.startswith(role + "_"), option
            assert doc.get("description") and doc.get("type"), "%s: %s needs a description and a type" % (role, option)
            assert "default" in doc or doc.get("required"), "%s: %s has no default" % (role, option)


@pytest.mark.parametrize("role", PLAYBOOK_ROLES)
def test_defaults_are_written_once_in_defaults_main(role):
    options = role_options(role)
    defaults = load_yaml(os.path.join(ROLES, role, "defaults", "main.yml"))
    assert sorted(defaults) == sorted(options), "defaults/main.yml and the argument spec of %s differ" % role
    for name, value in defaults.items():
        assert value == options[name]["default"], "%s: defaults/main.yml says %r, the spec %r" % (
            name, value, options[name]["default"])
    inline = re.compile(r"(?<![\w.])(%s)\s*\|\s*default\(" % "|".join(map(re.escape, options)))
    for path in role_files(role):
        with open(path, encoding="utf-8") as handle:
            found = inline.findall(handle.read())
        assert not found, "%s applies a default of its own to %s" % (os.path.relpath(path, ROLES), found)
