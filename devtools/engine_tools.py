# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the EDA tests and bench/eda_latency.py both need to drive ansible-rulebook: find its
programs, wait on a condition, stop its process group. Standard library only (the bench has no pytest)."""

import os
import signal
import subprocess
import sys
import time


class Timeout(Exception):
    """poll_until waited its whole time."""


def find_tool(name):
    """A program of the Python environment that runs this code (ansible-rulebook, ansible-galaxy), or None."""
    for directory in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    return None


def poll_until(check, timeout, interval=0.1):
    """check()'s first true value; Timeout after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Timeout()
        time.sleep(interval)


def stop_group(process, timeout):
    """SIGINT to the process group (ansible-rulebook and what ansible-runner started), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)
    return process.returncode
