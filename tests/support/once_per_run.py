# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Expensive shared work (one playbook run of many cases, one collection build) done once per test run.

A pytest fixture of scope "session" is not enough under `ansible-test units`: its ansible_forked
plugin runs every test in a forked child of the pytest process, so what a child computed for a
session fixture dies with it, and the next test computes it again. Two pytest-xdist workers
would each compute it too. So the result (anything JSON can hold) is kept in a file of a
directory the processes of one run share, and computed under a lock by the first to ask.

The run is named by PYTEST_XDIST_TESTRUNUID, or by AZURE_IMDS_TEST_RUN, which tests/unit/conftest.py
sets when pytest starts (before any worker or fork, which inherit it).
"""

import fcntl
import json
import os
import shutil
import tempfile
import time

PREFIX = "azure-imds-once-"
KEEP = 3600  # directories of runs that ended more than an hour ago are removed


def run_id():
    for name in ("PYTEST_XDIST_TESTRUNUID", "AZURE_IMDS_TEST_RUN"):
        value = os.environ.get(name, "")
        if value.isalnum():
            return value
    return "pid%d" % os.getpid()


def run_directory():
    """The directory the processes of this test run share."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        old = os.path.join(base, name)
        try:
            if name.startswith(PREFIX) and time.time() - os.stat(old).st_mtime > KEEP:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    path = os.path.join(base, PREFIX + run_id())
    os.makedirs(path, exist_ok=True)
    return path


def once_per_run(key, compute):
    """compute(workdir) once per test run, whichever process asks first; its JSON result for all.

    workdir is a fresh directory of the run's that outlives the process, for files the result
    names. A compute() that raises is not kept: the next test to ask tries again and sees the error.
    """
    directory = run_directory()
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)
    result = os.path.join(directory, safe + ".json")
    with open(os.path.join(directory, safe + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(result):
            with open(result, encoding="utf-8") as handle:
                return json.load(handle)
        workdir = tempfile.mkdtemp(prefix=safe + "-", dir=directory)
        value = compute(workdir)
        with open(result + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(value, handle)
        os.replace(result + ".tmp", result)
        with open(result, encoding="utf-8") as handle:
            return json.load(handle)  # the same JSON round trip for every caller
