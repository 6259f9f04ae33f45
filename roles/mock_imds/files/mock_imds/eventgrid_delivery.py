# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event Grid on the wire: the documented shapes, headers, retry rules, one HTTP attempt, and the
background thread that sends what eventgrid.py (the subscribers, behind the state's lock) hands it.

Sources: Microsoft's "Scheduled Events in Event Grid Concepts" (the notification), "Event Grid message
delivery and retry" (schedule, codes, batching, time to live), "Webhook event delivery" (handshakes),
"Use CloudEvents v1.0 schema with Event Grid" (content types), "Custom delivery properties" (headers);
quoted in docs/docsite/rst/mock_imds.rst, section "Event Grid delivery"."""

from __future__ import print_function

import collections
import http.client
import json
import socket
import ssl
import threading
import uuid
from urllib.parse import urlsplit

EVENT_TYPE = "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"
VALIDATION_TYPE = "Microsoft.EventGrid.SubscriptionValidationEvent"
# Microsoft's Event Grid sample spells the type so; Resource Graph rows say scheduledevents (compare without case).
RESOURCE_TYPE = "microsoft.maintenance/scheduledEvents"
DATA_API_VERSION = "2024-07-01"
DATA_VERSION = "3.0"
METADATA_VERSION = "1"
EVENT_GRID_SCHEMA = "EventGridSchema"
CLOUD_EVENTS_SCHEMA = "CloudEventSchemaV1_0"
SCHEMAS = (EVENT_GRID_SCHEMA, CLOUD_EVENTS_SCHEMA)
REQUEST_ORIGIN = "eventgrid.azure.net"
JSON_TYPE = "application/json; charset=utf-8"
CLOUD_EVENT_TYPE = "application/cloudevents+json; charset=utf-8"
CLOUD_BATCH_TYPE = "application/cloudevents-batch+json; charset=utf-8"

# "Event Grid retries delivery on the following schedule on a best effort basis: 10 seconds, 30 seconds,
# 1 minute, 5 minutes, 10 minutes, 30 minutes, 1 hour, 3 hours, 6 hours, every 12 hours up to 24 hours"
RETRY_SCHEDULE = (10, 30, 60, 300, 600, 1800, 3600, 10800, 21600)
RETRY_EVERY_AFTER = 43200
# The failure-code table: "408 Request Timeout: retry after 2 minutes or more; 503 Service Unavailable:
# retry after 30 seconds or more; all others: retry after 10 seconds or more".
RETRY_AT_LEAST = {408: 120, 503: 30}
# "Webhook: 400 (Bad request), 413 (Request entity is too large), 401 (Unauthorized)": never retried.
NEVER_RETRIED = {400: "BadRequest", 401: "Unauthorized", 413: "PayloadTooLarge"}
SUCCESS = (200, 201, 202, 203, 204)
# "Event Grid waits 30 seconds for a response after delivering a message."
RESPONSE_TIMEOUT = 30.0
MAX_ANSWER = 65536


def retry_delay(attempt, status):
    """Simulated seconds before attempt number attempt + 1, after attempt number attempt failed."""
    base = RETRY_SCHEDULE[attempt - 1] if attempt <= len(RETRY_SCHEDULE) else RETRY_EVERY_AFTER
    return max(base, RETRY_AT_LEAST.get(status, 0))


def outcome_name(status, error):
    """Event Grid's lastDeliveryOutcome names for what an attempt got."""
    if error is not None:
        return error
    if status in NEVER_RETRIED:
        return NEVER_RETRIED[status]
    return {403: "Forbidden", 404: "NotFound", 408: "TimedOut"}.get(status, "Busy")


def notification(event_grid_id, row, sim_time_text):
    """One Event Grid schema event for a scheduled event's state change; row is arm.py's Resource Graph row."""
    info = collections.OrderedDict((
        ("id", row["id"]), ("name", row["name"]), ("type", RESOURCE_TYPE), ("location", row["location"]),
        ("properties", row["properties"])))
    return collections.OrderedDict((
        ("id", event_grid_id), ("topic", "/subscriptions/%s" % row["subscriptionId"]), ("subject", row["id"]),
        ("data", collections.OrderedDict((("resourceInfo", info), ("apiVersion", DATA_API_VERSION)))),
        ("eventType", EVENT_TYPE), ("dataVersion", DATA_VERSION), ("metadataVersion", METADATA_VERSION),
        ("eventTime", sim_time_text)))


def cloud_event(doc):
    """The same event in the CloudEvents 1.0 schema (Event Grid's mapping: topic -> source, eventType -> type)."""
    return collections.OrderedDict((
        ("specversion", "1.0"), ("id", doc["id"]), ("source", doc["topic"]), ("subject", doc["subject"]),
        ("type", doc["eventType"]), ("time", doc["eventTime"]), ("datacontenttype", "application/json"),
        ("data", doc["data"])))


def validation_event(topic, code, validation_url, sim_time_text):
    return [collections.OrderedDict((
        ("id", str(uuid.uuid4())), ("topic", topic), ("subject", ""),
        ("data", collections.OrderedDict((("validationCode", code), ("validationUrl", validation_url)))),
        ("eventType", VALIDATION_TYPE), ("eventTime", sim_time_text), ("metadataVersion", METADATA_VERSION),
        ("dataVersion", "1")))]


def delivery_request(schema, name, docs, delivery_count, static_headers):
    """(headers, body) of one notification POST carrying docs (Event Grid schema dicts)."""
    headers = collections.OrderedDict(static_headers)
    headers["aeg-event-type"] = "Notification"
    headers["aeg-subscription-name"] = name
    headers["aeg-delivery-count"] = str(delivery_count)
    if schema == EVENT_GRID_SCHEMA:
        headers["aeg-data-version"] = DATA_VERSION
        headers["aeg-metadata-version"] = METADATA_VERSION
        headers["Content-Type"] = JSON_TYPE
        body = list(docs)
    else:
        # aeg-metadata-version is the CloudEvents spec version; aeg-data-version does not apply.
        headers["aeg-metadata-version"] = "1.0"
        events = [cloud_event(doc) for doc in docs]
        if len(events) == 1:
            headers["Content-Type"] = CLOUD_EVENT_TYPE
            body = events[0]
        else:
            headers["Content-Type"] = CLOUD_BATCH_TYPE
            body = events
    return headers, json.dumps(body).encode("utf-8")


def handshake_request(schema, name, topic, code, validation_url, sim_time_text, static_headers):
    """(method, headers, body) of the validation handshake of a subscriber."""
    headers = collections.OrderedDict(static_headers)
    if schema == CLOUD_EVENTS_SCHEMA:
        headers["WebHook-Request-Origin"] = REQUEST_ORIGIN
        return "OPTIONS", headers, b""
    headers["aeg-event-type"] = "SubscriptionValidation"
    headers["aeg-subscription-name"] = name
    headers["aeg-delivery-count"] = "0"
    headers["aeg-data-version"] = "1"
    headers["aeg-metadata-version"] = METADATA_VERSION
    headers["Content-Type"] = JSON_TYPE
    return "POST", headers, json.dumps(validation_event(topic, code, validation_url, sim_time_text)).encode("utf-8")


def handshake_verdict(schema, code, answer):
    """None when the answer validates the subscriber, else why not (for the error and the audit)."""
    status, headers, body = answer["status"], answer["headers"], answer["body"]
    if answer["error"] is not None:
        return "no answer (%s: %s)" % (answer["error"], answer["detail"])
    if status != 200:
        return "HTTP %d (Event Grid needs exactly 200 OK; 202 Accepted is not a validation response)" % status
    if schema == CLOUD_EVENTS_SCHEMA:
        origin = (headers.get("webhook-allowed-origin") or "").strip().lower()
        if origin not in (REQUEST_ORIGIN, "*"):
            return "the OPTIONS answer lacks WebHook-Allowed-Origin: %s (or *)" % REQUEST_ORIGIN
        return None
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("validationResponse") != code:
        return ('the answer does not echo the validationCode as {"validationResponse": "<code>"} (Event Grid would '
                'wait 5 minutes for a GET of the validationUrl, then fail; the mock fails at once)')
    return None


def send(url, method, headers, body, ca_file, timeout=RESPONSE_TIMEOUT):
    """One HTTP attempt: {"status", "headers" (lower-case names), "body", "error", "detail"}; never raises."""
    parts = urlsplit(url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    answer = {"status": None, "headers": {}, "body": b"", "error": None, "detail": None}
    try:
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=ca_file)
            conn = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        try:
            conn.request(method, target, body=body if method != "OPTIONS" else None, headers=dict(headers))
            response = conn.getresponse()
            answer["body"] = response.read(MAX_ANSWER)
            answer["status"] = response.status
            answer["headers"] = dict((k.lower(), v) for k, v in response.getheaders())
        finally:
            conn.close()
    except socket.timeout as exc:
        answer.update(error="TimedOut", detail=str(exc) or "no answer within %g s" % timeout)
    except ssl.SSLError as exc:
        answer.update(error="SocketError", detail="TLS: %s" % exc)
    except (OSError, http.client.HTTPException) as exc:
        answer.update(error="SocketError", detail="%s: %s" % (type(exc).__name__, exc))
    return answer


class Deliverer(object):
    """The background thread: takes due work from the state (under its lock), sends it (without the
    lock), hands the answer back (under the lock). Woken by new notifications and clock advances,
    and every poll seconds of real time so that transitions due as simulated time runs are seen."""

    def __init__(self, state, poll=0.05):
        self._state = state
        self._poll = poll
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mock_imds_eventgrid", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def wake(self):
        self._wake.set()

    def stop(self, timeout=5.0):
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self):
        return self._thread.is_alive()

    def _run(self):
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                jobs = self._state._eventgrid_take()
                for job in jobs:
                    if self._stopping.is_set():
                        return
                    answer = send(job["url"], job["method"], job["headers"], job["body"], job["ca_file"])
                    self._state._eventgrid_done(job, answer)
            except Exception as exc:  # pylint: disable=broad-except
                # A bug of the mock must not end delivery silently: it goes in the audit, the loop goes on.
                self._state._eventgrid_internal_error(exc)
                jobs = []
            if not jobs:
                self._wake.wait(self._poll)
