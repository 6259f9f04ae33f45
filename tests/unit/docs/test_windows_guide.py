# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tasks files of the Windows guide (docs/docsite/rst/windows.rst) are valid tasks files.

No Windows host runs here, so they are not run. Each YAML example of the guide that names a tasks
file (a first line "# maintenance/<name>.yml") is read as a tasks file: every module is named by
its FQCN, and every option it is given is one its module documents (the real ansible.windows, taken
from the ansible package by tests/harness/prepare.d/26-windows-collection.sh, and ansible-core's
own modules), with a value among the documented choices. Then ansible-lint checks the files, with
ansible.windows on the collections path.
"""

import os
import re
import subprocess
import sys

import pytest
import yaml

import ansible
from ansible.playbook.block import Block
from ansible.playbook.task import Task
from ansible.plugins.loader import fragment_loader

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

ROOT = collection_path.ROOT
GUIDE = os.path.join(ROOT, "docs", "docsite", "rst", "windows.rst")
WINDOWS = os.path.join(ROOT, collection_path.WINDOWS_COLLECTIONS)
CORE_MODULES = os.path.join(os.path.dirname(ansible.__file__), "modules")
KEYWORDS = set(Task.fattributes) | set(Block.fattributes)
TASKS_FILE = re.compile(r"^\.\. code:: yaml\n\n((?:   # maintenance/[a-z_]+\.yml\n)(?:(?:   .*)?\n)+)", re.M)


def tasks_files():
    """{file name: its text} of the guide's tasks files."""
    with open(GUIDE, encoding="utf-8") as handle:
        text = handle.read()
    found = {}
    for block in TASKS_FILE.findall(text):
        lines = [line[3:] for line in block.rstrip("\n").split("\n")]
        found[lines[0][2:].split("/", 1)[1]] = "\n".join(lines) + "\n"
    return found


FILES = tasks_files()


def module_source(name):
    namespace, collection, module = name.split(".")
    if (namespace, collection) == ("ansible", "builtin"):
        return os.path.join(CORE_MODULES, module + ".py")
    assert (namespace, collection) == ("ansible", "windows"), "%s: only ansible.builtin and ansible.windows here" % name
    path = os.path.join(WINDOWS, "ansible_collections", "ansible", "windows", "plugins", "modules", module + ".py")
    assert os.path.exists(path), "%s is missing: run tests/harness/prepare units (it takes ansible.windows out of " \
                                 "the ansible package into %s)" % (path, collection_path.WINDOWS_COLLECTIONS)
    return path


def documented_options(name):
    """{option: its documentation}, aliases included, of a module, with its doc fragments."""
    with open(module_source(name), encoding="utf-8") as handle:
        source = handle.read()
    start = source.index("DOCUMENTATION = r")
    quote = source[start + 17:start + 20]
    documentation = yaml.safe_load(source[start + 20:source.index(quote, start + 20)])
    options = dict(documentation.get("options") or {})
    for fragment in documentation.get("extends_documentation_fragment") or []:
        if fragment.startswith("ansible.windows."):
            path = os.path.join(WINDOWS, "ansible_collections", "ansible", "windows", "plugins", "doc_fragments",
                                fragment.split(".")[2] + ".py")
            with open(path, encoding="utf-8") as handle:
                fragment_source = handle.read()
            begin = fragment_source.index("DOCUMENTATION = r")
            fragment_quote = fragment_source[begin + 17:begin + 20]
            options.update(yaml.safe_load(fragment_source[begin + 20:fragment_source.index(fragment_quote, begin + 20)])
                           .get("options") or {})
        else:
            text = getattr(fragment_loader.get(fragment.split(".")[-1]), "DOCUMENTATION", None)
            options.update((yaml.safe_load(text) or {}).get("options") or {} if text else {})
    for option, spec in list(options.items()):
        for alias in spec.get("aliases") or []:
            options[alias] = spec
    return options


def tasks_of(tasks):
    for task in tasks:
        if "block" in task:
            yield from tasks_of(task["block"])
        else:
            yield task


def test_the_guide_has_the_drain_and_recover_files():
    assert sorted(FILES) == ["drain.yml", "recover.yml"], sorted(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_task_gives_its_module_only_documented_options(name):
    tasks = yaml.safe_load(FILES[name])
    modules = set()
    for task in tasks_of(tasks):
        actions = [key for key in task if key not in KEYWORDS]
        assert len(actions) == 1 and actions[0].count(".") == 2, (name, task.get("name"), actions)
        module = actions[0]
        modules.add(module)
        options = documented_options(module)
        for option, value in task[module].items():
            assert option in options, "%s: %s has no option %s" % (name, module, option)
            choices = options[option].get("choices")
            if choices and isinstance(value, str) and "{{" not in value:
                assert value in choices, "%s: %s %s=%s, not one of %s" % (name, module, option, value, choices)
    # Both kinds of host are served: ansible.windows for the Windows VMs.
    assert any(module.startswith("ansible.windows.") for module in modules), modules


def test_ansible_lint_passes_the_tasks_files(tmp_path):
    directory = tmp_path / "maintenance"
    directory.mkdir()
    for name, text in FILES.items():
        (directory / name).write_text(text)
    (tmp_path / ".ansible-lint").write_text("---\nprofile: production\noffline: true\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=WINDOWS, ANSIBLE_HOME=str(tmp_path / "ansible-home"),
               NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-lint"), "maintenance"],
                         cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-4000:]
    assert "2 files processed" in run.stdout, run.stdout[-2000:]
