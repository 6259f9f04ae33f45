# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's log: one line per decision (text or JSON, journald priorities), whatever a message holds."""

import json
import os
import re
import sys
import threading
import time
import traceback


class Log(object):
    """One log line: a decision, with fields for the JSON log format. The planner and the notify
    action return these; Logger.apply writes them."""

    __slots__ = ("level", "action", "message", "fields")

    def __init__(self, level, action, message, **fields):
        self.level = level
        self.action = action
        self.message = message
        self.fields = fields

    def __repr__(self):
        return "Log(%s, %s, %r)" % (self.level, self.action, self.message)


def under_journald(stream, environ=None):
    """True when stream is the journal: systemd sets JOURNAL_STREAM to its device:inode."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM")
    if not value:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return value == "%d:%d" % (st.st_dev, st.st_ino)


# Line breaks of any kind and every other control character: from IMDS fields or handler output
# they could otherwise forge a log line (or a journald priority, or a terminal escape).
_UNPRINTABLE_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_text(text):
    """text with every control character written as \\xNN or \\uNNNN, so it stays on one line."""
    def escape(match):
        code = ord(match.group(0))
        return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code
    return _UNPRINTABLE_RE.sub(escape, text)


class Logger(object):
    """Writes one line per call. Under journald: a <priority> prefix and no time (the journal
    stamps lines itself); elsewhere an ISO time first. log_format json: one JSON object a line.
    Whatever a message holds, it stays one line (escape_text; JSON escapes its own)."""

    PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3}

    def __init__(self, stream=None, log_format="text", journald=None, wall_clock=None):
        self.stream = stream or sys.stdout
        self.log_format = log_format
        self.journald = under_journald(self.stream) if journald is None else journald
        self._wall_clock = wall_clock or time.time
        # Reentrant: the stop signal's handler logs, and may interrupt the main thread mid-line.
        self._lock = threading.RLock()
        # A stream with a file descriptor gets each line by os.write: a signal handler that logs
        # while the main thread is inside a buffered write would make the buffered writer raise
        # "reentrant call" in whatever the main thread was doing (once, a handler's start, which
        # then ran unsupervised). A line of up to PIPE_BUF bytes is written whole or not at all.
        self._fd = None
        try:
            fd = self.stream.fileno()
            self.stream.flush()
            self._fd = fd
        except (AttributeError, OSError, ValueError):
            pass

    def _stamp(self):
        now = self._wall_clock()
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % int((now % 1) * 1000)

    def __call__(self, level, action, message, **fields):
        if self.log_format == "json":
            record = {"time": self._stamp(), "level": level, "action": action, "message": message}
            record.update(fields)
            line = json.dumps(record, sort_keys=True, default=str)
        else:
            message = escape_text("%s" % (message,))
            line = message if level == "info" else "%s: %s" % (level.upper(), message)
            if not self.journald:
                line = "%s %s" % (self._stamp(), line)
        if self.journald:
            line = "<%d>%s" % (self.PRIORITY.get(level, 6), line)
        with self._lock:
            try:
                self._write(line + "\n")
            except Exception:  # pylint: disable=broad-except
                pass   # a line that cannot be written is lost; logging never stops the watcher

    def _write(self, text):
        if self._fd is None:
            self.stream.write(text)
            self.stream.flush()
            return
        data = memoryview(text.encode("utf-8", "backslashreplace"))
        while data:
            written = os.write(self._fd, data)
            if written <= 0:
                return
            data = data[written:]

    def apply(self, actions):
        for action in actions:
            self(action.level, action.action, action.message, **action.fields)


def describe_internal_error(exc):
    """One line: the error and where it was raised (file:line in function), never a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        frame = frames[-1]
        where = " at %s:%d in %s" % (os.path.basename(frame[0]), frame[1], frame[2])
    return "%s: %s%s" % (type(exc).__name__, exc, where)
