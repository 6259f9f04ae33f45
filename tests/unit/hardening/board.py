"""Runs the cells of the hardening tables in the background and counts their outcomes.

Most cells wait (for a retry, a deadline, a trickling server), so they run side by side from the
start of the session while pytest walks the tests in order; each test then only collects its
cell's outcome and asserts on it. Only the cells of tests selected in this session are started
and counted (conftest.py starts them from pytest_collection_finish).

The cells run in a runner process of their own (this file run as a program), in threads, and
their outcomes travel through files. That is because of how `ansible-test units` runs pytest:
- it runs each test in a forked child of the pytest process (its ansible_forked plugin). Threads
  of the pytest process would not exist in the child, and a subprocess a thread started at the
  moment of a fork would hang: the child inherits the pipe through which Popen learns that its
  own child has exec'd, and keeps it open. The runner is started before any test is forked, and
  nothing in it forks without exec.
- it runs two pytest-xdist workers, and every worker collects every cell, though each runs only
  part of the tests. The runners of one run share a directory: a runner claims a cell (a file
  created with O_EXCL) before it runs it, so that each cell runs once, in whichever runner was
  free, and a test reads the outcome file whichever runner wrote it.
A runner ends when it has gone through its list: the other worker may still need its outcomes.
"""

import collections
import importlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Threads per pool. Matrix cells mostly sleep in retries and deadlines; bad-input cases are short
# subprocesses that need the CPU, so they get fewer threads on this 2-core machine. Halved when
# two xdist workers each run a runner.
POOL_SIZES = {"matrix": 14, "input": 4}

# The outcomes a cell can have, in the order the summary prints them.
SUCCESS, CLEAN_ERROR, CRASH, HANG, WRONG = "success", "clean error", "crash", "hang", "not as documented"
REFUSED, ACCEPTED, EXCEPTION = "refused", "accepted", "exception"

PREFIX = "azure-imds-hardening-"
POLL = 0.2


class CellFailed(Exception):
    """The cell's work raised; the text says what."""


