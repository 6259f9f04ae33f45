# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the watcher decides, with no I/O: no clock, no files, no HTTP, no processes.

The Planner keeps one record per EventId (the durable state) and turns each polled document and
each finished handler phase into log lines, queued phase jobs and due approvals. The daemon
carries them out, persists the records before it starts a phase, and reports back. Time is always passed in,
so tests drive it with plain numbers: the wall clock (seconds since the epoch) where a decision is
about NotBefore or what is kept on disk, the monotonic clock of this run for approval retries, so
that a step of the wall clock never delays or hurries one. A decision against NotBefore is made
afresh at each poll: one taken under a wrong wall clock is never final.

Record fields (all JSON): event (the last normalised event), mine, status, gone, policy,
policy_reason, drain / started / recover (phase outcomes), approval, approval_retry_at (the
monotonic time of this run's next try; a new run tries at once), seen_incarnation (the last
DocumentIncarnation that held the event), missing_polls (documents in a row without it), gone_at
(when it was taken as gone). records.py holds their schema (check_record).
"""

import json
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event
# One rule for when an event is gone, shared with the notify action and the EDA event source.
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import GONE_AFTER_MISSING_POLLS
# One rule for an event first seen Started (the Scheduled Events Policy's automatic approval of a
# user event), shared with the wait action plugin and the EDA event source.
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import (
    AUTO_APPROVED, describe_unseen_start, unseen_start)

from .log import Log
from .records import event_key, new_record, not_before_epoch, owes_recover

SCHEDULED = "Scheduled"
STARTED = "Started"
# A phase job's outcome besides True (succeeded) and False (failed): a stop of the watcher kept
# handlers from starting or cut one short.
STOPPED = "stopped"
# _skip_reason's answer for a drain whose NotBefore has passed by the wall clock: not final.
_NOT_BEFORE_PASSED = "NotBefore has passed"
# A finished event of this VM is remembered this long, so that one that comes back (a transient
# document without it) is never drained a second time.
REMEMBER_FINISHED_SECONDS = 86400.0


class Job(object):
    """One phase (the phase's handlers in order) to run for one event."""

    __slots__ = ("key", "phase", "event")

    def __init__(self, key, phase, event):
        self.key = key
        self.phase = phase
        self.event = event

    def __repr__(self):
        return "Job(%s, %s)" % (self.phase, self.event.get("event_id"))


def describe(event):
    parts = ["%s %s" % (event.get("event_type"), event.get("event_status"))]
    if event.get("not_before"):
        parts.append("NotBefore %s" % event["not_before"])
    if event.get("event_source"):
        parts.append("source %s" % event["event_source"])
    if event.get("duration_in_seconds") is not None:
        parts.append("duration %ss" % event["duration_in_seconds"])
    parts.append("resources %s" % ",".join(event.get("resources") or []))
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# Approval policy
# --------------------------------------------------------------------------------------------


def approval_policy(event, resource_name, approval):
    """(policy, reason) for a Scheduled event that names this VM.

    Order: leader_only can only withhold; then the first matching rule; then the User and short
    Freeze shortcuts; then the default policy.
    """
    if approval["leader_only"] and not _event.is_leader(event, resource_name):
        leader = (event.get("resources") or ["(none)"])[0]
        return "none", "leader_only: %s approves, the first name in Resources" % leader
    for index, rule in enumerate(approval["rules"]):
        if rule["event_types"] is not None and event.get("event_type") not in rule["event_types"]:
            continue
        if rule["event_sources"] is not None and event.get("event_source") not in rule["event_sources"]:
            continue
        return rule["policy"], "approval rule %d" % index
    if approval["user_events_at_once"] and event.get("event_source") == "User":
        return "immediate", "user_events_at_once: EventSource is User"
    limit = approval["freeze_max_duration"]
    duration = event.get("duration_in_seconds")
    if (limit is not None and event.get("event_type") == "Freeze" and isinstance(duration, int)
            and not isinstance(duration, bool) and 0 <= duration <= limit):
        return "immediate", "a Freeze of %ss is within freeze_max_duration (%ss)" % (duration, limit)
    return approval["policy"], "default policy"


# --------------------------------------------------------------------------------------------
# Handlers: which run, for how long, with what input
# --------------------------------------------------------------------------------------------

def applies(handler, event):
    types = handler.get("event_types")
    return types is None or event.get("event_type") in types


def handler_time_limit(timeout, phase, not_before_at, now_epoch, kill_grace):
    """(seconds, reason) a handler may run. A drain handler's SIGKILL (timeout + kill_grace) lands
    no later than NotBefore (not_before_at, seconds since the epoch), so its limit is cut to
    NotBefore - kill_grace; 0 or less: do not start."""
    if phase != "drain" or not_before_at is None:
        return timeout, "timeout"
    until_not_before = not_before_at - now_epoch - kill_grace
    if until_not_before < timeout:
        return until_not_before, "NotBefore"
    return timeout, "timeout"


def handler_environment(event, phase, resource_name):
    """The SE_* variables of a handler. Values are plain strings; a handler never gets a shell line."""
    duration = event.get("duration_in_seconds")
    return {
        "SE_EVENT_ID": event.get("event_id") or "",
        "SE_EVENT_TYPE": event.get("event_type") or "",
        "SE_EVENT_STATUS": event.get("event_status") or "",
        "SE_NOT_BEFORE": event.get("not_before") or "",
        "SE_RESOURCES": " ".join(event.get("resources") or []),
        "SE_EVENT_SOURCE": event.get("event_source") or "",
        "SE_DURATION": "" if duration is None else str(duration),
        "SE_DESCRIPTION": event.get("description") or "",
        "SE_PHASE": phase,
        "SE_RESOURCE_NAME": resource_name or "",
    }


def handler_input(event, phase, resource_name):
    """The JSON a handler reads on standard input: the event as the modules return it."""
    document = dict(event)
    document["phase"] = phase
    document["resource_name"] = resource_name
    return json.dumps(document, sort_keys=True) + "\n"


# --------------------------------------------------------------------------------------------

class Planner(object):
    """Records plus a FIFO of phase jobs. Handlers never run in parallel: one job at a time."""

    def __init__(self, resource_name, approval, records=None):
        self.resource_name = resource_name
        self.approval = approval
        self.records = records if records is not None else {}
        self.queue = []        # [(key, phase)] waiting
        self.running = None    # (key, phase) of the job being run
        self._noted = set()    # (incarnation, index, text) of events set aside, logged once
        self._now = None
        # Keys whose drain waits because NotBefore looked passed by the wall clock: decided again
        # at each poll, and skipped for good only once the event is no longer Scheduled.
        self._late_drains = set()

    # -- helpers ---------------------------------------------------------------------------

    def _eid(self, key):
        return self.records[key]["event"].get("event_id") or key

    def _queued(self, key, phase):
        return (key, phase) in self.queue or self.running == (key, phase)

    def _enqueue(self, key, phase):
        if not self._queued(key, phase):
            self.queue.append((key, phase))

    def has_work(self):
        return bool(self.queue) or self.running is not None

    def pending_approvals(self, now):
        """Events whose approval is due now (first try, or a retry whose backoff has passed). now
        is the monotonic clock approval_failed() got its retry_at from."""
        due = []
        for key, record in sorted(self.records.items()):
            if not record["mine"] or record["gone"] or record["status"] != SCHEDULED:
                continue
            wanted = (record["policy"] == "immediate"
                      or (record["policy"] == "after_drain" and record["drain"] == "succeeded"))
            if not wanted or record["approval"] not in (None, "retry"):
                continue
            if record["approval"] == "retry" and (record["approval_retry_at"] or 0) > now:
                continue
            due.append(key)
        return due

    # -- after a restart -------------------------------------------------------------------

    def restore(self):
        """Settle phases a kill or restart cut short. Drain and started are at most once per event:
        an interrupted one is not run again (a handler may have done half its work and could do
        harm twice) and an interrupted drain is never approved. Recover is at least once: it runs
        again, since forgetting it would leave the VM drained."""
        actions = []
        for key, record in sorted(self.records.items()):
            eid = self._eid(key)
            if record["approval"] == "retry":
                # Its time was on the monotonic clock of the run that wrote it: try again at once.
                record["approval_retry_at"] = None
            if record["drain"] == "running":
                record["drain"] = "interrupted"
                if record["policy"] == "after_drain" and record["approval"] is None:
                    record["approval"] = "withheld"
                actions.append(Log(
                    "error", "drain_interrupted",
                    "event %s: the drain was cut short by a restart of the watcher; it is not run again "
                    "(at most once per event) and the event is not approved: the platform starts it at "
                    "NotBefore %s" % (eid, record["event"].get("not_before") or "(none)"),
                    event_id=eid, phase="drain"))
            if record["started"] == "running":
                record["started"] = "interrupted"
                actions.append(Log(
                    "error", "started_interrupted",
                    "event %s: the started handlers were cut short by a restart; not run again" % eid,
                    event_id=eid, phase="started"))
            if record["recover"] == "running":
                record["recover"] = None
                actions.append(Log(
                    "warning", "recover_interrupted",
                    "event %s: the recover handlers were cut short by a restart; they run again (at least "
                    "once per event)" % eid, event_id=eid, phase="recover"))
        return actions

    # -- each poll -------------------------------------------------------------------------

    def observe(self, events, now_epoch, incarnation=None):
        """Fold one successfully polled document into the records. Returns log actions; jobs go
        into the queue and approvals come from pending_approvals(). incarnation is the document's
        DocumentIncarnation (None: unknown, so only polls in a row count)."""
        self._now = now_epoch
        actions = []
        present = set()
        for index, event in enumerate(events):
            event_id = event.get("event_id")
            if not isinstance(event_id, str) or not event_id.strip():
                actions.extend(self._set_aside(index, event, incarnation))
                continue
            key = event_key(event_id)
            present.add(key)
            record = self.records.get(key)
            if record is None or (record["gone"] and not record["mine"]):
                seen_before = record is not None
                record = new_record(event, _event.affects(event, self.resource_name), incarnation)
                self.records[key] = record
                actions.extend(self._first_sight(key, record, seen_before))
            else:
                if record["gone"]:
                    actions.extend(self._came_back(key, record))
                actions.extend(self._update(key, record, event))
                record["seen_incarnation"] = incarnation
                record["missing_polls"] = 0
            if record["mine"]:
                self._plan(key, record)
                actions.extend(self._settle_late_drain(key, record))
        for key, record in sorted(self.records.items()):
            if key in present:
                continue
            eid = self._eid(key)
            if not record["gone"]:
                record["missing_polls"] += 1
                if not self._is_gone(record, incarnation):
                    actions.append(Log("info", "event_missing", "event %s: missing from the document (incarnation "
                                       "%s); not taken as gone until a newer document or %d in a row lack it"
                                       % (eid, incarnation, GONE_AFTER_MISSING_POLLS), event_id=eid))
                    continue
                record["gone"] = True
                record["gone_at"] = now_epoch
                if not record["mine"]:
                    text = "left the document (not this VM)"
                elif self._recover_due(key, record):
                    text = "left the document (finished or cancelled): recover is due"
                else:
                    text = "left the document; no handler ran for it, nothing to recover"
                actions.append(Log("info", "event_gone", "event %s: %s" % (eid, text), event_id=eid,
                                   mine=record["mine"]))
                actions.extend(self._settle_late_drain(key, record))
            # Also after a restart: an event that vanished while the watcher was down still gets
            # its recover.
            if record["mine"] and record["recover"] is None and self._recover_due(key, record):
                self._enqueue(key, "recover")
        self._forget_finished()
        return actions

    @staticmethod
    def _is_gone(record, incarnation):
        seen = record["seen_incarnation"]
        if incarnation is not None and seen is not None and incarnation > seen:
            return True
        return record["missing_polls"] >= GONE_AFTER_MISSING_POLLS

    def _set_aside(self, index, event, incarnation):
        """An event whose EventId could not be read: nothing can be done for it (state is keyed by
        it, an approval names it), so it is logged once per document incarnation and left alone."""
        text = describe(event)
        note = (incarnation, index, text)
        if note in self._noted:
            return []
        if self._noted and next(iter(self._noted))[0] != incarnation:
            self._noted = set()
        self._noted.add(note)
        return [Log("error", "event_set_aside", "event #%d of document incarnation %s has no readable EventId "
                    "(%r); set aside, not acted on: %s" % (index + 1, incarnation, event.get("event_id"), text),
                    incarnation=incarnation)]

    def _came_back(self, key, record):
        eid = self._eid(key)
        record["gone"] = False
        record["gone_at"] = None
        ran = [phase for phase in ("drain", "started", "recover") if record[phase] is not None]
        return [Log("warning", "event_back", "event %s: back in the document after it was taken as gone; what "
                    "already ran (%s) is not run again: a drain runs at most once per event"
                    % (eid, ", ".join("%s %s" % (p, record[p]) for p in ran) or "nothing"), event_id=eid)]

    def _first_sight(self, key, record, seen_before=True):
        """Log lines (and the approval policy) for an event that names this VM for the first time.
        seen_before: whether an earlier document held it (then it cannot be first seen Started).
        The record is persisted, so a restarted watcher never sees the same event first again."""
        event = record["event"]
        eid = event.get("event_id")
        if not record["mine"]:
            return [Log("info", "event_seen", "event %s: %s: does not name this VM (%s); logged, not acted on"
                        % (eid, describe(event), self.resource_name), event_id=eid, mine=False,
                        event_type=event.get("event_type"), event_status=event.get("event_status"))]
        actions = [Log("info", "event_seen", "event %s: %s: names this VM (%s)"
                       % (eid, describe(event), self.resource_name), event_id=eid, mine=True,
                       event_type=event.get("event_type"), event_status=event.get("event_status"),
                       not_before=event.get("not_before"))]
        reason = unseen_start(event, seen_before)
        if reason is not None:
            actions.append(Log("warning", reason, "event %s: %s with EventSource %s was first seen Started: %s%s"
                               % (eid, event.get("event_type"), event.get("event_source"),
                                  describe_unseen_start(reason),
                                  "; to drain before user reboots and redeploys, turn automaticallyApprove off "
                                  "with azure_imds.scheduled_events.scheduled_events_policy"
                                  if reason == AUTO_APPROVED else ""),
                               event_id=eid, event_type=event.get("event_type"),
                               event_source=event.get("event_source")))
        if record["status"] == SCHEDULED:
            policy, reason = approval_policy(event, self.resource_name, self.approval)
            record["policy"], record["policy_reason"] = policy, reason
            text = {"after_drain": "approve once every drain handler has succeeded",
                    "immediate": "approve at once, no drain",
                    "none": "never approve; the platform starts it at NotBefore"}[policy]
            actions.append(Log("info", "policy", "event %s: approval policy %s (%s): %s"
                               % (eid, policy, reason, text), event_id=eid, policy=policy, reason=reason))
        return actions

    def _update(self, key, record, event):
        actions = []
        eid = event.get("event_id")
        old_status = record["status"]
        record["event"] = dict(event)
        record["status"] = event.get("event_status")
        if old_status != record["status"]:
            actions.append(Log("info", "event_changed", "event %s: %s -> %s%s"
                               % (eid, old_status, record["status"], "" if record["mine"] else " (not this VM)"),
                               event_id=eid, mine=record["mine"], event_status=record["status"]))
        if not record["mine"] and _event.affects(event, self.resource_name):
            # Resources now name this VM (they could not be read before, or IMDS added it): from
            # here on the event is this VM's. The other way round it stays this VM's: what ran for
            # it still owes its recover.
            record["mine"] = True
            actions.extend(self._first_sight(key, record))
        return actions

    def _plan(self, key, record):
        if record["status"] == SCHEDULED and record["drain"] is None and record["policy"] in ("after_drain", "none"):
            self._enqueue(key, "drain")
        if record["status"] == STARTED and record["started"] is None:
            self._enqueue(key, "started")

    def _settle_late_drain(self, key, record):
        """A drain held back because NotBefore looked passed is skipped for good once the event is
        no longer Scheduled: a fact of the document, not of the clock."""
        if key not in self._late_drains or (not record["gone"] and record["status"] == SCHEDULED):
            return []
        self._late_drains.discard(key)
        if (key, "drain") in self.queue:
            self.queue.remove((key, "drain"))
        if record["drain"] is not None:
            return []
        record["drain"] = "skipped"
        eid = self._eid(key)
        return [Log("warning", "phase_skipped", "event %s: drain handlers not run: NotBefore %s had passed by this "
                    "VM's clock and the event %s: skipped for good" % (
                        eid, record["event"].get("not_before"),
                        "left the document" if record["gone"] else "is now %s" % record["status"]),
                    event_id=eid, phase="drain")]

    def _recover_due(self, key, record):
        # A phase still running may yet owe a recover; the recover job waits behind it and checks again.
        return owes_recover(record) or self.running in ((key, "drain"), (key, "started"))

    def _forget_finished(self):
        for key in [k for k, r in self.records.items() if r["gone"]]:
            record = self.records[key]
            if self._queued(key, "recover") or self._queued(key, "drain") or self._queued(key, "started"):
                continue
            if record["mine"] and owes_recover(record) and record["recover"] not in ("succeeded", "failed"):
                continue
            if record["mine"] and not self._long_gone(record):
                continue
            del self.records[key]

    def _long_gone(self, record):
        if self._now is None or record["gone_at"] is None:
            return False
        return self._now - record["gone_at"] >= REMEMBER_FINISHED_SECONDS

    def finished(self, key):
        """True when nothing more will be done for this event (gone, and its recover done or not owed)."""
        record = self.records.get(key)
        if record is None:
            return True
        if not record["gone"] or any(self._queued(key, phase) for phase in ("drain", "started", "recover")):
            return False
        return not (record["mine"] and owes_recover(record) and record["recover"] not in ("succeeded", "failed"))

    # -- jobs ------------------------------------------------------------------------------

    def next_job(self, now_epoch):
        """Pop the next job that still makes sense and mark it running (the caller persists the
        records before it starts a handler). Returns (job or None, log actions)."""
        actions = []
        while self.running is None and self.queue:
            key, phase = self.queue.pop(0)
            record = self.records.get(key)
            if record is None:
                continue
            reason = self._skip_reason(record, phase, now_epoch)
            eid = self._eid(key)
            if reason == _NOT_BEFORE_PASSED:
                actions.extend(self._hold_drain(key, record, now_epoch))
                continue
            if phase == "drain" and key in self._late_drains:
                self._late_drains.discard(key)
                if reason is None:
                    actions.append(Log("info", "drain_resumed", "event %s: NotBefore %s is ahead again by this "
                                       "VM's clock: the drain held back runs now"
                                       % (eid, record["event"].get("not_before")), event_id=eid, phase="drain"))
            if reason:
                if phase == "drain":
                    record["drain"] = "skipped"
                elif phase == "started":
                    record["started"] = "skipped"
                actions.append(Log("warning" if phase == "drain" else "info", "phase_skipped",
                                   "event %s: %s handlers not run: %s" % (eid, phase, reason),
                                   event_id=eid, phase=phase))
                self._forget_finished()
                continue
            record[phase] = "running"
            self.running = (key, phase)
            return Job(key, phase, dict(record["event"])), actions
        return None, actions

    def _skip_reason(self, record, phase, now_epoch):
        if phase == "drain":
            if record["gone"]:
                return "the event left the document before its drain could start"
            if record["status"] != SCHEDULED:
                return "the event is already %s" % record["status"]
            not_before = not_before_epoch(record["event"])
            if not_before is not None and not_before <= now_epoch:
                return _NOT_BEFORE_PASSED
        elif phase == "started":
            if record["gone"]:
                return "the event ended before its started handlers could run"
        elif phase == "recover":
            if not owes_recover(record):
                return "no drain or started handler ran for it"
        return None

    def _hold_drain(self, key, record, now_epoch):
        """NotBefore has passed by the wall clock, yet the event is still Scheduled. A drain must
        end by NotBefore, so it does not start now; but the wall clock may be wrong (a step, a jump
        that NTP undoes), so nothing is final: the next poll plans the drain again and decides
        afresh. Logged once per hold."""
        if key in self._late_drains:
            return []
        self._late_drains.add(key)
        eid = self._eid(key)
        return [Log("warning", "drain_held", "event %s: drain not started: NotBefore %s has passed by this VM's "
                    "clock (%s); a drain must end by NotBefore. Decided again at each poll while the event is "
                    "Scheduled (the clock may be wrong); skipped for good once it starts or leaves"
                    % (eid, record["event"].get("not_before"),
                       time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_epoch))),
                    event_id=eid, phase="drain")]

    def job_finished(self, key, phase, ok, summary):
        """Record a phase's outcome (ok: True, False or STOPPED). Returns log actions; approvals
        follow from pending_approvals()."""
        self.running = None
        record = self.records.get(key)
        if record is None:
            return []
        eid = self._eid(key)
        if ok == STOPPED:
            return self._stopped(key, record, phase, summary)
        record[phase] = "succeeded" if ok else "failed"
        actions = [Log("info" if ok else "error", "phase_finished", "event %s: %s %s (%s)"
                       % (eid, phase, "succeeded" if ok else "FAILED", summary),
                       event_id=eid, phase=phase, ok=ok)]
        if phase == "drain" and record["policy"] == "after_drain":
            if not ok:
                record["approval"] = "withheld"
                actions.append(Log("error", "approval_withheld",
                                   "event %s: not approving because the drain failed; the platform starts the "
                                   "event at NotBefore %s" % (eid, record["event"].get("not_before") or "(none)"),
                                   event_id=eid))
            elif record["gone"] or record["status"] != SCHEDULED:
                actions.append(Log("info", "approval_not_needed", "event %s: drained, but it is %s: nothing to "
                                   "approve" % (eid, "gone" if record["gone"] else record["status"]),
                                   event_id=eid))
        if phase == "drain" and record["policy"] == "none" and ok:
            actions.append(Log("info", "approval_not_needed", "event %s: drained; policy none: not approving, the "
                               "platform starts it at NotBefore %s" % (eid, record["event"].get("not_before")),
                               event_id=eid))
        self._forget_finished()
        return actions

    def _stopped(self, key, record, phase, summary):
        eid = self._eid(key)
        if phase == "recover":
            # At least once: the recover runs again, from its first handler, at the next start.
            record["recover"] = None
            return [Log("warning", "recover_interrupted", "event %s: the recover was cut short by the stop (%s); "
                        "it runs again at the next start" % (eid, summary), event_id=eid, phase=phase)]
        actions = self.handler_killed(key, phase)
        actions.insert(0, Log("error", "phase_finished", "event %s: %s INTERRUPTED by the stop of the watcher (%s); "
                              "not run again (at most once per event)" % (eid, phase, summary),
                              event_id=eid, phase=phase, ok=False))
        self._forget_finished()
        return actions

    def handler_killed(self, key, phase):
        """A handler of this phase was ended before it could finish (a stop, or left over from a
        killed watcher): the phase is interrupted, a drain's event is not approved, a recover runs
        again."""
        record = self.records.get(key)
        if record is None:
            return []
        eid = self._eid(key)
        if phase == "recover":
            if record["recover"] != "succeeded":
                record["recover"] = None
            return []
        if record.get(phase) not in ("failed", "interrupted"):
            record[phase] = "interrupted"
        actions = []
        if phase == "drain" and record["policy"] in ("after_drain", "none") and record["approval"] in (None, "retry"):
            record["approval"] = "withheld"
            record["approval_retry_at"] = None
            actions.append(Log("error", "approval_withheld", "event %s: not approving: its drain did not finish; the "
                               "platform starts the event at NotBefore %s"
                               % (eid, record["event"].get("not_before") or "(none)"), event_id=eid))
        return actions

    def approval_sent(self, keys):
        actions = []
        for key in keys:
            record = self.records.get(key)
            if record is None:
                continue
            record["approval"] = "sent"
            record["approval_retry_at"] = None
            eid = self._eid(key)
            actions.append(Log("info", "approval_sent", "event %s: approval sent (policy %s: %s)"
                               % (eid, record["policy"], record["policy_reason"]), event_id=eid,
                               policy=record["policy"]))
        return actions

    def approval_failed(self, keys, error, retry_at):
        """retry_at: epoch of the next try, or None when the error is not worth retrying."""
        actions = []
        for key in keys:
            record = self.records.get(key)
            if record is None:
                continue
            eid = self._eid(key)
            record["approval"] = "retry" if retry_at is not None else "failed"
            record["approval_retry_at"] = retry_at
            actions.append(Log("error", "approval_failed", "event %s: approval failed: %s%s"
                               % (eid, error, "; trying again while it is Scheduled" if retry_at is not None
                                  else "; not retried"), event_id=eid))
        return actions
