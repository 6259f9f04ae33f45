# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# What Event Grid POSTs to a webhook subscribed to the MaintenanceResources system topic: the body
# read (Event Grid schema or CloudEvents 1.0, within Event Grid's limits), each element told apart
# (the validation handshake, a scheduled event, anything else), and a scheduled event turned into
# the event the EDA source `event_grid` queues: the transition, the event as fleet_event_info
# returns it (through _fleet's and _event's one normaliser) and the envelope. No I/O.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _fleet
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import MAX_NESTING
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._edge import (
    TooDeep, clean_value, json_nesting_exceeds, short_repr)

EVENT_GRID_SCHEMA = "EventGridSchema"
CLOUD_EVENT_SCHEMA = "CloudEventSchemaV1_0"
# Structured content mode of CloudEvents over HTTP: one event, or a batch (a JSON array).
CLOUD_EVENT_TYPE = "application/cloudevents+json"
CLOUD_EVENT_BATCH_TYPE = "application/cloudevents-batch+json"

# Microsoft's pages name the scheduled event's eventType two ways
# (Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted in the sample,
# microsoft.maintenance/scheduledevents/write in the field table), so the resource's type decides.
SCHEDULED_EVENT_TYPE = "microsoft.maintenance/scheduledevents"
VALIDATION_EVENT = "microsoft.eventgrid.subscriptionvalidationevent"
SUBSCRIPTION_DELETED_EVENT = "microsoft.eventgrid.subscriptiondeletedevent"

# Event Grid's own limits: an event is at most 1 MB, a batch at most 5,000 events (max events per
# batch 1-5000; preferred batch size 1-1024 KB, exceeded only by a single larger event).
MAX_EVENT_BYTES = 1024 * 1024
MAX_EVENTS_PER_DELIVERY = 5000
MAX_ID_LENGTH = 1024

# EventStatus -> the transition, by the names the IMDS source (and _transitions) already gives
# them: Completed is the end of an event that ran ("ended"), Canceled the end of one that never
# will ("cancelled"). Compared without regard to case.
TRANSITIONS = {
    "scheduled": "scheduled",
    "started": "started",
    "completed": "ended",
    "canceled": "cancelled",
    "cancelled": "cancelled",
}

# The envelope's keys under both schemas, so that a rulebook reads one set whichever is chosen.
_CLOUD_EVENT_ALIASES = (("topic", "source"), ("eventType", "type"), ("eventTime", "time"))


class DeliveryError(ValueError):
    """A body that is no Event Grid delivery: status is 400 (cannot be parsed) or 413 (too large)."""

    def __init__(self, status, message):
        super(DeliveryError, self).__init__(message)
        self.status = status


def media_type(content_type):
    """The media type of a Content-Type header, lower case, without its parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def parse_delivery(body, content_type):
    """(schema, elements) of a POSTed body. Raises DeliveryError for a body that is not one."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError as exc:
        raise DeliveryError(400, "the body is not UTF-8 text (%s)" % exc.reason)
    if not text.strip():
        raise DeliveryError(400, "the body is empty")
    if json_nesting_exceeds(text, MAX_NESTING):
        raise DeliveryError(400, "the body nests arrays and objects more than %d deep" % MAX_NESTING)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DeliveryError(400, "the body is not JSON (%s)" % short_repr(str(exc)))
    kind = media_type(content_type)
    if kind == CLOUD_EVENT_TYPE:
        if not isinstance(document, dict):
            raise DeliveryError(400, "a body of type %s must be one JSON object (one CloudEvent)" % kind)
        return CLOUD_EVENT_SCHEMA, [document]
    if isinstance(document, dict):
        if "specversion" in document:
            return CLOUD_EVENT_SCHEMA, [document]
        raise DeliveryError(400, "an Event Grid schema delivery is a JSON array of events, got an object")
    if not isinstance(document, list):
        raise DeliveryError(400, "a delivery is a JSON array of events, got %s" % type(document).__name__)
    if len(document) > MAX_EVENTS_PER_DELIVERY:
        raise DeliveryError(413, "the delivery holds %d events; Event Grid sends at most %d at once"
                            % (len(document), MAX_EVENTS_PER_DELIVERY))
    cloud = kind == CLOUD_EVENT_BATCH_TYPE or (
        bool(document) and all(isinstance(item, dict) and "specversion" in item for item in document))
    return (CLOUD_EVENT_SCHEMA if cloud else EVENT_GRID_SCHEMA), document


