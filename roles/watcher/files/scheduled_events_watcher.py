# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""azure-imds-watcher: acts on Azure Scheduled Events on the VM it runs on, with no controller.

Polls Scheduled Events once a second through the collection's shared IMDS client (_imds.py,
installed beside this file), runs the operator's drain handlers for an event that names this VM,
approves it by policy, runs started handlers when it starts and recover handlers when it ends.

    python3 scheduled_events_watcher.py run [--config FILE] [--once] [--dry-run]
    python3 scheduled_events_watcher.py status [--config FILE] [--json]
    python3 scheduled_events_watcher.py start|stop --pid-file FILE ...   (without systemd)

The reference is docs/docsite/rst/watcher.rst. Standard library only, Python 3.6 or later.
"""

import argparse
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
# On a VM the role installs _imds.py beside this file; in a checkout (tests, benchmarks) it is the
# collection's own plugins/module_utils/_imds.py.
if not os.path.exists(os.path.join(_HERE, "_imds.py")):
    sys.path.insert(1, os.path.normpath(os.path.join(_HERE, "..", "..", "..", "plugins", "module_utils")))

if __name__ == "__main__":
    # IMDS speaks plain HTTP on a link-local address. http.client would load the TLS library
    # (about 4 MB of the daemon's 22 MB of resident memory) for nothing; an https imds_url is
    # refused at start instead. Only for the program: an importer keeps its ssl.
    sys.modules.setdefault("ssl", None)

import _imds  # noqa: E402  pylint: disable=wrong-import-position
import watcher_liveness  # noqa: E402  pylint: disable=wrong-import-position
import watcher_notify  # noqa: E402  pylint: disable=wrong-import-position
import watcher_processes  # noqa: E402  pylint: disable=wrong-import-position
from watcher_config import (DEFAULT_CONFIG_PATH, ConfigError, check_config, load_config,  # noqa: E402
                            stop_timeout)
from watcher_decisions import (Planner, approval_policy, check_record, describe, event_key,  # noqa: E402
                                not_before_epoch)
from watcher_handlers import PhaseRunner  # noqa: E402
from watcher_state import StateError, StateLocked, StateStore, open_private_log, replace_file  # noqa: E402

PROGRAM = "azure-imds-watcher"
CONFIG_ENV_VAR = "AZURE_IMDS_WATCHER_CONFIG"
# 0: done, or stopped by a signal. 1: a failure (run --once whose poll failed, status without
# IMDS, an internal error of a command). 2: a configuration or usage error: restarting cannot fix
# it, so the unit does not (RestartPreventExitStatus=2).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# 4: `run` refused to start because another watcher holds the state directory's lock. Not a crash:
# under systemd the unit tries again after RestartSec (the holder may be a `run --once`).
EXIT_LOCKED = 4
# The longest the loop ever waits between two attempts, whatever the retry table or a
# Retry-After says: a Preempt gives 30 s of notice, and one request every 10 s is far below the
# rate limit of 5 a second.
MAX_BACKOFF = 10.0
# IMDS errors the client does not retry (400, 404, redirects) still must not stop the daemon: it
# keeps polling, backing off to MAX_BACKOFF.
NOT_RETRIED = _imds.RetryRule("an error the client does not retry", base=1.0, cap=MAX_BACKOFF)
# An unexpected error inside one loop iteration (a bug, a full disk): logged, then the same backoff.
INTERNAL = _imds.RetryRule("an internal error", base=1.0, cap=MAX_BACKOFF)
FAILURE_REMINDER_SECONDS = 60.0


# --------------------------------------------------------------------------------------------
# Logging: one line per decision
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Pacing: at most one request per poll interval
# --------------------------------------------------------------------------------------------

class Pacer(object):
    """When the next poll may start. Polls start a whole interval after the previous request
    started (so the period does not stretch by the processing time), later after a failure's
    backoff (never more than MAX_BACKOFF), and never within an interval after an approval. The
    client makes one attempt per call (retry_timeout 0): retries are the loop's, so they are
    paced too."""

    def __init__(self, interval, clock):
        self.interval = interval
        self._clock = clock
        self.next_at = clock()

    def polled(self, started_at, backoff=0.0):
        self.next_at = max(started_at + self.interval, self._clock() + min(backoff, MAX_BACKOFF))

    def approved(self, started_at):
        self.next_at = max(self.next_at, started_at + self.interval)

    def wait(self):
        return max(0.0, self.next_at - self._clock())


class FailureStreak(object):
    """Consecutive failures: counts attempts per kind for the backoff and keeps the log to one
    line when a streak starts, a reminder a minute, and one line when it ends."""

    def __init__(self):
        self.count = 0
        self.attempts = {}
        self.started_at = None
        self.last_logged = None

    def failed(self, key, now):
        first = self.count == 0
        self.count += 1
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if first:
            self.started_at = now
        should_log = first or now - self.last_logged >= FAILURE_REMINDER_SECONDS
        if should_log:
            self.last_logged = now
        return self.attempts[key], should_log

    def succeeded(self, now):
        summary = None
        if self.count:
            summary = (self.count, now - self.started_at)
        self.count = 0
        self.attempts = {}
        return summary


def describe_failure(exc, client):
    """The error for the log. With retry_timeout 0 the client's "did not succeed within
    retry_timeout" wording would mislead: the loop retries, so name the URL and the failure."""
    if isinstance(exc, _imds.ImdsTimeoutError) and client.last_failures:
        text = "%s from %s" % (client.last_failures[-1].describe(), exc.url)
        return text + (" (%s)" % exc.hint if exc.status == 429 else "")
    return str(exc)


