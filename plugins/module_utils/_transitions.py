# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
"""What counts as a transition of a scheduled event: the one rule the EDA event source and the
watcher share.

Python 3 standard library only and no import of the collection: the watcher installs this file
beside itself on a VM, and the event source loads it from a checkout.

IMDS has two statuses, Scheduled and Started, and no Completed: an event that is over, or that
was cancelled, simply leaves the document. So the four transitions are:

- ``scheduled``: an event is seen for the first time with any status but Started.
- ``started``: an event is seen Started for the first time. An event first seen Started (a
  Preempt or a Terminate often skips Scheduled; a poller may also miss a short Scheduled phase)
  emits ``started`` only, never a made-up ``scheduled``, and its ``seen_scheduled`` is False.
- ``ended``: an event that was seen Started is gone.
- ``cancelled``: an event that was never seen Started is gone. The service never says
  "cancelled": it is inferred. An event that went from Scheduled to Started and away between two
  polls looks exactly like a cancel, and consumers must allow for that.

An event is gone when a document with a higher DocumentIncarnation than the last one that held it
lacks it, or when ``gone_after_missing_polls`` documents in a row lack it: one document without
an event is not the end of a maintenance.

An event first seen Started had no Scheduled phase for the observer, so nothing could drain for
it. ``unseen_start`` says why, the one rule every consumer (the watcher, the wait action plugin
and through it ``rolling_maintenance``, the EDA source) applies: a user-initiated event
(EventSource User) is taken as approved automatically by the Scheduled Events Policy
(``userInitiatedReboot`` / ``userInitiatedRedeploy`` ``automaticallyApprove``: Azure publishes
such an event Started, never Scheduled); any other only as started before it was seen (a
platform event whose NotBefore passed between two polls, a Preempt, a host failure). A
transition carries it as ``auto_approved`` and ``started_before_seen``.

Each transition type is emitted at most once per EventId (EventIds are compared without case).
An event that comes back after it was taken as gone is tracked again without a second
``scheduled``; its ``started`` and ``ended`` still come if they have not. Events whose EventId
cannot be read are left out: nothing can name them later.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import MAX_INCARNATION
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._edge import is_int

# An event is taken as gone when a document with a higher DocumentIncarnation lacks it, or when
# this many documents in a row lack it.
GONE_AFTER_MISSING_POLLS = 2
TRANSITIONS = ("scheduled", "started", "ended", "cancelled")
STARTED = "Started"
# How many gone events are remembered (so that one that comes back is not announced again).
# Bounded so that a long-running source never grows without end.
REMEMBER_GONE_EVENTS = 1024
MAX_MISSING_POLLS = 1000
SNAPSHOT_VERSION = 1


# What unseen_start answers for an event first seen Started.
AUTO_APPROVED = "auto_approved"
STARTED_BEFORE_SEEN = "started_before_seen"
USER = "User"
AUTO_APPROVED_TEXT = "approved automatically by the Scheduled Events Policy, no drain was possible"
STARTED_BEFORE_SEEN_TEXT = "started before it was seen, no drain was possible"


def unseen_start(event, seen_before):
    """Why an event had no Scheduled phase for its observer, or None.

    event: a normalised event (``event_status``, ``event_source``) as seen now; seen_before: True
    when the observer saw this EventId in an earlier document (with any status). Only an event
    Started at its first sighting qualifies: one seen Scheduled before that then started is
    approved by someone (or by NotBefore) in the open, and drained for. Of those, a User event is
    the Scheduled Events Policy's automatic approval (AUTO_APPROVED); any other source cannot be
    told apart from a platform event whose NotBefore passed between polls (STARTED_BEFORE_SEEN).
    """
    if seen_before or not isinstance(event, dict) or event.get("event_status") != STARTED:
        return None
    return AUTO_APPROVED if event.get("event_source") == USER else STARTED_BEFORE_SEEN


def describe_unseen_start(reason):
    """The words every consumer reports for unseen_start's answer ("" for None)."""
    return {AUTO_APPROVED: AUTO_APPROVED_TEXT, STARTED_BEFORE_SEEN: STARTED_BEFORE_SEEN_TEXT}.get(reason, "")


def event_key(event_id):
    """Events are keyed by the lower-case EventId (IMDS sends upper case; compare without case)."""
    return event_id.lower()


def affects(event, resource_name):
    """Exact match of a VM name in Resources (web_1 never matches web_10), as the client decides it."""
    return resource_name is not None and resource_name in (event.get("resources") or [])


