# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection packages, installs and feeds ansible-builder as an installed collection.

- The tarball built from this checkout installs, passes `ansible-galaxy collection verify
  --offline`, carries LICENSE and leaves development files out.
- ansible-builder's dependency scan (`introspect`, the step every image build runs over every
  installed collection) reads meta/execution-environment.yml of the installed copy without error
  and finds jmespath.
- A release made by antsibull-changelog (in a scratch copy) announces every module, role and
  playbook once, under its own "New ..." section, after a release summary: no fragment repeats them.
- Our own image definition, extensions/ee/execution-environment.yml, turns into a build context
  (`ansible-builder create`, offline) in a scratch tree laid out like the repository (extensions/ee/
  two levels below build/), so its relative paths are the real ones.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.tests.support.once_per_run import once_per_run
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, ROOT, load_yaml

EE_DIR = os.path.join(ROOT, "extensions", "ee")
DOCS = os.path.join(ROOT, "docs")
GPL3 = "/usr/share/common-licenses/GPL-3"
# Development-only paths that must stay out of the tarball (galaxy.yml build_ignore).
DEV_ONLY = ("build/", ".cache/", ".venv/", ".hypothesis/", ".pytest_cache/", "tests/", "bench/", "devtools/", "extensions/ee/",
            "extensions/demo/", "extensions/molecule/", "docs/generate_reference.py", "Makefile")


def run(args, **kwargs):
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, **kwargs)
    return proc.returncode, proc.stdout.decode()


def tool(name):
    """A tool of the environment under test; its absence is a failure, not a skip."""
    path = os.path.join(BIN, name)
    assert os.path.isfile(path), "%s is not installed in %s (tests/requirements.txt lists it)" % (name, BIN)
    return path


def pins(path):
    found = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                found[name.split("[", 1)[0].strip().lower()] = version.strip()
    return found


@pytest.fixture
def galaxy():
    return load_yaml(os.path.join(ROOT, "galaxy.yml"))


# The tarball, its installed copy and the build context are made once for every test of the run
# (ansible-test forks each test: see tests/support/once_per_run.py); the fixtures hand out their paths.

def build_tarball(out):
    galaxy_yml = load_yaml(os.path.join(ROOT, "galaxy.yml"))
    rc, output = run([tool("ansible-galaxy"), "collection", "build", "--output-path", out, ROOT])
    assert rc == 0, output
    path = os.path.join(out, "%s-%s-%s.tar.gz" % (galaxy_yml["namespace"], galaxy_yml["name"], galaxy_yml["version"]))
    assert os.path.isfile(path), output
    return path


@pytest.fixture
def tarball():
    return pathlib.Path(once_per_run("collection-tarball", build_tarball))


def install_tarball(where, path):
    # Only this directory is searched: under ansible-test the checkout itself is on the collections
    # path, and ansible-galaxy would answer that the collection is installed already.
    rc, output = run([tool("ansible-galaxy"), "collection", "install", "--offline", "-p", where, path],
                     env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=where))
    assert rc == 0, output
    assert os.path.isfile(os.path.join(where, "ansible_collections", "azure_imds", "scheduled_events",
                                       "MANIFEST.json")), output
    return where


@pytest.fixture
def installed(tarball):
    """The directory holding ansible_collections/ with the collection installed from the tarball."""
    return pathlib.Path(once_per_run("collection-installed", lambda where: install_tarball(where, str(tarball))))


def test_the_tarball_carries_the_license_and_no_development_files(tarball):
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
        license_text = archive.extractfile("LICENSE").read().decode()
    with open(GPL3, encoding="utf-8") as handle:
        assert license_text == handle.read()
    leaked = sorted(n for n in names if any(n == d.rstrip("/") or n.startswith(d) for d in DEV_ONLY))
    assert leaked == []
    for needed in ("meta/execution-environment.yml", "meta/ee-requirements.txt", "meta/runtime.yml",
                   "playbooks/rolling_maintenance.yml", "plugins/modules/scheduled_event_info.py",
                   "roles/watcher/meta/argument_specs.yml", "changelogs/changelog.yaml", "README.md"):
        assert needed in names, needed


