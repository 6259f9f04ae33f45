# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control API under /_mock/: one function from a request to a JSON answer."""

from __future__ import print_function

import re

from .checks import MockError, _check_keys, parse_json
from .rules import CONTROL_PREFIX, _parse_query
from .scenarios import BUILTIN_SCENARIOS


def _query_args(query):
    params = _parse_query(query)
    if params is None:
        raise MockError("duplicate query parameters")
    return params


_SEQ_RE = re.compile(r"\A[0-9]{1,18}\Z")


def _since(params):
    value = params.get("since")
    if value is None:
        return None
    if not _SEQ_RE.match(value):
        raise MockError("since must be a sequence number (an integer of up to 18 digits), got %r" % value[:40])
    return int(value)


def _control_vm(state, params):
    vm = params.get("vm")
    if vm is not None and not state.has_vm(vm):
        raise MockError("no VM named %r in the fleet" % vm, 404)
    return vm


def control(state, method, path, query, body):
    """Run one control call; returns (status, JSON-able object). path starts after /_mock/."""
    doc = parse_json(body, "the request body") if body and body.strip() else {}
    parts = [p for p in path.split("/") if p]
    route = "/".join(parts[:1])
    params = _query_args(query)
    if method == "POST" and not isinstance(doc, dict):
        raise MockError("the request body must be a JSON object")
    if route == "arm":
        return state.arm_control(method, parts[1:], doc)
    if route == "eventgrid":
        return state.eventgrid_control(method, parts[1:], doc, since=_since(params), subscriber=params.get("subscriber"))
    if route == "state" and len(parts) == 1 and method == "GET":
        return 200, state.snapshot()
    if route == "events":
        if len(parts) == 1 and method == "GET":
            return 200, state.events()
        if len(parts) == 1 and method == "POST":
            return 201, state.add_event(doc)
        if len(parts) == 2 and method == "GET":
            return 200, state.event(parts[1])
        if len(parts) == 3 and method == "POST":
            return 200, state.event_action(parts[1], parts[2])
    if route == "faults":
        if len(parts) == 1 and method == "GET":
            return 200, state.faults()
        if len(parts) == 1 and method == "POST":
            return 201, state.add_fault(doc)
        if len(parts) == 1 and method == "DELETE":
            return 200, state.clear_faults(vm=_control_vm(state, params))
        if len(parts) == 2 and method == "DELETE":
            return 200, state.clear_faults(fault_id=parts[1])
    if parts == ["time", "advance"] and method == "POST":
        _check_keys(doc, ("seconds",), "time/advance body")
        if "seconds" not in doc:
            raise MockError('time/advance needs {"seconds": N} (simulated seconds)')
        return 200, state.advance(doc["seconds"])
    if route == "config" and len(parts) == 1:
        if method == "GET":
            return 200, state.config()
        if method == "POST":
            return 200, state.configure(doc)
    if route == "reset" and len(parts) == 1 and method == "POST":
        _check_keys(doc, ("fleet", "start_time"), "reset body")
        return 200, state.reset(fleet=doc.get("fleet"), start_time=doc.get("start_time"))
    if route == "fleet" and len(parts) == 1:
        if method == "GET":
            return 200, state.fleet()
        if method == "POST":
            return 200, state.set_fleet(doc)
    if route == "scenario" and len(parts) == 1 and method == "POST":
        return 200, state.load_scenario(doc, files=False)
    if route == "scenarios" and len(parts) == 1 and method == "GET":
        return 200, dict((name, s["description"]) for name, s in sorted(BUILTIN_SCENARIOS.items()))
    if route == "audit" and len(parts) == 1 and method == "GET":
        return 200, state.audit(since=_since(params), vm=_control_vm(state, params))
    if route == "redirect-target" and len(parts) == 1:
        state.record_followed_redirect(method, CONTROL_PREFIX + path + ("?" + query if query else ""))
        raise MockError("mock_imds: a client followed a redirect; IMDS clients must never follow redirects")
    raise MockError("no control call %s /_mock/%s; see docs/docsite/rst/mock_imds.rst for the control API" % (method, path), 404)