def backoff_for(client, policy, streak, now):
    """(delay, log this failure?) after a failed request, by the shared client's retry table,
    never above MAX_BACKOFF."""
    failure = client.last_failures[-1] if client.last_failures else None
    rule = _imds.retry_rule_for(failure) if failure is not None else None
    if rule is None:
        rule = NOT_RETRIED
    key = (failure.kind, failure.status) if failure is not None else ("error", None)
    attempt, should_log = streak.failed(key, now)
    retry_after = failure.retry_after if failure is not None else None
    return min(MAX_BACKOFF, policy.delay(rule, attempt, retry_after)), should_log


def describe_internal_error(exc):
    """One line: the error and where it was raised (file:line in function), never a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        frame = frames[-1]
        where = " at %s:%d in %s" % (os.path.basename(frame[0]), frame[1], frame[2])
    return "%s: %s%s" % (type(exc).__name__, exc, where)


class _StopRequested(BaseException):
    """Raised by the signal handler inside a request that may be abandoned (a GET): a stop need
    not wait for IMDS. BaseException, so no except Exception on the way swallows it."""


# --------------------------------------------------------------------------------------------
# The daemon
# --------------------------------------------------------------------------------------------

class Watcher(object):
    """The loop. Each iteration (one poll and what it leads to, or one wait for a finished
    handler phase) runs inside one guarded boundary: whatever goes wrong in it is logged with
    its context and the loop goes on after a backoff. Only a bad configuration stops the daemon,
    before the loop starts."""

    def __init__(self, config, client, log, store, clock=None, wall_clock=None, dry_run=False, runner=None,
                 retry_policy=None, idle=None, sleep=None, telemetry=None):
        self.config = config
        self.client = client
        self.log = log
        self.store = store
        self.dry_run = dry_run
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock or time.time
        self._sleep = sleep or time.sleep
        self._runner = runner
        self._policy = retry_policy or _imds.RetryPolicy()
        # idle(seconds) replaces blocking on the result queue when time is simulated (tests).
        self._idle = idle
        self.pacer = Pacer(config["poll_interval"], self._clock)
        self.streak = FailureStreak()
        self.internal = FailureStreak()
        self.results = queue.Queue()
        self.planner = None
        self.resource_name = None
        self.stopping = False
        # A second stop signal: cut the running handler short instead of waiting for it.
        self.hurry = False
        self.polls = 0
        self._loaded = None
        self._killed = []
        # The notify action (watcher_notify): the transitions and their outbox, one sender per receiver.
        self.notifications = None
        self.senders = []
        self._warned = (None, set())
        # True only while a GET runs that a stop may abandon (see _StopRequested).
        self.interruptible = False
        # Metrics, the status file and systemd's notify socket. Without one (tests that drive the
        # loop in-process) nothing is published but what the configuration's metrics keys ask for.
        self.telemetry = telemetry or watcher_liveness.Telemetry(config, log, watcher_liveness.UNKNOWN_VERSION,
                                                                 wall_clock=self._wall_clock, environ={},
                                                                 write_status=False)
        if store is not None:
            store.on_write = self.telemetry.state_written

    # -- start -----------------------------------------------------------------------------

    def _deadline(self, seconds):
        return _imds.Deadline(seconds, clock=self._clock)

    def mark_stop(self):
        """What SIGTERM and SIGINT do first, from the signal handler: flags only. A second signal
        may arrive while the first one's handler runs (its log line is out), and must count."""
        if self.stopping:
            self.hurry = True
        self.stopping = True

    def abandon_get(self):
        """Then, from the signal handler: abandon a GET that a stop may cut short."""
        if self.interruptible:
            self.interruptible = False
            raise _StopRequested()

    def resolve_name(self, keep_trying=True):
        """This VM's name as Resources spells it: the configured one, or IMDS compute/name."""
        if self.config["resource_name"]:
            self.resource_name = self.config["resource_name"]
            source = "configuration"
        else:
            while True:
                started = self._clock()
                try:
                    self.resource_name = self._interruptible_get(
                        lambda: self.client.get_vm_name(deadline=self._deadline(self._request_timeout())))
                    self.pacer.polled(started)
                    self._request_done(started)
                    break
                except _StopRequested:
                    return False
                except _imds.ImdsError as exc:
                    self._request_done(started, exc)
                    delay, should_log = backoff_for(self.client, self._policy, self.streak, self._clock())
                    self.pacer.polled(started, delay)
                    if should_log or not keep_trying:
                        self.log("error", "imds_error", "cannot learn this VM's name from IMDS: %s"
                                 % describe_failure(exc, self.client))
                    if not keep_trying:
                        return False
                    if not self._sleep_until_next_poll():
                        return False
            source = "IMDS compute/name"
            self._imds_recovered()
        self.log("info", "startup", "%s: this VM is %s (from %s); polling %s every %gs%s"
                 % (PROGRAM, self.resource_name, source, self.client.scheduled_events_url(),
                    self.config["poll_interval"], "; DRY RUN: no handler runs, nothing is approved"
                    if self.dry_run else ""),
                 resource_name=self.resource_name, dry_run=self.dry_run)
        return True

    def _request_done(self, started, exc=None, publish=True):
        """Report one GET to the metrics and the status file (and readiness, after the first)."""
        if exc is None:
            self.telemetry.polled("ok", self._clock() - started)
        else:
            failure = self.client.last_failures[-1] if self.client.last_failures else None
            self.telemetry.polled(watcher_liveness.poll_outcome(exc, failure), self._clock() - started,
                                  describe_failure(exc, self.client))
        if publish:
            self.telemetry.publish()

    def _request_timeout(self):
        return self.config["first_request_timeout"] if self.polls == 0 else self.config["request_timeout"]

    def _interruptible_get(self, call):
        self.interruptible = True
        try:
            if self.stopping:
                raise _StopRequested()
            return call()
        finally:
            self.interruptible = False

    def read_state(self):
        """Take the state directory (its lock: one watcher per directory), load the state file
        (records checked one by one, bad ones set aside) and write it back once, retrying with a
        backoff while the directory or file cannot be used (missing, read-only, full). False once
        stopping. Raises StateLocked when another watcher holds the directory. A dry run writes
        nothing and takes no lock."""
        if self._loaded is not None or self.store is None:
            return True
        streak = FailureStreak()
        while not self.stopping:
            try:
                if not self.dry_run:
                    self.store.ensure_directory()
                    self.store.lock()
                loaded = self.store.load(read_only=self.dry_run, check_record=check_record)
                if not self.dry_run:
                    self.store.check_writable()
                self._loaded = loaded
                break
            except StateLocked:
                raise
            except (StateError, OSError) as exc:
                attempt, should_log = streak.failed("state", self._clock())
                if should_log:
                    self.log("error", "state_unusable", "cannot use the state in %s: %s. Fix the directory (it must "
                             "be writable by the watcher); trying again with a backoff of up to %gs meanwhile, no "
                             "handler runs until then" % (self.config["state_dir"], exc, MAX_BACKOFF))
                # Alive, only waiting: systemd must not restart it (nor count a start timeout).
                self.telemetry.waiting("state directory unusable")
                self._sleep(min(MAX_BACKOFF, self._policy.delay(INTERNAL, attempt)))
                self.telemetry.loop()
        else:
            return False
        summary = streak.succeeded(self._clock())
        if summary:
            self.log("info", "state_recovered", "the state in %s can be used again after %d failed attempt%s"
                     % (self.config["state_dir"], summary[0], "" if summary[0] == 1 else "s"))
        for note in self._loaded.notes:
            self.log("error", "state_unreadable", note)
        return True

    def end_leftovers(self):
        """End the handler processes a killed predecessor left running (SIGTERM to each process
        group, SIGKILL after kill_grace), before anything else runs. Returns False once stopping."""
        if not self.read_state():
            return False
        if self._loaded is None:
            return True
        leftovers = list(self._loaded.running_handlers)
        for entry in leftovers:
            label = "%s/%s" % (entry["phase"], entry["handler"])
            if self.dry_run:
                self.log("warning", "handler_leftover", "DRY RUN: handler %s of event %s (pid %d) was left running by "
                         "a previous watcher; a real run would end it" % (label, entry["event_id"], entry["pid"]),
                         pid=entry["pid"])
                continue
            outcome = watcher_processes.end_group(entry, self.config["kill_grace"])
            if outcome != "gone":
                self.log("error", "handler_leftover", "event %s: handler %s (pid %d, process group %d) was still "
                         "running from a watcher that was killed: %s; its %s counts as interrupted"
                         % (entry["event_id"], label, entry["pid"], entry["pgid"], outcome, entry["phase"]),
                         event_id=entry["event_id"], phase=entry["phase"], handler=entry["handler"],
                         pid=entry["pid"], outcome=outcome)
            self._killed.append((entry["event_key"], entry["phase"]))
            self.telemetry.handler_killed(entry["phase"])
            if self.store is not None:
                self.store.handler_ended(entry["pid"])
        self._loaded.running_handlers = []
        return True

    def load_state(self):
        """Records from the state file (after end_leftovers), the planner, and the phase runner."""
        if not self.end_leftovers():
            return False
        records = self._loaded.records if self._loaded is not None else {}
        self.planner = Planner(self.resource_name, self.config["approval"], records)
        self.log.apply(self.planner.restore())
        for key, phase in self._killed:
            self.log.apply(self.planner.handler_killed(key, phase))
        self._start_notify()
        self._persist()
        if self._runner is None:
            self._runner = PhaseRunner(self.config, self.log, self.resource_name, clock=self._clock,
                                       wall_clock=self._wall_clock, should_stop=lambda: self.stopping,
                                       on_spawned=self._handler_spawned, on_exited=self._handler_exited)
        return True

    def _start_notify(self):
        """The notify action, going on from the state file: unsent notifications are sent again."""
        section = self._loaded.notify if self._loaded is not None else None
        if not self.config["notify"]:
            outbox = section.get("outbox") if isinstance(section, dict) else None
            if outbox:
                self.log("warning", "notify_discarded", "notify has no receivers now: %d unsent notification%s of "
                         "the state file %s dropped" % (len(outbox), "" if len(outbox) == 1 else "s",
                                                        "is" if len(outbox) == 1 else "are"))
            if self.store is not None and not self.dry_run:
                self.store.forget_notify()
            return
        self.notifications = watcher_notify.Notifications(self.config, self.resource_name, self.telemetry.version,
                                                          wall_clock=self._wall_clock)
        self.notifications.on_change = self.telemetry.notify_outbox
        notes, problem = self.notifications.restore(section)
        if problem is not None:
            self.log("error", "state_unreadable", "the notify section of the state file cannot be used (%s); it is "
                     "kept in set_aside and the events present now are notified again" % problem)
            if self.store is not None and not self.dry_run:
                self.store.put_aside("notify", section, problem)
        for note in notes:
            self.log("info", "notify_restored", note)
        for line in watcher_notify.token_files_readable(self.config):
            self.log("warning", "notify_token", line)
        if self.dry_run:
            return
        if self.store is not None:
            self.store.notify = self.notifications
        self.senders = watcher_notify.senders_for(self.config, self.notifications, self.telemetry.version, self.log,
                                                  self._persist_notify, self.telemetry)

    def _persist_notify(self):
        if self.store is not None:
            self.store.write_now()

    def _notify(self, document):
        if self.notifications is not None:
            self.log.apply(self.notifications.observe(document, keep=not self.dry_run))

    def _handler_spawned(self, entry):
        self.telemetry.handler_started()
        if self.store is not None and not self.dry_run:
            self.store.handler_started(entry)

    def _handler_exited(self, pid):
        self.telemetry.handler_ended()
        if self.store is not None and not self.dry_run:
            self.store.handler_ended(pid)

    def _persist(self):
        if self.store is not None and not self.dry_run:
            self.store.save(self.planner.records, self.resource_name)

    # -- polling ---------------------------------------------------------------------------

    def _sleep_until_next_poll(self):
        """Wait for the next poll, handling finished jobs meanwhile. False once stopping."""
        while not self.stopping:
            self.telemetry.loop()
            wait = self.pacer.wait()
            if wait <= 0:
                return True
            self._wait_results(min(wait, 1.0))
        return False

    def _imds_recovered(self):
        summary = self.streak.succeeded(self._clock())
        if summary:
            self.log("info", "imds_recovered", "IMDS answers again after %d failed request%s over %.1fs"
                     % (summary[0], "" if summary[0] == 1 else "s", summary[1]))

    def poll(self):
        """One GET of the document and everything it leads to. Returns False if IMDS failed. The
        metrics and the status file are published once per poll, whatever happened in it."""
        try:
            return self._poll()
        finally:
            self.telemetry.publish()

    def _poll(self):
        started = self._clock()
        deadline = self._deadline(self._request_timeout())
        try:
            document = self._interruptible_get(lambda: self.client.get_scheduled_events(deadline=deadline))
        except _StopRequested:
            return False
        except _imds.ImdsError as exc:
            self._request_done(started, exc, publish=False)
            delay, should_log = backoff_for(self.client, self._policy, self.streak, self._clock())
            self.pacer.polled(started, delay)
            if should_log:
                self.log("error", "imds_error", "polling Scheduled Events failed (%d in a row; next try in %.1fs; "
                         "the watcher keeps polling): %s" % (self.streak.count, self.pacer.wait(),
                                                             describe_failure(exc, self.client)),
                         status=exc.status)
            return False
        self.pacer.polled(started)
        self._request_done(started, publish=False)
        self.polls += 1
        self._imds_recovered()
        self._log_warnings(document)
        self.telemetry.document(document, self.resource_name)
        self.log.apply(self.planner.observe(document.events, self._wall_clock(), document.incarnation))
        # Queued now, sent once the next state write (the drain's, or the poll's last) holds them.
        self._notify(document)
        # A new drain starts before anything else is written or sent: the first handler's start
        # is what the operator's clock runs against.
        self._dispatch()
        self._approve_due()
        self._persist()
        # A whole poll went through: the streak of internal errors, if any, is over.
        self._internal_recovered()
        return True

    def _log_warnings(self, document):
        """What the client could not read in the document: logged once per DocumentIncarnation."""
        incarnation, logged = self._warned
        if incarnation != document.incarnation:
            logged = set()
            self._warned = (document.incarnation, logged)
        for warning in document.warnings:
            if warning not in logged:
                logged.add(warning)
                self.log("warning", "document_warning", "the Scheduled Events document (incarnation %s) has a field "
                         "the watcher could not read: %s" % (document.incarnation, warning),
                         incarnation=document.incarnation)

    # -- approvals -------------------------------------------------------------------------

    def _approve_due(self):
        # Retries are timed on the monotonic clock: a step of the wall clock neither delays nor hurries one.
        keys = self.planner.pending_approvals(self._clock())
        if not keys:
            return
        unusable = [k for k in keys if not _imds.is_event_id(self.planner.records[k]["event"]["event_id"])]
        if unusable:
            self.log.apply(self.planner.approval_failed(
                unusable, "its EventId is not a GUID, so no approval can name it", None))
            keys = [k for k in keys if k not in unusable]
            if not keys:
                return
        ids = [self.planner.records[k]["event"]["event_id"] for k in keys]
        if self.dry_run:
            for key, event_id in zip(keys, ids):
                self.planner.records[key]["approval"] = "dry_run"
                self.log("info", "dry_run", "DRY RUN: would approve event %s (policy %s)"
                         % (event_id, self.planner.records[key]["policy"]), event_id=event_id)
            return
        started = self._clock()
        try:
            self.client.approve(ids, deadline=self._deadline(self.config["request_timeout"]))
        except _imds.ImdsError as exc:
            failure = self.client.last_failures[-1] if self.client.last_failures else None
            rule = _imds.retry_rule_for(failure) if failure is not None else None
            retry_at = None
            if rule is not None:
                retry_at = self._clock() + min(MAX_BACKOFF, self._policy.delay(rule, 1, failure.retry_after))
            self.telemetry.approval(False, keys)
            self.log.apply(self.planner.approval_failed(keys, describe_failure(exc, self.client), retry_at))
        else:
            self.telemetry.approval(True, keys)
            self.log.apply(self.planner.approval_sent(keys))
        finally:
            self.pacer.approved(started)
        self._persist()

    # -- handler jobs ----------------------------------------------------------------------

    def _dispatch(self):
        if self.stopping or self.planner.running is not None:
            return
        before = (list(self.planner.queue), dict((k, dict(r)) for k, r in self.planner.records.items()))
        job, actions = self.planner.next_job(self._wall_clock())
        # The record says "running" on disk before any handler starts: a kill from here on never
        # runs this drain a second time. If it cannot be written, nothing starts.
        try:
            self._persist()
        except BaseException:
            self.planner.queue, self.planner.records = before
            self.planner.running = None
            raise
        self.log.apply(actions)
        if job is None:
            return
        if self.dry_run:
            names = [h.label for h in self._runner.handlers(job.phase, job.event)]
            self.log("info", "dry_run", "DRY RUN: would run the %s handlers of event %s: %s"
                     % (job.phase, job.event.get("event_id"), ", ".join(names) or "(none apply)"),
                     event_id=job.event.get("event_id"), phase=job.phase, handlers=names)
            self.results.put((job, True, "dry run"))
            return
        if job.phase == "drain":
            self.telemetry.drain_started(job.key)
        self._start_job(job)

    def _start_job(self, job):
        thread = threading.Thread(target=self._run_job, args=(job,), name="phase-%s" % job.phase)
        thread.daemon = True
        thread.start()

    def _run_job(self, job):
        try:
            ok, summary, results = self._runner.run(job.phase, job.event, key=job.key)[:3]
            self.telemetry.handler_results(job.phase, results)
        except Exception as exc:  # pylint: disable=broad-except
            # Whatever went wrong, the main loop must hear that the job ended, or it waits forever.
            ok, summary = False, "internal error running handlers: %s" % describe_internal_error(exc)
        self.results.put((job, ok, summary))

    def _wait_results(self, timeout):
        """Wait up to timeout (None: for ever) for a finished job; handle it and any others."""
        try:
            if self._idle is None or timeout is None:
                item = self.results.get(timeout=timeout)
            else:
                try:
                    item = self.results.get_nowait()
                except queue.Empty:
                    self._idle(timeout)
                    item = self.results.get_nowait()
        except queue.Empty:
            return
        while item is not None:
            self._job_done(*item)
            try:
                item = self.results.get_nowait()
            except queue.Empty:
                item = None

    def _job_done(self, job, ok, summary):
        if job.phase == "drain" and not self.dry_run:
            self.telemetry.drain_finished(not_before_epoch(job.event))
        self.log.apply(self.planner.job_finished(job.key, job.phase, ok, summary))
        self._persist()
        self._approve_due()
        self._dispatch()

    # -- loops -----------------------------------------------------------------------------

    def guarded(self, step, *args):
        """The boundary of one iteration: an unexpected error is logged with its context, the
        next poll waits a backoff, and the loop goes on. Returns step's result, or None."""
        try:
            result = step(*args)
        except Exception as exc:  # pylint: disable=broad-except
            now = self._clock()
            attempt, should_log = self.internal.failed("internal", now)
            delay = min(MAX_BACKOFF, self._policy.delay(INTERNAL, attempt))
            self.pacer.polled(now, delay)
            if should_log:
                self.log("error", "internal_error", "internal error (%d in a row; the watcher goes on, next poll in "
                         "%.1fs): %s" % (self.internal.count, delay, describe_internal_error(exc)),
                         error=type(exc).__name__)
            return None
        return result

    def _internal_recovered(self):
        summary = self.internal.succeeded(self._clock())
        if summary:
            self.log("info", "internal_recovered", "the loop runs normally again after %d internal error%s"
                     % (summary[0], "" if summary[0] == 1 else "s"))

    def _iteration(self):
        if self.pacer.wait() <= 0:
            self.poll()
        else:
            self._wait_results(min(self.pacer.wait(), 1.0))

    def _finish_running(self):
        """After a stop: no new handler starts; the running one ends within its own limit (at
        once after a second signal), its outcome and any approval it leads to are written."""
        if self.planner.running is not None:
            key, phase = self.planner.running
            self.log("info", "shutdown", "stopping: waiting for the running %s handler of event %s to finish (no "
                     "further handler starts; a second signal cuts it short)"
                     % (phase, self.planner.records[key]["event"]["event_id"]))
        cut = False
        while self.planner.running is not None:
            self.telemetry.loop()
            if self.hurry and not cut and self._runner is not None:
                self._runner.cut_short()
                cut = True
            self.guarded(self._wait_results, 1.0)
        self.guarded(self._persist)

    def run_once(self):
        """One poll, then every job and approval it leads to, then one attempt for each unsent
        notification (in order per receiver, up to its first failure). Exit status 1 if IMDS failed."""
        polled = self.guarded(self.poll)
        if polled:
            while not self.stopping and self.planner.has_work():
                self.guarded(self._dispatch)
                if self.planner.running is None:
                    break
                self.guarded(self._wait_results, 1.0)
        self._finish_running()
        for sender in self.senders:
            if not self.stopping:
                self.guarded(sender.send_pending_once)
        return EXIT_OK if polled else EXIT_FAILED

    def run_forever(self):
        for sender in self.senders:
            sender.start()
        try:
            while not self.stopping:
                self.telemetry.loop()
                self.guarded(self._iteration)
        finally:
            # What is unsent stays in the state file for the next start.
            for sender in self.senders:
                sender.stop()
        self._finish_running()
        self.log("info", "shutdown", "%s stopped" % PROGRAM)
        return EXIT_OK


