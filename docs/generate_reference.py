#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate docs/reference/*.md from the collection's own documentation, or check it is current.

    docs/generate_reference.py --write    rewrite docs/reference/ (make docs)
    docs/generate_reference.py --check    exit 1 listing stale, missing or extra pages (make test)

Sources: `ansible-doc --json` for every module and plugin (the docs-only
plugins/modules/scheduled_event_wait.py documents the action plugin), `ansible-doc -t role --json`
for every role (meta/argument_specs.yml), and playbooks/argument_specs/*.yml for the playbooks.
The pages depend on nothing but that documentation, so the check is stable across machines.

ansible-doc finds the collection through ANSIBLE_COLLECTIONS_PATH; when the collection is not
there, tests/harness/collection_path.py says where this checkout is found as the collection.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import collection_path  # noqa: E402  pylint: disable=wrong-import-position

REFERENCE = os.path.join(ROOT, "docs", "reference")
NAMESPACE, NAME = "azure_imds", "scheduled_events"
COLLECTION = "%s.%s" % (NAMESPACE, NAME)
INDEX = "README.md"

# plugins/<directory> -> ansible-doc type. action/ is documented by a docs-only file in modules/;
# filter and test plugins are documented by YAML files beside their code.
PLUGIN_TYPES = (
    ("modules", "module"), ("lookup", "lookup"), ("filter", "filter"), ("test", "test"),
    ("callback", "callback"), ("inventory", "inventory"), ("connection", "connection"),
    ("become", "become"), ("cache", "cache"), ("vars", "vars"), ("strategy", "strategy"),
)
SIDECAR_TYPES = ("filter", "test")
TYPE_TITLES = {"module": "Modules", "role": "Roles", "playbook": "Playbooks"}


class GenerationError(Exception):
    """Something the pages cannot be generated from; the message says what and how to fix it."""


# --------------------------------------------------------------------------------------------
# Finding the collection and its content
# --------------------------------------------------------------------------------------------

def collections_path(environ=None):
    """A collections path where ansible-doc finds this collection."""
    environ = os.environ if environ is None else environ
    for entry in (environ.get("ANSIBLE_COLLECTIONS_PATH") or "").split(os.pathsep):
        if entry and os.path.isfile(os.path.join(entry, "ansible_collections", NAMESPACE, NAME, "galaxy.yml")):
            return entry
    return collection_path.collections_dir(ROOT)


def plugin_names(root=ROOT):
    """{ansible-doc type: [short names]} of what this checkout holds."""
    found = {}
    for directory, doc_type in PLUGIN_TYPES:
        path = os.path.join(root, "plugins", directory)
        if not os.path.isdir(path):
            continue
        suffixes = (".yml", ".yaml") if doc_type in SIDECAR_TYPES else (".py",)
        names = sorted(os.path.splitext(f)[0] for f in os.listdir(path)
                       if f.endswith(suffixes) and not f.startswith("_"))
        if names:
            found[doc_type] = names
    return found


def role_names(root=ROOT):
    roles_dir = os.path.join(root, "roles")
    if not os.path.isdir(roles_dir):
        return []
    names = sorted(d for d in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, d)))
    missing = [d for d in names if not any(os.path.isfile(os.path.join(roles_dir, d, "meta", f))
                                           for f in ("argument_specs.yml", "argument_specs.yaml"))]
    if missing:
        raise GenerationError(
            "role%s %s ha%s no meta/argument_specs.yml, so there is nothing to document: add one (the role's "
            "variables with type, default and description)" % (
                "s" if len(missing) > 1 else "", ", ".join(missing), "ve" if len(missing) > 1 else "s"))
    return names


def playbook_specs(root=ROOT):
    """{playbook name: entry point} from playbooks/argument_specs/<name>.yml."""
    specs = {}
    directory = os.path.join(root, "playbooks", "argument_specs")
    if not os.path.isdir(directory):
        return specs
    for filename in sorted(os.listdir(directory)):
        name, ext = os.path.splitext(filename)
        if ext not in (".yml", ".yaml"):
            continue
        with open(os.path.join(directory, filename), encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        try:
            specs[name] = doc["argument_specs"][name]
        except (KeyError, TypeError):
            raise GenerationError("playbooks/argument_specs/%s has no argument_specs.%s entry" % (filename, name))
        if not os.path.isfile(os.path.join(root, "playbooks", name + ".yml")):
            raise GenerationError("playbooks/argument_specs/%s documents playbooks/%s.yml, which does not exist"
                                  % (filename, name))
    return specs


def ansible_doc(doc_type, names, path):
    """ansible-doc --json for names of one type. Fails when any name is missing from the answer."""
    if not names:
        return {}
    fqcns = ["%s.%s" % (COLLECTION, n) for n in names]
    executable = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    if not os.path.exists(executable):
        executable = "ansible-doc"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=path, ANSIBLE_NOCOLOR="1")
    try:
        proc = subprocess.run([executable, "--json", "-t", doc_type] + fqcns, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError as exc:
        raise GenerationError("cannot run ansible-doc (%s): run this with the Python of the project's .venv "
                              "(make docs)" % exc)
    stderr = proc.stderr.decode("utf-8", "replace").strip()
    try:
        docs = json.loads(proc.stdout.decode("utf-8") or "{}")
    except ValueError:
        docs = {}
    missing = [f for f in fqcns if f not in docs or not docs[f]]
    if proc.returncode != 0 or missing:
        raise GenerationError("ansible-doc -t %s could not document %s (exit %d): %s" % (
            doc_type, ", ".join(missing) or ", ".join(fqcns), proc.returncode, stderr or "no message"))
    return docs


# --------------------------------------------------------------------------------------------
# Ansible markup -> Markdown
# --------------------------------------------------------------------------------------------

_MARKUP = re.compile(r"\b(?P<kind>RV|[CVOEIBUMLP])\((?P<arg>(?:[^)\\]|\\.)*)\)|\bHORIZONTALLINE\b")


def _unescape(text):
    return re.sub(r"\\(.)", r"\1", text)


def _code(text):
    text = _unescape(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def _fqcn_link(fqcn, kind, pages):
    page = pages.get((kind, fqcn))
    return "[%s](%s)" % (fqcn, page) if page else _code(fqcn)


def markup(text, pages=None):
    """Ansible documentation markup (C(), V(), O(), M(), L() ...) as Markdown."""
    pages = pages or {}
    if text is None:
        return ""
    if isinstance(text, (list, tuple)):
        return "\n\n".join(markup(t, pages) for t in text)
    text = str(text)

    def replace(match):
        if match.group(0) == "HORIZONTALLINE":
            return "\n\n---\n\n"
        kind, arg = match.group("kind"), match.group("arg")
        if kind in ("C", "V", "E", "RV"):
            return _code(arg)
        if kind == "O":
            return _code(arg.split("#", 1)[-1] if "#" in arg.split("=", 1)[0] else arg)
        if kind == "I":
            return "*%s*" % _unescape(arg)
        if kind == "B":
            return "**%s**" % _unescape(arg)
        if kind == "U":
            return "<%s>" % _unescape(arg)
        if kind == "L":
            label, url = _unescape(arg).rsplit(",", 1) if "," in arg else (arg, arg)
            return "[%s](%s)" % (label.strip(), url.strip())
        if kind == "M":
            return _fqcn_link(_unescape(arg), "module", pages)
        name, plugin_type = _unescape(arg).split("#", 1) if "#" in arg else (_unescape(arg), "module")
        return _fqcn_link(name, plugin_type, pages)

    return _MARKUP.sub(replace, text)


def cell(text):
    """Markdown for one table cell: one line, pipes escaped."""
    return text.replace("|", "\\|").replace("\n\n", "<br>").replace("\n", " ").strip()


def _value(value):
    return "`%s`" % json.dumps(value) if not isinstance(value, str) else "`%s`" % value if value else '`""`'


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------

def page_name(kind, fqcn_or_name):
    return "%s_%s.md" % (kind, fqcn_or_name.rsplit(".", 1)[-1])


def _type_fact(entry, default_type):
    """"type: list of str" for a list, "type: int" otherwise."""
    fact = "type: %s" % entry.get("type", default_type)
    return fact + (" of %s" % entry["elements"] if entry.get("elements") else "")


def _child_prefix(path, entry):
    """Nested keys of a list are written name[].key, of a dict name.key."""
    return path + ("[]." if entry.get("type") == "list" else ".")


def _option_rows(options, pages, prefix=""):
    rows = []
    for name in sorted(options or {}):
        option = options[name] or {}
        path = prefix + name
        facts = [_type_fact(option, "str")]
        if option.get("required"):
            facts.append("**required**")
        if "default" in option and option["default"] is not None:
            facts.append("default: %s" % _value(option["default"]))
        if option.get("choices"):
            facts.append("choices: %s" % ", ".join(_value(c) for c in option["choices"]))
        if option.get("aliases"):
            facts.append("aliases: %s" % ", ".join(option["aliases"]))
        env = [e["name"] for e in option.get("env") or [] if isinstance(e, dict) and e.get("name")]
        if env:
            facts.append("env: %s" % ", ".join("`%s`" % e for e in env))
        rows.append("| `%s` | %s | %s |" % (path, "<br>".join(facts), cell(markup(option.get("description"), pages))))
        nested = option.get("suboptions") or option.get("options")
        if nested:
            rows.extend(_option_rows(nested, pages, _child_prefix(path, option)))
    return rows


def _options_table(options, pages, title="Parameters"):
    if not options:
        return ["## %s" % title, "", "None.", ""]
    return ["## %s" % title, "", "| Parameter | Type, default, choices | Description |", "| --- | --- | --- |"] + \
        _option_rows(options, pages) + [""]


def _return_rows(values, pages, prefix=""):
    rows = []
    for name in sorted(values or {}):
        value = values[name] or {}
        path = prefix + name
        facts = [_type_fact(value, "?")]
        if value.get("returned"):
            facts.append("returned: %s" % cell(markup(value["returned"], pages)))
        description = markup(value.get("description"), pages)
        if "sample" in value:
            description += "\n\nSample: `%s`" % json.dumps(value["sample"], sort_keys=True)
        rows.append("| `%s` | %s | %s |" % (path, "<br>".join(facts), cell(description)))
        if value.get("contains"):
            rows.extend(_return_rows(value["contains"], pages, _child_prefix(path, value)))
    return rows


def _paragraphs(value, pages):
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    return [markup(item, pages) for item in items]


def _bullets(title, value, pages):
    items = _paragraphs(value, pages)
    if not items:
        return []
    return ["## %s" % title, ""] + ["- %s" % item.replace("\n\n", " ") for item in items] + [""]


def render_plugin(fqcn, data, doc_type, pages):
    doc = data.get("doc") or {}
    lines = ["# %s" % fqcn, "", "<!-- Generated by docs/generate_reference.py from the plugin's documentation. "
             "Do not edit: run make docs. -->", ""]
    kind = "module" if doc_type == "module" else "%s plugin" % doc_type
    if doc_type == "module" and doc.get("has_action"):
        kind = "module; runs as an action plugin on the controller" if not _module_file_has_code(fqcn) else \
            "module with an action plugin"
    lines += ["**%s** (%s)" % (markup(doc.get("short_description"), pages), kind), ""]
    if doc.get("version_added"):
        lines += ["Added in version %s." % doc["version_added"], ""]
    lines += ["## Synopsis", ""] + [p + "\n" for p in _paragraphs(doc.get("description"), pages)]
    lines += _bullets("Requirements", doc.get("requirements"), pages)
    lines += _options_table(doc.get("options"), pages)
    if doc.get("attributes"):
        lines += ["## Attributes", "", "| Attribute | Support | Details |", "| --- | --- | --- |"]
        for name in sorted(doc["attributes"]):
            attribute = doc["attributes"][name]
            support = attribute.get("support", "")
            if name == "platform" and attribute.get("platforms"):
                platforms = attribute["platforms"]
                support = ", ".join(platforms) if isinstance(platforms, list) else platforms
            details = markup(attribute.get("details") or attribute.get("description"), pages)
            lines.append("| %s | %s | %s |" % (name, support, cell(details)))
        lines.append("")
    lines += _bullets("Notes", doc.get("notes"), pages)
    if doc.get("seealso"):
        lines += ["## See also", ""]
        for item in doc["seealso"]:
            described = ": " + markup(item["description"], pages) if item.get("description") else ""
            if item.get("module"):
                lines.append("- %s%s" % (_fqcn_link(item["module"], "module", pages), described))
            elif item.get("plugin"):
                lines.append("- %s%s" % (_fqcn_link(item["plugin"], item.get("plugin_type", "module"), pages),
                                         described))
            elif item.get("link"):
                lines.append("- [%s](%s)%s" % (item.get("name", item["link"]), item["link"], described))
        lines.append("")
    if data.get("examples"):
        lines += ["## Examples", "", "```yaml", data["examples"].strip("\n"), "```", ""]
    if data.get("return"):
        lines += ["## Return values", "", "| Key | Type, returned | Description |", "| --- | --- | --- |"]
        lines += _return_rows(data["return"], pages) + [""]
    authors = doc.get("author")
    if authors:
        lines += ["## Authors", ""] + ["- %s" % a for a in (authors if isinstance(authors, list) else [authors])]
        lines.append("")
    return "\n".join(lines)


def _module_file_has_code(fqcn):
    """A docs-only module file (for an action plugin) holds nothing but documentation."""
    path = os.path.join(ROOT, "plugins", "modules", fqcn.rsplit(".", 1)[-1] + ".py")
    try:
        with open(path, encoding="utf-8") as handle:
            return "def main(" in handle.read()
    except OSError:
        return False


def render_entry_points(title, intro, entry_points, pages, usage):
    lines = ["# %s" % title, "", "<!-- Generated by docs/generate_reference.py from %s. Do not edit: run make docs. -->"
             % intro, ""]
    for entry in sorted(entry_points):
        spec = entry_points[entry] or {}
        heading = "" if len(entry_points) == 1 else " `%s`" % entry
        if spec.get("short_description"):
            lines += ["**%s**" % markup(spec["short_description"], pages), ""]
        lines += ["## Synopsis%s" % heading, ""] + [p + "\n" for p in _paragraphs(spec.get("description"), pages)]
        lines += usage(entry)
        lines += _options_table(spec.get("options"), pages, "Variables%s" % heading)
        authors = spec.get("author")
        if authors:
            lines += ["## Authors", ""] + ["- %s" % a for a in (authors if isinstance(authors, list) else [authors])]
            lines.append("")
    return "\n".join(lines)


def render_role(fqcn, data, pages):
    def usage(entry):
        lines = ["```yaml", "- name: Apply %s" % fqcn, "  ansible.builtin.include_role:", "    name: %s" % fqcn]
        if entry != "main":
            lines.append("    tasks_from: %s" % entry)
        return lines + ["```", ""]
    return render_entry_points(fqcn, "the role's meta/argument_specs.yml", data.get("entry_points") or {}, pages,
                               usage)


def render_playbook(name, spec, pages):
    fqcn = "%s.%s" % (COLLECTION, name)

    def usage(_entry):
        return ["```console", "ansible-playbook -i inventory %s -e %s_hosts=web" % (fqcn, name), "```", "",
                "Source: `playbooks/%s.yml`. Play-level variables (hosts, batch size) must be extra vars; the "
                "others may also come from the inventory." % name, ""]
    return render_entry_points(fqcn, "playbooks/argument_specs/%s.yml" % name, {name: spec}, pages, usage)


def render_index(entries):
    lines = ["# Reference", "", "<!-- Generated by docs/generate_reference.py. Do not edit: run make docs. -->", "",
             "Generated from the documentation of every module, plugin, role and playbook of `%s`." % COLLECTION, ""]
    order = list(TYPE_TITLES)
    kinds = sorted(set(entry[0] for entry in entries), key=lambda k: (order.index(k) if k in order else len(order), k))
    for kind in kinds:
        lines += ["## %s" % TYPE_TITLES.get(kind, kind.capitalize() + " plugins"), "", "| Name | Description |",
                  "| --- | --- |"]
        for entry_kind, fqcn, page, summary in entries:
            if entry_kind == kind:
                lines.append("| [%s](%s) | %s |" % (fqcn, page, cell(summary)))
        lines.append("")
    return "\n".join(lines)


def generate(environ=None):
    """{file name: content} of every reference page, the index included."""
    path = collections_path(environ)
    plugins = dict((t, ansible_doc(t, names, path)) for t, names in plugin_names().items())
    roles = ansible_doc("role", role_names(), path)
    playbooks = playbook_specs()
    pages = {}
    entries = []
    for doc_type, docs in plugins.items():
        for fqcn in docs:
            pages[(doc_type, fqcn)] = page_name(doc_type, fqcn)
    for fqcn in roles:
        pages[("role", fqcn)] = page_name("role", fqcn)
    for name in playbooks:
        pages[("playbook", "%s.%s" % (COLLECTION, name))] = page_name("playbook", name)

    out = {}
    for doc_type in sorted(plugins):
        for fqcn in sorted(plugins[doc_type]):
            data = plugins[doc_type][fqcn]
            out[pages[(doc_type, fqcn)]] = render_plugin(fqcn, data, doc_type, pages)
            entries.append((doc_type, fqcn, pages[(doc_type, fqcn)],
                            markup((data.get("doc") or {}).get("short_description"), pages)))
    for fqcn in sorted(roles):
        out[pages[("role", fqcn)]] = render_role(fqcn, roles[fqcn], pages)
        main = (roles[fqcn].get("entry_points") or {}).get("main") or {}
        entries.append(("role", fqcn, pages[("role", fqcn)], markup(main.get("short_description"), pages)))
    for name in sorted(playbooks):
        fqcn = "%s.%s" % (COLLECTION, name)
        out[pages[("playbook", fqcn)]] = render_playbook(name, playbooks[name], pages)
        entries.append(("playbook", fqcn, pages[("playbook", fqcn)],
                        markup(playbooks[name].get("short_description"), pages)))
    out[INDEX] = render_index(entries)
    return dict((name, text.rstrip("\n") + "\n") for name, text in out.items())


# --------------------------------------------------------------------------------------------
# Writing and checking
# --------------------------------------------------------------------------------------------

def existing_pages(directory=None):
    directory = directory or REFERENCE
    if not os.path.isdir(directory):
        return {}
    pages = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".md"):
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                pages[name] = handle.read()
    return pages


def compare(generated, existing):
    """(stale, missing, extra) page names."""
    stale = sorted(n for n in generated if n in existing and existing[n] != generated[n])
    missing = sorted(n for n in generated if n not in existing)
    extra = sorted(n for n in existing if n not in generated)
    return stale, missing, extra


def write(generated, directory=None):
    directory = directory or REFERENCE
    os.makedirs(directory, exist_ok=True)
    stale, missing, extra = compare(generated, existing_pages(directory))
    for name in stale + missing:
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(generated[name])
    for name in extra:
        os.remove(os.path.join(directory, name))
    return stale, missing, extra


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite docs/reference/")
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/reference/ is not current")
    args = parser.parse_args(argv)
    try:
        generated = generate()
    except GenerationError as exc:
        print("docs: error: %s" % exc, file=sys.stderr)
        return 2
    count = len(generated) - 1  # the index is not a reference page of its own
    if args.write:
        stale, missing, extra = write(generated)
        for label, names in (("updated", stale), ("added", missing), ("removed", extra)):
            for name in names:
                print("docs: %s docs/reference/%s" % (label, name))
        print("docs: %d reference pages current" % count)
        return 0
    stale, missing, extra = compare(generated, existing_pages())
    if stale or missing or extra:
        for label, names in (("stale", stale), ("missing", missing), ("not generated (remove it)", extra)):
            for name in names:
                print("docs: %s: docs/reference/%s" % (label, name))
        print("docs: %d of %d reference pages need regenerating: run make docs (docs/generate_reference.py --write)"
              % (len(stale) + len(missing) + len(extra), count + 1))
        return 1
    print("docs: %d reference pages current" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
