# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# What a Scheduled Event is: the document parsed, each event's fields read and normalised (snake_case
# keys, NotBefore as ISO 8601 UTC, what cannot be read as null with a warning), and events selected
# and annotated. No I/O: the one normaliser of an event wherever it comes from (IMDS today).
# Standard library only: the watcher carries it onto the VM.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import datetime
import email.utils
import json
import re
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import (
    DEFAULT_API_VERSION, MAX_INCARNATION, MAX_NESTING)
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._edge import (
    ImdsInputError, ImdsResponseError, TooDeep, clean_value, cut_nesting, is_int, short_repr)

_GUID_RE = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")

# Raw IMDS field -> normalised key. Order is the order of the normalised dict.
EVENT_FIELDS = (
    ("EventId", "event_id"),
    ("EventType", "event_type"),
    ("EventStatus", "event_status"),
    ("ResourceType", "resource_type"),
    ("Resources", "resources"),
    ("NotBefore", "not_before"),
    ("Description", "description"),
    ("EventSource", "event_source"),
    ("DurationInSeconds", "duration_in_seconds"),
)
_RAW_FIELDS = frozenset(pair[0] for pair in EVENT_FIELDS)


# --------------------------------------------------------------------------------------------
# Events: parsing and normalising
# --------------------------------------------------------------------------------------------

def is_event_id(value):
    return isinstance(value, str) and bool(_GUID_RE.match(value))


def validate_event_ids(event_ids):
    """Returns the ids unchanged; raises ImdsInputError naming every malformed one."""
    if isinstance(event_ids, str):
        event_ids = [event_ids]
    bad = [e for e in event_ids if not is_event_id(e)]
    if bad:
        raise ImdsInputError(
            "not an EventId (a GUID such as C7061BAC-AFDC-4513-B24B-AA5F13A16123): %s. "
            "Take the ids from the events returned by scheduled_event_info." % ", ".join(repr(b) for b in bad))
    return list(event_ids)


