# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stop signal's handler logs. A signal that arrives while the main thread is inside a log
write must not break that write: once, under load, Python's buffered stdout raised "reentrant
call" in the main thread (while it logged a handler's start), and that handler then ran with no
one watching it.

The scenario is forced, not timed: the log goes to a pipe that is full, so the main thread's write
blocks; a helper thread waits until the kernel shows the main thread blocked in that write
(/proc .../wchan), then sends it the signal. The signal's handler lets a reader drain the pipe and
logs its own line."""

import subprocess
import sys

from .helpers import watcher_environment

SCENARIO = r"""
import os, signal, sys, threading, time
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import log as watcher_log

read_end, write_end = os.pipe()
os.set_blocking(write_end, False)
try:
    while True:
        os.write(write_end, b"#" * 4096)
except BlockingIOError:
    pass
os.set_blocking(write_end, True)
stream = os.fdopen(write_end, "w")
log = watcher_log.Logger(stream, "text", journald=False, wall_clock=lambda: 0.0)
main_tid = threading.get_native_id()
drain = threading.Event()
chunks = []
outcome = {}

def reader():
    drain.wait()
    while True:
        data = os.read(read_end, 65536)
        if not data:
            return
        chunks.append(data)

def signaller():
    wchan = "/proc/self/task/%d/wchan" % main_tid
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(wchan) as handle:
            if "pipe_write" in handle.read():
                outcome["blocked"] = True
                signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
                return
        time.sleep(0.01)
    drain.set()

def on_signal(signum, frame):
    drain.set()
    log("info", "shutdown", "received SIGUSR1")

signal.signal(signal.SIGUSR1, on_signal)
threads = [threading.Thread(target=reader), threading.Thread(target=signaller)]
for thread in threads:
    thread.start()
try:
    log("info", "handler_started", "event X: handler drain/10-record started")
except BaseException as exc:
    outcome["raised"] = "%s: %s" % (type(exc).__name__, exc)
log("info", "after", "the next line")
stream.close()
for thread in threads:
    thread.join()
text = b"".join(chunks).decode().lstrip("#")
print(repr(outcome))
print(text, end="")
"""


def test_a_signal_handler_that_logs_in_the_middle_of_a_log_write_breaks_nothing():
    run = subprocess.run([sys.executable, "-c", SCENARIO], env=watcher_environment(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=120, check=False)
    lines = run.stdout.decode().splitlines()
    assert run.returncode == 0, lines
    # The signal came while the main thread was blocked in its write, and nothing was raised.
    assert lines[0] == "{'blocked': True}", lines
    # Every line whole: the handler's first (the main thread's write had not begun), then the
    # interrupted one, then the next.
    assert lines[1:] == ["1970-01-01T00:00:00.000Z received SIGUSR1",
                         "1970-01-01T00:00:00.000Z event X: handler drain/10-record started",
                         "1970-01-01T00:00:00.000Z the next line"], lines