# --------------------------------------------------------------------------------------------
# status
# --------------------------------------------------------------------------------------------

def status_report(config, client, store):
    """What the watcher sees and remembers, as a JSON-able dict. Raises ImdsError."""
    name = config["resource_name"] or client.get_vm_name(deadline=_imds.Deadline(config["first_request_timeout"]))
    document = client.get_scheduled_events(deadline=_imds.Deadline(config["first_request_timeout"]))
    notify_section = None
    try:
        loaded = store.load(read_only=True, check_record=check_record)
        records, note, notify_section = loaded.records, loaded.note, loaded.notify
    except StateError as exc:
        # Reading the state takes root under the service's defaults; the events are still worth showing.
        records, note = {}, str(exc)
    events = []
    for event in _imds.annotate_events(document.events, name):
        record = records.get(event_key(event.get("event_id"))) if isinstance(event.get("event_id"), str) else None
        entry = dict(event)
        entry["leader"] = _imds.is_leader(event, name)
        if event["affects_this_host"] and event.get("event_status") == "Scheduled":
            entry["policy"], entry["policy_reason"] = approval_policy(event, name, config["approval"])
        entry["watcher"] = None if record is None else dict(
            (k, record[k]) for k in ("drain", "approval", "started", "recover", "policy"))
        events.append(entry)
    present = set(event_key(e["event_id"]) for e in document.events if isinstance(e.get("event_id"), str))
    remembered = dict((k, r) for k, r in records.items() if k not in present)
    return {"resource_name": name, "imds_url": client.scheduled_events_url(),
            "document_incarnation": document.incarnation, "document_warnings": list(document.warnings),
            "events": events, "state_file": store.path, "state_note": note, "remembered": remembered,
            "notify": notify_status(config, notify_section)}