def test_the_installed_collection_verifies_offline(installed, galaxy):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed))
    fqcn = "%s.%s" % (galaxy["namespace"], galaxy["name"])
    rc, output = run([tool("ansible-galaxy"), "collection", "verify", "--offline", fqcn], env=env, cwd=str(installed))
    assert rc == 0, output
    assert "Successfully verified that checksums for '%s:%s'" % (fqcn, galaxy["version"]) in output


def test_ansible_builder_introspects_the_installed_collection(installed, galaxy):
    rc, output = run([tool("ansible-builder"), "introspect", str(installed)])
    assert rc == 0, output
    found = yaml.safe_load(output)
    fqcn = "%s.%s" % (galaxy["namespace"], galaxy["name"])
    # Every library of meta/ee-requirements.txt, in its order, each attributed to the collection.
    with open(os.path.join(ROOT, "meta", "ee-requirements.txt"), encoding="utf-8") as handle:
        libraries = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    assert "jmespath" in libraries and "azure-identity" in libraries, libraries
    assert found["python"] == ["%s  # from collection %s" % (library, fqcn) for library in libraries]
    assert found["system"] == []


def create_context(work, path):
    shutil.copytree(EE_DIR, os.path.join(work, "extensions", "ee"))
    os.makedirs(os.path.join(work, "build"))
    shutil.copy(path, os.path.join(work, "build"))
    rc, output = run([tool("ansible-builder"), "create", "-f", "extensions/ee/execution-environment.yml",
                      "--context", "context"], cwd=work)
    assert rc == 0, output
    return [output, os.path.join(work, "context")]


@pytest.fixture
def context(tarball):
    """(ansible-builder output, context directory) from a scratch tree shaped like the repository."""
    output, directory = once_per_run("ee-build-context", lambda work: create_context(work, str(tarball)))
    return output, pathlib.Path(directory)


def context_files(directory):
    return sorted(os.path.relpath(os.path.join(d, f), str(directory)) for d, _dirs, names in os.walk(str(directory))
                  for f in names)


def test_ansible_builder_creates_the_build_context(context, tarball):
    output, directory = context
    assert "Complete! The build context can be found at:" in output
    files = context_files(directory)
    assert "Containerfile" in files and "_build/requirements.yml" in files
    assert "_build/collections/%s" % tarball.name in files


def test_the_image_installs_the_tarball_of_make_build_whatever_its_version(context, galaxy):
    _output, directory = context
    containerfile = (directory / "Containerfile").read_text()
    base = re.search(r'^ARG EE_BASE_IMAGE="([^"]*)"', containerfile, re.M).group(1)
    # Fully qualified: the first component names a registry host (podman's rule: it has a dot or a
    # port, or is localhost), so no registries.conf search list decides which image it is.
    host = base.split("/", 1)[0]
    assert "/" in base and ("." in host or ":" in host or host == "localhost"), base
    install = [line for line in containerfile.splitlines()
               if line.startswith("RUN ") and "ansible-galaxy collection install --offline" in line]
    assert len(install) == 1, containerfile
    assert "collections/%s-%s-*.tar.gz" % (galaxy["namespace"], galaxy["name"]) in install[0]
    for name in os.listdir(EE_DIR):
        with open(os.path.join(EE_DIR, name), encoding="utf-8") as handle:
            assert galaxy["version"] not in handle.read(), "%s writes the collection version by hand" % name


def test_the_image_gets_the_versions_the_collection_is_tested_with(context):
    _output, directory = context
    tested = pins(os.path.join(ROOT, "tests", "requirements.txt"))
    containerfile = (directory / "Containerfile").read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile, re.M).group(1).split()
    assert "ansible-core==%s" % tested["ansible-core"] in refs
    assert pins(str(directory / "_build" / "requirements.txt")) == {"jmespath": tested["jmespath"]}
    with open(os.path.join(EE_DIR, "bindep.txt"), encoding="utf-8") as handle:
        assert (directory / "_build" / "bindep.txt").read_text() == handle.read()


