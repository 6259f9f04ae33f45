"""Runs the cells of the hardening tables in the background and counts their outcomes.

Most cells wait (for a retry, a deadline, a trickling server), so they run in threads from the
start of the session while pytest walks the tests in order; each test then only collects its
cell's outcome and asserts on it. Only the cells of tests selected in this session are started
and counted (conftest.py submits them from pytest_collection_finish).

Under pytest-xdist (ansible-test units runs two workers) every worker collects, and so would
start, every cell, though each runs only part of the tests. The workers of one run share the
cells instead: a worker's pool thread claims a cell (a file created with O_EXCL in a directory of
the run) before it runs it and publishes the outcome beside the claim; a test whose cell the
other worker claimed waits for that file. Each cell then runs once, on whichever worker was free.
"""

import collections
import os
import pickle
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Threads per pool. Matrix cells mostly sleep in retries and deadlines; bad-input cases are short
# subprocesses that need the CPU, so they get fewer threads on this 2-core machine.
POOL_SIZES = {"matrix": 14, "input": 4}

# The outcomes a cell can have, in the order the summary prints them.
SUCCESS, CLEAN_ERROR, CRASH, HANG, WRONG = "success", "clean error", "crash", "hang", "not as documented"
REFUSED, ACCEPTED, EXCEPTION = "refused", "accepted", "exception"


class _Elsewhere(object):
    """What a pool thread returns for a cell another worker of the run claimed first."""


class CellFailed(Exception):
    """The cell's work raised on the worker that claimed it."""


ELSEWHERE = _Elsewhere()
PREFIX = "azure-imds-hardening-"


def _run_directory():
    """The directory the xdist workers of this run share, or None outside xdist. Those of runs
    that ended more than an hour ago are removed."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not os.environ.get("PYTEST_XDIST_WORKER") or not run.isalnum():
        return None
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        old = os.path.join(base, name)
        try:
            if name.startswith(PREFIX) and time.time() - os.stat(old).st_mtime > 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    path = os.path.join(base, PREFIX + run)
    os.makedirs(path, exist_ok=True)
    return path


class Board(object):
    def __init__(self):
        self._lock = threading.Lock()
        self._pools = {}
        self._futures = {}
        self._shared = _run_directory()
        self._tallies = collections.OrderedDict()     # table -> OrderedDict(cell id -> (outcome, dims))
        self._failures = collections.OrderedDict()    # table -> [(cell id, reason)]
        self.notes = []                               # lines for the summary, such as what took long

    def _pool(self, name):
        with self._lock:
            if name not in self._pools:
                size = POOL_SIZES[name]
                if self._shared is not None:      # two workers share the machine's cores
                    size = max(1, size // 2)
                self._pools[name] = ThreadPoolExecutor(size, thread_name_prefix="hardening-" + name)
            return self._pools[name]

    def _path(self, key, suffix):
        return os.path.join(self._shared, "".join(c if c.isalnum() or c in "-_." else "_" for c in key) + suffix)

    def _claimed(self, work, key):
        """work() for the cell key if this worker claims it first (its outcome then published for
        the other workers), else ELSEWHERE."""
        if self._shared is None:
            return work()
        try:
            os.close(os.open(self._path(key, ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return ELSEWHERE
        try:
            outcome = work()
        except Exception as exc:  # pylint: disable=broad-except
            outcome = CellFailed("%s: %s" % (type(exc).__name__, exc))
        partial = self._path(key, ".partial")
        with open(partial, "wb") as handle:
            pickle.dump(outcome, handle)
        os.replace(partial, self._path(key, ".outcome"))
        if isinstance(outcome, CellFailed):
            raise outcome
        return outcome

    def submit(self, pool, key, work):
        """Start work() in the background unless a cell of that key was started already."""
        with self._lock:
            if key in self._futures:
                return self._futures[key]
        future = self._pool(pool).submit(self._claimed, work, key)
        with self._lock:
            return self._futures.setdefault(key, future)

    def result(self, pool, key, work, timeout):
        """The outcome of the cell key, started now if the session did not start it already; a
        cell claimed by another worker is read from its published outcome."""
        end = time.monotonic() + timeout
        outcome = self.submit(pool, key, work).result(timeout)
        if outcome is not ELSEWHERE:
            return outcome
        path = self._path(key, ".outcome")
        while not os.path.exists(path):
            if time.monotonic() >= end:
                raise TimeoutError("the cell %s, claimed by another pytest-xdist worker, had no outcome after %gs"
                                   % (key, timeout))
            time.sleep(0.2)
        with open(path, "rb") as handle:
            outcome = pickle.load(handle)
        if isinstance(outcome, CellFailed):
            raise outcome
        return outcome

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

    def shutdown(self):
        for pool in list(self._pools.values()):
            pool.shutdown(wait=False, cancel_futures=True)


BOARD = Board()
