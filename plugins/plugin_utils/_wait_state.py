# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This plugin_utils is PRIVATE to this collection: its API may change in any release.
#
# The wait of the scheduled_event_wait action plugin as a predicate (Goal) plus a clock (Waiter).
# Nothing here knows about Ansible's plumbing: the action plugin hands in a function that runs
# the scheduled_event_info module, a connection reset and the clock, so unit tests drive every
# path with a fake clock and scripted module results and never really wait.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _event
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import AUTO_APPROVED, unseen_start

try:
    import jmespath
    from jmespath.exceptions import JMESPathError
except ImportError:  # pragma: no cover - the unit tests set jmespath to None instead
    jmespath = None
    JMESPathError = Exception

STATES = ("absent", "present", "started", "completed", "changed")
DEFAULT_STATE = "absent"

# Seconds one run of the info module watches IMDS on the host before it reports back. Each run
# costs a module transfer and a Python start on the host; a longer run saves CPU, a shorter one
# only matters for noticing a vanished connection sooner, which the host's own failure reports.
CHUNK_SECONDS = 120.0


WATCH_OPTIONS = ("changed_since", "max_wait", "poll_interval")

# Seconds a module run may take beyond its own end (module transfer, Python start, the answer's way
# back) before the host counts as gone. A VM that is reset hard leaves an SSH session that neither
# answers nor fails; only a connection reset ends it.
ANSWER_GRACE = 30.0


class WaitInputError(ValueError):
    """The task's options cannot describe a wait. ``str()`` names the problem and the fix."""


# --------------------------------------------------------------------------------------------
# The condition
# --------------------------------------------------------------------------------------------

def jmespath_truthy(value):
    """JMESPath's own truth rule (as its ``||``, ``&&`` and filters apply it): 0 is true."""
    return not (value is None or value is False or value == "" or value == [] or value == {})


class Condition:
    """A JMESPath expression compiled once, evaluated against the raw IMDS document."""

    def __init__(self, expression):
        if jmespath is None:
            raise WaitInputError(
                "condition needs the Python library jmespath on the Ansible controller, and it is not "
                "installed for the Python that runs ansible-playbook. Install it with `pip install jmespath` "
                "in that environment, or wait with state alone.")
        if not isinstance(expression, str) or not expression.strip():
            raise WaitInputError("condition is empty. Give a JMESPath expression such as "
                                 "\"length(Events[?EventType=='Reboot']) == `0`\", or leave condition out.")
        self.expression = expression
        try:
            self._compiled = jmespath.compile(expression)
        except JMESPathError as exc:
            raise WaitInputError(
                "condition %r is not a valid JMESPath expression: %s. Check the quoting: literals go in "
                "backticks (`0`), strings in single quotes ('Reboot')." % (expression, _one_line(exc)))

    def holds(self, document):
        try:
            return jmespath_truthy(self._compiled.search(document))
        except JMESPathError as exc:
            raise WaitInputError(
                "condition %r cannot be evaluated against the Scheduled Events document: %s. The document "
                "has the keys DocumentIncarnation (a number) and Events (a list of objects with EventId, "
                "EventType, EventStatus, Resources, NotBefore, ...)." % (self.expression, _one_line(exc)))


def _one_line(exc):
    return " ".join(str(exc).split())


# --------------------------------------------------------------------------------------------
# The predicate
# --------------------------------------------------------------------------------------------

class Snapshot:
    """What one successful run of the info module saw."""

    def __init__(self, result):
        self.document = result.get("document")
        self.incarnation = result.get("document_incarnation")
        self.events = list(result.get("events") or [])
        self.resource_name = result.get("resource_name")

    def describe(self):
        if not self.events:
            return "DocumentIncarnation %s with no matching event" % self.incarnation
        listed = ", ".join("%s %s %s" % (e.get("event_type"), e.get("event_id"), e.get("event_status"))
                           for e in self.events)
        return "DocumentIncarnation %s with %d matching event%s (%s)" % (
            self.incarnation, len(self.events), "" if len(self.events) == 1 else "s", listed)