def notify_status(config, section):
    """The notify action as the state file has it: receivers and what waits for each."""
    outbox = section.get("outbox") if isinstance(section, dict) else None
    outbox = outbox if isinstance(outbox, list) else []
    receivers = []
    for target in config["notify"]:
        waiting = sum(1 for entry in outbox if isinstance(entry, dict) and target["url"] in (entry.get("pending") or ()))
        receivers.append({"url": watcher_notify.safe_url(target["url"]), "unsent": waiting})
    return {"receivers": receivers, "unsent": len(outbox)}


def print_status(report, out):
    write = out.write
    write("this VM:   %s\n" % report["resource_name"])
    write("IMDS:      %s\n" % report["imds_url"])
    write("document:  incarnation %s, %d event%s\n" % (report["document_incarnation"], len(report["events"]),
                                                       "" if len(report["events"]) == 1 else "s"))
    for warning in report.get("document_warnings") or []:
        write("  warning: %s\n" % escape_text(warning))
    for event in report["events"]:
        write("  %s  %s\n" % (escape_text("%s" % (event["event_id"],)), escape_text(describe(event))))
        if not event["affects_this_host"]:
            write("      does not name this VM: not acted on\n")
            continue
        if event.get("policy"):
            leader = ", leader" if event["leader"] else ""
            write("      policy %s (%s)%s\n" % (event["policy"], event["policy_reason"], leader))
        watcher = event["watcher"]
        write("      watcher: %s\n" % ("not seen yet" if watcher is None else ", ".join(
            "%s %s" % (k, watcher[k] or "-") for k in ("drain", "approval", "started", "recover"))))
    write("state:     %s%s\n" % (report["state_file"], " (%s)" % report["state_note"] if report["state_note"] else ""))
    for receiver in report["notify"]["receivers"]:
        write("notify:    %s, %d unsent\n" % (escape_text(receiver["url"]), receiver["unsent"]))
    for key, record in sorted(report["remembered"].items()):
        write("  %s  no longer in the document: drain %s, started %s, recover %s\n"
              % (escape_text(record["event"].get("event_id") or key), record["drain"] or "-", record["started"] or "-",
                 record["recover"] or "-"))


