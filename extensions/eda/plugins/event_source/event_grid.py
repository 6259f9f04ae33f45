# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event-Driven Ansible event source: the webhook of an Azure Event Grid subscription to scheduled events."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: event_grid
short_description: Azure Scheduled Events of a whole fleet, pushed by Event Grid, as Event-Driven Ansible events
version_added: 0.1.0
description:
  - An ansible-rulebook event source that is the webhook of an Azure Event Grid subscription to the
    C(Microsoft.ResourceNotifications.MaintenanceResources) system topic, where Azure publishes every
    state change of every scheduled event of the VMs, scale sets and availability sets whose Scheduled
    Events Policy enables C(eventGridAndResourceGraph). Nothing runs on the VMs.
  - It answers both validation handshakes, checks a secret on every request, and puts one event on the
    rulebook's queue for each scheduled event notification, with the event read by the same normaliser
    as M(azure_imds.scheduled_events.fleet_event_info).
  - "Each event put on the queue has: C(type), the transition, named as the IMDS source
    C(azure_imds.scheduled_events.scheduled_events) names them: V(scheduled) for
    C(EventStatus) Scheduled, V(started) for Started, V(ended) for Completed and V(cancelled) for Canceled;
    C(scheduled_event), the event as M(azure_imds.scheduled_events.fleet_event_info) returns it in
    RV(azure_imds.scheduled_events.fleet_event_info#module:events) (C(event_id), C(event_status) with
    Azure's own word, C(resources), C(not_before) in ISO 8601 UTC, C(id), C(scope_id),
    C(virtual_machine_ids), ...); and C(event_grid), the notification's envelope without its data
    (C(id), C(topic), C(subject), C(eventType), C(eventTime), C(dataVersion), C(metadataVersion);
    under CloudEvents its own keys plus those three aliases), C(data_api_version) (C(data.apiVersion)),
    C(delivery_count) (the C(aeg-delivery-count) header, V(null) when absent) and C(schema)
    (V(EventGridSchema) or V(CloudEventSchemaV1_0))."
  - A scheduled event is recognised by C(data.resourceInfo.type) V(microsoft.maintenance/scheduledevents)
    (without regard to case), never by C(eventType) alone, since Microsoft's pages give two different
    C(eventType) strings. Its ARM id is C(data.resourceInfo.id), else the C(subject). Other event types,
    and C(Microsoft.EventGrid.SubscriptionDeletedEvent), are logged and skipped.
  - "Duplicates: Event Grid may deliver the same notification twice with the same C(id), and retries a
    delivery it did not see answered with success. An event whose Event Grid C(id) was queued in the
    last O(dedup_hours) is dropped (logged). The same C(EventId) comes back with a new C(id) for each
    status and is kept. An id counts as seen only once its event is queued. The ids are kept in memory,
    at most O(dedup_max_ids) of them (the oldest forgotten first); without O(dedup_file) a restart
    forgets them, so a retry of a delivery queued before the restart is queued again. With
    O(dedup_file) they are also appended to that journal (fsynced once per delivery, compacted by a
    rename) and read back at start."
  - "Answers: 200 once every event of a delivery is queued (or skipped, or dropped as a duplicate);
    200 with C({\"validationResponse\": code}) to the Event Grid schema handshake; 200 with
    C(WebHook-Allowed-Origin) and C(WebHook-Allowed-Rate) to the CloudEvents C(OPTIONS) handshake;
    401 without a valid secret (nothing is queued; Event Grid drops the delivery); 400 for a body that
    cannot be parsed (not UTF-8 JSON, not an array in the Event Grid schema, nested deeper than 32);
    413 for a body over O(max_body_size) or over 5,000 events (Event Grid does not retry 400, 401 or
    413: it drops or dead-letters the delivery); 503 when the events cannot be queued within
    O(queue_wait) seconds or the source is stopping (Event Grid retries it with growing delays for up to
    24 hours); 404 for another path, 405 for another method."
  - An element of a delivery that cannot be read (not an object, larger than Event Grid's 1 MB per
    event, without an C(id), with an C(EventStatus) that names no transition) is logged and skipped;
    the rest of the delivery is still queued. Text from the event (C(Description), C(Resources)) is
    kept as sent, but unpaired surrogates become U+FFFD, and the log shows it only shortened and
    escaped. Nothing in a request stops the source.
  - The query string of a request is never logged (it carries the secret); the log names the path.
  - A bad option stops the source at start with a message naming the option and the fix.
author:
  - azure_imds.scheduled_events contributors
options:
  host:
    description:
      - The address to listen on. V(0.0.0.0) for every IPv4 address; V(127.0.0.1) behind a TLS-terminating
        reverse proxy on the same host.
    type: str
    default: 0.0.0.0
  port:
    description:
      - The TCP port to listen on, from 1 to 65535.
    type: int
    required: true
  path:
    description:
      - The URL path of the webhook (the path of the endpoint URL given to Event Grid, without the query
        string). Other paths are answered 404.
    type: str
    default: /
  certfile:
    description:
      - A PEM file with the server certificate (and its chain) for HTTPS served by the source itself.
        Event Grid delivers only to C(https://) URLs with a certificate a public CA signed.
      - Leave out to serve plain HTTP behind a reverse proxy that terminates TLS and passes the path and
        the query string on unchanged.
    type: path
  keyfile:
    description:
      - The PEM file of the certificate's private key, when it is not in O(certfile). Needs O(certfile).
    type: path
  secret:
    description:
      - The secret Event Grid sends in the query parameter C(code) of the endpoint URL
        (C(https://host:port/path?code=SECRET)), on every request, handshakes included.
      - A list of secrets accepts any of them, so a secret can be rotated (add the new one, change the
        subscription's URL, remove the old one). Compared in constant time.
      - Use at least 32 random URL-safe characters (for example C(openssl rand -hex 32)).
    type: raw
  authorization:
    description:
      - The whole value of the C(Authorization) header Event Grid sends when the subscription sets it as a
        static delivery property (C(--delivery-attribute-mapping Authorization static "Bearer TOKEN" true)).
      - A string or a list (for rotation). With both O(secret) and O(authorization), a request must carry
        both.
    type: raw
  insecure_no_secret:
    description:
      - Start without O(secret) and O(authorization), so that anyone who reaches the port can queue
        events. Only for a source that something else protects (a proxy that authenticates). Without it,
        a source with neither refuses to start.
    type: bool
    default: false
  allowed_rate:
    description:
      - What the CloudEvents handshake answers in C(WebHook-Allowed-Rate), requests a minute, or V(*)
        for any rate.
    type: str
    default: '*'
  queue_size:
    description:
      - How many events the source holds while the rulebook is busy (ansible-rulebook takes one at a time).
        A delivery is answered 200 only once all its events are in this buffer.
      - A whole number from 1 to 1000000.
    type: int
    default: 10000
  queue_wait:
    description:
      - Seconds a delivery may wait for room in the buffer before it is answered 503 (Event Grid then
        retries it later; what was queued is not queued again). Event Grid waits 30 seconds for an answer.
      - A number of seconds from 0 to 20.
    type: float
    default: 5
  max_body_size:
    description:
      - The largest request body read, in bytes; a larger one is answered 413, which Event Grid does not
        retry. Event Grid sends batches of at most 1,024 KB (a single larger event, of at most 1 MB, alone);
        the default leaves four times that.
      - A whole number from 65536 to 67108864.
    type: int
    default: 4194304
  dedup_hours:
    description:
      - Hours an Event Grid id is remembered after its event was queued. Event Grid retries for up to 24
        hours (its default and largest event time to live).
      - A number from 1 to 168.
    type: float
    default: 24
  dedup_max_ids:
    description:
      - The most Event Grid ids remembered; when more are queued within O(dedup_hours), the oldest are
        forgotten first.
      - A whole number from 1000 to 10000000.
    type: int
    default: 100000
  dedup_file:
    description:
      - A file where the ids remembered are kept, so that a restart of ansible-rulebook still drops the
        duplicates of what it queued before. Created (mode 0600) when missing; its directory must exist.
      - Leave out to remember the ids in memory only.
    type: path
notes:
  - Needs aiohttp, which ansible-rulebook itself depends on.
  - Event Grid treats 200 to 204 as success, retries 408, 429, 5xx and timeouts, and never retries 400,
    401, 403 or 413. A delivery is answered within O(queue_wait) seconds, well inside its 30.
  - ansible-rulebook itself, run with C(-vv), logs each source's arguments (O(secret) included) in its
    C(ruleset define) debug line; this source never logs them.
  - The handshakes are checked against the secret like any request. The CloudEvents handshake echoes
    the C(WebHook-Request-Origin) (Event Grid sends C(eventgrid.azure.net)).
seealso:
  - module: azure_imds.scheduled_events.fleet_event_info
  - module: azure_imds.scheduled_events.fleet_event_approve
"""

EXAMPLES = r"""
---
- name: Scheduled events of the whole fleet, from Event Grid
  hosts: all
  sources:
    - azure_imds.scheduled_events.event_grid:
        host: 0.0.0.0
        port: 8443
        path: /eventgrid
        certfile: /etc/eda/tls/fullchain.pem
        keyfile: /etc/eda/tls/privkey.pem
        secret: "{{ lookup('ansible.builtin.env', 'EVENT_GRID_SECRET') }}"
        dedup_file: /var/lib/eda/event_grid_seen.jsonl
  rules:
    - name: Drain and approve each scheduled event once
      condition: event.type == "scheduled"
      throttle:
        once_within: 24 hours
        group_by_attributes:
          - event.scheduled_event.event_id
          - event.scheduled_event.event_status
      action:
        debug:
          msg: "{{ event.scheduled_event.event_type }} of {{ event.scheduled_event.resources }}"
"""

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import ssl
import sys

# ansible-rulebook runs a source by its file path, with no collection importable: when this file
# sits in a collections tree (.../ansible_collections/azure_imds/scheduled_events/, seven levels up),
# that tree goes first on the import path (as in scheduled_events.py).
_COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 7))
if os.path.isdir(os.path.join(_COLLECTIONS, "ansible_collections", "azure_imds", "scheduled_events")):
    sys.path.insert(0, _COLLECTIONS)

from aiohttp import web

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _event_grid, _event_grid_seen, _source_args
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._source_args import SourceConfigError

OPTIONS = ("host", "port", "path", "certfile", "keyfile", "secret", "authorization", "insecure_no_secret",
           "allowed_rate", "queue_size", "queue_wait", "max_body_size", "dedup_hours", "dedup_max_ids", "dedup_file")
MAX_SECRET_LENGTH = 1024
SHORT_SECRET = 16
RETRY_AFTER_SECONDS = "10"

LOG = logging.getLogger("azure_imds.scheduled_events.event_grid")
# A request aiohttp cannot parse is reported on its own logger with the bytes it choked on.
_QUERY_RE = re.compile(r"\?[^\s'\"]*")


def check_args(args):
    """The source's options, each checked once: a dict of clean values, and warnings for the log.
    Raises SourceConfigError naming the option. Files are not opened here (see run())."""
    if not isinstance(args, dict):
        raise SourceConfigError("the source's arguments must be a mapping of options, got %s." % _edge.short_repr(args))
    unknown = sorted(str(k) for k in args if k not in OPTIONS and not str(k).startswith("eda_"))
    if unknown:
        raise SourceConfigError("unknown option%s %s; the options are %s." % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(OPTIONS)))
    if args.get("port") is None:
        raise SourceConfigError("port is required: the TCP port Event Grid's endpoint URL names (from 1 to 65535).")
    clean = {
        "host": _source_args.text(args, "host", "0.0.0.0", "an address to listen on (0.0.0.0, 127.0.0.1, a host name)"),
        "port": _source_args.number(args, "port", None, 1, 65535, integer=True, unit="a TCP port"),
        "path": _source_args.text(args, "path", "/", "a URL path starting with /"),
        "certfile": _source_args.text(args, "certfile", what="the path of a PEM certificate file"),
        "keyfile": _source_args.text(args, "keyfile", what="the path of a PEM key file"),
        "secret": _source_args.secrets(args, "secret", "the value of the code query parameter of the endpoint URL",
                                       MAX_SECRET_LENGTH),
        "authorization": _source_args.secrets(args, "authorization",
                                              'the Authorization header value, such as "Bearer TOKEN"', MAX_SECRET_LENGTH),
        "insecure_no_secret": _source_args.flag(args, "insecure_no_secret", False),
        "allowed_rate": _source_args.text(args, "allowed_rate", "*", "a number of requests a minute or *"),
        "queue_size": _source_args.number(args, "queue_size", 10000, 1, 1000000, integer=True, unit="events"),
        "queue_wait": _source_args.number(args, "queue_wait", 5, 0, 20),
        "max_body_size": _source_args.number(args, "max_body_size", 4 * 1024 * 1024, 65536, 64 * 1024 * 1024,
                                             integer=True, unit="bytes"),
        "dedup_hours": _source_args.number(args, "dedup_hours", 24, 1, 168, unit="hours"),
        "dedup_max_ids": _source_args.number(args, "dedup_max_ids", 100000, 1000, 10000000, integer=True, unit="ids"),
        "dedup_file": _source_args.text(args, "dedup_file", what="the path of a file"),
    }
    path = clean["path"]
    if not path.startswith("/") or "?" in path or "#" in path or " " in path:
        raise SourceConfigError("path must be a URL path starting with / and without a query string (the secret goes "
                                "in secret), got %s." % _edge.short_repr(path))
    if clean["allowed_rate"] != "*" and not (clean["allowed_rate"].isdigit() and int(clean["allowed_rate"]) > 0):
        raise SourceConfigError("allowed_rate must be a whole number of requests a minute or *, got %s."
                                % _edge.short_repr(clean["allowed_rate"]))
    if clean["keyfile"] and not clean["certfile"]:
        raise SourceConfigError("keyfile needs certfile: give the certificate too, or neither for plain HTTP behind a "
                                "TLS-terminating proxy.")
    warnings = []
    if not clean["secret"] and not clean["authorization"]:
        if not clean["insecure_no_secret"]:
            raise SourceConfigError("secret (or authorization) is required: without it anyone who reaches the port "
                                    "can queue events. Set secret to the code query parameter of the endpoint URL, "
                                    "or insecure_no_secret: true when something else authenticates the requests.")
        warnings.append("insecure_no_secret: the source accepts requests without a secret.")
    elif clean["insecure_no_secret"]:
        warnings.append("insecure_no_secret is ignored: a secret or authorization is set and checked.")
    if any(len(secret) < SHORT_SECRET for secret in clean["secret"] or []):
        warnings.append("secret: an entry is shorter than %d characters; use a long random one (openssl rand -hex 32)."
                        % SHORT_SECRET)
    return clean, warnings


def ssl_context(options):
    """The server's TLS context (TLS 1.2 or later, as Event Grid requires), or None for plain HTTP."""
    if not options["certfile"]:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(options["certfile"], options["keyfile"])
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise SourceConfigError("certfile %s%s cannot be loaded (%s); give a PEM certificate (with its chain) and its "
                                "private key." % (options["certfile"], " with keyfile %s" % options["keyfile"]
                                                  if options["keyfile"] else "", exc))
    return context


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


def _matches(given, accepted):
    """Whether given is one of accepted, in time that depends on neither (digests compared, all of them)."""
    if given is None:
        return False
    digest = _digest(given)
    found = False
    for value in accepted:
        found |= hmac.compare_digest(digest, _digest(value))
    return found


class _RedactQuery(logging.Filter):
    """aiohttp reports a request it cannot parse with the bytes it read: cut any query string out."""

    def filter(self, record):
        record.msg = _QUERY_RE.sub("?<query hidden>", record.getMessage())
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


HTTP_LOG = logging.getLogger("azure_imds.scheduled_events.event_grid.http")
HTTP_LOG.addFilter(_RedactQuery())


class Receiver(object):
    """Answers Event Grid's requests: handshakes, the secret, the body, the buffer and the answer.

    Deliveries are queued one at a time (a lock), so that a duplicate arriving while its first copy
    waits for room is dropped once the first is queued. Each delivery gets queue_wait seconds in all,
    the lock included, before it is answered 503."""

    def __init__(self, options, seen, loop_time=None):
        self.options = options
        self.seen = seen
        self.buffer = asyncio.Queue(options["queue_size"])
        self.stopping = False
        self.lock = asyncio.Lock()
        self._loop_time = loop_time or asyncio.get_event_loop().time

    # -- the answers -------------------------------------------------------------------------------

    def _answer(self, request, status, what, body=None, headers=None):
        """The response, and one log line naming the method, the path (never the query) and the outcome."""
        level = logging.INFO if status < 400 or status == 404 else logging.WARNING
        LOG.log(level, "event_grid: %s %s from %s: %d, %s", request.method, _edge.short_repr(request.path, 200),
                request.remote, status, what)
        if status == 503:
            headers = dict(headers or {}, **{"Retry-After": RETRY_AFTER_SECONDS})
        if body is None:
            body = {"status": status, "message": what}
        return web.json_response(body, status=status, headers=headers)

    def _authorized(self, request):
        """None when the request carries the secrets configured, else why not (never the values)."""
        if self.options["secret"]:
            codes = request.query.getall("code", [])
            if len(codes) != 1:
                return "no code query parameter" if not codes else "more than one code query parameter"
            if not _matches(codes[0], self.options["secret"]):
                return "the code query parameter is not a secret of this source"
        if self.options["authorization"]:
            if not _matches(request.headers.get("Authorization"), self.options["authorization"]):
                return "the Authorization header is missing or wrong"
        return None

    async def handle(self, request):
        try:
            return await self._handle(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pylint: disable=broad-except
            # A bug of this source, never a request's fault: answered as Event Grid retries it.
            LOG.error("event_grid: %s %s: the source failed (%s: %s); answered 500, Event Grid retries",
                      request.method, _edge.short_repr(request.path, 200), type(exc).__name__, _edge.short_repr(str(exc)))
            return web.json_response({"status": 500, "message": "the source failed"}, status=500)

    async def _handle(self, request):
        if request.path.rstrip("/") != self.options["path"].rstrip("/"):
            return self._answer(request, 404, "not the webhook's path")
        if request.method not in ("POST", "OPTIONS"):
            return self._answer(request, 405, "only POST and OPTIONS are answered", headers={"Allow": "POST, OPTIONS"})
        refused = self._authorized(request)
        if refused:
            return self._answer(request, 401, "refused: %s" % refused)
        if self.stopping:
            return self._answer(request, 503, "the source is stopping")
        if request.method == "OPTIONS":
            return self._cloud_events_handshake(request)
        return await self._delivery(request)

    def _cloud_events_handshake(self, request):
        origin = request.headers.get("WebHook-Request-Origin")
        headers = {"Allow": "POST, OPTIONS", "WebHook-Allowed-Rate": self.options["allowed_rate"],
                   "WebHook-Allowed-Origin": origin if origin and origin.isprintable() else "*"}
        return self._answer(request, 200, "CloudEvents handshake of %s" % _edge.short_repr(origin, 100),
                            body={}, headers=headers)

    async def _read(self, request):
        """The body, or a response refusing it."""
        length = request.content_length
        if length is not None and length > self.options["max_body_size"]:
            return None, self._answer(request, 413, "the body is %d bytes, over max_body_size %d" % (
                length, self.options["max_body_size"]))
        try:
            return await request.read(), None
        except web.HTTPRequestEntityTooLarge:
            return None, self._answer(request, 413, "the body is over max_body_size %d" % self.options["max_body_size"])

    async def _delivery(self, request):
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        try:
            schema, elements = _event_grid.parse_delivery(body, request.headers.get("Content-Type"))
        except _event_grid.DeliveryError as exc:
            return self._answer(request, exc.status, "refused: %s" % exc)
        count = _event_grid.delivery_count(request.headers.get("aeg-delivery-count"))
        events, skipped, warnings = [], 0, []
        for position, raw in enumerate(elements, 1):
            element = _event_grid.classify(raw, schema)
            if element.kind == "validation":
                return self._answer(request, 200, "Event Grid schema handshake (SubscriptionValidationEvent)",
                                    body={"validationResponse": element.code})
            event = None
            if element.kind == "scheduled":
                event = _event_grid.queued_event(element, schema, count, position, warnings)
            elif element.kind == "malformed":
                warnings.append("element #%d %s; it was skipped." % (position, element.reason))
            else:
                LOG.info("event_grid: element #%d skipped: %s", position, element.reason)
            if event is None:
                skipped += 1
            else:
                events.append(event)
        for warning in warnings:
            LOG.warning("event_grid: %s", _edge.short_repr(warning, 500))
        queued, duplicates, trouble = await self._queue(events)
        what = "%d queued, %d duplicate%s dropped, %d skipped of %d (%s, delivery count %s)" % (
            queued, duplicates, "" if duplicates == 1 else "s", skipped, len(elements), schema, count)
        if trouble:
            return self._answer(request, 503, "%s; %s" % (trouble, what))
        return self._answer(request, 200, what, body={"queued": queued, "duplicates": duplicates, "skipped": skipped})

    async def _queue(self, events):
        """Put the events in the buffer, each id seen once; (queued, duplicates, trouble or None)."""
        deadline = self._loop_time() + self.options["queue_wait"]
        queued = duplicates = 0
        try:
            if self.lock.locked() and deadline <= self._loop_time():
                raise asyncio.TimeoutError()
            # An unlocked lock is taken at once (wait_for of Python 3.11 would refuse a timeout of 0).
            await (self.lock.acquire() if not self.lock.locked() else
                   asyncio.wait_for(self.lock.acquire(), deadline - self._loop_time()))
        except asyncio.TimeoutError:
            return 0, 0, "other deliveries held the buffer for queue_wait %s s" % _edge.format_number(
                self.options["queue_wait"])
        trouble = None
        try:
            for event in events:
                event_grid_id = event["event_grid"]["id"]
                if event_grid_id in self.seen:
                    duplicates += 1
                    LOG.info("event_grid: Event Grid id %s was queued before (%s %s); dropped as a duplicate",
                             _edge.short_repr(event_grid_id, 100), event["type"],
                             _edge.short_repr(event["scheduled_event"].get("event_id"), 60))
                    continue
                if self.stopping:
                    trouble = "the source is stopping"
                    break
                try:
                    if not self.buffer.full():
                        self.buffer.put_nowait(event)
                    elif deadline > self._loop_time():
                        await asyncio.wait_for(self.buffer.put(event), deadline - self._loop_time())
                    else:
                        raise asyncio.TimeoutError()
                except asyncio.TimeoutError:
                    trouble = "the buffer of queue_size %d stayed full for queue_wait %s s" % (
                        self.options["queue_size"], _edge.format_number(self.options["queue_wait"]))
                    break
                self.seen.add(event_grid_id)
                queued += 1
                LOG.info("event_grid: %s %s (%s) of %s", event["type"],
                         _edge.short_repr(event["scheduled_event"].get("event_id"), 60),
                         _edge.short_repr(event["scheduled_event"].get("event_type"), 40),
                         _edge.short_repr(event["scheduled_event"].get("resources"), 200))
        finally:
            try:
                self.seen.write()
            except (OSError, ValueError) as exc:
                LOG.error("event_grid: dedup_file %s cannot be written (%s); duplicates of this delivery may be "
                          "queued again after a restart", self.options["dedup_file"], exc)
            self.lock.release()
        return queued, duplicates, trouble


async def _feed(queue, buffer):
    """Hand the buffered events to the rulebook's queue, one at a time, as it takes them."""
    while True:
        event = await buffer.get()
        await queue.put(event)


async def run(queue, options, seen=None, started=None):
    """Serve until cancelled. started, when given, is called with the (host, port) bound."""
    context = ssl_context(options)
    if seen is None:
        seen = _event_grid_seen.SeenIds(options["dedup_file"], options["dedup_hours"] * 3600.0,
                                        options["dedup_max_ids"])
        try:
            unreadable = seen.load()
        except _event_grid_seen.SeenFileError as exc:
            raise SourceConfigError(str(exc))
        if unreadable:
            LOG.warning("event_grid: dedup_file %s: %d lines could not be read (a write cut short); they were left out",
                        options["dedup_file"], unreadable)
    receiver = Receiver(options, seen)
    app = web.Application(client_max_size=options["max_body_size"])
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    # No access log: its request line would carry the query string, and so the secret.
    runner = web.AppRunner(app, access_log=None, logger=HTTP_LOG)
    await runner.setup()
    feeder = None
    try:
        site = web.TCPSite(runner, options["host"], options["port"], ssl_context=context)
        try:
            await site.start()
        except OSError as exc:
            raise SourceConfigError("port %s on host %s cannot be listened on (%s); choose another port or host."
                                    % (options["port"], options["host"], exc.strerror or exc))
        bound = site._server.sockets[0].getsockname()[:2] if site._server and site._server.sockets else None
        LOG.info("event_grid: listening on %s://%s:%s%s (%s; %d Event Grid ids remembered%s)",
                 "https" if context else "http", options["host"], bound[1] if bound else options["port"],
                 options["path"], "secret checked" if options["secret"] or options["authorization"] else
                 "NO SECRET", len(seen), ", kept in %s" % options["dedup_file"] if options["dedup_file"] else "")
        feeder = asyncio.ensure_future(_feed(queue, receiver.buffer))
        if started is not None:
            started(bound)
        await feeder
    finally:
        receiver.stopping = True
        if feeder is not None:
            feeder.cancel()
            await asyncio.wait([feeder])
        await runner.cleanup()
        seen.close()
        if receiver.buffer.qsize():
            LOG.warning("event_grid: stopped with %d events the rulebook had not taken; Event Grid will not send them "
                        "again", receiver.buffer.qsize())


async def main(queue, args):
    """ansible-rulebook's entry point."""
    try:
        options, warnings = check_args(args)
        for warning in warnings:
            LOG.warning("event_grid: %s", warning)
        await run(queue, options)
    except SourceConfigError as exc:
        LOG.error("azure_imds.scheduled_events.event_grid: %s", exc)
        raise


if __name__ == "__main__":
    # Run directly: print each event (for a look at what a rulebook would get).

    class PrintQueue(object):
        async def put(self, event):
            print(json.dumps(event, indent=2))  # noqa: T201

    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(PrintQueue(), {"port": int(os.environ.get("EVENT_GRID_PORT", "8080")),
                                    "secret": os.environ.get("EVENT_GRID_SECRET")}))
