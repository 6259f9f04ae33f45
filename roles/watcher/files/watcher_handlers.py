# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finding, checking and running the operator's handlers.

A handler is an executable file in HANDLERS_DIR/<phase>/ or a command (argument list) from the
configuration. It is started with an argument list (never a shell line built from event data),
gets the event as JSON on standard input and as SE_* variables, runs in a session of its own so
that a timeout can stop its children too, and writes its output to an unlinked file in the state
directory: its exit is seen the moment it happens even if a child it left behind keeps a pipe
open.
"""

import os
import signal
import stat
import subprocess
import tempfile
import threading
import time

from watcher_decisions import applies, handler_environment, handler_input, handler_time_limit

import _imds

OUTPUT_LIMIT = 16384
OUTPUT_LINES = 40
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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


def permission_problem(path, euid=None):
    """Why this file must not be run, or None. Anyone who can change a handler could run code as
    the watcher (root): a handler, and the directory holding it, must be writable only by its
    owner, and the owner must be root or the watcher's own user."""
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
    if st.st_uid not in (0, euid):
        return "%s is owned by uid %d, not by root or the watcher's user; fix with: chown root %s" % (
            path, st.st_uid, path)
    if not st.st_mode & stat.S_IXUSR:
        return "%s is not executable; fix with: chmod u+x %s" % (path, path)
    parent = os.path.dirname(os.path.realpath(path))
    try:
        pst = os.stat(parent)
    except OSError as exc:
        return "cannot stat %s (%s)" % (parent, exc.strerror or exc)
    if pst.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not pst.st_mode & stat.S_ISVTX:
        return ("its directory %s is writable by group or others (mode %04o); fix with: chmod go-w %s"
                % (parent, stat.S_IMODE(pst.st_mode), parent))
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
    """Runs one phase for one event. log(level, action, message, **fields) receives every line."""

    def __init__(self, config, log, resource_name, clock=None, wall_clock=None, popen=None, base_env=None,
                 timer=None):
        self.config = config
        self.log = log
        self.resource_name = resource_name
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock or time.time
        self._popen = popen or subprocess.Popen
        self._timer = timer or threading.Timer
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

    def run(self, phase, event):
        """(ok, summary, results). ok needs every applicable handler to exit 0; none is vacuously ok."""
        eid = event.get("event_id")
        handlers = self.handlers(phase, event)
        if not handlers:
            self.log("info", "phase_empty", "event %s: no %s handler applies to %s events"
                     % (eid, phase, event.get("event_type")), event_id=eid, phase=phase)
            return True, "no %s handler applies" % phase, []
        not_before = _imds.not_before_epoch(event.get("not_before"))
        results = []
        for handler in handlers:
            results.append(self._run_one(handler, phase, event, not_before))
        ok = all(r.ok for r in results)
        plural = "" if len(results) == 1 else "s"
        summary = "%d handler%s: %s" % (len(results), plural, ", ".join(r.short() for r in results))
        return ok, summary, results

    def _run_one(self, handler, phase, event, not_before):
        eid = event.get("event_id")
        fields = dict(event_id=eid, phase=phase, handler=handler.name)
        problem = handler.problem or permission_problem(handler.path)
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
        return self._execute(handler, phase, event, limit, limited_by, kill_grace, fields)

    def _execute(self, handler, phase, event, limit, limited_by, kill_grace, fields):
        eid = event.get("event_id")
        env = dict(self._base_env)
        env.update(handler_environment(event, phase, self.resource_name))
        state_dir = self.config["state_dir"]
        with tempfile.TemporaryFile(dir=state_dir) as stdin, tempfile.TemporaryFile(dir=state_dir) as output:
            stdin.write(handler_input(event, phase, self.resource_name).encode("utf-8"))
            stdin.seek(0)
            start = self._clock()
            try:
                proc = self._popen(handler.argv, stdin=stdin, stdout=output, stderr=subprocess.STDOUT, env=env,
                                   cwd="/", close_fds=True, start_new_session=True, shell=False)
            except OSError as exc:
                detail = "cannot start %s: %s" % (handler.argv[0], exc.strerror or exc)
                self.log("error", "handler_finished", "event %s: handler %s FAILED to start: %s"
                         % (eid, handler.label, detail), outcome="not_started", **fields)
                return HandlerResult(handler, "not_started", detail=detail)
            self.log("info", "handler_started", "event %s: handler %s started (pid %d, time limit %.0fs by %s)"
                     % (eid, handler.label, proc.pid, limit, limited_by), pid=proc.pid, time_limit=limit, **fields)
            expiry = _Expiry(proc, kill_grace, self._timer)
            timer = self._timer(limit, expiry.fire)
            timer.daemon = True
            timer.start()
            exit_code = proc.wait()
            duration = self._clock() - start
            timer.cancel()
            expiry.finish()
            output.seek(0)
            text = output.read(OUTPUT_LIMIT + 1).decode("utf-8", "replace")
        self._log_output(handler, eid, text, fields)
        if expiry.fired:
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

    def _log_output(self, handler, eid, text, fields):
        lines = text.splitlines()
        truncated = len(text) > OUTPUT_LIMIT or len(lines) > OUTPUT_LINES
        for line in lines[:OUTPUT_LINES]:
            self.log("info", "handler_output", "event %s: %s: %s" % (eid, handler.label, line[:500]), **fields)
        if truncated:
            self.log("info", "handler_output", "event %s: %s: (output cut after %d lines / %d bytes)"
                     % (eid, handler.label, OUTPUT_LINES, OUTPUT_LIMIT), **fields)


class _Expiry(object):
    """SIGTERM to the handler's session at its time limit, SIGKILL kill_grace seconds later."""

    def __init__(self, proc, kill_grace, timer):
        self.proc = proc
        self.kill_grace = kill_grace
        self._timer = timer
        self.fired = False
        self._kill_timer = None
        self._lock = threading.Lock()
        self._done = False

    def _signal(self, sig):
        with self._lock:
            if self._done:
                return
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def fire(self):
        self.fired = True
        self._signal(signal.SIGTERM)
        self._kill_timer = self._timer(self.kill_grace, self._signal, (signal.SIGKILL,))
        self._kill_timer.daemon = True
        self._kill_timer.start()

    def finish(self):
        """The handler has exited. After a timeout, children it left in its session go too."""
        if self.fired:
            self._signal(signal.SIGKILL)
        with self._lock:
            self._done = True
        if self._kill_timer is not None:
            self._kill_timer.cancel()
