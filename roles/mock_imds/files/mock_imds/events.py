# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Events: the lifecycle states, the spec check and the document entry per api-version."""

from __future__ import print_function

import collections

from .checks import MAX_TEXT, MockError, _check_keys, _choice, _number, _string, _string_list
from .clock import iso_utc, rfc1123
from .rules import (
    DEFAULT_DURATION,
    DEFAULT_NOTICE,
    DEFAULT_NOTICE_OTHER,
    EVENT_TYPES,
    EVENT_TYPES_SINCE,
    FIELDS_SINCE,
    PENDING,
    SCHEDULED,
    STARTED,
    UNDERSCORE_BEFORE,
    VISIBLE_STATES,
)


EVENT_SPEC_KEYS = (
    "at", "event_type", "resources", "notice", "duration", "status", "event_source", "description",
    "duration_in_seconds", "event_id", "resource_type", "cancel_at",
)


class Event(object):
    __slots__ = (
        "event_id", "event_type", "resources", "resource_type", "event_source", "description",
        "duration_in_seconds", "notice", "duration", "initial_status", "audience",
        "status", "appear_at", "not_before", "cancel_at", "started_at", "ended_at", "approvals", "tenants_approved",
    )

    def next_transition(self):
        """(sim time, action) of the next thing the clock does to this event, or None."""
        if self.status == PENDING:
            return self.appear_at, "appear"
        if self.status == SCHEDULED:
            if self.cancel_at is not None and self.cancel_at <= self.not_before:
                return self.cancel_at, "cancel"
            return self.not_before, "start"
        if self.status == STARTED:
            return self.started_at + self.duration, "remove"
        return None

    def entry(self, schema):
        """The event as IMDS shows it to one api-version schema, or None if that version hides it."""
        since = EVENT_TYPES_SINCE.get(self.event_type)
        if since is not None and schema < since:
            return None
        resources = self.resources
        if schema < UNDERSCORE_BEFORE:
            resources = ["_" + name for name in resources]
        entry = collections.OrderedDict((
            ("EventId", self.event_id),
            ("EventStatus", self.status),
            ("EventType", self.event_type),
            ("ResourceType", self.resource_type),
            ("Resources", list(resources)),
            ("NotBefore", rfc1123(self.not_before) if self.status == SCHEDULED else ""),
        ))
        values = {"Description": self.description, "EventSource": self.event_source,
                  "DurationInSeconds": self.duration_in_seconds}
        for field, field_since in FIELDS_SINCE:
            if schema >= field_since:
                entry[field] = values[field]
        return entry

    def view(self):
        """The control API's full internal view."""
        ends_at = self.started_at + self.duration if self.started_at is not None else None
        return collections.OrderedDict((
            ("event_id", self.event_id),
            ("event_type", self.event_type),
            ("status", self.status),
            ("resources", list(self.resources)),
            ("resource_type", self.resource_type),
            ("event_source", self.event_source),
            ("description", self.description),
            ("duration_in_seconds", self.duration_in_seconds),
            ("notice", self.notice),
            ("duration", self.duration),
            ("appears_at", iso_utc(self.appear_at)),
            ("not_before", iso_utc(self.not_before)),
            ("not_before_rfc1123", rfc1123(self.not_before) if self.not_before is not None else None),
            ("cancel_at", iso_utc(self.cancel_at)),
            ("started_at", iso_utc(self.started_at)),
            ("ends_at", iso_utc(ends_at) if self.status in (PENDING, SCHEDULED, STARTED) else None),
            ("ended_at", iso_utc(self.ended_at)),
            ("visible_to", sorted(self.audience)),
            ("approvals", [dict(a) for a in self.approvals]),
            ("tenants_approved", self.tenants_approved),
        ))


def normalize_event_spec(spec, where, fleet):
    """Check one event description (control API or scenario) and fill in the defaults."""
    _check_keys(spec, EVENT_SPEC_KEYS, where)
    out = {}
    event_type = spec.get("event_type")
    if not isinstance(event_type, str) or not event_type.strip():
        raise MockError("%s.event_type must be a non-empty string such as %s" % (where, ", ".join(EVENT_TYPES)))
    out["event_type"] = _string(event_type, where + ".event_type", maximum=64)
    resources = _string_list(spec.get("resources", [fleet.default_vm]), where + ".resources")
    if not resources:
        raise MockError("%s.resources must be a non-empty list of VM names" % where)
    unknown = [r for r in resources if r not in fleet.vms]
    if unknown:
        raise MockError("%s.resources names VMs that are not in the fleet: %s (fleet: %s); add them to the fleet "
                        "first" % (where, ", ".join(unknown[:10]), ", ".join(list(fleet.vms)[:20])))
    out["resources"] = list(resources)
    out["status"] = _choice(spec.get("status", SCHEDULED), where + ".status", VISIBLE_STATES)
    out["at"] = _number(spec.get("at", 0), where + ".at", minimum=0)
    out["notice"] = _number(spec.get("notice", DEFAULT_NOTICE.get(event_type, DEFAULT_NOTICE_OTHER)),
                            where + ".notice", minimum=0)
    out["duration"] = _number(spec.get("duration", DEFAULT_DURATION), where + ".duration", minimum=0)
    out["event_source"] = _choice(spec.get("event_source", "Platform"), where + ".event_source", ("Platform", "User"))
    out["description"] = _string(spec.get("description", ""), where + ".description", maximum=MAX_TEXT, empty=True)
    out["duration_in_seconds"] = _number(spec.get("duration_in_seconds", -1), where + ".duration_in_seconds",
                                         minimum=-1, integer=True)
    out["resource_type"] = _string(spec.get("resource_type", "VirtualMachine"), where + ".resource_type", maximum=64)
    event_id = spec.get("event_id")
    if event_id is not None:
        event_id = _string(event_id, where + ".event_id (a GUID, like IMDS uses)", maximum=128)
    out["event_id"] = event_id
    cancel_at = spec.get("cancel_at")
    if cancel_at is not None:
        cancel_at = _number(cancel_at, where + ".cancel_at", minimum=0)
        if out["status"] != SCHEDULED:
            raise MockError("%s.cancel_at only applies to Scheduled events (status is %s)" % (where, out["status"]))
        if cancel_at <= out["at"]:
            raise MockError("%s.cancel_at (%s) must be later than at (%s)" % (where, cancel_at, out["at"]))
    out["cancel_at"] = cancel_at
    return out
