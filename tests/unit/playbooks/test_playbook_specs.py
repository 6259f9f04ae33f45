# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each playbook's variables are documented once (playbooks/argument_specs/) and agree everywhere.

The spec is what the playbook validates at run time and what the reference pages are generated
from; the header comment of the playbook and the guides list the same names, and every default the
playbook applies with default() is the documented one.
"""

import ast
import os
import re

import pytest

from .conftest import PLAYBOOK_NAMES, PLAYBOOKS, ROOT, argument_spec
from .playbook_files import reachable_files, reads, strip_comments

GUIDES = [os.path.join(ROOT, "docs", "getting_started.md")] + [
    os.path.join(ROOT, "docs", "guides", name) for name in sorted(os.listdir(os.path.join(ROOT, "docs", "guides")))]
DEFAULT_USE = re.compile(r"(?<![\w.])(?P<name>[a-z_]+)\s*\|\s*default\((?P<value>[^()]*?)(?:,\s*true)?\)")
JINJA_LITERALS = {"true": True, "false": False, "none": None}


def header(name):
    """The comment block at the top of playbooks/<name>.yml."""
    with open(os.path.join(PLAYBOOKS, name + ".yml"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return "\n".join(line for line in lines[1:] if line.startswith("#"))


def literal(text):
    text = text.strip()
    if text in JINJA_LITERALS:
        return JINJA_LITERALS[text]
    return ast.literal_eval(text)


def default_uses(name):
    """(variable, default) for every `variable | default(value)` in the files the playbook uses."""
    uses = []
    for path in reachable_files(name)[0]:
        if not path.startswith(PLAYBOOKS):
            continue
        with open(path, encoding="utf-8") as handle:
            text = strip_comments(handle.read(), path)
        uses.extend((m.group("name"), m.group("value"), os.path.relpath(path, ROOT)) for m in DEFAULT_USE.finditer(text))
    return uses


@pytest.mark.parametrize("name", PLAYBOOK_NAMES)
def test_every_variable_is_prefixed_and_listed_in_the_playbook_header(name):
    options = argument_spec(name)
    assert options
    top = header(name)
    for variable in options:
        assert variable.startswith(name + "_"), variable
        assert re.search(r"^#\s+%s\s" % variable, top, re.M), "%s is not listed at the top of playbooks/%s.yml" % (
            variable, name)


@pytest.mark.parametrize("name", PLAYBOOK_NAMES)
def test_every_documented_variable_is_read(name):
    files = reachable_files(name)[0]
    unread = [v for v in argument_spec(name) if not reads(files, v)]
    assert not unread, "playbooks/argument_specs/%s.yml documents variables the playbook never reads: %s" % (
        name, ", ".join(unread))


@pytest.mark.parametrize("name", PLAYBOOK_NAMES)
def test_every_default_applied_is_the_documented_one(name):
    options = argument_spec(name)
    seen = set()
    for variable, value, where in default_uses(name):
        if not variable.startswith(name + "_"):
            continue
        assert variable in options, "%s uses %s with a default, but its argument spec does not document it" % (
            where, variable)
        documented = options[variable].get("default")
        applied = literal(value)
        if applied == "" and documented in ([], ""):
            applied = documented  # default('', true) or omit: an empty value means "not set"
        assert applied == documented, "%s: %s defaults to %r, the spec says %r" % (where, variable, applied, documented)
        seen.add(variable)
    assert seen, "no default() found: the scan is broken"


@pytest.mark.parametrize("name", PLAYBOOK_NAMES)
def test_the_guides_mention_every_variable(name):
    text = ""
    for path in GUIDES:
        with open(path, encoding="utf-8") as handle:
            text += handle.read()
    missing = [v for v in argument_spec(name) if "`%s`" % v not in text]
    assert not missing, "no guide under docs/ documents %s" % ", ".join(missing)


def test_the_default_scan_reads_jinja_literals():
    found = DEFAULT_USE.findall("{{ a_b | default([], true) }} {{ c | default('x') }} {{ d|default(omit) }}")
    assert [(n, literal(v)) for n, v in found if v != "omit"] == [("a_b", []), ("c", "x")]
