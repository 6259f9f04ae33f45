# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 22, item 9: the watcher's systemd unit, rendered by Ansible's own template lookup from the
role's defaults and vars. ProtectSystem=strict makes ReadWritePaths mean something: it names exactly
what the watcher writes (the state directory, the metrics textfile's directory when there is one)
and what the operator adds for handlers. The molecule scenario watcher_systemd scores the installed
unit with systemd-analyze security."""

import os

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from .conftest import ROOT

ROLE = os.path.join(ROOT, "roles", "watcher")
UNIT_TEMPLATE = os.path.join(ROLE, "templates", "azure-imds-watcher.service.j2")

init_plugin_loader([])


def render_unit(**overrides):
    """The unit's [Service] settings: {name: [value, ...]} in the order of the file."""
    loader = DataLoader()
    variables = {}
    for part in ("defaults", "vars"):
        for name, value in loader.load_from_file(os.path.join(ROLE, part, "main.yml")).items():
            variables[name] = trust_as_template(value) if isinstance(value, str) else value
    variables.update(overrides, ansible_managed="Ansible managed")
    loader.set_basedir(os.path.join(ROLE, "templates"))
    text = Templar(loader=loader, variables=variables).template(
        trust_as_template("{{ lookup('ansible.builtin.template', '%s') }}" % UNIT_TEMPLATE))
    service = text.split("[Service]", 1)[1].split("[Install]", 1)[0]
    settings = {}
    for line in service.splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            settings.setdefault(name, []).append(value)
    return settings


def test_the_unit_has_the_round_3_hardening():
    unit = render_unit()
    for name, value in (("ProtectProc", "invisible"), ("UMask", "0077"), ("TasksMax", "512"), ("MemoryMax", "1G"),
                        ("MemoryDenyWriteExecute", "yes"), ("ProtectSystem", "strict")):
        assert unit.get(name) == [value], (name, unit.get(name))


def test_read_write_paths_name_exactly_what_the_watcher_writes():
    unit = render_unit()
    assert unit["ReadWritePaths"] == ['/var/lib/azure-imds-watcher "-/var/lib/node_exporter/textfile_collector"']
    unit = render_unit(watcher_metrics_textfile="", watcher_state_dir="/srv/watcher")
    assert unit["ReadWritePaths"] == ["/srv/watcher"]
    unit = render_unit(watcher_metrics_textfile="", watcher_systemd_read_write_paths=["/var/lib/app"])
    assert unit["ReadWritePaths"] == ['/var/lib/azure-imds-watcher "-/var/lib/app"']


@pytest.mark.parametrize("option", ["ProtectProc", "MemoryDenyWriteExecute", "UMask"])
def test_a_handler_that_needs_it_can_leave_an_option_out(option):
    unit = render_unit(watcher_systemd_hardening_exclude=[option])
    assert option not in unit
    assert unit["ProtectSystem"] == ["strict"] and "TasksMax" in unit and "MemoryMax" in unit


def test_limits_and_protect_system_follow_their_variables():
    unit = render_unit(watcher_systemd_tasks_max="infinity", watcher_systemd_memory_max="4G",
                       watcher_systemd_protect_system="full")
    assert unit["TasksMax"] == ["infinity"] and unit["MemoryMax"] == ["4G"] and unit["ProtectSystem"] == ["full"]
