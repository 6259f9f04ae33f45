#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lint the collection's documentation and render its docsite; exit 1 on any error or warning.

    docs/check_docsite.py [--keep DIR]

1. `antsibull-docs lint-collection-docs --plugin-docs`: every module, role and plugin's
   documentation, docs/docsite/extra-docs.yml, links.yml and the RST pages under docs/docsite/rst/.
2. The docsite as antsibull-docs makes it (`sphinx-init`, `collection --use-current`), built by
   `sphinx-build -W --keep-going` (nitpicky): a broken reference, a page in no toctree or a bad
   RST construct fails.
3. The rendered collection index links every page extra-docs.yml lists, under its title.

Offline: the Sphinx configuration that sphinx-init writes fetches the Ansible docsite's
inventories to resolve references into it (common_return_values, ansible.builtin modules).
Nothing may be fetched here, so this script gives intersphinx a local inventory instead: the
labels of those pages at their real addresses, built from the installed ansible-core.
A reference to a label that is neither ours nor in that inventory fails the build.

Needs the project's .venv (antsibull-docs, sphinx, sphinx-ansible-theme); the collection is found
as docs/generate_reference.py finds it (ANSIBLE_COLLECTIONS_PATH, else this checkout).
"""

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import yaml
from docutils.nodes import make_id

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    from ansible_collections.azure_imds.scheduled_events.docs.generate_reference import (COLLECTION, NAME, NAMESPACE,
                                                                                         GenerationError, collections_path)
except ModuleNotFoundError as missing:
    sys.exit("check_docsite.py: %s: run it through tests/harness/loopback-only (make test SUITES=docsite does), "
             "which puts this checkout on the import path" % missing)
ANSIBLE_DOCSITE = "https://docs.ansible.com/projects/ansible/devel/"
# Labels of the Ansible docsite that generated plugin pages refer to, and their pages there.
ANSIBLE_LABELS = {
    "common_return_values": "reference_appendices/common_return_values.html",
    "ansible_configuration_settings": "reference_appendices/config.html",
    "action_plugins": "plugins/action.html",
    "playbooks_intro": "playbook_guide/playbooks_intro.html",
    "become": "playbook_guide/playbooks_privilege_escalation.html",
    # Collections of the ansible package our pages refer to (ansible.windows.win_uri: the Windows path).
    "ansible_collections.ansible.windows.win_uri_module": "collections/ansible/windows/win_uri_module.html",
}


class CheckError(Exception):
    """A step failed; the message says which and shows its output."""


def environment(path):
    """antsibull-docs runs `ansible` and `ansible-doc`: the ones beside this Python come first."""
    bindir = os.path.dirname(sys.executable)
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=path, ANSIBLE_NOCOLOR="1",
                PATH=bindir + os.pathsep + os.environ.get("PATH", ""))


def run(step, argv, env, cwd=None):
    proc = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False)
    output = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        raise CheckError("%s failed (exit %d): %s\n%s" % (step, proc.returncode, " ".join(argv), output.rstrip()))
    return output


def builtin_labels():
    """{label: page} of every ansible.builtin module, from the installed ansible-core."""
    import ansible.modules  # pylint: disable=import-outside-toplevel
    labels = {}
    for filename in os.listdir(os.path.dirname(ansible.modules.__file__)):
        if filename.endswith(".py") and not filename.startswith("_"):
            module = filename[:-3]
            labels["ansible_collections.ansible.builtin.%s_module" % module] = \
                "collections/ansible/builtin/%s_module.html" % module
    return labels


def core_envvars():
    """The environment variables of ansible-core's own settings (base.yml), which the Ansible docsite's
    configuration page defines as envvar targets: plugin pages refer to those a doc fragment names
    (inventory_cache's ANSIBLE_CACHE_PLUGIN, for instance)."""
    import ansible.config  # pylint: disable=import-outside-toplevel
    with open(os.path.join(os.path.dirname(ansible.config.__file__), "base.yml"), encoding="utf-8") as handle:
        settings = yaml.safe_load(handle)
    return sorted(set(entry["name"] for setting in settings.values() if isinstance(setting, dict)
                      for entry in setting.get("env") or () if isinstance(entry, dict) and entry.get("name")))


def write_inventory(path):
    """A Sphinx inventory (version 2) of the Ansible docsite labels and environment variables we link to."""
    labels = dict(ANSIBLE_LABELS, **builtin_labels())
    # A label's anchor is the id docutils makes of it (common_return_values -> common-return-values).
    body = "".join("%s std:label -1 %s#%s %s\n" % (label, page, make_id(label), label) for label, page in sorted(labels.items()))
    body += "".join("%s std:envvar -1 %s#envvar-%s -\n" % (name, ANSIBLE_LABELS["ansible_configuration_settings"], name)
                    for name in core_envvars())
    with open(path, "wb") as handle:
        handle.write(b"# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n"
                     b"# The remainder of this file is compressed using zlib.\n")
        handle.write(zlib.compress(body.encode("utf-8")))


def offline_conf(site):
    """conf.py of sphinx-init with intersphinx reading the local inventory only."""
    conf = os.path.join(site, "conf.py")
    with open(conf, encoding="utf-8") as handle:
        text = handle.read()
    inventory = os.path.join(site, "ansible_devel.inv")
    text, count = re.subn(r"(?ms)^intersphinx_mapping = \{.*?^\}\n",
                          "intersphinx_mapping = {'ansible_devel': (%r, %r)}\n" % (ANSIBLE_DOCSITE, inventory), text)
    if count != 1:
        raise CheckError("%s has no intersphinx_mapping block to replace: has antsibull-docs changed sphinx-init?" % conf)
    with open(conf, "w", encoding="utf-8") as handle:
        handle.write(text)
    write_inventory(inventory)


def extra_pages():
    """[(section title, page name)] from docs/docsite/extra-docs.yml."""
    with open(os.path.join(ROOT, "docs", "docsite", "extra-docs.yml"), encoding="utf-8") as handle:
        index = yaml.safe_load(handle)
    return [(section["title"], entry if isinstance(entry, str) else entry["ref"])
            for section in index["sections"] for entry in section["toctree"]]


def page_title(html_text):
    match = re.search(r"<h1>(.*?)<a class=\"headerlink\"", html_text, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))).strip() if match else None


