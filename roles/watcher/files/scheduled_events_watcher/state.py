# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's durable state: one JSON file replaced atomically.

A write goes to a temporary file in the same directory, is flushed and fsynced, renamed over the
old file, and the directory is fsynced so the rename itself survives a power cut. Whatever
instant the process or the machine dies, the file holds either the old or the new state, never
a mix: that is what lets a restart neither repeat a drain nor forget a recover.

The file (version 1; the last three keys are optional, so older files still load):

    {"version": 1, "resource_name": "web_0",
     "records": {"<lower-case EventId>": {...one record per event...}},
     "running_handlers": [{"pid", "pgid", "start_ticks", "boot_id", "event_key", "event_id",
                           "phase", "handler", "started_at"}],
     "set_aside": [{"key", "record", "reason", "set_aside_at"}],
     "notify": {"version", "tracker", "next_id", "outbox"}}

running_handlers names the handler processes this watcher started and has not yet seen end: a
watcher killed without its handlers finds them there at its next start. set_aside keeps the
records a load could not use, as they were, so that nothing is lost. notify is the notify action's
transition tracker and outbox (watcher_notify), present only when notify has receivers.

Several threads write: the loop (records), the thread that runs handlers (running_handlers) and
the notify senders (the outbox). A lock orders them; each write carries the records as the loop
last saved them and the notify section as it is at that moment.
"""

import copy
import errno
import fcntl
import glob
import json
import os
import threading
import time

from .files import replace_file
from .handlers import directories_problem

STATE_VERSION = 1
STATE_FILE = "state.json"
# One watcher per state directory: the one that holds an flock on this file (its pid inside).
LOCK_FILE = "watcher.lock"
HANDLER_RECORD_KEYS = ("pid", "pgid", "start_ticks", "boot_id", "event_key", "event_id", "phase", "handler",
                       "started_at")


class StateError(Exception):
    """The state directory or file cannot be used; the message says what to fix."""


class StateLocked(StateError):
    """Another process holds the state directory's lock: a second watcher must not start."""

    def __init__(self, directory, holder):
        self.directory = directory
        self.holder = holder
        who = "pid %d" % holder if holder else "a process whose pid is not written yet"
        super(StateLocked, self).__init__(
            "another watcher (%s) holds the state directory %s (the lock on %s): one watcher per state directory, "
            "so this one does not start. Stop that one first (systemctl stop, or azure-imds-watcher stop), or give "
            "this one another state_dir." % (who, directory, os.path.join(directory, LOCK_FILE)))


class LoadedState(object):
    """What load() found: usable records, handler processes of a previous watcher, records set
    aside (now and earlier) and notes for the log (one line each)."""

    __slots__ = ("records", "running_handlers", "set_aside", "notes", "notify")

    def __init__(self, records=None, running_handlers=None, set_aside=None, notes=None, notify=None):
        self.records = records if records is not None else {}
        self.running_handlers = running_handlers if running_handlers is not None else []
        self.set_aside = set_aside if set_aside is not None else []
        self.notes = notes if notes is not None else []
        self.notify = notify

    @property
    def note(self):
        return "; ".join(self.notes) or None


