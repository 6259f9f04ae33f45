# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finding, checking and running the operator's handlers.

A handler is an executable file in HANDLERS_DIR/<phase>/ or a command (argument list) from the
configuration. It is started with an argument list (never a shell line built from event data),
gets the event as JSON on standard input and as SE_* variables, and runs in a session of its own
so that a timeout can stop its children too; its process record is in the state file before it
may run (watcher_processes). Its output goes to a pipe read by a thread that keeps the first
OUTPUT_LIMIT bytes: its exit is seen the moment it happens even if a child it left behind keeps
the pipe open.
"""

import os
import re
import signal
import stat
import subprocess
import tempfile
import threading
import time

from . import processes
from .decisions import (STOPPED, applies, handler_environment, handler_input, handler_time_limit,
                        not_before_epoch)

# Output kept per handler run (the rest is counted and dropped), lines and characters logged.
OUTPUT_LIMIT = 64 * 1024
OUTPUT_LINES = 40
OUTPUT_LINE_CHARS = 500
# How long to wait for the output pipe's end once the handler has exited (a child it left in the
# background may hold the pipe for ever).
OUTPUT_SETTLE_SECONDS = 0.5
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Bytes (UTF-8) of one SE_* value. Linux refuses to start a program given one environment string
# over 128 KiB, or all of them with the arguments over a quarter of the stack limit ("Argument list
# too long"); ten values of 16 KiB stay far below both. The whole event is on standard input.
SE_VALUE_MAX_BYTES = 16 * 1024
# What an environment cannot hold: NUL ends a C string; an unpaired surrogate has no UTF-8.
_UNSTORABLE_RE = re.compile(r"[\x00\ud800-\udfff]")


def handler_env_values(values):
    """The SE_* values as a program's environment can take them, with SE_TRUNCATED.

    NUL and unpaired surrogates become U+FFFD; a value longer than SE_VALUE_MAX_BYTES is cut on a
    character boundary (SE_RESOURCES after a whole name) and SE_TRUNCATED names it ("" when none is).
    """
    clean = {}
    truncated = []
    for name in sorted(values):
        text = _UNSTORABLE_RE.sub(u"\ufffd", values[name])
        data = text.encode("utf-8")
        if len(data) > SE_VALUE_MAX_BYTES:
            text = data[:SE_VALUE_MAX_BYTES].decode("utf-8", "ignore")
            if name == "SE_RESOURCES":
                # The name at the cut is either whole (a space follows) or left out.
                text = text[:max(0, text.rfind(" "))] if data[SE_VALUE_MAX_BYTES:][:1] != b" " else text
            truncated.append(name)
        clean[name] = text
    clean["SE_TRUNCATED"] = " ".join(truncated)
    return clean


class Handler(object):
    __slots__ = ("name", "phase", "argv", "path", "event_types", "timeout", "problem")

    def __init__(self, name, phase, argv, path=None, event_types=None, timeout=None, problem=None):
        self.name = name
        self.phase = phase
        self.argv = argv
        self.path = path
        self.event_types = event_types
        self.timeout = timeout
        self.problem = problem

    def get(self, key, default=None):
        return getattr(self, key, default)

    @property
    def label(self):
        return "%s/%s" % (self.phase, self.name)


def _listable(name):
    return not name.startswith(".") and not name.endswith(("~", ".swp", ".tmp", ".dpkg-old", ".dpkg-new"))


def discover(handlers_dir, phase, configured):
    """Handlers of one phase in lexical order of name: files of HANDLERS_DIR/<phase>/ and
    configured commands. A configured file entry only adds event_types and timeout to the file of
    that name; if the file is missing the handler carries a problem and is refused."""
    directory = os.path.join(handlers_dir, phase)
    by_name = {}
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        names = []
    except OSError as exc:
        return [Handler("(directory)", phase, None, path=directory,
                        problem="cannot list %s (%s)" % (directory, exc.strerror or exc))]
    for name in names:
        path = os.path.join(directory, name)
        if _listable(name) and not os.path.isdir(path):
            by_name[name] = Handler(name, phase, [path], path=path)
    for entry in configured:
        if entry["phase"] != phase:
            continue
        name = entry["name"]
        handler = by_name.get(name)
        if entry["command"] is not None:
            if handler is not None:
                handler.problem = ("both a file %s and a configured command are named %s; rename one"
                                   % (handler.path, name))
                continue
            handler = Handler(name, phase, list(entry["command"]), path=entry["command"][0])
            by_name[name] = handler
        elif handler is None:
            handler = Handler(name, phase, None, path=os.path.join(directory, name),
                              problem="it is configured but %s does not exist" % os.path.join(directory, name))
            by_name[name] = handler
        handler.event_types = entry["event_types"]
        handler.timeout = entry["timeout"]
    return [by_name[name] for name in sorted(by_name)]


def _owner_problem(path, st, euid, kind):
    if st.st_uid not in (0, euid):
        return "%s %s is owned by uid %d, not by root or the watcher's user; fix with: chown root %s" % (
            kind, path, st.st_uid, path)
    return None


def _directory_problem(directory, euid):
    try:
        st = os.stat(directory)
    except OSError as exc:
        return "cannot stat %s (%s)" % (directory, exc.strerror or exc)
    # A sticky directory (/tmp) lets nobody else rename or remove what is inside it.
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return ("the directory %s is writable by group or others (mode %04o), so anyone in them could replace "
                "what it holds; fix with: chmod go-w %s" % (directory, stat.S_IMODE(st.st_mode), directory))
    return _owner_problem(directory, st, euid, "the directory")


def _ancestors(path):
    """Every directory from / down to the one holding path."""
    directories = []
    parent = os.path.dirname(path)
    while True:
        directories.append(parent)
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return list(reversed(directories))


def permission_problem(path, euid=None, executable=True):
    """Why this file must not be run (or, executable=False, be read by a handler), or None. As
    OpenSSH's StrictModes: anyone who can change a handler, or any directory on the way to it,
    could run code as the watcher (root). So the file and every directory from / down to it,
    along the path as written and along the path its symbolic links lead to, must be writable
    only by their owner (sticky directories aside), and owned by root or the watcher's user."""
    euid = os.geteuid() if euid is None else euid
    try:
        st = os.stat(path)
    except OSError as exc:
        return "cannot stat %s (%s)" % (path, exc.strerror or exc)
    if not stat.S_ISREG(st.st_mode):
        return "%s is not a regular file" % path
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return ("%s is writable by group or others (mode %04o); fix with: chmod go-w %s"
                % (path, stat.S_IMODE(st.st_mode), path))
    problem = _owner_problem(path, st, euid, "the file")
    if problem:
        return problem
    if executable and not st.st_mode & stat.S_IXUSR:
        return "%s is not executable; fix with: chmod u+x %s" % (path, path)
    return directories_problem(path, euid)