def check_index(build):
    """Each extra-docs page rendered and linked from the collection's index page; [(page, title)]."""
    collection_html = os.path.join(build, "collections", NAMESPACE, NAME)
    with open(os.path.join(collection_html, "index.html"), encoding="utf-8") as handle:
        index = handle.read()
    found = []
    for section, page in extra_pages():
        if section not in index:
            raise CheckError("the rendered collection index has no section %r (extra-docs.yml)" % section)
        target = os.path.join(collection_html, "docsite", page + ".html")
        if not os.path.isfile(target) or 'href="docsite/%s.html"' % page not in index:
            raise CheckError("docsite/%s is not rendered or not linked from the collection index" % page)
        with open(target, encoding="utf-8") as handle:
            found.append((page, page_title(handle.read())))
    return found


def check(keep=None):
    path = collections_path()
    env = environment(path)
    collection = os.path.join(path, "ansible_collections", NAMESPACE, NAME)
    bindir = os.path.dirname(sys.executable)
    antsibull = os.path.join(bindir, "antsibull-docs")

    output = run("lint-collection-docs", [antsibull, "lint-collection-docs", "--plugin-docs", collection], env)
    if output.strip():
        raise CheckError("lint-collection-docs reported:\n%s" % output.rstrip())
    print("docsite: antsibull-docs lint-collection-docs --plugin-docs: no findings")

    site = keep or tempfile.mkdtemp(prefix="docsite-")
    try:
        if keep:
            shutil.rmtree(site, ignore_errors=True)
            os.makedirs(site, 0o755)
        run("sphinx-init", [antsibull, "sphinx-init", "--use-current", "--dest-dir", site, COLLECTION], env)
        offline_conf(site)
        rst = os.path.join(site, "rst")
        os.makedirs(rst, exist_ok=True)
        os.chmod(rst, 0o755)
        run("antsibull-docs collection", [antsibull, "--config-file", "antsibull-docs.cfg", "collection", "--cleanup",
                                          "everything", "--use-current", "--dest-dir", "rst", COLLECTION], env, cwd=site)
        build = os.path.join(site, "build")
        output = run("sphinx-build", [os.path.join(bindir, "sphinx-build"), "-b", "html", "-W", "--keep-going", "-q",
                                      "-c", ".", "rst", build], env, cwd=site)
        if output.strip():
            raise CheckError("sphinx-build reported:\n%s" % output.rstrip())
        pages = check_index(build)
        print("docsite: rendered with sphinx-build -W (nitpicky), no warnings: %s"
              % os.path.join(build, "collections", NAMESPACE, NAME, "index.html"))
        for page, title in pages:
            print("docsite: index links docsite/%s.html: %s" % (page, title))
    finally:
        if not keep:
            shutil.rmtree(site, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", metavar="DIR", help="render into DIR (emptied first) and keep it")
    args = parser.parse_args(argv)
    try:
        check(os.path.abspath(args.keep) if args.keep else None)
    except (CheckError, GenerationError) as exc:
        print("docsite: error: %s" % exc, file=sys.stderr)
        return 1
    print("docsite: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