def _document_parts(document):
    """(incarnation, events) of a ScheduledEvents of the client or of a plain dict."""
    if isinstance(document, dict):
        incarnation = document.get("document_incarnation", document.get("incarnation"))
        events = document.get("events")
    else:
        incarnation = getattr(document, "incarnation", None)
        events = getattr(document, "events", None)
    if incarnation is not None and not (is_int(incarnation) and 0 <= incarnation <= MAX_INCARNATION):
        raise ValueError("document_incarnation must be a whole number from 0 to %d or null, got %r"
                         % (MAX_INCARNATION, incarnation))
    if not isinstance(events, list):
        raise ValueError("the document's events must be a list, got %s" % type(events).__name__)
    return incarnation, events


def _new_record(event, incarnation):
    return {
        "event": copy.deepcopy(event),
        "emitted": [],
        "seen_scheduled": False,
        "seen_started": False,
        "seen_incarnation": incarnation,
        "missing_polls": 0,
        "gone": False,
        "unseen_start": None,
    }


class TransitionTracker(object):
    """Turns each polled document into the transitions it reveals. No I/O, no clock."""

    def __init__(self, resource_name=None, emit_existing=True, gone_after_missing_polls=GONE_AFTER_MISSING_POLLS):
        if resource_name is not None and not isinstance(resource_name, str):
            raise ValueError("resource_name must be a string or null, got %r" % (resource_name,))
        if not isinstance(emit_existing, bool):
            raise ValueError("emit_existing must be true or false, got %r" % (emit_existing,))
        if not (is_int(gone_after_missing_polls) and 1 <= gone_after_missing_polls <= MAX_MISSING_POLLS):
            raise ValueError("gone_after_missing_polls must be a whole number from 1 to %d, got %r"
                             % (MAX_MISSING_POLLS, gone_after_missing_polls))
        self.resource_name = resource_name
        self.emit_existing = emit_existing
        self.gone_after_missing_polls = gone_after_missing_polls
        self.documents_seen = 0
        # key -> record; gone records stay (oldest first in gone_order) up to REMEMBER_GONE_EVENTS.
        self.records = {}
        self.gone_order = []

    # -- each poll ---------------------------------------------------------------------------

    def observe(self, document):
        """The transitions one successfully read document reveals, in a stable order: the
        document's events in their order first, then the gone events by EventId."""
        incarnation, events = _document_parts(document)
        quiet = self.documents_seen == 0 and not self.emit_existing
        self.documents_seen += 1
        transitions = []
        present = set()
        for event in events:
            event_id = event.get("event_id") if isinstance(event, dict) else None
            if not isinstance(event_id, str) or not event_id.strip():
                continue
            key = event_key(event_id)
            if key in present:
                continue
            present.add(key)
            record = self.records.get(key)
            if record is None:
                record = self.records[key] = _new_record(event, incarnation)
                record["unseen_start"] = unseen_start(event, seen_before=False)
            elif record["gone"]:
                record["gone"] = False
                self.gone_order.remove(key)
            record["event"] = copy.deepcopy(event)
            record["seen_incarnation"] = incarnation
            record["missing_polls"] = 0
            started = event.get("event_status") == STARTED
            if started:
                record["seen_started"] = True
                wanted = "started"
            elif not record["seen_started"]:
                # A Started event seen Scheduled again later is not scheduled anew.
                record["seen_scheduled"] = True
                wanted = "scheduled"
            else:
                wanted = None
            if wanted is not None and wanted not in record["emitted"]:
                record["emitted"].append(wanted)
                if not quiet:
                    transitions.append(self._transition(wanted, record, incarnation))
        for key in sorted(self.records):
            record = self.records[key]
            if key in present or record["gone"]:
                continue
            record["missing_polls"] += 1
            if not self._is_gone(record, incarnation):
                continue
            record["gone"] = True
            self.gone_order.append(key)
            final = "ended" if record["seen_started"] else "cancelled"
            if final not in record["emitted"]:
                record["emitted"].append(final)
                transitions.append(self._transition(final, record, incarnation))
        self._forget_gone()
        return transitions

    def _is_gone(self, record, incarnation):
        seen = record["seen_incarnation"]
        if incarnation is not None and seen is not None and incarnation > seen:
            return True
        return record["missing_polls"] >= self.gone_after_missing_polls

    def _forget_gone(self):
        while len(self.gone_order) > REMEMBER_GONE_EVENTS:
            del self.records[self.gone_order.pop(0)]

    def _transition(self, kind, record, incarnation):
        event = copy.deepcopy(record["event"])
        mine = affects(event, self.resource_name)
        if "affects_this_host" in event:
            event["affects_this_host"] = mine
        return {
            "type": kind,
            "scheduled_event": event,
            "document_incarnation": incarnation,
            "resource_name": self.resource_name,
            "affects_this_host": mine,
            "seen_scheduled": record["seen_scheduled"],
            # Set on the started transition of an event first seen Started (and on its ended).
            "auto_approved": record.get("unseen_start") == AUTO_APPROVED,
            "started_before_seen": record.get("unseen_start") == STARTED_BEFORE_SEEN,
        }

    # -- persistence -------------------------------------------------------------------------

    def snapshot(self):
        """The tracker's memory as plain JSON types, for a daemon to persist."""
        return {
            "version": SNAPSHOT_VERSION,
            "resource_name": self.resource_name,
            "documents_seen": self.documents_seen,
            "records": copy.deepcopy(self.records),
            "gone_order": list(self.gone_order),
        }

    @classmethod
    def restore(cls, data, **kwargs):
        """A tracker that goes on from a snapshot. kwargs are the constructor's (resource_name
        defaults to the snapshot's). Raises ValueError naming the field it cannot trust."""
        if not isinstance(data, dict):
            raise ValueError("the snapshot is not a JSON object")
        if data.get("version") != SNAPSHOT_VERSION:
            raise ValueError("version: %r is not %d, the only snapshot version this tracker reads"
                             % (data.get("version"), SNAPSHOT_VERSION))
        kwargs.setdefault("resource_name", data.get("resource_name"))
        tracker = cls(**kwargs)
        seen = data.get("documents_seen")
        if not (is_int(seen) and seen >= 0):
            raise ValueError("documents_seen: %r is not a whole number of 0 or more" % (seen,))
        records = data.get("records")
        if not isinstance(records, dict):
            raise ValueError("records: not a JSON object")
        # A snapshot written before unseen_start was recorded: its events were seen before.
        records = dict((k, dict({"unseen_start": None}, **r) if isinstance(r, dict) else r) for k, r in records.items())
        for key, record in records.items():
            problem = _record_problem(key, record)
            if problem:
                raise ValueError("records[%r]: %s" % (key, problem))
        order = data.get("gone_order")
        gone = sorted(k for k, r in records.items() if r["gone"])
        if not isinstance(order, list) or sorted(order) != gone or len(set(order)) != len(order):
            raise ValueError("gone_order: %r does not list exactly the gone records" % (order,))
        tracker.documents_seen = seen
        tracker.records = copy.deepcopy(records)
        tracker.gone_order = list(order)
        tracker._forget_gone()
        return tracker