def _run_directory():
    """The directory the xdist workers of this run share (one of this process's own outside
    xdist). Those of runs that ended more than an hour ago are removed."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        old = os.path.join(base, name)
        try:
            if name.startswith(PREFIX) and time.time() - os.stat(old).st_mtime > 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    if run.isalnum() and os.environ.get("PYTEST_XDIST_WORKER"):
        path = os.path.join(base, PREFIX + run)
        os.makedirs(path, exist_ok=True)
        return path
    return tempfile.mkdtemp(prefix=PREFIX)


def _path(directory, key, suffix):
    return os.path.join(directory, "".join(c if c.isalnum() or c in "-_." else "_" for c in key) + suffix)


def claim_and_run(directory, key, work):
    """Run work() and publish its outcome, unless a runner claimed the cell first."""
    try:
        os.close(os.open(_path(directory, key, ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return
    # A pair, so that the runner (run as __main__) pickles no class of its own.
    try:
        published = (work(), None)
    except Exception as exc:  # pylint: disable=broad-except
        published = (None, "%s: %s" % (type(exc).__name__, exc))
    partial = _path(directory, key, ".partial")
    with open(partial, "wb") as handle:
        pickle.dump(published, handle)
    os.replace(partial, _path(directory, key, ".outcome"))


class Board(object):
    """The pytest side: starts the runner, reads outcomes, keeps the tallies for the summary."""

    def __init__(self):
        self._lock = threading.Lock()
        self._directory = None
        self._started = set()
        self._runner_log = None
        self._tallies = collections.OrderedDict()     # table -> OrderedDict(cell id -> (outcome, dims))
        self._failures = collections.OrderedDict()    # table -> [(cell id, reason)]

    @property
    def directory(self):
        if self._directory is None:
            self._directory = _run_directory()
        return self._directory

    def start(self, cells):
        """Start a runner for cells, [(priority, pool, key, module file)], slowest first. The runner
        imports each module by the collection's name, from the collections directory that holds
        this checkout, whatever name the test run gave it."""
        seen = set()
        cells = [cell for cell in sorted(cells, key=lambda cell: -cell[0]) if not (cell[2] in seen or seen.add(cell[2]))]
        if not cells:
            return
        job = os.path.join(self.directory, "runner-%d.json" % os.getpid())
        with open(job, "w") as handle:
            json.dump({"directory": self.directory, "halve": bool(os.environ.get("PYTEST_XDIST_WORKER")),
                       "cells": [[pool, key, _collection_name(module)] for _priority, pool, key, module in cells]},
                      handle)
        self._runner_log = job[:-len(".json")] + ".log"
        with open(self._runner_log, "wb") as log:
            # Imported here: the runner (this file as a program) must install ansible-core's collection
            # loader before anything imports the collection.
            from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path  # pylint: disable=import-outside-toplevel
            tree = collection_path.collections_dir(ROOT)
            env = dict(os.environ, PYTHONPATH=tree, ANSIBLE_COLLECTIONS_PATH=tree)
            subprocess.Popen([sys.executable, os.path.abspath(__file__), job], stdin=subprocess.DEVNULL, env=env,
                             stdout=log, stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
        self._started.update(key for _priority, _pool, key, _module in cells)

    def result(self, key, work, timeout):
        """The outcome of the cell key, read from the file a runner wrote; a cell that no runner
        was given (a test run on its own) runs here and now."""
        if key not in self._started:
            claim_and_run(self.directory, key, work)
        end = time.monotonic() + timeout
        path = _path(self.directory, key, ".outcome")
        while not os.path.exists(path):
            if time.monotonic() >= end:
                raise TimeoutError("the cell %s had no outcome after %gs; the runner's log: %s"
                                   % (key, timeout, self._runner_tail()))
            time.sleep(POLL)
        with open(path, "rb") as handle:
            outcome, failure = pickle.load(handle)
        if failure is not None:
            raise CellFailed("the cell %s raised %s" % (key, failure))
        return outcome

    def _runner_tail(self):
        try:
            with open(self._runner_log, "rb") as handle:
                return handle.read()[-2000:].decode("utf-8", "replace") or "(empty)"
        except (OSError, TypeError):
            return "(none)"

    def count(self, table, cell, outcome, dims=(), failure=None):
        with self._lock:
            self._tallies.setdefault(table, collections.OrderedDict())[cell] = (outcome, tuple(dims))
            if failure:
                self._failures.setdefault(table, []).append((cell, failure))

    def tally(self, table):
        with self._lock:
            return dict(self._tallies.get(table, {}))

    def failures(self, table):
        with self._lock:
            return list(self._failures.get(table, []))


BOARD = Board()


def _collection_name(module_file):
    """tests/unit/hardening/x.py -> ansible_collections.azure_imds.scheduled_events.tests.unit.hardening.x"""
    relative = os.path.splitext(os.path.relpath(os.path.realpath(module_file), os.path.realpath(ROOT)))[0]
    return ".".join(("ansible_collections", "azure_imds", "scheduled_events") + tuple(relative.split(os.sep)))


def run(job_file):
    """The runner: every cell of the job, in its order, in pools of threads."""
    with open(job_file) as handle:
        job = json.load(handle)
    # As under ansible-test and tests/unit/conftest.py: the collection's modules load through
    # ansible-core's collection loader.
    from ansible.plugins.loader import init_plugin_loader  # pylint: disable=import-outside-toplevel
    init_plugin_loader()
    works = {}
    for module_name in sorted(set(module for _pool, _key, module in job["cells"])):
        works.update(importlib.import_module(module_name).cells())
    pools = dict((name, ThreadPoolExecutor(max(1, size // 2) if job["halve"] else size,
                                           thread_name_prefix="hardening-" + name))
                 for name, size in POOL_SIZES.items())
    for pool, key, _module in job["cells"]:
        pools[pool].submit(claim_and_run, job["directory"], key, works[key])
    for pool in pools.values():
        pool.shutdown(wait=True)


if __name__ == "__main__":
    run(sys.argv[1])
