# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which files a collection playbook uses, and whether they read a variable (comments excluded)."""

import os
import re

from .conftest import PLAYBOOKS, ROOT

FILE_REFERENCE = re.compile(r"[\w./-]+\.(?:ya?ml|j2)\b")
ROLE_REFERENCE = re.compile(r"azure_imds\.scheduled_events\.(\w+)")
# What a role reads; defaults/ and meta/ only declare.
ROLE_READING_DIRS = ("tasks", "handlers", "templates", "vars")


def strip_comments(text, path):
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    if path.endswith((".yml", ".yaml")):
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return text


def _role_files(role):
    files = []
    for sub in ROLE_READING_DIRS:
        base = os.path.join(ROOT, "roles", role, sub)
        for dirpath, _dirs, names in os.walk(base):
            files.extend(os.path.join(dirpath, n) for n in sorted(names))
    return files


def reachable_files(playbook):
    """The playbook, the tasks files and templates it uses (transitively) and the files of its roles."""
    start = os.path.join(PLAYBOOKS, playbook + ".yml")
    seen, todo, roles = [], [start], set()
    while todo:
        path = todo.pop()
        if path in seen or not os.path.isfile(path):
            continue
        seen.append(path)
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = strip_comments(handle.read(), path)
        for reference in FILE_REFERENCE.findall(text):
            if reference.startswith("argument_specs/"):
                continue
            for base in (os.path.dirname(path), PLAYBOOKS, os.path.join(PLAYBOOKS, "tasks"),
                         os.path.join(PLAYBOOKS, "templates")):
                candidate = os.path.normpath(os.path.join(base, reference))
                if os.path.isfile(candidate):
                    todo.append(candidate)
                    break
        roles.update(r for r in ROLE_REFERENCE.findall(text) if os.path.isdir(os.path.join(ROOT, "roles", r)))
    for role in sorted(roles):
        seen.extend(_role_files(role))
    return seen, sorted(roles)


def reads(files, variable):
    """Whether a variable name appears, as a name, outside the comments of any of the files."""
    pattern = re.compile(r"(?<![\w.])%s\b" % re.escape(variable))
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            if pattern.search(strip_comments(handle.read(), path)):
                return True
    return False
