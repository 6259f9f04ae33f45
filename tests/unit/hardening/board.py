"""Runs the cells of the hardening tables in the background and counts their outcomes.

Most cells wait (for a retry, a deadline, a trickling server), so they run in threads from the
start of the session while pytest walks the tests in order; each test then only collects its
cell's outcome and asserts on it. Only the cells of tests selected in this session are started
and counted (conftest.py submits them from pytest_collection_finish).

Outcomes travel through files, never through the threads' futures, because of how
`ansible-test units` runs pytest:
- it runs each test in a forked child of the pytest process (its ansible_forked plugin). A child
  has none of its parent's threads, so a future the parent's pool was still working on would
  never end in the child. The child therefore waits for the cell's outcome file, which the
  parent's pool thread writes, and touches nothing a pool thread may hold at the fork (the only
  lock here is taken by the main thread alone).
- it runs two pytest-xdist workers, and every worker collects, and so would start, every cell,
  though each runs only part of the tests. The workers of one run share a directory instead: a
  pool thread claims a cell (a file created with O_EXCL) before it runs it, so that each cell runs
  once, on whichever worker was free, and a test reads the outcome whichever worker wrote it.
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


class CellFailed(Exception):
    """The cell's work raised; the text says what."""


PREFIX = "azure-imds-hardening-"
POLL = 0.2


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


class Board(object):
    def __init__(self):
        self._lock = threading.Lock()                 # the main thread's alone (see the docstring)
        self._pools = {}
        self._started = set()
        self._owner = os.getpid()                     # whose threads the pools are
        self._directory = None
        self._tallies = collections.OrderedDict()     # table -> OrderedDict(cell id -> (outcome, dims))
        self._failures = collections.OrderedDict()    # table -> [(cell id, reason)]
        self.notes = []                               # lines for the summary, such as what took long

    def _path(self, key, suffix):
        if self._directory is None:
            self._directory = _run_directory()
        return os.path.join(self._directory, "".join(c if c.isalnum() or c in "-_." else "_" for c in key) + suffix)

    def _pool(self, name):
        if name not in self._pools:
            size = POOL_SIZES[name]
            if os.environ.get("PYTEST_XDIST_WORKER"):     # two workers share the machine's cores
                size = max(1, size // 2)
            self._pools[name] = ThreadPoolExecutor(size, thread_name_prefix="hardening-" + name)
        return self._pools[name]

    def _claim_and_run(self, key, work):
        """Run work() and publish its outcome, unless another worker claimed the cell first."""
        try:
            os.close(os.open(self._path(key, ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return
        try:
            outcome = work()
        except Exception as exc:  # pylint: disable=broad-except
            outcome = CellFailed("%s: %s" % (type(exc).__name__, exc))
        partial = self._path(key, ".partial")
        with open(partial, "wb") as handle:
            pickle.dump(outcome, handle)
        os.replace(partial, self._path(key, ".outcome"))

    def submit(self, pool, key, work):
        """Start work() in the background unless a cell of that key was started already."""
        with self._lock:
            if key in self._started:
                return
            self._started.add(key)
            if os.getpid() != self._owner:
                # A forked test child has no pool threads: the cell runs here and now.
                self._claim_and_run(key, work)
                return
            self._pool(pool).submit(self._claim_and_run, key, work)

    def result(self, pool, key, work, timeout):
        """The outcome of the cell key (started now if the session did not start it already), read
        from the file its runner wrote, in this process or another."""
        end = time.monotonic() + timeout
        self.submit(pool, key, work)
        path = self._path(key, ".outcome")
        while not os.path.exists(path):
            if time.monotonic() >= end:
                raise TimeoutError("the cell %s had no outcome after %gs" % (key, timeout))
            time.sleep(POLL)
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
