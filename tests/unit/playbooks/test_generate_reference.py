# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/generate_reference.py: markup, page rendering, and the --check that `make test` relies on."""

import os
import sys

import pytest

from .conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "docs"))
import generate_reference as gen  # noqa: E402  pylint: disable=wrong-import-position,import-error

PAGES = {("module", "azure_imds.scheduled_events.scheduled_event_info"): "module_scheduled_event_info.md",
         ("role", "azure_imds.scheduled_events.watcher"): "role_watcher.md"}


@pytest.mark.parametrize("text, markdown", [
    ("Use C(state=absent) or V(null).", "Use `state=absent` or `null`."),
    ("Set O(imds_url), see RV(events[].event_id) and E(AZURE_IMDS_URL).",
     "Set `imds_url`, see `events[].event_id` and `AZURE_IMDS_URL`."),
    ("I(never) B(ever) U(https://example.org/x)", "*never* **ever** <https://example.org/x>"),
    ("L(the docs, https://example.org/a,b)", "[the docs, https://example.org/a](b)"),
    ("M(azure_imds.scheduled_events.scheduled_event_info) and M(ansible.builtin.reboot)",
     "[azure_imds.scheduled_events.scheduled_event_info](module_scheduled_event_info.md) and `ansible.builtin.reboot`"),
    ("P(azure_imds.scheduled_events.watcher#role)", "[azure_imds.scheduled_events.watcher](role_watcher.md)"),
    ("V(length(x\\)) stays whole", "`length(x)` stays whole"),
    ("a HORIZONTALLINE b", "a \n\n---\n\n b"),
    (["one", "two"], "one\n\ntwo"),
])
def test_markup_becomes_markdown(text, markdown):
    assert gen.markup(text, PAGES) == markdown


def test_a_plugin_page_has_nested_options_return_values_and_examples():
    data = {
        "doc": {"short_description": "Do a thing", "description": ["First.", "Second with C(code)."],
                "options": {"outer": {"type": "dict", "description": "Outer | piped.",
                                      "suboptions": {"inner": {"type": "int", "default": 3, "required": True,
                                                               "description": "Inner."}}},
                            "mode": {"type": "str", "choices": ["a", "b"], "default": "a", "description": ["M."]}},
                "notes": ["A note."], "author": ["someone"]},
        "examples": "\n---\n- name: Example\n  azure_imds.scheduled_events.thing:\n",
        "return": {"items": {"type": "list", "elements": "dict", "returned": "success", "description": "All.",
                             "sample": [{"a": 1}], "contains": {"a": {"type": "int", "returned": "always",
                                                                      "description": "An a."}}}},
    }
    page = gen.render_plugin("azure_imds.scheduled_events.thing", data, "module", PAGES)
    assert page.startswith("# azure_imds.scheduled_events.thing\n")
    assert "| `outer` | type: dict | Outer \\| piped. |" in page
    assert "| `outer.inner` | type: int<br>**required**<br>default: `3` | Inner. |" in page
    assert "| `mode` | type: str<br>default: `a`<br>choices: `a`, `b` | M. |" in page
    assert "| `items[].a` | type: int<br>returned: always | An a. |" in page
    assert 'Sample: `[{"a": 1}]`' in page
    assert "```yaml\n---\n- name: Example\n  azure_imds.scheduled_events.thing:\n```" in page
    assert "## Notes\n\n- A note." in page


def test_compare_finds_stale_missing_and_extra_pages():
    generated = {"a.md": "new\n", "b.md": "same\n", "c.md": "added\n"}
    existing = {"a.md": "old\n", "b.md": "same\n", "z.md": "gone\n"}
    assert gen.compare(generated, existing) == (["a.md"], ["c.md"], ["z.md"])


def test_check_fails_with_the_list_then_passes_after_write(tmp_path, monkeypatch, capsys):
    pages = {"README.md": "# Reference\n", "module_x.md": "# x\n", "role_y.md": "# y\n"}
    monkeypatch.setattr(gen, "generate", lambda environ=None: dict(pages))
    monkeypatch.setattr(gen, "REFERENCE", str(tmp_path))
    (tmp_path / "module_x.md").write_text("# an older x\n")
    (tmp_path / "module_old.md").write_text("# removed plugin\n")
    assert gen.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "docs: stale: docs/reference/module_x.md" in out
    assert "docs: missing: docs/reference/role_y.md" in out
    assert "docs: not generated (remove it): docs/reference/module_old.md" in out
    assert "reference pages current" not in out
    assert gen.main(["--write"]) == 0
    assert sorted(os.listdir(str(tmp_path))) == ["README.md", "module_x.md", "role_y.md"]
    assert gen.main(["--check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "docs: 2 reference pages current"


def test_without_the_collection_on_the_path_this_checkout_is_found_as_the_collection():
    path = gen.collections_path({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent"})
    link = os.path.join(path, "ansible_collections", "azure_imds", "scheduled_events")
    assert os.path.realpath(link) == os.path.realpath(ROOT)
    assert gen.collections_path({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent:" + path}) == path


def test_an_undocumentable_role_is_an_error_that_names_the_fix(tmp_path):
    os.makedirs(str(tmp_path / "roles" / "bare" / "tasks"))
    with pytest.raises(gen.GenerationError, match="role bare has no meta/argument_specs.yml"):
        gen.role_names(str(tmp_path))


def test_every_module_role_and_playbook_of_the_checkout_gets_a_page():
    pages = gen.generate()
    modules = [f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "modules")) if f.endswith(".py")]
    roles = os.listdir(os.path.join(ROOT, "roles"))
    playbooks = [f[:-4] for f in os.listdir(os.path.join(ROOT, "playbooks")) if f.endswith(".yml")]
    expected = ["module_%s.md" % m for m in modules] + ["role_%s.md" % r for r in roles] + \
        ["playbook_%s.md" % p for p in playbooks] + ["README.md"]
    assert sorted(pages) == sorted(expected)
    assert "[azure_imds.scheduled_events.scheduled_event_wait](module_scheduled_event_wait.md)" in pages["README.md"]
    assert "| `rolling_maintenance_mode` | type: str<br>default: `maintenance`<br>choices: `maintenance`, `gate` |" \
        in pages["playbook_rolling_maintenance.md"]