def same_event_id(a, b):
    """EventIds are GUIDs: compare without regard to case (IMDS sends upper case)."""
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def _epoch_to_iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def not_before_epoch(value):
    """Seconds since the epoch for a NotBefore in RFC 1123 or ISO 8601, or None when empty.

    Raises ValueError (only) for anything else, impossible dates included.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("NotBefore %s is not a string" % (short_repr(value),))
    value = value.strip()
    if not value:
        return None
    try:
        match = _ISO_RE.match(value)
        if match:
            fields = [int(g) for g in match.groups()[:6]]
            # datetime refuses a 13th month or a 31st of April, which timegm would silently roll over.
            epoch = calendar.timegm(datetime.datetime(*fields).timetuple())
            zone = match.group(7)
            if zone and zone != "Z":
                sign = 1 if zone[0] == "+" else -1
                digits = zone[1:].replace(":", "")
                epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        else:
            parsed = email.utils.parsedate_tz(value)
            if parsed is None:
                raise ValueError("no such format")
            datetime.datetime(*parsed[:6])
            epoch = email.utils.mktime_tz(parsed)
        _epoch_to_iso(epoch)
    except (ValueError, TypeError, OverflowError, OSError) as exc:
        raise ValueError("NotBefore %s is not a date in RFC 1123 or ISO 8601 (%s)" % (short_repr(value), exc))
    return epoch


def normalize_not_before(value):
    """ISO 8601 UTC (``2022-04-11T22:26:58Z``) or None when IMDS sent an empty string."""
    epoch = not_before_epoch(value)
    return None if epoch is None else _epoch_to_iso(epoch)


def _strip_resource(name, api_version):
    # The 2017-03-01 preview prefixed VM names with an underscore.
    if api_version == "2017-03-01" and isinstance(name, str) and name.startswith("_"):
        return name[1:]
    return name


def _event_label(raw, position):
    label = "event #%d" % position
    event_id = raw.get("EventId")
    if event_id is not None:
        label += " (EventId %s)" % (event_id if is_event_id(event_id) else short_repr(event_id, 60))
    return label


class _EventReader:
    """Reads one raw event field by field: what cannot be read becomes None (Resources: []) and a warning."""

    def __init__(self, raw, position, api_version, warnings):
        self.raw = raw
        self.api_version = api_version
        self.warnings = warnings
        self.label = _event_label(raw, position)

    def warn(self, field, problem, read_as="null"):
        self.warnings.append("%s: %s %s; read as %s." % (self.label, field, problem, read_as))

    def string(self, field):
        value = self.raw.get(field)
        if value is None or isinstance(value, str):
            return value
        self.warn(field, "is not a string (got %s)" % short_repr(value, 60))
        return None

    def event_id(self):
        value = self.string("EventId")
        if value is not None and not is_event_id(value):
            self.warnings.append("%s: EventId is not a GUID; it is reported as sent but cannot be approved."
                                 % self.label)
        return value

    def resources(self):
        value = self.raw.get("Resources")
        if value is None:
            return []
        if isinstance(value, str):
            self.warn("Resources", "is a single string, not a list", "the one-element list [%s]" % short_repr(value))
            value = [value]
        if not isinstance(value, list):
            self.warn("Resources", "is not a list (got %s)" % short_repr(value, 60), "an empty list")
            return []
        names = [v for v in value if isinstance(v, str)]
        if len(names) != len(value):
            dropped = [v for v in value if not isinstance(v, str)]
            self.warnings.append("%s: Resources holds entries that are not strings (%s); they were left out."
                                 % (self.label, short_repr(dropped, 60)))
        return [_strip_resource(name, self.api_version) for name in names]

    def not_before(self):
        try:
            return normalize_not_before(self.raw.get("NotBefore"))
        except ValueError as exc:
            # exc names the field and the value: "NotBefore 'soon' is not a date in ..."
            self.warnings.append("%s: %s; read as null." % (self.label, exc))
            return None

    def duration(self):
        value = self.raw.get("DurationInSeconds")
        if value is None or is_int(value):
            return value
        self.warn("DurationInSeconds", "is not a whole number (got %s)" % short_repr(value, 60))
        return None


def normalize_event(raw, api_version=DEFAULT_API_VERSION, position=1, warnings=None):
    """One IMDS event as a dict with snake_case keys. Missing fields are None; extras pass through.

    Never raises for the content of raw: a field that cannot be read is None (Resources: an empty
    list) and a warning is appended to warnings.
    """
    warnings = [] if warnings is None else warnings
    reader = _EventReader(raw, position, api_version, warnings)
    event = {}
    for raw_key, key in EVENT_FIELDS:
        if raw_key == "EventId":
            event[key] = reader.event_id()
        elif raw_key == "Resources":
            event[key] = reader.resources()
        elif raw_key == "NotBefore":
            event[key] = reader.not_before()
        elif raw_key == "DurationInSeconds":
            event[key] = reader.duration()
        else:
            event[key] = reader.string(raw_key)
    for raw_key, value in raw.items():
        if raw_key in _RAW_FIELDS:
            continue
        key = _snake_case(raw_key)
        if key in event or key in ANNOTATIONS:
            warnings.append("%s: the extra field %s would replace %s; it was left out."
                            % (reader.label, short_repr(raw_key, 60), key))
            continue
        event[key] = value
    return event


# What annotate_events adds to each event; no field of IMDS may take these names.
ANNOTATIONS = ("affects_this_host", "seconds_to_not_before")


def _snake_case(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# -- the document's edge: nesting and text ----------------------------------------------------

def _keep_field(target, key, value, label, depth, warnings):
    """target[key] = value cleaned; a value nested too deep is left out. Each with a warning."""
    replaced = []
    name = clean_value(key, depth, replaced)
    shown = short_repr(name, 60) if isinstance(name, str) else repr(name)
    try:
        value = clean_value(value, depth, replaced)
    except TooDeep:
        warnings.append("%s: the field %s nests deeper than %d levels; it was left out."
                        % (label, shown, MAX_NESTING))
        return
    if replaced:
        warnings.append("%s: %s holds unpaired surrogates (\\ud800-\\udfff, not text); each became U+FFFD."
                        % (label, shown))
    target[name] = value


def parse_document(body, url=None):
    """Parse a scheduled events body. Raises ImdsResponseError when it is not a document at all."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body or not body.strip():
        raise ImdsResponseError("IMDS answered 200 with an empty body", url=url, status=200)
    try:
        document = json.loads(cut_nesting(body, MAX_NESTING + 1))
    except (ValueError, RecursionError) as exc:
        raise ImdsResponseError("IMDS answered 200 with a body that is not JSON (%s)" % short_repr(str(exc)),
                                url=url, status=200)
    if not isinstance(document, dict) or not isinstance(document.get("Events"), list):
        raise ImdsResponseError(
            "IMDS answered 200 with JSON that is not a Scheduled Events document (no Events list)",
            url=url, status=200)
    return document


