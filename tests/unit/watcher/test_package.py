"""The watcher is one package that imports the collection's module_utils by the collection's name:
the role installs exactly the module_utils files it imports, and none of them needs Ansible."""
import ast
import os

import yaml

from .conftest import ROOT

PACKAGE = os.path.join(ROOT, "roles", "watcher", "files", "scheduled_events_watcher")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
PREFIX = "ansible_collections.azure_imds.scheduled_events.plugins.module_utils"


def _imports_of(path):
    """Names of the module_utils files one Python file imports (either import form)."""
    found = set()
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PREFIX:
            found.update(alias.name + ".py" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX + "."):
            found.add(node.module[len(PREFIX) + 1:].split(".")[0] + ".py")
        elif isinstance(node, ast.Import):
            found.update(alias.name[len(PREFIX) + 1:].split(".")[0] + ".py" for alias in node.names
                         if alias.name.startswith(PREFIX + "."))
    return found


def shared_files_imported():
    """The module_utils files the package imports, directly or through each other, sorted."""
    wanted = set()
    for name in os.listdir(PACKAGE):
        if name.endswith(".py"):
            wanted |= _imports_of(os.path.join(PACKAGE, name))
    todo = list(wanted)
    while todo:
        for name in _imports_of(os.path.join(MODULE_UTILS, todo.pop())):
            if name not in wanted:
                wanted.add(name)
                todo.append(name)
    return sorted(wanted)


def test_the_role_installs_exactly_the_module_utils_the_package_imports():
    with open(os.path.join(ROOT, "roles", "watcher", "vars", "main.yml"), encoding="utf-8") as handle:
        installed = yaml.safe_load(handle)["_watcher_shared_files"]
    assert installed == shared_files_imported()
    assert "_imds.py" in installed and "_transitions.py" in installed


def test_no_module_utils_file_the_watcher_takes_needs_ansible():
    for name in shared_files_imported():
        with open(os.path.join(MODULE_UTILS, name), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("ansible."), (name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(alias.name.split(".")[0] == "ansible" for alias in node.names), name
