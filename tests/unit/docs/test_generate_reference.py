# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/generate_reference.py: markup through antsibull-docs-parser, the playbook and event source
pages, and the --check that `make test` relies on."""

import os
import textwrap

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.docs import generate_reference as gen
from ansible_collections.azure_imds.scheduled_events.tests.harness.collection_path import ROOT

ROLE = "azure_imds.scheduled_events.thing"
ROLE_CONTEXT = gen.Context(current_plugin=gen.dom.PluginIdentifier(fqcn=ROLE, type="role"), role_entrypoint="main")


@pytest.mark.parametrize("text, rst", [
    ("Use C(state=absent) or V(null).", "Use :literal:`state=absent` or :ansval:`null`."),
    ("Set O(thing_mode).", "Set :ansopt:`azure\\_imds.scheduled\\_events.thing#role:main:thing\\_mode`."),
    ("See M(ansible.builtin.reboot).", "See :ref:`ansible.builtin.reboot <ansible_collections.ansible.builtin.reboot_module>`."),
    ("See P(azure_imds.scheduled_events.watcher#role).",
     "See :ref:`azure\\_imds.scheduled\\_events.watcher <ansible_collections.azure_imds.scheduled_events.watcher_role>`."),
    ("E(AZURE_IMDS_URL) on the host", ":ansenvvar:`AZURE\\_IMDS\\_URL` on the host"),
    ("I(never) B(ever) U(https://example.org/x)",
     ":emphasis:`never` :strong:`ever` \\ `https://example.org/x <https://example.org/x>`__"),
    ("L(the docs, https://example.org/a)", "`the docs <https://example.org/a>`__"),
    ("V(length(x\\)) stays whole", ":ansval:`length(x)` stays whole"),
    (["one", "two"], "one\n\ntwo"),
])
def test_markup_is_parsed_by_antsibull_docs_parser(text, rst):
    assert gen.markup(text, ROLE_CONTEXT, "test") == rst


def test_plain_markup_names_options_without_a_plugin_to_link_to():
    assert gen.markup("Set O(emit_existing=false).", gen.Context(), "test", plain=True) == \
        "Set :literal:`emit\\_existing=false`."


def test_broken_markup_is_an_error_that_says_where():
    with pytest.raises(gen.GenerationError, match="DOCUMENTATION of x.py.*M"):
        gen.markup("See M(not-a-module).", gen.Context(), "DOCUMENTATION of x.py")


def write_playbook(root, name, text):
    os.makedirs(str(root / "playbooks"), exist_ok=True)
    (root / "playbooks" / (name + ".yml")).write_text(textwrap.dedent(text))


def test_the_roles_of_a_playbook_are_found_in_roles_and_in_included_tasks(tmp_path):
    write_playbook(tmp_path, "run", """\
        ---
        # azure_imds.scheduled_events.run
        #
        # Runs things.
        #   run_hosts  host pattern (default all)
        - name: First
          hosts: all
          roles:
            - role: azure_imds.scheduled_events.thing
            - community.general.other
        - name: Second
          hosts: all
          tasks:
            - name: In a block
              block:
                - name: Summary
                  ansible.builtin.include_role:
                    name: azure_imds.scheduled_events.summary
                    tasks_from: summary
                - name: Again
                  ansible.builtin.import_role:
                    name: azure_imds.scheduled_events.thing
        """)
    assert gen.playbook_roles("run", str(tmp_path)) == [ROLE, "azure_imds.scheduled_events.summary"]
    assert gen.header_comment("run", str(tmp_path)) == ["Runs things.", "  run_hosts  host pattern (default all)"]


ROLE_DOC = {"entry_points": {"main": {
    "short_description": "Do a thing",
    "description": ["First, with C(code).", "Second, see O(thing_mode)."],
    "options": {
        "thing_mode": {"type": "str", "choices": ["a", "b"], "default": "a", "description": ["Mode."]},
        "thing_targets": {"type": "list", "elements": "dict", "description": "Targets.",
                          "options": {"url": {"type": "str", "required": True, "description": "Where."}}},
    }}}}


def test_a_playbook_page_has_its_header_and_the_variables_of_its_role(tmp_path):
    write_playbook(tmp_path, "thing", """\
        ---
        # azure_imds.scheduled_events.thing
        #
        # Runs the thing role.
        #   thing_hosts  host pattern (default all)
        - name: Play
          hosts: "{{ thing_hosts | default('all') }}"
          roles:
            - role: azure_imds.scheduled_events.thing
        """)
    page = gen.render_playbook("thing", {ROLE: ROLE_DOC}, str(tmp_path))
    assert page.startswith(".. _ansible_collections.azure_imds.scheduled_events.docsite.playbook_thing:\n")
    assert "azure_imds.scheduled_events.thing playbook\n==========" in page
    assert "   Runs the thing role.\n     thing_hosts  host pattern (default all)\n" in page
    assert "   * - :ansopt:`azure\\_imds.scheduled\\_events.thing#role:main:thing\\_mode`\n     - str\n\n" \
           "       default: :literal:`a`\n\n       choices: :literal:`a`, :literal:`b`\n     -\n       Mode." in page
    assert ":ansopt:`azure\\_imds.scheduled\\_events.thing#role:main:thing\\_targets[].url`" in page
    assert ":strong:`required`" in page
    assert "Second, see :ansopt:`azure\\_imds.scheduled\\_events.thing#role:main:thing\\_mode`." in page


def test_an_event_source_page_comes_from_its_documentation():
    doc = {"short_description": "Events", "version_added": "0.1.0",
           "description": ["Polls E(AZURE_IMDS_URL)."],
           "options": {"poll_interval": {"type": "float", "default": 1, "description": "Seconds, see O(emit_existing)."},
                       "imds_url": {"type": "str", "required": True, "description": "Where."}}}
    page = gen.render_event_source("things", doc)
    assert page.startswith(".. _ansible_collections.azure_imds.scheduled_events.docsite.event_source_things:\n")
    assert "     - azure_imds.scheduled_events.things:\n         imds_url: ...\n" in page
    assert "- Polls :ansenvvar:`AZURE\\_IMDS\\_URL`." in page
    assert "   * - :literal:`poll\\_interval`\n     - float\n\n       default: :literal:`1`\n     -\n" \
           "       Seconds, see :literal:`emit\\_existing`." in page


def test_an_event_source_without_documentation_is_an_error_that_names_the_fix(tmp_path):
    directory = tmp_path / gen.EVENT_SOURCES
    os.makedirs(str(directory))
    (directory / "bare.py").write_text("def main():\n    pass\n")
    with pytest.raises(gen.GenerationError, match="bare.py has no DOCUMENTATION string"):
        gen.event_source_docs(str(tmp_path))


def test_compare_finds_stale_missing_and_extra_pages():
    generated = {"a.rst": "new\n", "b.rst": "same\n", "c.rst": "added\n"}
    existing = {"a.rst": "old\n", "b.rst": "same\n", "z.rst": "gone\n"}
    assert gen.compare(generated, existing) == (["a.rst"], ["c.rst"], ["z.rst"])


def test_check_fails_with_the_list_then_passes_after_write(tmp_path, monkeypatch, capsys):
    pages = {"playbook_x.rst": "x\n", "event_source_y.rst": "y\n"}
    monkeypatch.setattr(gen, "generate", lambda environ=None: dict(pages))
    monkeypatch.setattr(gen, "REFERENCE", str(tmp_path))
    (tmp_path / "playbook_x.rst").write_text("an older x\n")
    (tmp_path / "playbook_old.rst").write_text("removed playbook\n")
    assert gen.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "docs: stale: docs/docsite/rst/reference/playbook_x.rst" in out
    assert "docs: missing: docs/docsite/rst/reference/event_source_y.rst" in out
    assert "docs: not generated (remove it): docs/docsite/rst/reference/playbook_old.rst" in out
    assert "reference pages current" not in out
    assert gen.main(["--write"]) == 0
    assert sorted(os.listdir(str(tmp_path))) == ["event_source_y.rst", "playbook_x.rst"]
    assert gen.main(["--check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "docs: 2 reference pages current"


def test_a_page_missing_from_extra_docs_is_an_error_that_names_the_fix(monkeypatch):
    monkeypatch.setattr(gen, "listed_pages", lambda docsite=None: set())
    with pytest.raises(gen.GenerationError, match="extra-docs.yml does not list .*reference/playbook_report.*: add them"):
        gen.generate()


def test_without_the_collection_on_the_path_this_checkout_is_found_as_the_collection():
    path = gen.collections_path({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent"})
    link = os.path.join(path, "ansible_collections", "azure_imds", "scheduled_events")
    assert os.path.realpath(link) == os.path.realpath(ROOT)
    assert gen.collections_path({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent:" + path}) == path


def test_every_playbook_and_event_source_of_the_checkout_gets_a_page_with_every_role_variable():
    pages = gen.generate()
    playbooks = [f[:-4] for f in os.listdir(os.path.join(ROOT, "playbooks")) if f.endswith(".yml")]
    sources = [f[:-3] for f in os.listdir(os.path.join(ROOT, gen.EVENT_SOURCES))
               if f.endswith(".py") and not f.startswith("_")]
    assert sorted(pages) == sorted(["playbook_%s.rst" % p for p in playbooks] +
                                   ["event_source_%s.rst" % s for s in sources])
    for playbook in playbooks:
        roles = gen.playbook_roles(playbook)
        assert roles, "playbooks/%s.yml applies no role of the collection" % playbook
        page = pages["playbook_%s.rst" % playbook]
        for role in roles:
            with open(os.path.join(ROOT, "roles", role.rsplit(".", 1)[-1], "meta", "argument_specs.yml"),
                      encoding="utf-8") as handle:
                spec = yaml.safe_load(handle)["argument_specs"]["main"]
            for option in spec.get("options") or {}:
                name = "%s#role:main:%s" % (role, option)
                assert ":ansopt:`%s`" % name.replace("_", "\\_") in page, (playbook, option)
