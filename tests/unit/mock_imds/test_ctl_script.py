# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock's process script (roles/mock_imds/templates/mock_imds_ctl.sh.j2) counts a pid file as
a running mock only when that process has the program as one whole argument: the script's own path
begins with the program's, so a stale pid given anew to the script itself (as happens in a fresh
PID namespace, where pids repeat from run to run) once passed for a running mock, and `start` then
started nothing."""

import os
import shlex
import subprocess
import sys
import time

import jinja2

from .helpers import ROOT

TEMPLATE = os.path.join(ROOT, "roles", "mock_imds", "templates", "mock_imds_ctl.sh.j2")


def render(install_dir):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    with open(TEMPLATE) as handle:
        template = env.from_string(handle.read())
    program = os.path.join(install_dir, "mock_imds")
    script = os.path.join(install_dir, "mock_imds_ctl.sh")
    with open(script, "w") as handle:
        handle.write(template.render(ansible_managed="test", mock_imds_install_dir=install_dir,
                                     _mock_imds_program=program, _mock_imds_argv=[sys.executable, program]))
    return script, program


def holding(argv, shown):
    """A process started with argv, once /proc shows the command line `shown` for it."""
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 30
    while True:
        with open("/proc/%d/cmdline" % proc.pid, "rb") as handle:
            if handle.read().split(b"\0")[:len(shown)] == [a.encode() for a in shown]:
                return proc
        assert time.monotonic() < deadline, "the stand-in process never showed its command line"
        time.sleep(0.01)


def status_of(script, pid, install_dir):
    with open(os.path.join(install_dir, "mock_imds.pid"), "w") as handle:
        handle.write("%d\n" % pid)
    done = subprocess.run(["sh", script, "status"], stdout=subprocess.PIPE, check=False)
    return done.returncode, done.stdout.decode().strip()


def test_a_process_named_like_the_script_is_not_the_mock(tmp_path):
    script, _program = render(str(tmp_path))
    # argv[0] is the script's own path, which begins with the program's path.
    stand_in = holding(["bash", "-c", "exec -a \"$0\" sleep 60", script], [script, "60"])
    try:
        assert status_of(script, stand_in.pid, str(tmp_path)) == (3, "mock_imds is not running")
    finally:
        stand_in.kill()
        stand_in.wait()


def test_a_process_running_the_program_is_the_mock(tmp_path):
    script, program = render(str(tmp_path))
    argv = [sys.executable, "-c", "import time; time.sleep(60)", program]
    stand_in = holding(argv, argv)
    try:
        assert status_of(script, stand_in.pid, str(tmp_path)) == (0, "mock_imds runs (pid %d)" % stand_in.pid)
    finally:
        stand_in.kill()
        stand_in.wait()
