"""The hardening suites of issue 10: the fault matrix and the bad-input table.

Their cells run in background threads from the start of the session (see board.py); the summary
at the end prints each table's counts, over the cells that ran in this session only.
"""

import collections

from .board import BOARD, CLEAN_ERROR, CRASH, HANG, SUCCESS, WRONG, REFUSED, ACCEPTED, EXCEPTION


def pytest_collection_finish(session):
    """Start every selected cell now, in a runner process, so that they wait for deadlines together."""
    cells = []
    for item in session.items:
        module = getattr(item, "module", None)
        prefetch = getattr(module, "prefetch", None)
        callspec = getattr(item, "callspec", None)
        if prefetch is not None and callspec is not None:
            started = prefetch(callspec.params)
            if started is not None:
                priority, pool, key, _work = started
                cells.append((priority, pool, key, module.__file__))
    BOARD.start(cells)


def _counts(tally, order):
    counter = collections.Counter(outcome for outcome, _dims in tally.values())
    known = ["%d %s" % (counter.pop(name, 0), name) for name in order]
    return known + ["%d %s" % (n, name) for name, n in sorted(counter.items())]


def pytest_terminal_summary(terminalreporter):
    write = terminalreporter.write_line
    matrix = BOARD.tally("fault matrix")
    if matrix:
        faults = set(dims[0] for _outcome, dims in matrix.values())
        consumers = set(dims[1] for _outcome, dims in matrix.values())
        write("fault matrix: %d faults x %d consumers = %d cells: %s"
              % (len(faults), len(consumers), len(matrix), ", ".join(_counts(matrix, (SUCCESS, CLEAN_ERROR, CRASH,
                                                                                      HANG, WRONG)))))
        for cell, reason in BOARD.failures("fault matrix"):
            write("  fault matrix cell %s: %s" % (cell, reason))
    bad = BOARD.tally("bad input")
    if bad:
        targets = collections.Counter(dims[0] for _outcome, dims in bad.values())
        write("bad input: %d cases (%s): %s"
              % (len(bad), ", ".join("%s %d" % item for item in sorted(targets.items())),
                 ", ".join(_counts(bad, (REFUSED, ACCEPTED, EXCEPTION, HANG)))))
        for cell, reason in BOARD.failures("bad input"):
            write("  bad input case %s: %s" % (cell, reason))