class Element(object):
    """One element of a delivery, told apart.

    kind: "validation" (code holds the validationCode), "scheduled" (envelope and resource_info
    hold the event), "skipped" (another event type: reason says which) or "malformed" (reason says
    why it cannot be read). Text in it is cleaned (unpaired surrogates become U+FFFD)."""

    def __init__(self, kind, reason=None, envelope=None, resource_info=None, code=None):
        self.kind = kind
        self.reason = reason
        self.envelope = envelope
        self.resource_info = resource_info
        self.code = code

    @property
    def event_grid_id(self):
        return (self.envelope or {}).get("id")


def _type_of(raw, schema):
    value = raw.get("type" if schema == CLOUD_EVENT_SCHEMA else "eventType")
    return value if isinstance(value, str) else None


def classify(raw, schema):
    """The Element of one raw element of a delivery. Never raises for its content."""
    if not isinstance(raw, dict):
        return Element("malformed", reason="not a JSON object (got %s)" % short_repr(raw, 60))
    try:
        size = len(json.dumps(raw, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        raw = clean_value(raw, 2, [])
    except (TooDeep, ValueError, RecursionError) as exc:
        return Element("malformed", reason="cannot be read (%s)" % short_repr(str(exc), 60))
    event_type = _type_of(raw, schema)
    if size > MAX_EVENT_BYTES:
        return Element("malformed", reason="is %d bytes; Event Grid's events are at most %d" % (size, MAX_EVENT_BYTES))
    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    lowered = (event_type or "").lower()
    if lowered == VALIDATION_EVENT:
        code = data.get("validationCode")
        if not isinstance(code, str) or not code or len(code) > MAX_ID_LENGTH:
            return Element("malformed", reason="a SubscriptionValidationEvent without a validationCode")
        return Element("validation", code=code)
    if lowered == SUBSCRIPTION_DELETED_EVENT:
        return Element("skipped", reason="the subscription was deleted (%s)" % event_type)
    info = data.get("resourceInfo")
    info_type = info.get("type") if isinstance(info, dict) else None
    if not isinstance(info_type, str) or info_type.lower() != SCHEDULED_EVENT_TYPE:
        return Element("skipped", reason="not a scheduled event (eventType %s, data.resourceInfo.type %s)"
                       % (short_repr(event_type, 100), short_repr(info_type, 100)))
    event_id = raw.get("id")
    if not isinstance(event_id, str) or not event_id.strip() or len(event_id) > MAX_ID_LENGTH:
        return Element("malformed", reason="a scheduled event without an Event Grid id (got %s)"
                       % short_repr(event_id, 60))
    return Element("scheduled", envelope=envelope(raw, schema, data), resource_info=info)


def envelope(raw, schema, data):
    """The element without its data: what Event Grid says about the notification."""
    result = dict((key, value) for key, value in raw.items() if key != "data")
    if schema == CLOUD_EVENT_SCHEMA:
        for alias, key in _CLOUD_EVENT_ALIASES:
            if alias not in result and key in raw:
                result[alias] = raw[key]
    if "apiVersion" in data:
        # The scheduled events schema version (data.apiVersion), beside dataVersion.
        result["data_api_version"] = data["apiVersion"]
    return result


def delivery_count(header):
    """aeg-delivery-count as a whole number, or None when absent or unreadable."""
    text = (header or "").strip()
    return int(text) if text.isdigit() and len(text) < 10 else None


def queued_event(element, schema, count, position, warnings):
    """The event put on the rulebook's queue for a scheduled element, or None (with a warning) when
    its EventStatus names no transition."""
    info = element.resource_info
    subject = element.envelope.get("subject")
    row = dict(info)
    if not isinstance(info.get("id"), str) and isinstance(subject, str):
        row["id"] = subject
    label = "Event Grid event %s (element #%d, data.resourceInfo)" % (short_repr(element.event_grid_id, 60), position)
    scheduled = _fleet.event_from_row(row, position, warnings, label=label)
    if scheduled["event_id"] is None:
        scope = _fleet.parse_event_id(row.get("id"))
        if scope is not None:
            scheduled["event_id"] = scope["event_id"]
    status = scheduled.get("event_status")
    transition = TRANSITIONS.get(status.lower()) if isinstance(status, str) else None
    if transition is None:
        warnings.append("Event Grid event %s: EventStatus %s is none of Scheduled, Started, Completed, Canceled; it "
                        "was not queued." % (short_repr(element.event_grid_id, 60), short_repr(status, 60)))
        return None
    event_grid = dict(element.envelope, delivery_count=count, schema=schema)
    return {"type": transition, "scheduled_event": scheduled, "event_grid": event_grid}
