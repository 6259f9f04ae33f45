# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The loop: poll, decide, run handlers, approve, persist; each iteration inside one guarded boundary."""

import queue
import threading
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _event, _retry

from . import EXIT_FAILED, EXIT_OK, PROGRAM, liveness, notify, processes
from .decisions import Planner
from .handlers import PhaseRunner
from .log import describe_internal_error
from .pacing import INTERNAL, MAX_BACKOFF, FailureStreak, Pacer, backoff_for, describe_failure
from .records import check_record, not_before_epoch
from .state import StateError, StateLocked


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
        self._policy = retry_policy or _retry.RetryPolicy()
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
        self.telemetry = telemetry or liveness.Telemetry(config, log, liveness.UNKNOWN_VERSION,
                                                         wall_clock=self._wall_clock, environ={},
                                                         write_status=False)
        if store is not None:
            store.on_write = self.telemetry.state_written

    # -- start -----------------------------------------------------------------------------

    def _deadline(self, seconds):
        return _edge.Deadline(seconds, clock=self._clock)

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
                except _edge.ImdsError as exc:
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
            self.telemetry.polled(liveness.poll_outcome(exc, failure), self._clock() - started,
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
            outcome = processes.end_group(entry, self.config["kill_grace"])
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
        self.notifications = notify.Notifications(self.config, self.resource_name, self.telemetry.version,
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
        for line in notify.token_files_readable(self.config):
            self.log("warning", "notify_token", line)
        if self.dry_run:
            return
        if self.store is not None:
            self.store.notify = self.notifications
        self.senders = notify.senders_for(self.config, self.notifications, self.telemetry.version, self.log,
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
        except _edge.ImdsError as exc:
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
        actions = self.planner.observe(document.events, self._wall_clock(), document.incarnation)
        self.telemetry.planned(actions)
        self.log.apply(actions)
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
        unusable = [k for k in keys if not _event.is_event_id(self.planner.records[k]["event"]["event_id"])]
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
        except _edge.ImdsError as exc:
            failure = self.client.last_failures[-1] if self.client.last_failures else None
            rule = _retry.retry_rule_for(failure) if failure is not None else None
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
