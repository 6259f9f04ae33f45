"""Runs the cells of the hardening tables in the background and counts their outcomes.

Most cells wait (for a retry, a deadline, a trickling server), so they run in threads from the
start of the session while pytest walks the tests in order; each test then only collects its
cell's outcome and asserts on it. Only the cells of tests selected in this session are started
and counted (conftest.py submits them from pytest_collection_finish).
"""

import collections
import threading
from concurrent.futures import ThreadPoolExecutor

# Threads per pool. Matrix cells mostly sleep in retries and deadlines; bad-input cases are short
# subprocesses that need the CPU, so they get fewer threads on this 2-core machine.
POOL_SIZES = {"matrix": 14, "input": 4}

# The outcomes a cell can have, in the order the summary prints them.
SUCCESS, CLEAN_ERROR, CRASH, HANG, WRONG = "success", "clean error", "crash", "hang", "not as documented"
REFUSED, ACCEPTED, EXCEPTION = "refused", "accepted", "exception"


class Board(object):
    def __init__(self):
        self._lock = threading.Lock()
        self._pools = {}
        self._futures = {}
        self._tallies = collections.OrderedDict()     # table -> OrderedDict(cell id -> (outcome, dims))
        self._failures = collections.OrderedDict()    # table -> [(cell id, reason)]
        self.notes = []                               # lines for the summary, such as what took long

    def _pool(self, name):
        with self._lock:
            if name not in self._pools:
                self._pools[name] = ThreadPoolExecutor(POOL_SIZES[name], thread_name_prefix="hardening-" + name)
            return self._pools[name]

    def submit(self, pool, key, work):
        """Start work() in the background unless a cell of that key was started already."""
        with self._lock:
            if key in self._futures:
                return self._futures[key]
        future = self._pool(pool).submit(work)
        with self._lock:
            return self._futures.setdefault(key, future)

    def result(self, pool, key, work, timeout):
        """The outcome of the cell key, started now if the session did not start it already."""
        return self.submit(pool, key, work).result(timeout)

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