class Goal:
    """When the wait is over.

    With ``condition`` and no ``state`` the condition alone decides; with both, both must hold;
    with neither, the state is ``absent``.
    """

    def __init__(self, state=None, condition=None, since_incarnation=None):
        if state is not None and state not in STATES:
            raise WaitInputError("state %r is not one of %s." % (state, ", ".join(STATES)))
        if since_incarnation is not None and state != "changed":
            raise WaitInputError(
                "since_incarnation applies only to state=changed (it is the DocumentIncarnation to move away "
                "from); set state: changed or leave since_incarnation out.")
        if state is None and condition is None:
            state = DEFAULT_STATE
        self.state = state
        self.condition = condition
        self.since_incarnation = since_incarnation
        self.baseline_incarnation = since_incarnation
        self.baseline_event_ids = None

    def first_read_state(self):
        """The state the info module can check on the first read (watch_unless_state), or None: when it
        does not hold there, the goal does not either (completed: the baseline is that read's events,
        so it holds at once only without any). changed and a condition alone are decided here only."""
        return {"absent": "absent", "completed": "absent", "present": "present", "started": "started"}.get(self.state)

    def begin(self, snapshot):
        """Remember what "when the wait began" means: called with the first document read."""
        if self.baseline_incarnation is None:
            self.baseline_incarnation = snapshot.incarnation
        if self.baseline_event_ids is None:
            self.baseline_event_ids = [e.get("event_id") for e in snapshot.events]

    def reached(self, snapshot):
        if self.state is not None and not self._state_holds(snapshot):
            return False
        return self.condition is None or self.condition.holds(snapshot.document)

    def _state_holds(self, snapshot):
        if self.state == "absent":
            return not snapshot.events
        if self.state == "present":
            return bool(snapshot.events)
        if self.state == "started":
            return any(e.get("event_status") == "Started" for e in snapshot.events)
        if self.state == "completed":
            # Compare against every event of the document, not only the matching ones: an event that
            # merely changed status (Scheduled to Started) has not completed.
            remaining = _event.ScheduledEvents(snapshot.document)
            return all(remaining.find(event_id) is None for event_id in self.baseline_event_ids)
        return snapshot.incarnation != self.baseline_incarnation

    def describe(self):
        parts = []
        if self.state == "completed" and self.baseline_event_ids:
            parts.append("state=completed (EventId %s to leave the document)" % ", ".join(self.baseline_event_ids))
        elif self.state == "changed":
            parts.append("state=changed (DocumentIncarnation to differ from %s)" % (
                "its first value" if self.baseline_incarnation is None else self.baseline_incarnation))
        elif self.state is not None:
            parts.append("state=%s" % self.state)
        if self.condition is not None:
            parts.append("condition %r" % self.condition.expression)
        return " and ".join(parts)


# --------------------------------------------------------------------------------------------
# The clock
# --------------------------------------------------------------------------------------------

class Outcome:
    def __init__(self):
        self.reached = False
        self.fatal = None          # a message when an error ended the wait before the deadline
        self.elapsed = 0.0
        self.polls = 0
        self.runs = 0              # runs of the info module, failed ones included
        self.snapshot = None       # the last document read
        self.last_error = None
        self.unreachable = 0       # runs that could not reach the host
        self.warnings = []         # the info module's warnings, each once
        self.facts = {}            # what Ansible adds to module results (the discovered interpreter)
        self.last_ok = False       # whether the latest run gave a document
        self.seen_event_ids = []   # every matching event seen during the wait, each once
        # EventIds first seen Started (by this wait, and not named in seen_event_ids): a User event
        # approved automatically by the Scheduled Events Policy, or any other that started unseen.
        self.auto_approved = []
        self.started_before_seen = []