class ScheduledEvents:
    """A parsed Scheduled Events document: the raw dict, its normalised events and what could not be read.

    Reading never raises: an event that cannot be fully read is kept with what could be read, and
    ``warnings`` holds one line per field that could not (naming the event and the field).
    """

    def __init__(self, document, api_version=DEFAULT_API_VERSION, url=None):
        self.api_version = api_version
        self.url = url
        self.warnings = []
        self.events = []
        # The document as every consumer sees it: text fields cleaned and deep fields left out once,
        # here, so that the modules, the wait, the watcher and the EDA source all get the same.
        self.document = {}
        for key, value in document.items():
            if key == "Events" and isinstance(value, list):
                self.document[key] = [self._read_event(raw, position) for position, raw in enumerate(value, 1)]
            else:
                _keep_field(self.document, key, value, "the document", 2, self.warnings)
        self.incarnation = self._incarnation(self.document.get("DocumentIncarnation"))

    def _read_event(self, raw, position):
        """Normalises one entry of Events into self.events; returns it as the document keeps it."""
        if isinstance(raw, dict):
            label = _event_label(raw, position)
            clean = {}
            for key, value in raw.items():
                _keep_field(clean, key, value, label, 4, self.warnings)
            self.events.append(normalize_event(clean, self.api_version, position, self.warnings))
            return clean
        self.warnings.append("event #%d is not a JSON object (got %s); it was left out."
                             % (position, short_repr(raw, 60)))
        try:
            return clean_value(raw, 3, [])
        except TooDeep:
            return None

    def _incarnation(self, value):
        if is_int(value) and 0 <= value <= MAX_INCARNATION:
            return value
        self.warnings.append("DocumentIncarnation %s; read as 0." % (
            "is missing" if value is None else "is not a whole number from 0 to %d (got %s)"
            % (MAX_INCARNATION, short_repr(value, 60))))
        return 0

    def find(self, event_id):
        for event in self.events:
            if same_event_id(event["event_id"], event_id):
                return event
        return None


# --------------------------------------------------------------------------------------------
# Selecting events
# --------------------------------------------------------------------------------------------

def affects(event, resource_name):
    """Exact match of a VM name in Resources: web_1 never matches web_10."""
    return resource_name is not None and resource_name in (event.get("resources") or [])


def affects_any(event, resource_names, ignore_case=False):
    """Whether Resources names one of resource_names exactly (without regard to case with
    ignore_case: Azure resource names are not case-sensitive, as the control plane compares them)."""
    fold = (lambda name: name.lower()) if ignore_case else (lambda name: name)
    wanted = set(fold(name) for name in resource_names)
    return any(isinstance(name, str) and fold(name) in wanted for name in event.get("resources") or [])


def is_leader(event, resource_name):
    """The first name in Resources is the documented choice of one approver per group."""
    resources = event.get("resources") or []
    return bool(resources) and resources[0] == resource_name


def select_events(events, event_ids=None, event_types=None, event_statuses=None, event_sources=None,
                  resource_name=None, this_host_only=False):
    """The events that pass every given filter. A filter left as None does not filter."""
    wanted_ids = None if event_ids is None else set(e.lower() for e in event_ids)
    selected = []
    for event in events:
        if wanted_ids is not None and (event.get("event_id") or "").lower() not in wanted_ids:
            continue
        if event_types is not None and event.get("event_type") not in event_types:
            continue
        if event_statuses is not None and event.get("event_status") not in event_statuses:
            continue
        if event_sources is not None and event.get("event_source") not in event_sources:
            continue
        if this_host_only and not affects(event, resource_name):
            continue
        selected.append(event)
    return selected


def annotate_events(events, resource_name, now_epoch=None):
    """Copies of the events with affects_this_host and seconds_to_not_before, sorted by NotBefore.

    Started events (no NotBefore) sort first: they are happening now.
    """
    now_epoch = time.time() if now_epoch is None else now_epoch
    annotated = []
    for event in events:
        copy = dict(event)
        copy["affects_this_host"] = affects(event, resource_name)
        epoch = not_before_epoch(event.get("not_before"))
        copy["seconds_to_not_before"] = None if epoch is None else round(float(epoch - now_epoch), 3)
        annotated.append(copy)
    annotated.sort(key=lambda e: (e["not_before"] is not None, e["not_before"] or "", e.get("event_id") or ""))
    return annotated
