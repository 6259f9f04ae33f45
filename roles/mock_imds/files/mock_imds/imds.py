# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IMDS side of the state: rate limit, faults, request rules, documents and approvals."""

from __future__ import print_function

import collections
import json

from .clock import iso_utc
from .faults import DELAY_FAULTS, GARBLE_FAULTS, status_body
from .rules import (
    BODY_BAD_API_VERSION,
    BODY_BAD_APPROVAL,
    BODY_BAD_FORMAT,
    BODY_FORWARDED,
    BODY_JSON_LEAF,
    BODY_METHOD,
    BODY_NOT_FOUND,
    BODY_NO_METADATA,
    BODY_TEXT_NON_LEAF,
    BODY_TOO_MANY,
    BODY_VERSIONS,
    INSTANCE_ACCEPTS,
    JSON_TYPE,
    PATH_INSTANCE,
    HEADERLESS_VERSIONS,
    PATH_SCHEDULED_EVENTS,
    PATH_VERSIONS,
    REDIRECT_TRAP,
    SCHEDULED,
    SCHEDULED_EVENTS_ACCEPTS,
    SCHEMA_FOR_VERSION,
    TEXT_TYPE,
    VISIBLE_STATES,
    _error_bytes,
    _json_bytes,
    _parse_query,
)


PATH_IDENTITY_TOKEN = "/metadata/identity/oauth2/token"