class Progress:
    """A line every ``interval`` seconds of a wait (0: none), built by ``describe(elapsed)``.

    Nothing here waits: the Waiter and the action plugin ask how long until the next line is due,
    wait no longer than that, then call ``tick()``. A line that comes late (a run answered after it
    was due) moves the next one on to its own slot; two lines never come at once.
    """

    def __init__(self, interval, clock, emit, describe):
        self.interval = float(interval or 0.0)
        self._clock = clock
        self._emit = emit
        self._describe = describe
        self._start = None
        self._next = None

    def start(self):
        self._start = self._clock()
        self._next = self._start + self.interval if self.interval > 0 else None

    def due_in(self):
        """Seconds until the next line is due; None when there are no lines."""
        if self._next is None:
            return None
        return max(0.0, self._next - self._clock())

    def tick(self):
        if self._next is None:
            return
        now = self._clock()
        if now < self._next:
            return
        self._emit(self._describe(now - self._start))
        self._next += (math.floor((now - self._next) / self.interval) + 1) * self.interval


class Waiter:
    """Runs the info module in chunks until the goal is reached or the one deadline passes.

    ``run_module(module_args, time_left)`` returns the module's result dict; a connection failure is returned
    as ``{"unreachable": True, "msg": ...}`` and is followed by ``reset_connection()``. Every
    sleep, every chunk's ``max_wait`` and every IMDS timeout passed down is clamped to the time
    left, so the whole wait ends within ``timeout`` plus the cost of the module run in flight.
    """

    def __init__(self, goal, run_module, module_args, timeout, delay=0.0, sleep=1.0,
                 request_timeout=_defaults.DEFAULT_REQUEST_TIMEOUT, retry_timeout=_defaults.DEFAULT_RETRY_TIMEOUT,
                 chunk=CHUNK_SECONDS, reset_connection=None, clock=None, sleep_fn=None, log=None,
                 progress_interval=0.0, progress=None, seen_event_ids=None, watch_first_read=False):
        self.goal = goal
        # EventIds the play saw before this wait (those it approved, say): none of them is first seen here.
        self.seen_before = set(str(event_id).upper() for event_id in seen_event_ids or ())
        self._run_module = run_module
        self._module_args = dict((k, v) for k, v in module_args.items() if v is not None)
        self.timeout = float(timeout)
        self.delay = float(delay)
        self.sleep = float(sleep)
        self.request_timeout = float(request_timeout)
        self.retry_timeout = float(retry_timeout)
        self.chunk = float(chunk)
        # One run for the first read and the watch after it (scheduled_event_info's watch_unless_state),
        # rather than a plain read first: a module run costs more than all the polls of a chunk.
        self.watch_first_read = watch_first_read
        self._reset_connection = reset_connection or (lambda: None)
        self._clock = clock or time.monotonic
        self._sleep = sleep_fn or time.sleep
        self._log = log or (lambda message: None)
        self.outcome = Outcome()
        self.progress = Progress(progress_interval if progress else 0.0, self._clock, progress or (lambda line: None),
                                 self.progress_line)

    def module_args(self, snapshot, time_left, resource_name=None):
        """Arguments of the next info module run: a plain read until a document was seen, then a watch."""
        args = dict(self._module_args)
        if resource_name and not args.get("resource_name"):
            args["resource_name"] = resource_name
        left = max(0.0, time_left)
        # The one deadline of the wait, crossing to the host as the module's own limits.
        args["request_timeout"] = max(_defaults.MIN_REQUEST_TIMEOUT, min(self.request_timeout, left))
        args["retry_timeout"] = min(self.retry_timeout, left)
        if snapshot is not None:
            args["changed_since"] = snapshot.incarnation
            args["max_wait"] = min(self.chunk, left)
            args["poll_interval"] = self.sleep
        elif self.watch_first_read and self.goal.first_read_state() is not None:
            args["watch_unless_state"] = self.goal.first_read_state()
            args["max_wait"] = min(self.chunk, left)
            args["poll_interval"] = self.sleep
        return args

    def progress_line(self, elapsed):
        """What the wait awaits, what it sees now, how many events it has seen and for how long."""
        outcome = self.outcome
        seen = len(outcome.seen_event_ids)
        return "waiting for %s; now: %s; %d event%s seen; %s elapsed of %s" % (
            self.goal.describe(), _now_text(outcome), seen, "" if seen == 1 else "s",
            duration_text(elapsed), duration_text(self.timeout))

    def _pause(self, seconds):
        """Sleep, cut into pieces that end where a progress line is due."""
        left = seconds
        while True:
            due = self.progress.due_in()
            if due is None or due >= left:
                self._sleep(max(0.0, left))
                self.progress.tick()
                return
            self._sleep(due)
            left -= due
            self.progress.tick()

    def run(self):
        outcome = self.outcome = Outcome()
        start = self._clock()
        self.progress.start()
        deadline = _edge.Deadline(self.timeout, self._clock, name="timeout")
        resource_name = None
        if self.delay > 0:
            self._pause(min(self.delay, deadline.remaining()))
        while True:
            began = self._clock()
            if outcome.runs and deadline.expired():
                break
            left = deadline.remaining()
            args = self.module_args(outcome.snapshot, left, resource_name)
            self._log("run %d of the info module with %s" % (outcome.runs + 1, _short(args)))
            result = self._run_module(args, left) or {}
            outcome.runs += 1
            outcome.last_ok = False
            outcome.polls += _polls_of(result)
            for warning in result.get("warnings") or []:
                if warning not in outcome.warnings:
                    outcome.warnings.append(warning)
            outcome.facts.update(result.get("ansible_facts") or {})
            if result.get("unreachable"):
                outcome.unreachable += 1
                outcome.last_error = "host unreachable: %s" % _message_of(result)
                self._log(outcome.last_error + "; resetting the connection")
                self._reset_connection()
            elif result.get("failed") or result.get("skipped") or not isinstance(result.get("document"), dict):
                outcome.last_error = _message_of(result)
                if outcome.runs == 1:
                    # Before the host ever answered, a failure is about this host or these options (not an
                    # Azure VM, a wrong imds_url, no Python): waiting would only delay the same error.
                    outcome.fatal = outcome.last_error
                    break
                self._log("the info module failed (%s); retrying" % outcome.last_error)
            else:
                snapshot = Snapshot(result)
                outcome.last_ok = True
                if isinstance(result.get("first_read"), dict) and outcome.snapshot is None:
                    # The run read the document, found the goal's state not there and watched on:
                    # its first read is where the wait began.
                    first = Snapshot(dict(result["first_read"], resource_name=snapshot.resource_name))
                    _remember_events(outcome, first, self.seen_before)
                    self.goal.begin(first)
                    outcome.snapshot = first
                _remember_events(outcome, snapshot, self.seen_before)
                if outcome.snapshot is None:
                    self.goal.begin(snapshot)
                unchanged = outcome.snapshot is not None and snapshot.incarnation == outcome.snapshot.incarnation
                outcome.snapshot = snapshot
                resource_name = snapshot.resource_name or resource_name
                if self.goal.reached(snapshot):
                    outcome.reached = True
                    break
                self.progress.tick()
                spent = self._clock() - began
                if unchanged and spent < self.sleep and not deadline.expired():
                    # A watch is meant to return on a change or after max_wait; one that returned early
                    # with the same document would otherwise turn this loop into a busy one.
                    self._pause(min(self.sleep - spent, deadline.remaining()))
                continue
            self.progress.tick()
            if not deadline.expired():
                self._pause(min(self.sleep, deadline.remaining()))
        outcome.elapsed = self._clock() - start
        return outcome