# --------------------------------------------------------------------------------------------
# start / stop without systemd
# --------------------------------------------------------------------------------------------

def read_pid(pid_file):
    """The pid in pid_file if that process is alive and is another watcher, else None.

    watcher_liveness.pid_is_watcher decides, by the one rule `status` uses too: a stale pid file's pid
    may have been given anew to this very command, which is a watcher by its command line but no
    running daemon."""
    try:
        with open(pid_file) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return None
    if not watcher_liveness.pid_is_watcher(pid):
        return None
    return pid


def write_pid(pid_file):
    replace_file(pid_file, ("%d\n" % os.getpid()).encode("ascii"), 0o644)


def start_background(args, out):
    pid = read_pid(args.pid_file)
    if pid is not None:
        out.write("running: %s already runs as pid %d\n" % (PROGRAM, pid))
        return EXIT_OK
    if args.check:
        out.write("started: would start %s (check mode)\n" % PROGRAM)
        return EXIT_OK
    command = [sys.executable, os.path.realpath(__file__), "run", "--config", args.config,
               "--pid-file", args.pid_file]
    if args.dry_run:
        command.append("--dry-run")
    log_dir = os.path.dirname(os.path.abspath(args.log_file))
    if not os.path.isdir(log_dir):
        out.write("error: the directory of --log-file %s does not exist; create it first\n" % args.log_file)
        return EXIT_USAGE
    try:
        log_handle = open_private_log(args.log_file)
    except OSError as exc:
        out.write("error: cannot open --log-file %s: %s\n" % (args.log_file, exc.strerror or exc))
        return EXIT_USAGE
    with log_handle, open(os.devnull, "rb") as null:
        proc = subprocess.Popen(command, stdin=null, stdout=log_handle, stderr=subprocess.STDOUT,
                                close_fds=True, start_new_session=True, cwd="/")
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if read_pid(args.pid_file) == proc.pid:
            out.write("started: %s runs as pid %d, logging to %s\n" % (PROGRAM, proc.pid, args.log_file))
            return EXIT_OK
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    out.write("error: %s did not start (exit %s); see %s\n" % (PROGRAM, proc.poll(), args.log_file))
    return EXIT_FAILED