def shown_output(command):
    """The lines a guide under docs/ shows after `$ command` in a code block (Markdown or
    reStructuredText), up to the next command or the end of the block; the guide is found by the
    command, wherever the docs keep it."""
    for directory, _dirs, names in os.walk(DOCS):
        for name in names:
            if name.endswith((".md", ".rst")):
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    text = handle.read()
                found = re.search(r"^( *)\$ %s\n((?:\1[^$\s`].*\n)*)" % re.escape(command), text, re.M)
                if found:
                    return [line[len(found.group(1)):] for line in found.group(2).splitlines()]
    raise AssertionError("no guide under docs/ shows `$ %s`" % command)


def test_the_guide_shows_the_real_output(context):
    _output, directory = context
    # The guide writes <version> where make build puts galaxy.yml's version.
    files = [re.sub(r"-\d+\.\d+\.\d+\.tar\.gz$", "-<version>.tar.gz", "context/" + name) for name in context_files(directory)]
    assert shown_output("find context -type f | sort") == files
    head = (directory / "Containerfile").read_text().splitlines()[:7]
    assert shown_output("head -7 context/Containerfile") == head


def test_manifest_of_the_tarball_names_this_collection(tarball, galaxy):
    with tarfile.open(str(tarball)) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == (galaxy["namespace"], galaxy["name"], galaxy["version"])
    assert info["license"] == ["GPL-3.0-or-later"]


# What a release needs of the collection: antsibull-changelog reads the fragments and galaxy.yml,
# and asks ansible-doc about the plugins and roles of a copy it makes itself.
RELEASE_INPUTS = ("galaxy.yml", "changelogs", "meta", "plugins", "roles", "playbooks")


def rst_sections(text):
    """{section title: [bullet lines]} of a generated CHANGELOG.rst (titles underlined with '-')."""
    sections, current = {}, None
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if number + 1 < len(lines) and re.match(r"^-{3,}$", lines[number + 1]) and len(lines[number + 1]) == len(line):
            current = sections.setdefault(line, [])
        elif current is not None and line.startswith("- "):
            current.append(line[2:])
    return sections


def test_a_release_announces_every_module_role_and_playbook_once(tmp_path, galaxy):
    work = tmp_path / "release"
    for name in RELEASE_INPUTS:
        source = os.path.join(ROOT, name)
        if os.path.isdir(source):
            shutil.copytree(source, str(work / name))
        else:
            os.makedirs(str(work), exist_ok=True)
            shutil.copy(source, str(work / name))
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    rc, output = run([tool("antsibull-changelog"), "release", "--version", galaxy["version"], "--date", "2026-01-01"],
                     cwd=str(work), env=env)
    assert rc == 0, output
    text = (work / "CHANGELOG.rst").read_text()
    assert re.search(r"^Release Summary\n-+\n\n\S", text, re.M), text[:600]
    sections = rst_sections(text)
    fqcn = "%s.%s." % (galaxy["namespace"], galaxy["name"])
    expected = {
        "New Modules": sorted(n[:-3] for n in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                              if n.endswith(".py") and not n.startswith("_")),
        "New Roles": sorted(os.listdir(os.path.join(ROOT, "roles"))),
        "New Playbooks": sorted(n[:-4] for n in os.listdir(os.path.join(ROOT, "playbooks")) if n.endswith(".yml")),
    }
    for title, names in expected.items():
        announced = [line.split(" - ", 1)[0] for line in sections.get(title, [])]
        assert announced == [fqcn + name for name in names], (title, announced)
    # Nothing else announces them again ("X - new module; ...", "new role that ...").
    again = [line for title, lines in sections.items() if not title.startswith("New ")
             for line in lines if re.search(r"\bnew (module|role|action plugin|playbook)\b", line, re.I)]
    assert again == []