def _remember_events(outcome, snapshot, seen_before):
    seen = outcome.seen_event_ids
    for event in snapshot.events:
        event_id = str(event.get("event_id") or "").upper()
        if event_id and event_id not in seen:
            seen.append(event_id)
            reason = unseen_start(event, seen_before=event_id in seen_before)
            if reason is not None:
                (outcome.auto_approved if reason == AUTO_APPROVED else outcome.started_before_seen).append(event_id)


# Events named in a progress line; more are counted, so that the line stays one line.
PROGRESS_EVENTS = 3


def _now_text(outcome):
    if outcome.runs == 0:
        return "the first read has not answered yet"
    if outcome.snapshot is None:
        return "no document read yet (%s)" % _cut(outcome.last_error)
    events = outcome.snapshot.events
    if not events:
        seen = "no matching event"
    else:
        seen = ", ".join("%s %s %s" % (e.get("event_type"), str(e.get("event_id"))[:8], e.get("event_status"))
                         for e in events[:PROGRESS_EVENTS])
        if len(events) > PROGRESS_EVENTS:
            seen += " and %d more" % (len(events) - PROGRESS_EVENTS)
    seen += " (DocumentIncarnation %s)" % outcome.snapshot.incarnation
    if not outcome.last_ok:
        # Since the document was read, the host stopped answering (as a VM being rebooted does).
        seen = "the last read failed (%s); before that %s" % (_cut(outcome.last_error), seen)
    return seen


