# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Event Grid face: webhook subscribers registered through `/_mock/eventgrid/...`, one notification
per state change of every published event, queued per subscriber, handed to the delivery thread
(eventgrid_delivery.py) and audited attempt by attempt.

A mixin of MockState, like ArmEndpoints: one lock, one clock, one set of events. Every change of
an event goes through MockState._record_transition, which calls _eventgrid_note; whether an event is
published is arm.py's rule (_published_scope), and data.resourceInfo is arm.py's Resource Graph row,
so IMDS, Resource Graph and Event Grid show the same event."""

from __future__ import print_function

import collections
import os
import re
import ssl
import threading
import uuid
from urllib.parse import parse_qsl, urlsplit

from .checks import MockError, _check_keys, _number, _string
from .clock import iso_utc
from .eventgrid_delivery import (
    NEVER_RETRIED,
    RESPONSE_TIMEOUT,
    SCHEMAS,
    SUCCESS,
    Deliverer,
    delivery_request,
    handshake_request,
    handshake_verdict,
    notification,
    outcome_name,
    retry_delay,
)
from .rules import PENDING, VISIBLE_STATES

SUBSCRIBER_KEYS = ("url", "schema", "max_events_per_batch", "ca_file", "headers", "name", "max_delivery_attempts",
                   "event_ttl", "queue_limit")
MAX_SUBSCRIBERS = 100
MAX_HEADERS = 10          # "You can set up to 10 headers when creating an event subscription."
MAX_HEADER_VALUE = 4096   # "Each header value shouldn't be greater than 4,096 (4K) bytes."
DEFAULT_QUEUE_LIMIT = 10000
MAX_DUPLICATES = 10 ** 6
# The mock writes these itself; aeg- is Event Grid's ("Don't use the aeg- prefix").
OWN_HEADERS = ("content-type", "content-length", "host", "transfer-encoding", "connection", "webhook-request-origin")
_NAME_RE = re.compile(r"\A[A-Za-z0-9-]{3,64}\Z")
_TOKEN_RE = re.compile(r"\A[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}\Z")
CREATING, SUCCEEDED, FAILED = "Creating", "Succeeded", "Failed"


class _Subscriber(object):
    def __init__(self, sid, cfg):
        self.sid = sid
        self.__dict__.update(cfg)
        self.state = CREATING
        self.failure = None
        self.code = str(uuid.uuid4())
        self.queue = collections.deque()
        self.batch = None         # the items of the batch being delivered (None: take the next from the queue)
        self.attempt = 0          # attempts made for that batch
        self.next_at = None       # simulated time of its next attempt
        self.busy = False         # a job of this subscriber is with the delivery thread
        self.done = threading.Event()
        self.counters = collections.OrderedDict(
            (k, 0) for k in ("delivered", "retried", "dropped", "duplicated", "overflowed"))


def _check_url(value):
    url = _string(value, "url", maximum=2048)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise MockError("url must not contain spaces or control characters; percent-encode them")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise MockError("url %r is not a URL (%s); give https://HOST:PORT/PATH?code=SECRET" % (url[:200], exc))
    if parts.scheme not in ("https", "http"):
        raise MockError("url must start with https:// (what Event Grid delivers to) or http:// (behind a TLS-"
                        "terminating proxy, or in tests), got %r" % url[:200])
    if not parts.hostname:
        raise MockError("url %r names no host; tests use https://127.0.0.1:PORT/PATH" % url[:200])
    if parts.username is not None or parts.password is not None:
        raise MockError("url must not carry user:password@; put the secret in the query string (?code=SECRET) "
                        "or in an Authorization header (headers)")
    if parts.fragment:
        raise MockError("url must not have a #fragment; Event Grid sends the path and query string only")
    if port == 0:
        raise MockError("url: port 0 is no port; give the receiver's port")
    return url, parts


def _check_headers(value):
    if not isinstance(value, dict):
        raise MockError("headers must be an object of header name to value (Event Grid's static delivery "
                        "properties, e.g. {\"Authorization\": \"Bearer ...\"}), got %r" % (value,))
    if len(value) > MAX_HEADERS:
        raise MockError("headers: at most %d (Event Grid's limit for delivery properties), got %d"
                        % (MAX_HEADERS, len(value)))
    headers = collections.OrderedDict()
    for name, text in value.items():
        if not _TOKEN_RE.match(name):
            raise MockError("headers: %r is not an HTTP header name (letters, digits and !#$%%&'*+.^_`|~-)" % name[:100])
        if name.lower().startswith("aeg-") or name.lower() in OWN_HEADERS:
            raise MockError("headers: %s is set by Event Grid itself; choose another name" % name)
        if name.lower() in (n.lower() for n in headers):
            raise MockError("headers: %s is given twice (names are case-insensitive)" % name)
        if not isinstance(text, str) or any(c in text for c in "\r\n\0"):
            raise MockError("headers.%s must be a string without line breaks, got %r" % (name, text))
        if len(text.encode("utf-8")) > MAX_HEADER_VALUE:
            raise MockError("headers.%s: at most %d bytes (Event Grid's limit), got %d"
                            % (name, MAX_HEADER_VALUE, len(text.encode("utf-8"))))
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise MockError("headers.%s must be plain ASCII or Latin-1 text (HTTP header values)" % name)
        headers[name] = text
    return headers


def _check_ca_file(value, scheme):
    path = _string(value, "ca_file", maximum=4096)
    if scheme != "https":
        raise MockError("ca_file only applies to an https:// url; drop it or use https")
    if not os.path.isfile(path):
        raise MockError("ca_file %s is not a file; give the PEM file of the CA that signed the receiver's "
                        "certificate (e.g. the mock's test CA, ca.pem of its tls_dir)" % path[:300])
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise MockError("ca_file %s is not a PEM CA certificate (%s); give the CA that signed the receiver's "
                        "certificate" % (path[:300], exc))
    return path


class EventGridFace(object):
    """The Event Grid side of MockState (lock, clock, events and audit seq are MockState's)."""

    def _init_eventgrid(self):
        self._eg_subscribers = collections.OrderedDict()
        self._eg_serial = 0
        self._eg_duplicates = 0
        self._eg_worker = None

    # -- notifications (lock held) ---------------------------------------------------------------

    def _eventgrid_note(self, event, old, sim_time):
        """A state change of event: one notification to every validated subscriber, if its scope publishes.
        An event that never left PENDING (cancelled before it appeared) was never published: nothing."""
        if not self._eg_subscribers or (old == PENDING and event.status not in VISIBLE_STATES):
            return
        published = self._published_scope(event)
        if published is None:
            return
        doc = notification(str(uuid.uuid4()), self._row(event, *published), iso_utc(sim_time))
        copies = 1
        if self._eg_duplicates:
            self._eg_duplicates -= 1
            copies = 2
        status = doc["data"]["resourceInfo"]["properties"]["EventStatus"]
        for sub in self._eg_subscribers.values():
            if sub.state != SUCCEEDED:
                continue
            for copy in range(copies):
                item = (doc, event.event_id, status, sim_time, copy > 0)
                if len(sub.queue) >= sub.queue_limit:
                    sub.counters["overflowed"] += 1
                    self._eg_record(sub, "notification", None, [item], None, {"error": "QueueFull", "detail":
                                    "queue_limit %d reached" % sub.queue_limit, "status": None}, "dropped")
                    continue
                sub.queue.append(item)
                sub.counters["duplicated"] += copy
        self._eventgrid_wake()

    def _eventgrid_wake(self):
        if self._eg_worker is not None:
            self._eg_worker.wake()

    def _eg_record(self, sub, kind, method, items, attempt, answer, outcome, next_at=None, reason=None, at=None):
        """One audit record; sim_time is when the attempt was made (at), not when its answer came."""
        docs = [item[0] for item in items]
        self._eg_audit.append(collections.OrderedDict((
            ("seq", self._next_seq()), ("time", iso_utc(self._wallclock())),
            ("sim_time", iso_utc(self._now() if at is None else at)),
            ("subscriber", sub.sid), ("name", sub.name), ("kind", kind), ("method", method), ("attempt", attempt),
            ("delivery_count", None if attempt is None else attempt - 1),
            ("ids", [d["id"] for d in docs]), ("event_ids", [item[1] for item in items]),
            ("statuses", [item[2] for item in items]), ("duplicates", [item[4] for item in items]),
            ("status", answer.get("status")), ("error", answer.get("error")), ("detail", answer.get("detail")),
            ("outcome", outcome), ("reason", reason), ("next_attempt", iso_utc(next_at)))))

    # -- the delivery thread's side ---------------------------------------------------------------

    def _eventgrid_take(self):
        """Work that is due now: handshakes of new subscribers, then per subscriber its next batch, in order."""
        with self._lock:
            self._tick()
            now = self._now()
            jobs = []
            for sub in self._eg_subscribers.values():
                if sub.busy or sub.state == FAILED:
                    continue
                if sub.state == CREATING:
                    method, headers, body = handshake_request(
                        sub.schema, sub.name, "/subscriptions/%s" % self._fleet.placement.subscription_id, sub.code,
                        "%s/_mock/eventgrid/subscribers/%s/validate?code=%s" % (self.base_url, sub.sid, sub.code),
                        iso_utc(now), sub.headers)
                    jobs.append(self._eg_job(sub, "handshake", method, headers, body, now))
                    continue
                if sub.batch is None and sub.queue:
                    sub.batch, ids = [], set()
                    while sub.queue and len(sub.batch) < sub.max_events_per_batch and sub.queue[0][0]["id"] not in ids:
                        ids.add(sub.queue[0][0]["id"])  # a duplicate goes in a delivery of its own
                        sub.batch.append(sub.queue.popleft())
                    sub.attempt, sub.next_at = 0, now
                if sub.batch is None or now < sub.next_at:
                    continue
                oldest = min(item[3] for item in sub.batch)
                if sub.attempt and now - oldest >= sub.event_ttl * 60:
                    # "The time-to-live expiration is checked ONLY at the next scheduled delivery attempt."
                    self._eg_drop(sub, {}, "TimeToLiveExceeded", at=now)
                    self._eventgrid_wake()
                    continue
                headers, body = delivery_request(sub.schema, sub.name, [item[0] for item in sub.batch], sub.attempt,
                                                 sub.headers)
                jobs.append(self._eg_job(sub, "notification", "POST", headers, body, now))
            return jobs

    @staticmethod
    def _eg_job(sub, kind, method, headers, body, at):
        sub.busy = True
        return {"sid": sub.sid, "sub": sub, "kind": kind, "url": sub.url, "method": method, "headers": headers,
                "body": body, "ca_file": sub.ca_file, "at": at}

    def _eg_drop(self, sub, answer, reason, at=None):
        sub.counters["dropped"] += len(sub.batch)
        self._eg_record(sub, "notification", "POST" if answer else None, sub.batch, sub.attempt if answer else None,
                        answer, "dropped", reason=reason, at=at)
        sub.batch = None

    def _eventgrid_done(self, job, answer):
        with self._lock:
            sub = job["sub"]
            sub.busy = False
            if job["kind"] == "handshake":
                failure = handshake_verdict(sub.schema, sub.code, answer)
                sub.state, sub.failure = (FAILED, failure) if failure else (SUCCEEDED, None)
                self._eg_record(sub, "handshake", job["method"], [], 1, answer, "failed" if failure else "validated",
                                reason=failure, at=job["at"])
                sub.done.set()
                return
            sub.attempt += 1
            status, at = answer["status"], job["at"]
            if status in SUCCESS:
                sub.counters["delivered"] += len(sub.batch)
                self._eg_record(sub, "notification", "POST", sub.batch, sub.attempt, answer, "delivered", at=at)
                sub.batch = None
            elif status in NEVER_RETRIED:
                self._eg_drop(sub, answer, NEVER_RETRIED[status], at=at)
            elif sub.attempt >= sub.max_delivery_attempts:
                self._eg_drop(sub, answer, "MaxDeliveryAttemptsExceeded", at=at)
            else:
                # The delay runs from the failed attempt, on the mock's clock.
                sub.next_at = at + retry_delay(sub.attempt, status)
                sub.counters["retried"] += len(sub.batch)
                self._eg_record(sub, "notification", "POST", sub.batch, sub.attempt, answer, "retry",
                                next_at=sub.next_at, reason=outcome_name(status, answer["error"]), at=at)

    def _eventgrid_internal_error(self, exc):
        with self._lock:
            self._eg_audit.append(collections.OrderedDict((
                ("seq", self._next_seq()), ("time", iso_utc(self._wallclock())), ("sim_time", iso_utc(self._now())),
                ("kind", "internal"), ("outcome", "error"), ("detail", "mock_imds internal error: %r" % (exc,)))))

    # -- the control side ----------------------------------------------------------------------------

    def eventgrid_control(self, method, parts, doc, since=None, subscriber=None):
        """/_mock/eventgrid/...: subscribers, duplicate, deliveries."""
        route = "/".join(parts)
        if route == "subscribers" and method == "POST":
            return 201, self.eventgrid_add_subscriber(doc)
        with self._lock:
            if route in ("", "subscribers") and method == "GET":
                subs = [self._eg_view(s) for s in self._eg_subscribers.values()]
                if route == "subscribers":
                    return 200, subs
                return 200, collections.OrderedDict((("subscribers", subs),
                                                     ("duplicates_pending", self._eg_duplicates),
                                                     ("delivering", self._eg_worker is not None
                                                      and self._eg_worker.alive)))
            if route == "subscribers" and method == "DELETE":
                removed = len(self._eg_subscribers)
                self._eg_subscribers.clear()
                return 200, {"removed": removed}
            if len(parts) == 2 and parts[0] == "subscribers" and method in ("GET", "DELETE"):
                sub = self._eg_subscribers.get(parts[1])
                if sub is None:
                    raise MockError("no Event Grid subscriber %r; GET /_mock/eventgrid/subscribers lists them"
                                    % parts[1][:80], 404)
                if method == "DELETE":
                    del self._eg_subscribers[parts[1]]
                return 200, self._eg_view(sub)
            if route == "duplicate" and method == "POST":
                _check_keys(doc, ("count",), "eventgrid/duplicate body")
                if "count" not in doc:
                    raise MockError('eventgrid/duplicate needs {"count": N}: the next N notifications are delivered '
                                    "twice with the same Event Grid id")
                self._eg_duplicates = _number(doc["count"], "count", minimum=0, maximum=MAX_DUPLICATES, integer=True)
                return 200, {"count": self._eg_duplicates}
            if route == "deliveries" and method == "GET":
                return 200, {"deliveries": self._eg_deliveries(since, subscriber), "last_seq": self._seq}
        raise MockError("no control call %s /_mock/eventgrid/%s; see docs/docsite/rst/mock_imds.rst, Event Grid "
                        "delivery" % (method, route[:100]), 404)

    def eventgrid_add_subscriber(self, doc=None, **kwargs):
        """Check, register, then wait (without the lock) for the validation handshake, as creating an
        event subscription does. A failed handshake leaves the subscriber Failed and raises MockError."""
        cfg = self._eg_parse(dict(doc or {}, **kwargs))
        with self._lock:
            if len(self._eg_subscribers) >= MAX_SUBSCRIBERS:
                raise MockError("the mock holds at most %d Event Grid subscribers; DELETE /_mock/eventgrid/"
                                "subscribers first" % MAX_SUBSCRIBERS)
            if cfg["name"] is None:
                cfg["name"] = "mock-subscription-%d" % (self._eg_serial + 1)
            if any(s.name.lower() == cfg["name"].lower() for s in self._eg_subscribers.values()):
                raise MockError("name %s is taken by another subscriber; choose another name" % cfg["name"])
            self._eg_serial += 1
            sub = _Subscriber("S%d" % self._eg_serial, cfg)
            self._eg_subscribers[sub.sid] = sub
            if self._eg_worker is None or not self._eg_worker.alive:
                self._eg_worker = Deliverer(self).start()
            self._eg_worker.wake()
        if not sub.done.wait(RESPONSE_TIMEOUT + 10):
            raise MockError("subscriber %s: the validation handshake did not finish; GET /_mock/eventgrid/"
                            "subscribers/%s shows its state" % (sub.sid, sub.sid), 504)
        with self._lock:
            if sub.state == FAILED:
                raise MockError("subscriber %s: webhook validation handshake failed for %s: %s. It stays Failed and "
                                "receives nothing (as an Event Grid subscription whose creation failed): fix the "
                                "endpoint, DELETE /_mock/eventgrid/subscribers/%s and add it again"
                                % (sub.sid, sub.base_url, sub.failure, sub.sid))
            return self._eg_view(sub)

    def eventgrid_deliveries(self, since=None, subscriber=None):
        with self._lock:
            return self._eg_deliveries(since, subscriber)

    def eventgrid_stop(self):
        """Stop the delivery thread (MockImds.stop calls this); queued notifications stay queued."""
        worker = self._eg_worker
        if worker is not None:
            worker.stop()

    def _eg_deliveries(self, since, subscriber):
        since = since or 0
        return [dict(r) for r in self._eg_audit
                if r["seq"] > since and (subscriber is None or r.get("subscriber") == subscriber)]

    @staticmethod
    def _eg_parse(doc):
        _check_keys(doc, SUBSCRIBER_KEYS, "eventgrid/subscribers body")
        if "url" not in doc:
            raise MockError('eventgrid/subscribers needs "url": the webhook, e.g. https://127.0.0.1:PORT/path?code=SECRET')
        url, parts = _check_url(doc["url"])
        schema = doc.get("schema", SCHEMAS[0])
        canonical = dict((s.lower(), s) for s in SCHEMAS)
        if not isinstance(schema, str) or schema.lower() not in canonical:
            raise MockError("schema must be EventGridSchema or CloudEventSchemaV1_0 (--event-delivery-schema), got %r"
                            % (schema,))
        name = doc.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME_RE.match(name)):
            raise MockError("name must be 3 to 64 letters, digits or hyphens (an event subscription name), got %r"
                            % (name,))
        return {
            "url": url, "base_url": "%s://%s%s" % (parts.scheme, parts.netloc, parts.path),
            "query_keys": [k for k, _v in parse_qsl(parts.query, keep_blank_values=True)],
            "schema": canonical[schema.lower()], "name": name,
            "max_events_per_batch": _number(doc.get("max_events_per_batch", 1), "max_events_per_batch (1 to 5000)",
                                            minimum=1, maximum=5000, integer=True),
            "max_delivery_attempts": _number(doc.get("max_delivery_attempts", 30), "max_delivery_attempts (1 to 30)",
                                             minimum=1, maximum=30, integer=True),
            "event_ttl": _number(doc.get("event_ttl", 1440), "event_ttl (minutes, 1 to 1440)", minimum=1,
                                 maximum=1440, integer=True),
            "queue_limit": _number(doc.get("queue_limit", DEFAULT_QUEUE_LIMIT), "queue_limit (1 to 100000)",
                                   minimum=1, maximum=100000, integer=True),
            "ca_file": None if doc.get("ca_file") is None else _check_ca_file(doc["ca_file"], parts.scheme),
            "headers": _check_headers(doc.get("headers", {})),
        }

    def _eg_view(self, sub):
        return collections.OrderedDict((
            ("id", sub.sid), ("name", sub.name), ("endpoint_base_url", sub.base_url), ("query_keys", sub.query_keys),
            ("schema", sub.schema), ("max_events_per_batch", sub.max_events_per_batch),
            ("max_delivery_attempts", sub.max_delivery_attempts), ("event_ttl", sub.event_ttl),
            ("queue_limit", sub.queue_limit), ("ca_file", sub.ca_file), ("header_names", list(sub.headers)),
            ("provisioning_state", sub.state), ("failure", sub.failure), ("queued", len(sub.queue)),
            ("in_flight", len(sub.batch) if sub.batch else 0), ("attempts", sub.attempt if sub.batch else 0),
            ("next_attempt", iso_utc(sub.next_at) if sub.batch else None), ("counters", dict(sub.counters))))