class Response(object):
    """One answer of the mock. action "drop" closes without answering, "reset" sends a TCP RST,
    "trickle" sends the answer one byte per ``interval`` seconds, "oversize" pads a 200 document
    with spaces to ``size`` bytes (streamed, never held in memory)."""
    __slots__ = ("status", "body", "content_type", "headers", "action", "interval", "size")

    def __init__(self, status, body=b"", content_type=JSON_TYPE, headers=(), action=None, interval=None, size=None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers
        self.action = action
        self.interval = interval
        self.size = size


class Admission(object):
    """What the rate limiter and the faults decided before the request is answered."""
    __slots__ = ("limited", "delay", "fault")

    def __init__(self, limited=False, delay=0.0, fault=None):
        self.limited = limited
        self.delay = delay
        self.fault = fault


ADMIT = Admission()
RATE_LIMITED = Admission(limited=True)


class ImdsEndpoints(object):
    """What MockState answers to IMDS requests (a mixin: MockState holds the lock, fleet and events)."""

    # -- the IMDS side -----------------------------------------------------------------------

    def default_vm(self):
        return self._fleet.default_vm

    def has_vm(self, name):
        return name in self._fleet.vms

    # -- the service's own lifecycle (service_lifecycle) -------------------------------------

    def _service_enabled(self, vm, now):
        record = self._service.get(vm)
        return record is not None and now - record[1] < self._service_cfg["service_idle_disable"]

    def _service_touch(self, vm):
        """A request for events: it enables the service for this VM (after the enable delay) or
        keeps it enabled. Events that appeared before the VM's service was enabled stay unseen: the
        mock's own model (Microsoft documents neither a per-VM service nor what becomes of them)."""
        now = self._now()
        if self._service_enabled(vm, now):
            self._service[vm][1] = now
            return
        self._service[vm] = [now + self._service_cfg["service_enable_delay"], now]
        self._bump((vm,))

    def _service_hides(self, vm, event):
        record = self._service.get(vm)
        return record is None or event.appear_at < record[0]

    def _service_view(self, vm):
        record = self._service.get(vm)
        now = self._now()
        return collections.OrderedDict((
            ("enabled", self._service_enabled(vm, now) and record[0] <= now),
            ("enabled_at", None if record is None else iso_utc(record[0])),
            ("last_request", None if record is None else iso_utc(record[1])),
        ))

    def admit(self, vm, method, path):
        """Rate limit and fault selection for one IMDS request to VM vm (path without query)."""
        with self._lock:
            if vm not in self._fleet.vms:
                return ADMIT
            real = self._clock()
            if self._rate_limit:
                window = self._windows[vm]
                cutoff = real - 1.0
                while window and window[0] <= cutoff:
                    window.popleft()
                if len(window) >= self._rate_limit:
                    return RATE_LIMITED
                window.append(real)
            delay = 0.0
            if (self._service_cfg["service_lifecycle"] and path == PATH_SCHEDULED_EVENTS
                    and not self._service_enabled(vm, self._now())):
                delay = self._service_cfg["service_first_call_delay"]
            if not self._faults:
                return Admission(delay=delay) if delay else ADMIT
            answer = None
            for fault in list(self._faults):
                if fault.expires is not None and real >= fault.expires:
                    self._faults.remove(fault)
                    continue
                if not fault.matches(vm, method, path):
                    continue
                if fault.kind in DELAY_FAULTS:
                    if fault.kind == "first_call_delay":
                        fault.delayed_vms.add(vm)
                    delay += fault.delay
                elif answer is None:
                    answer = fault
                else:
                    continue
                fault.hits += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
            return Admission(delay=delay, fault=answer)

    def respond(self, vm, method, path, query, headers, body, admission, arrival):
        """The answer to one IMDS request, recorded in the audit. headers: a case-insensitive mapping."""
        with self._lock:
            if vm not in self._fleet.vms:
                return Response(404, _error_bytes("mock_imds: no VM named %s in the fleet" % vm))
            now = self._tick()
            fault = admission.fault
            if admission.limited:
                response = Response(429, BODY_TOO_MANY)
            elif fault is None or fault.kind in GARBLE_FAULTS:
                response = self._answer(vm, method, path, query, headers, body)
                if fault is not None:
                    response = self._garble(fault, response)
            else:
                response = self._fault_response(fault, vm, path)
            full_path = path + "?" + query if query else path
            self._audit_request(arrival, now, vm, method, full_path, response.status,
                                None if fault is None else fault.kind)
            return response

    def _fault_response(self, fault, vm, path):
        if fault.kind == "status":
            headers = () if fault.retry_after is None else (("Retry-After", str(fault.retry_after)),)
            body = fault.body.encode("utf-8") if fault.body is not None else status_body(fault.status)
            return Response(fault.status, body, headers=headers)
        if fault.kind == "redirect":
            location = fault.location or "%s%s?from=%s%s" % (self.base_url, REDIRECT_TRAP, vm, path)
            return Response(fault.status, b"", headers=(("Location", location),))
        return Response(None, action=fault.kind)  # drop, reset

    @staticmethod
    def _garble(fault, response):
        kind = fault.kind
        if kind == "trickle":
            response.action, response.interval = "trickle", fault.interval
            return response
        if kind == "oversize":
            if response.status == 200:
                response.action, response.size = "oversize", max(fault.size, len(response.body))
            return response
        if kind == "empty_body":
            return Response(200, b"")
        body = response.body if response.status == 200 and len(response.body) > 1 else b'{"DocumentIncarnation":1,'
        return Response(200, body[:max(1, len(body) // 2)])

    def _answer(self, vm, method, path, query, headers, body):
        if headers.get("X-Forwarded-For") is not None:
            return Response(400, BODY_FORWARDED)
        params = _parse_query(query)
        metadata = headers.get("Metadata")
        if metadata is None or metadata.strip().lower() != "true":
            # The header is enforced from 2017-08-01 on; the earlier versions did without it.
            if params is None or params.get("api-version") not in HEADERLESS_VERSIONS:
                return Response(400, BODY_NO_METADATA)
        if params is None:
            return Response(400, _error_bytes("Bad request. Duplicate query parameters are not allowed"))
        if path == PATH_SCHEDULED_EVENTS:
            allowed, accepts = ("GET", "POST"), SCHEDULED_EVENTS_ACCEPTS
        elif path == PATH_INSTANCE or path.startswith(PATH_INSTANCE + "/"):
            allowed, accepts = ("GET",), INSTANCE_ACCEPTS
        elif path == PATH_VERSIONS:
            allowed, accepts = ("GET",), None
        elif path == PATH_IDENTITY_TOKEN and method == "GET":
            return self.identity_token(vm, params)
        else:
            return Response(404, BODY_NOT_FOUND)
        if method not in allowed:
            return Response(405, BODY_METHOD, headers=(("Allow", ", ".join(allowed)),))
        if accepts is None:
            return Response(200, BODY_VERSIONS)
        if params.get("api-version") not in accepts:
            return Response(400, BODY_BAD_API_VERSION)
        fmt = params.get("format", "json")
        if fmt not in ("json", "text"):
            return Response(400, BODY_BAD_FORMAT)
        if path != PATH_SCHEDULED_EVENTS:
            return self._instance(vm, path, fmt)
        if fmt != "json":
            return Response(400, BODY_TEXT_NON_LEAF)
        schema = SCHEMA_FOR_VERSION[params["api-version"]]
        if self._service_cfg["service_lifecycle"]:
            self._service_touch(vm)
        if method == "GET":
            return Response(200, self._document(vm, schema))
        return self._approve(vm, body)

    def _instance(self, vm, path, fmt):
        node = self._fleet.vms[vm].instance
        for key in path[len(PATH_INSTANCE):].split("/")[1:]:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return Response(404, BODY_NOT_FOUND)
        leaf = not isinstance(node, (dict, list))
        if fmt == "text":
            if not leaf:
                return Response(400, BODY_TEXT_NON_LEAF)
            return Response(200, str(node).encode("utf-8"), TEXT_TYPE)
        if leaf:
            return Response(400, BODY_JSON_LEAF)
        return Response(200, _json_bytes(node))

    def _approve(self, vm, body):
        try:
            doc = json.loads(body.decode("utf-8")) if body else None
        except ValueError:
            doc = None
        requests = doc.get("StartRequests") if isinstance(doc, dict) else None
        if not isinstance(requests, list) or not all(
                isinstance(r, dict) and isinstance(r.get("EventId"), str) for r in requests):
            return Response(400, BODY_BAD_APPROVAL)
        ids = [r["EventId"] for r in requests]
        known, unknown = [], []
        for event_id in ids:
            event = self._by_id.get(event_id.upper())
            if event is not None and event.status in VISIBLE_STATES and vm in event.audience:
                known.append(event)
            else:
                unknown.append(event_id)
        if unknown and self._unknown_ids == "reject":
            return Response(400, _error_bytes("Bad request. Unknown EventId: %s" % ", ".join(unknown)))
        now = self._now()
        not_listed, started = [], []
        for event in known:
            if vm not in event.resources:
                not_listed.append(event.event_id)
            if event.status != SCHEDULED:
                continue
            event.approvals.append(collections.OrderedDict((("vm", vm), ("sim_time", iso_utc(now)),
                                                            ("in_resources", vm in event.resources))))
            # Any VM the event is delivered to (its availability set or placement group) may
            # approve it for all; on a shared host Azure also waits for the other tenants.
            if self._approval_mode == "not_before":
                continue
            if self._approval_mode == "all" and not event.tenants_approved:
                continue
            started.append(event)
        self._approvals.append((self._next_seq(), self._wallclock(), now, vm, ids, unknown, not_listed,
                                [e.event_id for e in started]))
        if started:
            changed = set()
            for event in started:
                changed |= self._apply(event, "start", now, "approval")
            self._bump(changed)
            self._rebuild_live()
            self._refresh_due()
        return Response(200, b"", content_type=None)