def end_handlers_left_by(config_path):
    """End the handlers a killed watcher left running (as its next start would). Lines to print."""
    try:
        config = load_config(config_path if os.path.exists(config_path) else None)
        loaded = StateStore(config["state_dir"]).load(read_only=True)
    except (ConfigError, StateError) as exc:
        return ["could not look for handlers it left running: %s" % exc]
    lines = []
    for entry in loaded.running_handlers:           # each one checked by load()
        outcome = watcher_processes.end_group(entry, config["kill_grace"])
        lines.append("handler %s/%s (pid %d) it left running: %s" % (entry["phase"], entry["handler"],
                                                                     entry["pid"], outcome))
    return lines


def stop_background(args, out):
    pid = read_pid(args.pid_file)
    if pid is None:
        if os.path.exists(args.pid_file):
            if not args.check:
                os.remove(args.pid_file)
            out.write("stopped: removed the stale pid file %s\n" % args.pid_file)
        else:
            out.write("not running: no %s process in %s\n" % (PROGRAM, args.pid_file))
        return EXIT_OK
    if args.check:
        out.write("stopped: would stop pid %d (check mode)\n" % pid)
        return EXIT_OK
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and read_pid(args.pid_file) == pid:
        time.sleep(0.05)
    if read_pid(args.pid_file) == pid:
        os.kill(pid, signal.SIGKILL)
        out.write("stopped: pid %d did not stop within %gs and was killed\n" % (pid, args.timeout))
        # Without systemd nothing else ends the handler it was waiting for.
        for line in end_handlers_left_by(args.config):
            out.write("stopped: %s\n" % line)
    else:
        out.write("stopped: pid %d\n" % pid)
    try:
        os.remove(args.pid_file)
    except FileNotFoundError:
        pass
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, "%s: error: %s (see --help)\n" % (self.prog, message))


