# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records of the state file, one per EventId: their fields, the check of a record read back
(check_record), and what a record owes (a recover). No I/O."""

import math

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event

# Phase outcomes that mean handlers ran (or may have run) and so owe a recover when the event ends.
RECOVER_OWED_AFTER_DRAIN = ("succeeded", "failed", "interrupted")
RECOVER_OWED_AFTER_STARTED = ("succeeded", "failed", "interrupted")
PHASE_OUTCOMES = (None, "running", "succeeded", "failed", "interrupted", "skipped")
APPROVAL_OUTCOMES = (None, "sent", "retry", "failed", "withheld", "dry_run")
POLICIES = (None, "after_drain", "immediate", "none")


def event_key(event_id):
    """State is keyed by the lower-case EventId (IMDS sends upper case; compare without case)."""
    return (event_id or "").lower()


def not_before_epoch(event):
    """NotBefore of an event as seconds since the epoch, or None when it has none or it cannot be
    read (the client already warned about it): a limit is then the handler's timeout alone."""
    try:
        return _event.not_before_epoch(event.get("not_before"))
    except (ValueError, TypeError, OverflowError):
        return None


def new_record(event, mine, incarnation=None):
    return {
        "event": dict(event),
        "mine": mine,
        "status": event.get("event_status"),
        "gone": False,
        "policy": None,
        "policy_reason": None,
        "drain": None,
        "started": None,
        "recover": None,
        "approval": None,
        "approval_retry_at": None,
        "seen_incarnation": incarnation,
        "missing_polls": 0,
        "gone_at": None,
    }


# Fields added after the first release: a record written before them gets these values.
_LATER_FIELDS = {"seen_incarnation": None, "missing_polls": 0, "gone_at": None}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number_or_none(value):
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def check_record(key, record):
    """(record, problem) for one record of the state file: problem None and the record (with the
    fields added since it was written) when it can be used, else why not."""
    if not isinstance(key, str) or not key:
        return None, "the key is not a lower-case EventId"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    record = dict(_LATER_FIELDS, **record)
    missing = sorted(set(new_record({}, False)) - set(record))
    if missing:
        return None, "missing %s" % ", ".join(missing)
    event = record["event"]
    if not isinstance(event, dict):
        return None, "event is not a JSON object"
    if not isinstance(event.get("event_id"), str) or event_key(event["event_id"]) != key:
        return None, "event.event_id %r does not match the key" % (event.get("event_id"),)
    resources = event.get("resources")
    if resources is not None and not (isinstance(resources, list) and all(isinstance(r, str) for r in resources)):
        return None, "event.resources is not a list of names"
    for field in ("not_before", "event_type", "event_status", "event_source", "description"):
        if event.get(field) is not None and not isinstance(event[field], str):
            return None, "event.%s is not a string" % field
    if event.get("not_before") and not_before_epoch(event) is None:
        return None, "event.not_before %r is not a time" % (event["not_before"],)
    checks = (
        ("mine", lambda v: isinstance(v, bool)),
        ("gone", lambda v: isinstance(v, bool)),
        ("status", lambda v: v is None or isinstance(v, str)),
        ("policy", lambda v: v in POLICIES),
        ("policy_reason", lambda v: v is None or isinstance(v, str)),
        ("drain", lambda v: v in PHASE_OUTCOMES),
        ("started", lambda v: v in PHASE_OUTCOMES),
        ("recover", lambda v: v in PHASE_OUTCOMES),
        ("approval", lambda v: v in APPROVAL_OUTCOMES),
        ("approval_retry_at", _is_number_or_none),
        ("seen_incarnation", lambda v: v is None or _is_int(v)),
        ("missing_polls", lambda v: _is_int(v) and v >= 0),
        ("gone_at", _is_number_or_none),
    )
    for field, good in checks:
        try:
            ok = good(record[field])
        except TypeError:          # an unhashable value tested for membership
            ok = False
        if not ok:
            return None, "%s has an impossible value %r" % (field, record[field])
    return record, None


def owes_recover(record):
    return record["drain"] in RECOVER_OWED_AFTER_DRAIN or record["started"] in RECOVER_OWED_AFTER_STARTED