def directories_problem(path, euid=None):
    """Why someone other than root or the watcher's user could replace the file at path (which
    need not exist), or None: every directory from / down to the one holding it, along the path as
    written and along the path its symbolic links lead to, must be writable only by its owner
    (sticky directories aside) and owned by root or the watcher's user. Handlers (above) and every
    file the watcher writes (files.replace_file) are held to it."""
    euid = os.geteuid() if euid is None else euid
    seen = set()
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        for directory in _ancestors(candidate):
            if directory in seen:
                continue
            seen.add(directory)
            problem = _directory_problem(directory, euid)
            if problem:
                return problem
    return None


def command_problem(argv, euid=None):
    """Why a configured command must not run: its program, and every argument that names an
    existing file (a script given to an interpreter, a configuration it reads), as above.
    Relative arguments are taken from / (the handler's working directory)."""
    problem = permission_problem(argv[0], euid)
    if problem:
        return problem
    for argument in argv[1:]:
        if not argument or "\x00" in argument:
            continue
        path = os.path.join("/", argument)
        if not os.path.isfile(path):
            continue
        problem = permission_problem(path, euid, executable=False)
        if problem:
            return "argument %s: %s" % (argument, problem)
    return None


class HandlerResult(object):
    __slots__ = ("handler", "outcome", "exit_code", "duration", "detail")

    def __init__(self, handler, outcome, exit_code=None, duration=0.0, detail=""):
        self.handler = handler
        self.outcome = outcome          # ok, failed, timed_out, refused, not_started
        self.exit_code = exit_code
        self.duration = duration
        self.detail = detail

    @property
    def ok(self):
        return self.outcome == "ok"

    def short(self):
        if self.outcome == "ok":
            return "%s ok" % self.handler.name
        if self.outcome == "failed":
            return "%s exit %s" % (self.handler.name, self.exit_code)
        return "%s %s" % (self.handler.name, self.outcome.replace("_", " "))