def _seconds_argument(text):
    try:
        return _imds.check_number(float(text), "--timeout", minimum=0, maximum=_imds.MAX_TIMEOUT)
    except (ValueError, _imds.ImdsInputError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, _imds.ImdsInputError)
                                         else "--timeout must be a number of seconds, got %r" % text)


def build_parser():
    parser = _Parser(prog=PROGRAM, description="Act on Azure Scheduled Events on this VM: drain, approve, "
                                               "recover. Reference: docs/docsite/rst/watcher.rst of azure_imds.scheduled_events.")
    parser.add_argument("--version", action="version", version="%s %s" % (PROGRAM, watcher_liveness.collection_version()))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    config_path = os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=config_path,
                        help="JSON configuration (default $%s or %s)" % (CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH))
    common.add_argument("--imds-url", help="IMDS base URL; overrides the configuration and $%s" % _imds.URL_ENV_VAR)
    common.add_argument("--resource-name", help="this VM's name as Resources spells it (default: ask IMDS)")
    common.add_argument("--state-dir", help="overrides state_dir of the configuration")
    run = sub.add_parser("run", parents=[common], help="poll and act (the service runs this)")
    run.add_argument("--once", action="store_true", help="poll once, finish what that poll starts, exit")
    run.add_argument("--dry-run", action="store_true", help="run no handler, approve nothing; log what it would do")
    run.add_argument("--handlers-dir", help="overrides handlers_dir of the configuration")
    run.add_argument("--log-format", choices=("text", "json"), help="overrides log_format of the configuration")
    run.add_argument("--pid-file", help="write this process's pid here while it runs")
    status = sub.add_parser("status", parents=[common], help="print the events IMDS shows and the watcher's state")
    status.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("check-config", parents=[common], help="check the configuration file and exit")
    for name, text in (("start", "start `run` in the background (hosts without systemd)"),
                       ("stop", "stop the background process named by --pid-file")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--config", default=config_path)
        cmd.add_argument("--pid-file", required=True)
        cmd.add_argument("--log-file", default=os.devnull)
        cmd.add_argument("--dry-run", action="store_true")
        cmd.add_argument("--check", action="store_true", help="only say what would be done")
        cmd.add_argument("--timeout", type=_seconds_argument, default=30.0, help="seconds to wait (default 30)")
    return parser


def effective_config(args):
    config = load_config(args.config if (args.config != DEFAULT_CONFIG_PATH or os.path.exists(args.config))
                         else None)
    overrides = {}
    for option, key in (("imds_url", "imds_url"), ("resource_name", "resource_name"), ("state_dir", "state_dir"),
                        ("handlers_dir", "handlers_dir"), ("log_format", "log_format")):
        value = getattr(args, option, None)
        if value is not None:
            overrides[key] = value
    if overrides:
        doc = dict(config)
        doc.update(overrides)
        config = check_config(doc)
    return config


def make_client(config, **overrides):
    # retry_timeout 0: one attempt per call. The loop retries on its own schedule, so retries
    # are paced like polls and the loop keeps reacting to finished handlers meanwhile. The
    # client's own per-request bound is the longest the loop ever allows (the first poll's);
    # each call passes the Deadline that applies to it.
    overrides.setdefault("request_timeout", max(config["request_timeout"], config["first_request_timeout"]))
    client = _imds.client_from_options(dict(config, retry_timeout=0), **overrides)
    # Nor does the client resend on its own when a kept-alive connection drops.
    client.resend_on_stale_connection = False
    return client


def main(argv=None, out=None):
    """The command line. Never raises but SystemExit (argparse's usage errors, exit 2): any other
    error ends in one message on standard error and an exit status."""
    out = out or sys.stdout
    try:
        return _main(argv, out)
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROGRAM)
        return EXIT_FAILED
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write("%s: internal error: %s. Please report it with this line.\n"
                         % (PROGRAM, escape_text(describe_internal_error(exc))))
        return EXIT_FAILED