def check_handler_record(entry):
    """Why a running_handlers entry cannot be used, or None."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    missing = [k for k in HANDLER_RECORD_KEYS if k not in entry]
    if missing:
        return "missing %s" % ", ".join(missing)
    for key in ("pid", "pgid", "start_ticks"):
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return "%s is not a positive integer: %r" % (key, value)
    return None


def _no_constants(name):
    raise ValueError("%s is not JSON" % name)


class StateStore(object):

    def __init__(self, directory, filename=STATE_FILE, wall_clock=None):
        self.directory = directory
        self.path = os.path.join(directory, filename)
        self._wall_clock = wall_clock or time.time
        self._last_written = None
        self._lock = threading.Lock()
        self._records = {}
        self._resource_name = None
        self.running_handlers = []
        self.set_aside = []
        # on_write("ok" | "failed") after each attempt to write the file (the watcher's metrics).
        self.on_write = None
        # The notify section's source: state_snapshot() in each write, state_written() once the
        # file holds it (notify.Notifications), or None.
        self.notify = None
        # The notify section as loaded, written back as it was until self.notify takes over (or
        # forget_notify()): a write before that (ending a killed predecessor's handlers) must not
        # lose the outbox and the tracker's memory.
        self._notify_loaded = None
        # The open lock file while this store holds the directory (lock()), else None.
        self._lock_fd = None

    def lock(self):
        """Take the state directory for this process: an exclusive flock on LOCK_FILE, held until
        unlock() or the process ends (the kernel releases it even after a kill -9). The descriptor
        is close-on-exec, so no handler inherits it. Raises StateLocked naming the holder's pid,
        or StateError when the file cannot be opened or written (a read-only or full disk)."""
        if self._lock_fd is not None:
            return
        path = os.path.join(self.directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StateError("cannot open the lock file %s (%s)" % (path, exc.strerror or exc))
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise StateError("cannot lock %s (%s)" % (path, exc.strerror or exc))
                raise StateLocked(self.directory, _pid_in(fd))
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, b"%d\n" % os.getpid(), 0)
            except OSError as exc:
                raise StateError("cannot write the lock file %s (%s)" % (path, exc.strerror or exc))
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd

    @property
    def locked(self):
        return self._lock_fd is not None

    def unlock(self):
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)

    def __del__(self):
        self.unlock()

    def ensure_directory(self):
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StateError("cannot create the state directory %s (%s); create it or set state_dir to a "
                             "writable directory (under systemd it must be in ReadWritePaths)."
                             % (self.directory, exc.strerror or exc))
        # The state says which handlers ran and which events were approved: only root (or the
        # watcher's user) may be able to change it, by the rule every file the watcher writes follows.
        problem = directories_problem(self.path)
        if problem:
            raise StateError("refused to use the state directory %s: %s" % (self.directory, problem))

    def load(self, read_only=False, check_record=None):
        """A LoadedState. A missing file is an empty state; an unreadable one is set aside as
        state.json.corrupt-<time> (left in place when read_only) and reported in notes, so the
        watcher can still start. check_record(key, record) -> (record, problem): each record
        whose problem is not None goes to set_aside with the reason, the others are kept."""
        if not read_only and self.locked:
            # Left by a kill between creating the temporary file and renaming it: never read. Only
            # by the holder of the lock: without it the file may be a live watcher's write.
            for stale in glob.glob(glob.escape(self.path) + ".tmp-*"):
                try:
                    os.remove(stale)
                except OSError:
                    pass
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return LoadedState()
        except OSError as exc:
            raise StateError("cannot read the state file %s (%s)." % (self.path, exc.strerror or exc))
        try:
            document = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            records = document["records"]
            if not isinstance(records, dict) or document.get("version") != STATE_VERSION:
                raise ValueError("not a version %d watcher state" % STATE_VERSION)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            if read_only:
                return LoadedState(notes=["the state file %s could not be read (%s)" % (self.path, exc)])
            aside = "%s.corrupt-%d" % (self.path, int(self._wall_clock()))
            try:
                os.replace(self.path, aside)
            except OSError as move_exc:
                raise StateError("the state file %s could not be read (%s) nor moved aside (%s)"
                                 % (self.path, exc, move_exc.strerror or move_exc))
            return LoadedState(notes=["the state file %s could not be read (%s); it was moved to %s and the "
                                      "watcher starts with an empty state" % (self.path, exc, aside)])
        loaded = LoadedState(notify=document.get("notify"))
        earlier = document.get("set_aside")
        loaded.set_aside = list(earlier) if isinstance(earlier, list) else []
        now = self._wall_clock()

        def put_aside(key, value, reason, what):
            loaded.set_aside.append({"key": key, "record": value, "reason": reason, "set_aside_at": now})
            loaded.notes.append("%s %r in %s set aside (kept in its set_aside list): %s"
                                % (what, key, self.path, reason))

        for key, record in sorted(records.items()):
            if check_record is None:
                loaded.records[key] = record
                continue
            checked, problem = check_record(key, record)
            if problem is None:
                loaded.records[key] = checked
            else:
                put_aside(key, record, problem, "record")
        handlers = document.get("running_handlers", [])
        if not isinstance(handlers, list):
            put_aside("running_handlers", handlers, "not a list", "entry")
            handlers = []
        for index, entry in enumerate(handlers):
            problem = check_handler_record(entry)
            if problem is None:
                loaded.running_handlers.append(entry)
            else:
                put_aside("running_handlers[%d]" % index, entry, problem, "entry")
        with self._lock:
            self._resource_name = document.get("resource_name")
            self._notify_loaded = copy.deepcopy(loaded.notify)
            self._records = copy.deepcopy(loaded.records)
            self.running_handlers = list(loaded.running_handlers)
            self.set_aside = list(loaded.set_aside)
            self._last_written = None if loaded.notes else self._serialise()
        return loaded

    def _serialise(self):
        document = {"version": STATE_VERSION, "resource_name": self._resource_name, "records": self._records,
                    "running_handlers": self.running_handlers, "set_aside": self.set_aside}
        if self.notify is not None:
            document["notify"] = self.notify.state_snapshot()
        elif self._notify_loaded is not None:
            document["notify"] = self._notify_loaded
        return json.dumps(document, sort_keys=True, indent=1, allow_nan=False, default=str)

    def save(self, records, resource_name):
        """Write the records if anything changed since the last write. Returns True if it wrote."""
        snapshot = copy.deepcopy(records)
        with self._lock:
            self._records = snapshot
            self._resource_name = resource_name
            return self._write()

    def check_writable(self):
        """Write the state file now, changed or not: at start, a read-only or full file system shows
        here (OSError), before anything depends on a write."""
        with self._lock:
            self._last_written = None
            return self._write()

    def forget_notify(self):
        """The next write leaves the notify section out (the watcher has no receivers now)."""
        with self._lock:
            self._notify_loaded = None

    def write_now(self):
        """Write whatever changed (the notify outbox, from a sender thread)."""
        with self._lock:
            return self._write()

    def put_aside(self, key, record, reason):
        """Keep a part of the state that cannot be used, as it was, in set_aside."""
        with self._lock:
            self.set_aside.append({"key": key, "record": record, "reason": reason, "set_aside_at": self._wall_clock()})

    def handler_started(self, entry):
        """Note a running handler process (on disk before it may run: see watcher_processes)."""
        with self._lock:
            self.running_handlers.append(dict(entry))
            self._write()

    def handler_ended(self, pid):
        with self._lock:
            kept = [h for h in self.running_handlers if h.get("pid") != pid]
            if len(kept) != len(self.running_handlers):
                self.running_handlers = kept
                self._write()

    def _write(self):
        text = self._serialise()
        if text == self._last_written:
            self._written()
            return False
        try:
            replace_file(self.path, text.encode("utf-8") + b"\n", 0o600, durable=True)
        except BaseException:
            self._report("failed")
            raise
        self._report("ok")
        self._last_written = text
        self._written()
        return True

    def _written(self):
        if self.notify is not None:
            self.notify.state_written()

    def _report(self, outcome):
        if self.on_write is not None:
            self.on_write(outcome)


def _pid_in(fd):
    """The pid a lock holder wrote into the lock file, or None (not written yet, or not a pid)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        pid = int(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return pid if pid > 0 else None