class PhaseRunner(object):
    """Runs one phase for one event. log(level, action, message, **fields) receives every line.

    on_spawned(entry) is called with the handler's process record (pid, pgid, start_ticks,
    boot_id, event_key, event_id, phase, handler, started_at) before the handler may run, and
    on_exited(pid) once it has ended; the watcher keeps them in its state file. should_stop()
    is asked before each handler: once it says True no further handler of the phase starts."""

    def __init__(self, config, log, resource_name, clock=None, wall_clock=None, popen=None, base_env=None,
                 timer=None, on_spawned=None, on_exited=None, should_stop=None):
        self.config = config
        self.log = log
        self.resource_name = resource_name
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock or time.time
        self._popen = popen or processes.default_popen
        self._timer = timer or threading.Timer
        self._on_spawned = on_spawned or (lambda entry: None)
        self._on_exited = on_exited or (lambda pid: None)
        self._should_stop = should_stop or (lambda: False)
        self._current = None
        self._lock = threading.Lock()
        env = dict(os.environ if base_env is None else base_env)
        # Handlers are not part of the watcher's journal stream or its service notifications.
        for name in ("NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID"):
            env.pop(name, None)
        env.setdefault("PATH", DEFAULT_PATH)
        env.update(config["handler_environment"])
        self._base_env = env

    def handlers(self, phase, event):
        found = discover(self.config["handlers_dir"], phase, self.config["handlers"])
        return [h for h in found if applies(h, event)]

    def run(self, phase, event, key=None):
        """(outcome, summary, results): outcome True when every applicable handler exited 0 (none
        is vacuously True), False when one failed, STOPPED when a stop kept handlers from starting
        or cut the running one short."""
        eid = event.get("event_id")
        handlers = self.handlers(phase, event)
        if not handlers:
            self.log("info", "phase_empty", "event %s: no %s handler applies to %s events"
                     % (eid, phase, event.get("event_type")), event_id=eid, phase=phase)
            return True, "no %s handler applies" % phase, []
        not_before = not_before_epoch(event)
        results = []
        for handler in handlers:
            if self._should_stop():
                break
            results.append(self._run_one(handler, phase, event, not_before, key))
        left = len(handlers) - len(results)
        stopped = left or any(r.outcome == "cut_short" for r in results)
        plural = "" if len(handlers) == 1 else "s"
        summary = "%d handler%s: %s" % (len(handlers), plural, ", ".join(r.short() for r in results) or "none run")
        if left:
            summary += "; %d not started: the watcher is stopping" % left
        if stopped:
            return STOPPED, summary, results
        return all(r.ok for r in results), summary, results

    def cut_short(self):
        """Stop the running handler now (a second SIGTERM): its group gets SIGTERM, then SIGKILL
        after kill_grace, and the phase counts as interrupted."""
        with self._lock:
            current = self._current
        if current is not None:
            current.cut()

    def _run_one(self, handler, phase, event, not_before, key):
        eid = event.get("event_id")
        fields = dict(event_id=eid, phase=phase, handler=handler.name)
        problem = handler.problem or command_problem(handler.argv)
        if problem:
            self.log("error", "handler_refused", "event %s: handler %s REFUSED, not run: %s"
                     % (eid, handler.label, problem), **fields)
            return HandlerResult(handler, "refused", detail=problem)
        timeout = handler.timeout or self.config["handler_timeout"]
        kill_grace = self.config["kill_grace"]
        limit, limited_by = handler_time_limit(timeout, phase, not_before, self._wall_clock(), kill_grace)
        if limit <= 0:
            self.log("error", "handler_not_started", "event %s: handler %s not started: NotBefore %s is less than "
                     "kill_grace (%ss) away and a drain must end by NotBefore"
                     % (eid, handler.label, event.get("not_before"), kill_grace), **fields)
            return HandlerResult(handler, "not_started", detail="too close to NotBefore")
        return self._execute(handler, phase, event, limit, limited_by, kill_grace, fields, key)

    def _execute(self, handler, phase, event, limit, limited_by, kill_grace, fields, key):
        eid = event.get("event_id")
        env = dict(self._base_env)
        env.update(handler_env_values(handler_environment(event, phase, self.resource_name)))
        with tempfile.TemporaryFile(dir=self.config["state_dir"]) as stdin:
            stdin.write(handler_input(event, phase, self.resource_name).encode("utf-8"))
            stdin.seek(0)
            read_end, write_end = os.pipe()
            collector = _OutputCollector(read_end, OUTPUT_LIMIT)
            start = self._clock()
            spawned = {}

            def record(proc, ident):
                entry = dict(ident, event_key=key if key is not None else (eid or "").lower(), event_id=eid,
                             phase=phase, handler=handler.name, started_at=self._wall_clock())
                spawned.update(entry)
                self._on_spawned(entry)

            try:
                proc = processes.spawn_gated(handler.argv, self._popen, record, stdin=stdin,
                                             stdout=write_end, stderr=subprocess.STDOUT, env=env, cwd="/")
            except (OSError, processes.SpawnError) as exc:
                os.close(write_end)
                os.close(read_end)
                detail = "cannot start %s: %s" % (handler.argv[0], getattr(exc, "strerror", None) or exc)
                self.log("error", "handler_finished", "event %s: handler %s FAILED to start: %s"
                         % (eid, handler.label, detail), outcome="not_started", **fields)
                return HandlerResult(handler, "not_started", detail=detail)
            except BaseException:
                os.close(write_end)
                os.close(read_end)
                raise
            os.close(write_end)
            collector.start()
            self.log("info", "handler_started", "event %s: handler %s started (pid %d, time limit %.0fs by %s)"
                     % (eid, handler.label, proc.pid, limit, limited_by), pid=proc.pid, time_limit=limit, **fields)
            expiry = _Expiry(proc, kill_grace, self._timer)
            with self._lock:
                self._current = expiry
            timer = self._timer(limit, expiry.fire)
            timer.daemon = True
            timer.start()
            try:
                exit_code = proc.wait()
            finally:
                duration = self._clock() - start
                timer.cancel()
                expiry.finish()
                with self._lock:
                    self._current = None
                if not expiry.fired:
                    self._end_leftovers(handler, eid, spawned, kill_grace, fields)
                self._exited(proc.pid, eid, fields)
        # A child the handler left behind may hold the pipe open: take what came so far.
        collector.join(OUTPUT_SETTLE_SECONDS)
        kept, dropped = collector.snapshot()
        self._log_output(handler, eid, kept.decode("utf-8", "replace"), dropped, fields)
        if expiry.cut_by_stop:
            outcome = "cut_short"
            message = "CUT SHORT by a second stop signal after %.3fs (exit %s)" % (duration, exit_code)
        elif expiry.fired:
            outcome = "timed_out"
            message = "TIMED OUT after %.3fs (limit %.0fs by %s; exit %s)" % (duration, limit, limited_by, exit_code)
        elif exit_code == 0:
            outcome = "ok"
            message = "finished: exit 0 in %.3fs" % duration
        else:
            outcome = "failed"
            message = "FAILED: exit %s in %.3fs" % (exit_code, duration)
        self.log("info" if outcome == "ok" else "error", "handler_finished", "event %s: handler %s %s"
                 % (eid, handler.label, message), exit_code=exit_code, duration=round(duration, 3),
                 outcome=outcome, **fields)
        return HandlerResult(handler, outcome, exit_code, duration)

    def _end_leftovers(self, handler, eid, spawned, kill_grace, fields):
        """The handler has exited: what it left in its process group (a background child, even one
        that ignores SIGTERM) ends now, SIGTERM then SIGKILL after kill_grace, and is logged. Its
        record stays in the state file until then, so a kill meanwhile leaves it to the next start."""
        outcome = processes.end_group(spawned, kill_grace) if spawned else "gone"
        if outcome != "gone":
            self.log("warning", "handler_group_ended", "event %s: handler %s exited but left processes in its process "
                     "group %d: %s (a handler must not leave processes behind)"
                     % (eid, handler.label, spawned["pgid"], outcome), pgid=spawned["pgid"], outcome=outcome,
                     **fields)

    def _exited(self, pid, eid, fields):
        try:
            self._on_exited(pid)
        except Exception as exc:  # pylint: disable=broad-except
            # The handler's outcome stands; the record left behind only makes the next start
            # look for a process that is gone.
            self.log("warning", "handler_record", "event %s: could not note in the state file that handler pid %d "
                     "ended: %s" % (eid, pid, exc), **fields)

    def _log_output(self, handler, eid, text, dropped, fields):
        lines = text.splitlines()
        for line in lines[:OUTPUT_LINES]:
            self.log("info", "handler_output", "event %s: %s: %s" % (eid, handler.label, line[:OUTPUT_LINE_CHARS]),
                     **fields)
        if len(lines) > OUTPUT_LINES or dropped:
            self.log("info", "handler_output", "event %s: %s: (output cut after %d lines; %d of %d bytes kept, "
                     "truncated %d bytes)" % (eid, handler.label, min(len(lines), OUTPUT_LINES), len(text),
                                              len(text) + dropped, dropped), truncated_bytes=dropped, **fields)