def _main(argv, out):
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help(out)
        return EXIT_USAGE
    if args.command in ("start", "stop"):
        try:
            return start_background(args, out) if args.command == "start" else stop_background(args, out)
        except OSError as exc:
            sys.stderr.write("%s: %s: %s\n" % (PROGRAM, args.command, escape_text(str(exc))))
            return EXIT_FAILED
    try:
        config = effective_config(args)
        if (config["imds_url"] or os.environ.get(_imds.URL_ENV_VAR) or "").startswith("https:") \
                and sys.modules.get("ssl", False) is None:
            raise ConfigError("imds_url is https, but IMDS has no TLS endpoint and the watcher speaks plain HTTP "
                              "only: use http://169.254.169.254 (or the mock's http:// URL).")
        client = make_client(config)
    except (ConfigError, _imds.ImdsInputError) as exc:
        sys.stderr.write("%s: configuration error: %s\n" % (PROGRAM, escape_text(str(exc))))
        return EXIT_USAGE
    if args.command == "check-config":
        out.write("%s: the configuration %s is valid; a stop may take up to %ds (the unit's TimeoutStopSec must be "
                  "at least that)\n" % (PROGRAM, args.config, stop_timeout(config)))
        return EXIT_OK
    store = StateStore(config["state_dir"])
    if args.command == "status":
        return status_command(args, config, client, store, out)
    return run_command(args, config, client, store, out)


def daemon_report(config, now):
    """Is the daemon alive and polling? From the status file it keeps in its state directory."""
    status = watcher_liveness.read_status_file(config["state_dir"])
    exit_status, word, reason = watcher_liveness.health(status, config, now)
    return {"health": word, "reason": reason, "exit_status": exit_status, "status_file": status}


def status_command(args, config, client, store, out):
    """Exit status: 0 healthy, 1 degraded (polls failing for a minute, or IMDS does not answer
    `status` itself), 3 down (not running, or its status file stopped moving)."""
    now = time.time()
    daemon = daemon_report(config, now)
    try:
        report = status_report(config, client, store)
    except (_imds.ImdsError, StateError) as exc:
        if args.json:
            out.write(json.dumps({"daemon": daemon, "error": str(exc)}, indent=2, sort_keys=True, default=str) + "\n")
        else:
            out.write("".join(escape_text(line) + "\n" for line in watcher_liveness.describe_daemon(daemon, now)))
        sys.stderr.write("%s: status: %s\n" % (PROGRAM, escape_text(str(exc))))
        return max(EXIT_FAILED, daemon["exit_status"])
    finally:
        client.close()
    report["daemon"] = daemon
    if args.json:
        out.write(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        print_status(report, out)
        out.write("".join(escape_text(line) + "\n" for line in watcher_liveness.describe_daemon(daemon, now)))
    return daemon["exit_status"]


def run_command(args, config, client, store, out):
    log = Logger(out, config["log_format"])
    version = watcher_liveness.collection_version()
    # A dry run writes nothing into the state directory, its status file included.
    telemetry = watcher_liveness.Telemetry(config, log, version, write_status=not args.dry_run)
    watcher = Watcher(config, client, log, store, dry_run=args.dry_run, telemetry=telemetry)

    def stop(signum, _frame):
        again = watcher.stopping
        watcher.mark_stop()
        log("info", "shutdown", "received %s%s" % (signal.Signals(signum).name, "; cutting the running handler short"
                                                   if again else ""))
        watcher.abandon_get()

    def hang_up(signum, _frame):
        # No reload: a configuration changed under a running drain would split one event between two
        # policies. Logged, so that a hangup (a closed terminal, a stray kill -HUP) is no silent death.
        log("warning", "sighup", "received %s: ignored, the watcher goes on; it does not reload its configuration "
            "(restart it to apply a change)" % signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hang_up)
    published = False
    try:
        log("info", "startup", "%s %s (pid %d)%s" % (PROGRAM, version, os.getpid(), "; systemd watchdog every %gs"
                                                     % telemetry.watchdog if telemetry.watchdog else ""),
            version=version, pid=os.getpid())
        # The state directory first: created, locked (one watcher per directory), read and written
        # once, backing off while it cannot be used, before anything else is written: the pid
        # file and the status file of a watcher that may not start are nobody's to overwrite.
        if not watcher.read_state():
            return EXIT_OK
        if args.pid_file:
            try:
                write_pid(args.pid_file)
            except OSError as exc:
                log("error", "fatal", "cannot write the pid file %s (%s): give a writable --pid-file"
                    % (args.pid_file, exc.strerror or exc))
                return EXIT_USAGE
        published = True
        telemetry.start()
        # Leftovers of a killed predecessor end first: IMDS may keep the watcher waiting for long.
        if not watcher.end_leftovers():
            return EXIT_OK
        if not watcher.resolve_name(keep_trying=not args.once):
            return EXIT_FAILED if args.once and not watcher.stopping else EXIT_OK
        if not watcher.load_state():
            return EXIT_OK
        return watcher.run_once() if args.once else watcher.run_forever()
    except StateLocked as exc:
        log("error", "state_locked", str(exc), holder=exc.holder)
        return EXIT_LOCKED
    except (StateError, OSError) as exc:
        log("error", "fatal", "cannot keep the state in %s: %s. Fix the directory (it must be writable by the "
            "watcher) and restart." % (config["state_dir"], exc))
        return EXIT_FAILED
    except Exception as exc:  # pylint: disable=broad-except
        log("error", "fatal", "internal error outside the loop: %s" % describe_internal_error(exc))
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if published:
            telemetry.stopping()
        else:
            # Neither the status file nor the metrics textfile is this watcher's to write (yet).
            telemetry.notify("STOPPING=1")
        client.close()
        store.unlock()
        if args.pid_file and read_pid(args.pid_file) in (os.getpid(), None):
            try:
                os.remove(args.pid_file)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main())