def _cut(text, size=120):
    text = str(text or "no message")
    return text if len(text) <= size else text[:size - 3] + "..."


def duration_text(seconds):
    """45s, 2m00s or 1h02m03s: whole seconds, as an operator reads a job log."""
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return "%dh%02dm%02ds" % (hours, minutes, seconds)
    if minutes:
        return "%dm%02ds" % (minutes, seconds)
    return "%ds" % seconds


def run_patience(module_args, time_left, grace=ANSWER_GRACE):
    """Seconds to wait for the answer of a run started with module_args before resetting the connection.

    A watch ends on the host by its max_wait (every read of it shares that one deadline); a plain
    read, and the first read of a run with watch_unless_state (its own timeouts, then the watch), is
    bounded only by the time left.
    """
    expected = time_left
    if "max_wait" in module_args and "watch_unless_state" not in module_args:
        expected = min(module_args["max_wait"], time_left)
    return max(0.0, expected) + grace


def _polls_of(result):
    polls = result.get("polls")
    if isinstance(polls, int) and not isinstance(polls, bool):
        return polls
    return 1 if isinstance(result.get("document"), dict) else 0


def _message_of(result):
    if result.get("skipped"):
        return "the info module was skipped: %s" % (result.get("msg") or "no reason given")
    message = result.get("msg") or _exception_text(result.get("exception")) or result.get("module_stderr")
    if not message and not isinstance(result.get("document"), dict):
        message = ("the info module returned no Scheduled Events document; is the scheduled_event_info module "
                   "of this collection older than this action plugin?")
    return " ".join(str(message or "unknown error").split())


def _exception_text(exception):
    """A module's exception as text. ansible-core 2.19 reports it as an error summary object, whose
    repr is no message for a user: take the message it carries."""
    if exception is None or isinstance(exception, str):
        return exception
    event = getattr(exception, "event", None)
    message = getattr(event, "msg", None) or getattr(exception, "msg", None)
    if isinstance(message, str) and message.strip():
        return "the info module failed: %s" % message
    return "the info module failed with an error it did not describe (%s)" % type(exception).__name__


def _short(args):
    return ", ".join("%s=%s" % (k, args[k]) for k in sorted(args))


def timeout_message(goal, outcome, timeout):
    """The failure message when the deadline passed: what was waited for, last seen, last error."""
    text = "Timed out after %.1fs (timeout=%s) waiting for %s" % (outcome.elapsed, _number(timeout), goal.describe())
    if outcome.snapshot is not None:
        text += "; last seen: %s" % outcome.snapshot.describe()
    else:
        text += "; no Scheduled Events document could be read"
    if outcome.last_error:
        text += "; last error: %s" % outcome.last_error
    return text + "."


def _number(value):
    return ("%d" % value) if float(value).is_integer() else ("%s" % value)
