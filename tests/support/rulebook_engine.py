# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run ansible-rulebook for real (Java, drools, ansible-runner) against the mock IMDS.

The engine is slow to start (a JVM) and a rulebook runs until stopped, so a test starts it in the
background, waits on what the mock's audit log, a stand-in server or the engine's own output
shows (never on a fixed sleep), and stops it. The rule that fired is read from the engine's
own -vv output.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.devtools.engine_tools import Timeout, find_tool, poll_until, stop_group
from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

ROOT = collection_path.ROOT
FARM = collection_path.collections_dir(ROOT)
RULEBOOKS = os.path.join(ROOT, "extensions", "eda", "rulebooks")
# Bounds on real time for a busy two-core machine running other suites: what a run waits for
# normally comes in seconds.
ENGINE_START_TIMEOUT = 180.0
PLAYBOOK_TIMEOUT = 420.0


def tool(name):
    """A program of the Python environment that runs the tests (ansible-rulebook, ansible-galaxy)."""
    path = find_tool(name)
    if path is None:
        pytest.fail("%s is not installed beside %s: pip install ansible-rulebook==1.3.2 into this environment"
                    % (name, sys.executable))
    return path


def java_or_fail():
    """ansible-rulebook needs Java 17; a machine without it fails these tests, it never skips them."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        pytest.fail("Java is missing: ansible-rulebook needs a Java 17 runtime (Debian: apt-get install -y "
                    "openjdk-17-jre-headless)")
    return java


def wait_until(what, check, timeout, interval=0.1, describe=None):
    """Poll check() until it returns something true; fail naming what was awaited."""
    try:
        return poll_until(check, timeout, interval)
    except Timeout:
        pytest.fail("waited %.0f s for %s%s" % (timeout, what, "\n" + describe() if describe else ""))
    return None


class Engine(object):
    """One ansible-rulebook process started by a command line; output goes to a file that the test
    reads while it runs. PATH starts with this Python environment's programs, the collection is found
    in this checkout, AZURE_IMDS_URL is the command's (env) only."""

    def __init__(self, tmp_path, command, env=None):
        java_or_fail()
        self.tmp_path = tmp_path
        self.log_path = str(tmp_path / "rulebook.log")
        environ = dict(os.environ)
        environ.pop("AZURE_IMDS_URL", None)
        bin_dir = os.path.dirname(tool("ansible-galaxy"))
        environ.update({
            # ansible-rulebook finds the collection's source and playbook with ansible-galaxy, and
            # ansible-runner runs ansible-playbook, both from PATH.
            "PATH": bin_dir + os.pathsep + environ.get("PATH", ""),
            "ANSIBLE_COLLECTIONS_PATH": FARM,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote-tmp"),
            "TMPDIR": str(tmp_path),
            "EDA_JOB_TEMPLATE_REFRESH_DELAY": "0.2",
        })
        environ.update(env or {})
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, cwd=str(tmp_path), env=environ, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.returncode = None

    @property
    def output(self):
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")

    def tail(self, size=8000):
        return "--- ansible-rulebook output (last %d characters) ---\n%s" % (size, self.output[-size:])

    def wait_for(self, pattern, timeout=ENGINE_START_TIMEOUT, count=1):
        """Wait until the output matches pattern (a regular expression) count times; the matches."""
        regex = re.compile(pattern, re.M)

        def found():
            if self.process.poll() is not None:
                pytest.fail("ansible-rulebook ended (exit %s) while waiting for %r\n%s"
                            % (self.process.returncode, pattern, self.tail()))
            matches = regex.findall(self.output)
            return matches if len(matches) >= count else None

        return wait_until("%r in the output of ansible-rulebook" % pattern, found, timeout, describe=self.tail)

    def stop(self, timeout=120):
        """Stop ansible-rulebook and whatever ansible-runner started; the whole output."""
        self.returncode = stop_group(self.process, timeout)
        return self.output


class Rulebook(Engine):
    """ansible-rulebook -vv on a rulebook of extensions/eda/rulebooks, with an inventory of these hosts
    (local connection) and, if given, a vars file."""

    def __init__(self, tmp_path, rulebook, hosts, variables=None, env=None, args=()):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(json.dumps({"all": {"hosts": hosts, "vars": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
        command = [tool("ansible-rulebook"), "-r", os.path.join(RULEBOOKS, rulebook), "-i", str(inventory), "-vv"]
        if variables:
            vars_file = tmp_path / "vars.yml"
            vars_file.write_text(json.dumps(variables))
            command += ["--vars", str(vars_file)]
        super(Rulebook, self).__init__(tmp_path, command + list(args), env)