def _record_problem(key, record):
    """Why a snapshot's record cannot be used, or None."""
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = sorted(set(_new_record({}, None)) - set(record))
    if missing:
        return "missing %s" % ", ".join(missing)
    event = record["event"]
    if not isinstance(event, dict):
        return "event is not a JSON object"
    event_id = event.get("event_id")
    if not isinstance(event_id, str) or not event_id.strip() or event_key(event_id) != key:
        return "event.event_id %r does not match the key" % (event_id,)
    emitted = record["emitted"]
    if not isinstance(emitted, list) or any(t not in TRANSITIONS for t in emitted) or len(set(emitted)) != len(emitted):
        return "emitted %r is not a list of distinct transitions %s" % (emitted, ", ".join(TRANSITIONS))
    if record["unseen_start"] not in (None, AUTO_APPROVED, STARTED_BEFORE_SEEN):
        return "unseen_start %r is not null, %s or %s" % (record["unseen_start"], AUTO_APPROVED, STARTED_BEFORE_SEEN)
    for field in ("seen_scheduled", "seen_started", "gone"):
        if not isinstance(record[field], bool):
            return "%s %r is not true or false" % (field, record[field])
    seen = record["seen_incarnation"]
    if seen is not None and not (is_int(seen) and 0 <= seen <= MAX_INCARNATION):
        return "seen_incarnation %r is not a whole number from 0 to %d or null" % (seen, MAX_INCARNATION)
    missing_polls = record["missing_polls"]
    if not (is_int(missing_polls) and missing_polls >= 0):
        return "missing_polls %r is not a whole number of 0 or more" % (missing_polls,)
    return None