class _OutputCollector(threading.Thread):
    """Reads a handler's output pipe to its end, keeping the first `limit` bytes and counting the
    rest: a handler that writes gigabytes costs `limit` bytes of memory and nothing on disk, and
    never blocks on a full pipe."""

    def __init__(self, fd, limit):
        super(_OutputCollector, self).__init__(name="handler-output")
        self.daemon = True
        self._fd = fd
        self._limit = limit
        self._kept = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()

    def run(self):
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                with self._lock:
                    room = self._limit - len(self._kept)
                    if room > 0:
                        self._kept.extend(chunk[:room])
                    self._dropped += max(0, len(chunk) - max(room, 0))
        finally:
            os.close(self._fd)

    def snapshot(self):
        with self._lock:
            return bytes(self._kept), self._dropped


class _Expiry(object):
    """SIGTERM to the handler's session at its time limit (or at once for a second stop signal),
    SIGKILL kill_grace seconds later."""

    def __init__(self, proc, kill_grace, timer):
        self.proc = proc
        self.kill_grace = kill_grace
        self._timer = timer
        self.fired = False
        self.cut_by_stop = False
        self._kill_timer = None
        self._lock = threading.Lock()
        self._done = False

    def _signal(self, sig):
        with self._lock:
            if self._done:
                return
            processes.signal_group(self.proc.pid, sig)

    def fire(self):
        with self._lock:
            if self.fired or self._done:
                return
            self.fired = True
        self._signal(signal.SIGTERM)
        self._kill_timer = self._timer(self.kill_grace, self._signal, (signal.SIGKILL,))
        self._kill_timer.daemon = True
        self._kill_timer.start()

    def cut(self):
        self.cut_by_stop = True
        self.fire()

    def finish(self):
        """The handler has exited. After a timeout, children it left in its session go too."""
        if self.fired:
            self._signal(signal.SIGKILL)
        with self._lock:
            self._done = True
        if self._kill_timer is not None:
            self._kill_timer.cancel()
