# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where README and the guides say what to install, they agree with each other and with
meta/runtime.yml; and `make build` needs nothing but ansible-galaxy."""

import os
import re
import subprocess

import yaml

from .pages import README, ROOT, RST, copy_checkout, read, run_shell, user_env

PAGES = (README, os.path.join(RST, "getting_started.rst"), os.path.join(RST, "testing_with_the_mock.rst"),
         os.path.join(RST, "mock_imds.rst"))
GETTING_STARTED = os.path.join(RST, "getting_started.rst")
# The newest ansible-core the docs promise, the newest tested (tests/requirements.txt); the oldest is
# meta/runtime.yml's lower bound. test_support_range.py ties both to the pins and checks every pip command.
NEWEST = tuple(int(part) for part in re.search(r"^ansible-core==(\d+)\.(\d+)\.", read(os.path.join(ROOT, "tests", "requirements.txt")), re.M).groups())


def oldest():
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as handle:
        found = re.match(r">=(\d+)\.(\d+)\.0$", yaml.safe_load(handle)["requires_ansible"])
    assert found, "meta/runtime.yml requires_ansible should be >=X.Y.0"
    return int(found.group(1)), int(found.group(2))


def supported():
    low = oldest()
    return ["%d.%d" % (low[0], minor) for minor in range(low[1], NEWEST[1] + 1)]


def test_readme_and_getting_started_state_the_supported_range():
    versions = supported()
    text = read(README)
    assert "ansible-core %s or %s" % (", ".join(versions[:-1]), versions[-1]) in text
    assert "| ansible-core (controller) | %s (`meta/runtime.yml`: `>=%s.0`) | %s and %s" % (
        ", ".join(versions), versions[0], versions[0], versions[-1]) in text
    assert "| Python on the controller | what that ansible-core needs: 3.11 to 3.13 for 2.19, 3.12 to 3.14 for " \
        "2.20 and 2.21 | 3.11 (with 2.19) and 3.13 (with 2.21) |" in text
    guide = " ".join(read(GETTING_STARTED).split())
    assert "Controller: ansible-core %s or %s (``make test`` tests %s on Python 3.11 and %s on Python 3.13" % (
        ", ".join(versions[:-1]), versions[-1], versions[0], versions[-1]) in guide
    for page in PAGES:
        for old in ("2.17", "2.18"):
            assert "ansible-core %s" % old not in read(page), (page, old)


def test_getting_started_installs_as_readme_does_with_no_collection_server():
    readme_commands = set(re.sub(r"\s+#.*$", "", line).strip() for line in read(README).splitlines())
    guide = read(GETTING_STARTED)
    commands = [line.strip() for line in guide.splitlines()
                if line.strip().startswith(("ansible-galaxy collection", "python3 -m pip", "git clone"))]
    assert len(commands) >= 4, commands
    for command in commands:
        assert command in readme_commands, "getting_started.rst: %r is not what README.md says" % command
    for page in PAGES:
        assert "collection install azure_imds.scheduled_events" not in read(page), page


def test_make_build_needs_ansible_galaxy_only(tmp_path):
    """In a fresh clone, with ansible-galaxy on PATH and no network: a tarball, and no venv built."""
    clone = copy_checkout(tmp_path / "clone")
    home = tmp_path / "home"
    home.mkdir()
    proc = run_shell("make build", clone, user_env(home), timeout=300)
    assert proc.returncode == 0, proc.stdout
    version = re.search(r"^version: (\S+)$", read(os.path.join(ROOT, "galaxy.yml")), re.M).group(1)
    tarball = clone / "build" / ("azure_imds-scheduled_events-%s.tar.gz" % version)
    assert tarball.is_file(), proc.stdout
    assert not (clone / ".venv").exists() and not (clone / ".cache").exists(), proc.stdout
    listing = subprocess.run(["tar", "-tzf", str(tarball)], stdout=subprocess.PIPE, check=True,
                             universal_newlines=True).stdout.split()
    assert "roles/mock_imds/files/mock_imds/testing.py" in listing
