# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Faults injected on the IMDS side: kinds, their options and their bodies."""

from __future__ import print_function

import collections
import re
from http import HTTPStatus

from .checks import MAX_TEXT, MockError, _check_keys, _choice, _number
from .rules import MAX_FAULT_DELAY, OWN_BODIES, PATH_SCHEDULED_EVENTS, _error_bytes


FAULT_KINDS = ("first_call_delay", "status", "slow", "drop", "empty_body", "malformed_json", "redirect", "reset",
               "trickle", "oversize")
DELAY_FAULTS = ("first_call_delay", "slow")
# Faults that change how the real answer of a processed request is sent, not what it says.
GARBLE_FAULTS = ("empty_body", "malformed_json", "trickle", "oversize")
FAULT_KEYS = ("kind", "vm", "status", "count", "duration", "delay", "retry_after", "paths", "methods", "location",
              "body", "interval", "size")
# A trickle sends one byte per interval; an oversize answer pads the document to size bytes.
MAX_TRICKLE_INTERVAL = 30.0
DEFAULT_OVERSIZE = 2 * 1024 * 1024
MAX_OVERSIZE = 1024 * 1024 * 1024
REDIRECT_STATUSES = (301, 302, 303, 307, 308)


class Fault(object):
    __slots__ = ("fault_id", "kind", "vm", "status", "remaining", "expires", "duration", "delay", "retry_after",
                 "paths", "methods", "location", "body", "delayed_vms", "hits", "interval", "size")

    def matches(self, vm, method, path):
        if self.vm is not None and self.vm != vm:
            return False
        if self.methods is not None and method not in self.methods:
            return False
        if self.paths is not None and not any(path == p or path.startswith(p + "/") for p in self.paths):
            return False
        if self.kind == "first_call_delay":
            return method == "GET" and path == PATH_SCHEDULED_EVENTS and vm not in self.delayed_vms
        return True

    def view(self, real_now):
        return collections.OrderedDict((
            ("fault_id", self.fault_id), ("kind", self.kind), ("vm", self.vm), ("status", self.status),
            ("count", self.remaining), ("hits", self.hits), ("duration", self.duration),
            ("expires_in", None if self.expires is None else round(max(0.0, self.expires - real_now), 3)),
            ("delay", self.delay), ("retry_after", self.retry_after), ("paths", self.paths),
            ("methods", self.methods), ("location", self.location), ("interval", self.interval),
            ("size", self.size),
        ))


def _fault_paths(value):
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > 32 or not all(
            isinstance(p, str) and 0 < len(p) <= 256 for p in value):
        raise MockError("fault paths must be a list of IMDS paths such as /metadata/scheduledevents "
                        "(or short names such as scheduledevents)")
    return [p.rstrip("/") if p.startswith("/") else "/metadata/" + p.strip("/") for p in value]


# What may go into a response header verbatim: printable ASCII, never a line break.
_HEADER_VALUE_RE = re.compile(r"\A[\x20-\x7e]{1,2048}\Z")
_TOKEN_RE = re.compile(r"\A[A-Za-z]{1,16}\Z")


def _retry_after(value):
    """Seconds (a whole number) or, as RFC 9110 also allows, an HTTP date sent as given."""
    if value is None:
        return None
    if isinstance(value, str):
        if not _HEADER_VALUE_RE.match(value) or len(value) > 64:
            raise MockError("fault retry_after must be whole seconds or an HTTP date such as "
                            "'Sat, 01 Jan 2000 00:00:00 GMT' (printable, up to 64 characters), got %r" % value[:80])
        return value
    return _number(value, "fault retry_after (whole seconds or an HTTP date)", minimum=0, integer=True)


def make_fault(spec, fleet, real_now, fault_id):
    _check_keys(spec, FAULT_KEYS, "fault")
    f = Fault()
    f.fault_id = fault_id
    f.kind = _choice(spec.get("kind"), "fault kind", FAULT_KINDS)
    f.vm = spec.get("vm")
    if f.vm is not None and (not isinstance(f.vm, str) or f.vm not in fleet.vms):
        raise MockError("fault vm %r is not in the fleet (%s); omit vm for all VMs"
                        % (f.vm, ", ".join(list(fleet.vms)[:20])), 404)
    count = spec.get("count")
    f.remaining = None if count is None else _number(count, "fault count", minimum=1, maximum=10 ** 9, integer=True)
    duration = spec.get("duration")
    f.duration = None if duration is None else _number(duration, "fault duration (real seconds)", minimum=0.001)
    f.expires = None if f.duration is None else real_now + f.duration
    f.delay = 0.0
    if f.kind in DELAY_FAULTS:
        if "delay" not in spec:
            raise MockError("a %s fault needs delay (real seconds, at most %d)" % (f.kind, MAX_FAULT_DELAY))
        f.delay = _number(spec["delay"], "fault delay", minimum=0, maximum=MAX_FAULT_DELAY)
    elif "delay" in spec:
        raise MockError("delay only applies to first_call_delay and slow faults; add a separate slow fault")
    f.status = None
    if f.kind == "status":
        if "status" not in spec:
            raise MockError("a status fault needs status, e.g. 410, 429, 500, 503")
        f.status = _number(spec["status"], "fault status", minimum=100, maximum=599, integer=True)
    elif f.kind == "redirect":
        f.status = _number(spec.get("status", 307), "redirect status", integer=True)
        _choice(f.status, "redirect status", REDIRECT_STATUSES)
    elif "status" in spec:
        raise MockError("status only applies to status and redirect faults")
    f.retry_after = _retry_after(spec.get("retry_after"))
    f.paths = _fault_paths(spec.get("paths"))
    methods = spec.get("methods")
    if methods is not None and (not isinstance(methods, list) or len(methods) > 16
                                or not all(isinstance(m, str) and _TOKEN_RE.match(m) for m in methods)):
        raise MockError("fault methods must be a list such as [\"GET\"]")
    f.methods = None if methods is None else [m.upper() for m in methods]
    f.location = spec.get("location")
    if f.location is not None and (f.kind != "redirect" or not isinstance(f.location, str)
                                   or not _HEADER_VALUE_RE.match(f.location)):
        raise MockError("location only applies to redirect faults and must be a URL string (printable ASCII, up "
                        "to 2048 characters)")
    f.body = spec.get("body")
    if f.body is not None and (f.kind != "status" or not isinstance(f.body, str) or len(f.body) > MAX_TEXT):
        raise MockError("body only applies to status faults and must be a string of at most %d characters" % MAX_TEXT)
    f.interval = None
    if f.kind == "trickle":
        if "interval" not in spec:
            raise MockError("a trickle fault needs interval: real seconds between two bytes of the answer "
                            "(more than 0, at most %d)" % MAX_TRICKLE_INTERVAL)
        f.interval = _number(spec["interval"], "fault interval", minimum=0.001, maximum=MAX_TRICKLE_INTERVAL)
    elif "interval" in spec:
        raise MockError("interval only applies to trickle faults")
    f.size = None
    if f.kind == "oversize":
        f.size = _number(spec.get("size", DEFAULT_OVERSIZE), "fault size (bytes)", minimum=1, maximum=MAX_OVERSIZE,
                         integer=True)
    elif "size" in spec:
        raise MockError("size only applies to oversize faults")
    f.delayed_vms = set()
    f.hits = 0
    return f


def status_body(status):
    """The body of a status fault: the mock's own body for that status, else the reason phrase."""
    if status in OWN_BODIES:
        return OWN_BODIES[status]
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return _error_bytes(phrase)
