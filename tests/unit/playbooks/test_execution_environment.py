# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""meta/execution-environment.yml builds: `ansible-builder create` (offline) makes its context.

The collection tarball is built from this checkout into a scratch tree laid out like the
repository (meta/ beside build/), so the definition's relative paths are the real ones.
"""

import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from .conftest import BIN, ROOT, load_yaml

META = os.path.join(ROOT, "meta")
GUIDE = os.path.join(ROOT, "docs", "guides", "awx.md")
EE_FILES = ("execution-environment.yml", "ee-requirements.txt", "ee-bindep.txt", "ee-collections.yml")


def pins(path):
    found = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                found[name.split("[", 1)[0].strip().lower()] = version.strip()
    return found


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """(ansible-builder output, context directory, collection version)."""
    work = tmp_path_factory.mktemp("ee")
    os.makedirs(str(work / "meta"))
    for name in EE_FILES:
        shutil.copy(os.path.join(META, name), str(work / "meta" / name))
    build = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path",
                            str(work / "build"), ROOT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    assert build.returncode == 0, build.stdout.decode()
    proc = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", "meta/execution-environment.yml",
                           "--context", "context"], cwd=str(work), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False)
    output = proc.stdout.decode()
    assert proc.returncode == 0, output
    return output, work / "context", load_yaml(os.path.join(ROOT, "galaxy.yml"))["version"]


def test_ansible_builder_creates_the_build_context(context):
    output, directory, _version = context
    assert "Complete! The build context can be found at:" in output
    files = sorted(os.path.relpath(os.path.join(d, f), str(directory)) for d, _dirs, names in os.walk(str(directory))
                   for f in names)
    assert "Containerfile" in files and "_build/requirements.yml" in files


def test_the_context_carries_this_collection_with_its_playbooks(context):
    _output, directory, version = context
    tarball = directory / "_build" / "collections" / ("azure_imds-scheduled_events-%s.tar.gz" % version)
    assert tarball.is_file(), "meta/ files name another version than galaxy.yml (%s)" % version
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["namespace"] == "azure_imds"
    assert manifest["collection_info"]["version"] == version
    for needed in ("playbooks/rolling_maintenance.yml", "playbooks/tasks/rolling_maintenance_events.yml",
                   "playbooks/templates/report_fleet.json.j2", "plugins/modules/scheduled_event_info.py",
                   "plugins/action/scheduled_event_wait.py", "roles/watcher/meta/argument_specs.yml"):
        assert needed in names, needed
    requirements = load_yaml(str(directory / "_build" / "requirements.yml"))
    assert requirements["collections"] == [
        {"name": "collections/azure_imds-scheduled_events-%s.tar.gz" % version, "type": "file"}]


def test_the_image_gets_the_versions_the_collection_is_tested_with(context):
    _output, directory, _version = context
    tested = pins(os.path.join(ROOT, "tests", "requirements.txt"))
    containerfile = (directory / "Containerfile").read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile, re.M).group(1).split()
    assert "ansible-core==%s" % tested["ansible-core"] in refs
    python = pins(str(directory / "_build" / "requirements.txt"))
    assert python == {"jmespath": tested["jmespath"]}
    assert (directory / "_build" / "bindep.txt").read_text() == open(os.path.join(META, "ee-bindep.txt")).read()


def test_the_guide_shows_the_real_output(context):
    _output, directory, _version = context
    with open(GUIDE, encoding="utf-8") as handle:
        guide = handle.read()
    files = sorted("context/" + os.path.relpath(os.path.join(d, f), str(directory))
                   for d, _dirs, names in os.walk(str(directory)) for f in names)
    shown = re.search(r"\$ find context -type f \| sort\n(.*?)\n\$ ", guide, re.S).group(1).splitlines()
    assert shown == files
    head = (directory / "Containerfile").read_text().splitlines()[:7]
    shown_head = re.search(r"\$ head -7 context/Containerfile\n(.*?)\n```", guide, re.S).group(1).splitlines()
    assert shown_head == head
