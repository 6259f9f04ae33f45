# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo` (extensions/demo/run_demo.py): the whole run, and the clean-up on Ctrl-C."""

import os
import re
import signal
import socket
import subprocess
import sys

from ansible_collections.azure_imds.scheduled_events.tests.harness.collection_path import ROOT

DEMO = os.path.join(ROOT, "extensions", "demo", "run_demo.py")


def start():
    env = dict(os.environ)
    env.pop("AZURE_IMDS_URL", None)
    return subprocess.Popen([sys.executable, DEMO], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def assert_nothing_left(port):
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the mock still listens on port %d" % port
    needle = ("127.0.0.1:%d" % port).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        assert needle not in cmdline, "process %s still runs for the demo: %r" % (pid, cmdline)


def port_of(output):
    return int(re.search(r"mock IMDS at http://127\.0\.0\.1:(\d+)", output).group(1))


def test_the_demo_rolls_through_the_fleet_and_stops_everything():
    proc = start()
    output = proc.communicate(timeout=240)[0].decode()
    assert proc.returncode == 0, output
    assert re.search(r"web_0 \(VM web_0\): Freeze \S+ from Platform", output), output
    assert re.search(r"web_1 \(VM web_1\): Reboot \S+ from User", output), output
    assert "web_2 (VM web_2): no scheduled event, left alone" in output
    for step in ("drain", "approval", "Started", "completed", "recover", "health"):
        assert len(re.findall(r"^\s+\d\d:\d\d:\d\d\.\d{3}\s+\+\s*[\d.]+s\s+%s\b" % step, output, re.M)) == 2, step
    assert "held on every host, one host at a time" in output
    assert "demo: mock stopped, nothing left running" in output
    assert_nothing_left(port_of(output))


def test_ctrl_c_stops_the_playbook_and_the_mock():
    proc = start()
    seen = b""
    while b"running: ansible-playbook" not in seen:
        line = proc.stdout.readline()
        assert line, "the demo ended before running the playbook: %s" % seen.decode()
        seen += line
    proc.send_signal(signal.SIGINT)
    output = seen.decode() + proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "demo: interrupted (SIGINT); cleaning up" in output
    assert "demo: mock stopped, nothing left running" in output
    assert_nothing_left(port_of(output))
