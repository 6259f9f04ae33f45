# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state: fleet, clock, events, faults, audit, behind one lock."""

from __future__ import print_function

import collections
import threading
import time
import uuid

from .checks import MAX_SECONDS, MockError, _check_keys, _choice, _number
from .clock import MAX_START_TIME, SIM_TIME_MAX, SIM_TIME_MIN, clamp_time, iso_utc, parse_iso
from .events import Event, normalize_event_spec
from .faults import make_fault
from .fleet import Fleet
from .arm import ArmEndpoints
from .arm_control import ArmControl
from .eventgrid import EventGridFace
from .identity import IdentityEndpoints
from .imds import ImdsEndpoints
from .rules import (
    APPROVAL_MODES,
    CANCELLED,
    PENDING,
    RATE_LIMIT_PER_SECOND,
    REMOVED,
    SCHEDULED,
    STARTED,
    UNKNOWN_ID_POLICIES,
    VISIBLE_STATES,
    _json_bytes,
)
from .scenarios import CONFIG_KEYS, SCENARIO_KEYS, resolve_scenario


CLOCK_CAUSES = {"appear": "at", "start": "not_before", "cancel": "cancel_at", "remove": "duration"}


# Bounds of what one reset may hold: enough for any test, small enough to stay fast.
MAX_EVENTS = 20000
MAX_FAULTS = 1000
MAX_SPEED = 1e6
MAX_RATE_LIMIT = 1000000
# The service's own lifecycle (off unless asked): enabled by a VM's first request, which takes
# service_enable_delay simulated seconds (up to two minutes in Azure) and service_first_call_delay
# real seconds to answer; disabled after service_idle_disable simulated seconds without a request.
SERVICE_DEFAULTS = {"service_lifecycle": False, "service_enable_delay": 120.0, "service_first_call_delay": 0.0,
                    "service_idle_disable": 86400.0}
SERVICE_BOUNDS = {"service_enable_delay": (0, 600), "service_first_call_delay": (0, 120),
                  "service_idle_disable": (1, MAX_SECONDS)}


class MockState(ImdsEndpoints, ArmEndpoints, IdentityEndpoints, ArmControl, EventGridFace):
    """Everything the mock knows, behind one lock. Lifecycle transitions are computed lazily from
    the clock whenever state is touched, so advancing simulated time is instant.

    clock: a callable giving real monotonic seconds (time.monotonic); simulated time is
    start_time + elapsed * speed + advanced seconds. Rate limiting and fault durations use the
    same clock, unscaled. wallclock (time.time) only stamps the audit."""

    def __init__(self, fleet=None, default_vm=None, speed=1.0, start_time=None, rate_limit=True,
                 approval_mode="any", unknown_event_ids="accept", clock=None, wallclock=None, audit_limit=100000,
                 **service):
        self._lock = threading.Lock()
        self._clock = clock or time.monotonic
        self._wallclock = wallclock or time.time
        self._fleet = fleet if isinstance(fleet, Fleet) else Fleet(fleet, default_vm)
        self._speed = 1.0
        self._rate_limit = 0
        self._approval_mode = "any"
        self._unknown_ids = "accept"
        self._service_cfg = dict(SERVICE_DEFAULTS)
        cfg = {"speed": speed, "rate_limit": rate_limit, "approval_mode": approval_mode,
               "unknown_event_ids": unknown_event_ids}
        unknown = sorted(set(service) - set(SERVICE_DEFAULTS))
        if unknown:
            raise MockError("unknown option %s (known service options: %s)"
                            % (", ".join(unknown), ", ".join(sorted(SERVICE_DEFAULTS))))
        cfg.update(service)
        self._apply_config(self._parse_config(cfg))
        self._set_start(self._wallclock() if start_time is None else self._start_epoch(start_time))
        self._audit_limit = audit_limit
        self.base_url = ""
        self.scenario = None
        self._fault_serial = 0
        self._reset_runtime()
        self._init_arm()
        self._init_eventgrid()

    # -- helpers (lock held) -----------------------------------------------------------------

    @staticmethod
    def _start_epoch(value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _number(value, "start_time (epoch seconds)", minimum=SIM_TIME_MIN, maximum=MAX_START_TIME)
        try:
            epoch = parse_iso(value)
        except (TypeError, ValueError, OverflowError):
            raise MockError("start_time %r is not an ISO 8601 time such as 2022-04-11T22:11:53Z"
                            % (value if not isinstance(value, str) else value[:80],))
        if not SIM_TIME_MIN <= epoch <= MAX_START_TIME:
            raise MockError("start_time %s is out of range: use a time between 1971 and 8900" % value)
        return epoch

    def _set_start(self, epoch):
        self._sim_base = epoch
        self._real_base = self._clock()

    def _now(self):
        return clamp_time(self._sim_base + (self._clock() - self._real_base) * self._speed)

    def _reset_runtime(self):
        self._events = []            # every event, in creation order
        self._live = []              # events in a visible state, in creation order
        self._by_id = {}             # upper-case id -> event
        self._ended = collections.deque()  # ended events kept as Resource Graph history, oldest first
        self._next_due = float("inf")
        self._faults = []
        self._incarnation = dict((name, 1) for name in self._fleet.vms)
        self._doc_cache = dict((name, {}) for name in self._fleet.vms)
        self._windows = dict((name, collections.deque()) for name in self._fleet.vms)
        self._service = {}           # VM -> [enabled_at, last_request] (service_lifecycle only)
        self._seq = 0
        self._requests = collections.deque(maxlen=self._audit_limit)
        self._approvals = collections.deque(maxlen=self._audit_limit)
        self._transitions = collections.deque(maxlen=self._audit_limit)
        self._eg_audit = collections.deque(maxlen=self._audit_limit)  # Event Grid attempts (eventgrid.py)

    def _next_seq(self):
        self._seq += 1
        return self._seq

    @staticmethod
    def _parse_config(cfg):
        """Check a config object; returns the attribute values it sets (nothing is changed yet)."""
        _check_keys(cfg, CONFIG_KEYS, "config")
        values = {}
        if "speed" in cfg:
            speed = _number(cfg["speed"], "speed", minimum=0, maximum=MAX_SPEED)
            if speed <= 0:
                raise MockError("speed must be > 0 (use 1 for real time; advance time with /_mock/time/advance)")
            values["_speed"] = speed
        if "rate_limit" in cfg:
            value = cfg["rate_limit"]
            if value is True:
                value = RATE_LIMIT_PER_SECOND
            elif value is False or value is None:
                value = 0
            else:
                value = _number(value, "rate_limit (true, false or requests per second)", minimum=0,
                                maximum=MAX_RATE_LIMIT, integer=True)
            values["_rate_limit"] = value
        if "approval_mode" in cfg:
            values["_approval_mode"] = _choice(cfg["approval_mode"], "approval_mode", APPROVAL_MODES)
        if "unknown_event_ids" in cfg:
            values["_unknown_ids"] = _choice(cfg["unknown_event_ids"], "unknown_event_ids", UNKNOWN_ID_POLICIES)
        service = {}
        for key, (minimum, maximum) in SERVICE_BOUNDS.items():
            if key in cfg:
                service[key] = _number(cfg[key], key, minimum=minimum, maximum=maximum)
        if "service_lifecycle" in cfg:
            if not isinstance(cfg["service_lifecycle"], bool):
                raise MockError("service_lifecycle must be true or false, got %r" % (cfg["service_lifecycle"],))
            service["service_lifecycle"] = cfg["service_lifecycle"]
        if service:
            values["_service_update"] = service
        return values

    def _apply_config(self, values):
        if "_speed" in values and hasattr(self, "_sim_base"):
            self._set_start(self._now())  # keep simulated time continuous across a speed change
        for name, value in values.items():
            if name == "_service_update":
                self._service_cfg.update(value)
                if not self._service_cfg["service_lifecycle"] and hasattr(self, "_service"):
                    self._service = {}
                self._doc_cache = dict((vm, {}) for vm in self._fleet.vms)
            else:
                setattr(self, name, value)

    def _config_view(self):
        return collections.OrderedDict((
            ("speed", self._speed),
            ("rate_limit", self._rate_limit > 0),
            ("rate_limit_per_second", self._rate_limit),
            ("approval_mode", self._approval_mode),
            ("unknown_event_ids", self._unknown_ids),
            ("default_vm", self._fleet.default_vm),
        ) + tuple(sorted(self._service_cfg.items())))

    def _bump(self, names):
        for name in names:
            self._incarnation[name] += 1
            self._doc_cache[name] = {}

    def _record_transition(self, event, to, sim_time, cause):
        old = event.status
        self._transitions.append((self._next_seq(), self._wallclock(), sim_time, event.event_id, old, to, cause))
        event.status = to
        self._eventgrid_note(event, old, sim_time)

    def _refresh_due(self):
        due = float("inf")
        for event in self._events:
            step = event.next_transition()
            if step is not None and step[0] < due:
                due = step[0]
        self._next_due = due

    def _rebuild_live(self):
        self._live = [e for e in self._events if e.status in VISIBLE_STATES]

    def _apply(self, event, action, at, cause):
        """One lifecycle step; returns the VMs whose document changed."""
        if action == "appear":
            status = event.initial_status
            if status == SCHEDULED and self._policy_start(event):
                status, cause = STARTED, "policy"  # auto-approved by the Scheduled Events Policy: never Scheduled
            self._record_transition(event, status, at, cause)
            if status == STARTED:
                event.started_at = at
            return event.audience
        if action == "start":
            self._record_transition(event, STARTED, at, cause)
            event.started_at = at
            return event.audience
        was_visible = event.status in VISIBLE_STATES
        self._record_transition(event, CANCELLED if action == "cancel" else REMOVED, at, cause)
        event.ended_at = at
        self._remember_ended(event)
        return event.audience if was_visible else frozenset()

    def _due_at(self, at):
        steps = ((e, e.next_transition()) for e in self._events)
        return [(e, step[1]) for e, step in steps if step is not None and step[0] <= at]

    def _tick(self, now=None):
        """Apply every transition that is due; each instant is one document change per VM."""
        if now is None:
            now = self._now()
        if now < self._next_due:
            return now
        while self._next_due <= now:
            at = self._next_due
            changed = set()
            batch = self._due_at(at)
            while batch:  # an event can step twice at one instant (notice 0): still one change
                for event, action in batch:
                    changed |= self._apply(event, action, at, CLOCK_CAUSES[action])
                batch = self._due_at(at)
            self._bump(changed)
            self._refresh_due()
        self._rebuild_live()
        return now

    def _change(self, event, action, cause):
        """A step caused by a request (approval, control call) at the current simulated time."""
        changed = self._apply(event, action, self._now(), cause)
        self._bump(changed)
        self._rebuild_live()
        self._refresh_due()

    def _event(self, event_id):
        event = self._by_id.get(str(event_id).upper())
        if event is None:
            raise MockError("no event with id %r; GET /_mock/state lists the events" % (event_id,), 404)
        return event

    def _check_room(self, count):
        if len(self._events) + count > MAX_EVENTS:
            raise MockError("the mock holds at most %d events; POST /_mock/reset first" % MAX_EVENTS)

    def _create_event(self, norm, base):
        """Every check first, then the change: a refused event leaves no trace."""
        last = base + norm["at"] + norm["notice"] + norm["duration"] + (norm["cancel_at"] or 0)
        if last > SIM_TIME_MAX:
            raise MockError("event: at + notice + duration end after the year 9000; use smaller values")
        event = Event()
        event_id = norm["event_id"] or str(uuid.uuid4()).upper()
        if event_id.upper() in self._by_id:
            raise MockError("an event with id %s already exists; give another event_id or omit it" % event_id)
        event.event_id = event_id
        for key in ("event_type", "resources", "resource_type", "event_source", "description",
                    "duration_in_seconds", "notice", "duration"):
            setattr(event, key, norm[key])
        event.initial_status = norm["status"]
        event.audience = self._fleet.audience(event.resources)
        event.status = PENDING
        event.appear_at = base + norm["at"]
        event.not_before = event.appear_at + event.notice if event.initial_status == SCHEDULED else None
        event.cancel_at = None if norm["cancel_at"] is None else base + norm["cancel_at"]
        event.started_at = event.ended_at = None
        event.approvals = []
        event.tenants_approved = False
        self._events.append(event)
        self._by_id[event_id.upper()] = event
        return event

    def _document(self, vm, schema):
        cache = self._doc_cache[vm]
        body = cache.get(schema)
        if body is None:
            entries = []
            hides = self._service_hides if self._service_cfg["service_lifecycle"] else None
            for event in self._live:
                if vm in event.audience and not (hides and hides(vm, event)):
                    entry = event.entry(schema)
                    if entry is not None:
                        entries.append(entry)
            body = _json_bytes(collections.OrderedDict((("DocumentIncarnation", self._incarnation[vm]),
                                                        ("Events", entries))))
            cache[schema] = body
        return body

    def _audit_request(self, arrival, sim_time, vm, method, path, status, fault):
        self._requests.append((self._next_seq(), arrival, sim_time, vm, method, path, status, fault))

    # -- the control side ---------------------------------------------------------------------

    def now(self):
        with self._lock:
            return self._now()

    def advance(self, seconds):
        seconds = _number(seconds, "seconds", minimum=0)
        with self._lock:
            if self._now() + seconds > SIM_TIME_MAX:
                raise MockError("seconds: %s would take the simulated clock past the year 9000; advance less or "
                                "POST /_mock/reset with a start_time" % seconds)
            self._sim_base += seconds
            now = self._tick()
            self._eventgrid_wake()  # retries that fell due
            return {"now": iso_utc(now), "advanced": seconds}

    def configure(self, cfg=None, **kwargs):
        cfg = dict(cfg or {}, **kwargs)
        with self._lock:
            values = self._parse_config(cfg)
            self._tick()
            self._apply_config(values)
            return self._config_view()

    def config(self):
        with self._lock:
            return self._config_view()

    def reset(self, fleet=None, start_time=None):
        new_fleet = None if fleet is None or isinstance(fleet, Fleet) else Fleet(fleet)
        start = None if start_time is None else self._start_epoch(start_time)
        with self._lock:
            self._reset(new_fleet or fleet, start)
            return self._snapshot()

    def _reset(self, fleet=None, start_epoch=None):
        """Checked values only (a Fleet, epoch seconds): nothing here may fail half-way."""
        if fleet is not None:
            self._fleet = fleet
            self._reset_policies()
        if start_epoch is not None:
            self._set_start(start_epoch)
        self.scenario = None
        self._reset_runtime()

    def set_fleet(self, doc):
        fleet = Fleet(doc)
        with self._lock:
            self._reset(fleet)
            return self._snapshot()

    def fleet(self):
        with self._lock:
            return self._fleet.document()

    def load_scenario(self, name_or_doc, fleet=None, default_vm=None, start_time=None, config=None, files=True):
        """Reset, then load a scenario. fleet (a fleet document), default_vm, start_time and config
        given here win over the scenario's own: the CLI passes its explicit options this way.
        Everything is checked first: a scenario that fails to load changes nothing."""
        name, doc = resolve_scenario(name_or_doc, files=files)
        _check_keys(doc, SCENARIO_KEYS, "scenario")
        events = doc.get("events", [])
        if not isinstance(events, list):
            raise MockError("scenario.events must be a list of event objects")
        new_fleet = None
        if fleet is not None or doc.get("fleet") is not None or default_vm is not None:
            new_fleet = Fleet(fleet if fleet is not None else doc.get("fleet"), default_vm)
        scenario_cfg = doc.get("config") or {}
        _check_keys(scenario_cfg, CONFIG_KEYS, "scenario.config")
        cfg = dict(scenario_cfg)
        if "speed" in doc:
            cfg["speed"] = doc["speed"]
        cfg.update(config or {})
        values = self._parse_config(cfg)
        start = start_time if start_time is not None else doc.get("start_time")
        start = None if start is None else self._start_epoch(start)
        with self._lock:
            target = new_fleet or self._fleet
            norms = [normalize_event_spec(spec, "scenario.events[%d]" % i, target) for i, spec in enumerate(events)]
            ids = [n["event_id"].upper() for n in norms if n["event_id"]]
            if len(ids) != len(set(ids)):
                raise MockError("scenario.events: the same event_id is given twice")
            if len(norms) > MAX_EVENTS:
                raise MockError("scenario.events: at most %d events" % MAX_EVENTS)
            base = self._now() if start is None else start
            for norm in norms:
                if base + norm["at"] + norm["notice"] + norm["duration"] + (norm["cancel_at"] or 0) > SIM_TIME_MAX:
                    raise MockError("scenario.events: an event ends after the year 9000; use smaller values")
            self._apply_config(values)
            self._reset(new_fleet, start)
            base = self._now()
            for norm in norms:
                self._create_event(norm, base)
            self.scenario = name
            self._refresh_due()
            self._tick()
            return self._snapshot()

    def add_event(self, spec=None, **kwargs):
        spec = dict(spec or {}, **kwargs)
        with self._lock:
            norm = normalize_event_spec(spec, "event", self._fleet)
            self._check_room(1)
            event = self._create_event(norm, self._now())
            self._refresh_due()
            self._tick()
            return event.view()

    def event_action(self, event_id, action):
        with self._lock:
            self._tick()
            event = self._event(event_id)
            allowed = {"cancel": (PENDING, SCHEDULED), "start": (SCHEDULED,), "complete": (SCHEDULED, STARTED),
                       "approve_tenants": (PENDING, SCHEDULED)}
            if action not in allowed:
                raise MockError("unknown event action %r: use cancel, start, complete or approve_tenants"
                                % action[:80], 404)
            if event.status not in allowed[action]:
                raise MockError("cannot %s event %s: it is %s (%s needs %s)"
                                % (action, event.event_id, event.status, action, " or ".join(allowed[action])))
            if action == "approve_tenants":
                self._approve_tenants(event)
            else:
                self._change(event, {"complete": "remove"}.get(action, action), "control")
            return event.view()

    def _approve_tenants(self, event):
        """The other tenants of the host agree (approval_mode all): the event starts once its own
        group has approved too."""
        event.tenants_approved = True
        if self._approval_mode == "all" and event.status == SCHEDULED and event.approvals:
            self._change(event, "start", "approval")

    def events(self):
        with self._lock:
            self._tick()
            return [e.view() for e in self._events]

    def event(self, event_id):
        with self._lock:
            self._tick()
            return self._event(event_id).view()

    def add_fault(self, spec=None, **kwargs):
        spec = dict(spec or {}, **kwargs)
        with self._lock:
            if len(self._faults) >= MAX_FAULTS:
                raise MockError("the mock holds at most %d faults; DELETE /_mock/faults first" % MAX_FAULTS)
            fault = make_fault(spec, self._fleet, self._clock(), "F%d" % (self._fault_serial + 1))
            self._fault_serial += 1
            self._faults.append(fault)
            return fault.view(self._clock())

    def faults(self):
        with self._lock:
            real = self._clock()
            self._faults = [f for f in self._faults if f.expires is None or real < f.expires]
            return [f.view(real) for f in self._faults]

    def clear_faults(self, vm=None, fault_id=None):
        with self._lock:
            keep = []
            for fault in self._faults:
                hit = (fault_id is None or fault.fault_id == fault_id) and (vm is None or fault.vm == vm)
                if not hit:
                    keep.append(fault)
            removed = len(self._faults) - len(keep)
            if fault_id is not None and not removed:
                raise MockError("no fault with id %r; GET /_mock/faults lists them" % fault_id, 404)
            self._faults = keep
            return {"removed": removed}

    def record_followed_redirect(self, method, path):
        """A client followed a redirect fault to the trap: that goes in the request audit (vm null)."""
        with self._lock:
            self._audit_request(self._wallclock(), self._now(), None, method, path, 400, "redirect")

    def audit(self, since=None, vm=None):
        since = 0 if since is None else since
        with self._lock:
            requests = [collections.OrderedDict((
                ("seq", s), ("time", iso_utc(t)), ("sim_time", iso_utc(st)), ("vm", v), ("method", m),
                ("path", p), ("status", code), ("fault", f)))
                for s, t, st, v, m, p, code, f in self._requests if s > since and (vm is None or v == vm)]
            approvals = [collections.OrderedDict((
                ("seq", s), ("time", iso_utc(t)), ("sim_time", iso_utc(st)), ("vm", v), ("event_ids", list(ids)),
                ("unknown_event_ids", list(unknown)), ("not_in_resources", list(foreign)),
                ("started", list(started))))
                for s, t, st, v, ids, unknown, foreign, started in self._approvals
                if s > since and (vm is None or v == vm)]
            visible = None if vm is None else set(e.event_id for e in self._events if vm in e.audience)
            transitions = [collections.OrderedDict((
                ("seq", s), ("time", iso_utc(t)), ("sim_time", iso_utc(st)), ("event_id", eid), ("from", old),
                ("to", new), ("cause", cause)))
                for s, t, st, eid, old, new, cause in self._transitions
                if s > since and (visible is None or eid in visible)]
            return {"requests": requests, "approvals": approvals, "transitions": transitions,
                    "arm_requests": self.arm_audit(since) if vm is None else [],
                    "eventgrid": self._eg_deliveries(since, None) if vm is None else [], "last_seq": self._seq}

    def incarnation(self, vm):
        with self._lock:
            self._tick()
            return self._incarnation[vm]

    def snapshot(self):
        with self._lock:
            self._tick()
            return self._snapshot()

    def _snapshot(self):
        vms = collections.OrderedDict()
        for name, vm in self._fleet.vms.items():
            vms[name] = collections.OrderedDict((
                ("group", vm.group), ("kind", vm.kind), ("url", "%s/vm/%s" % (self.base_url, name)),
                ("incarnation", self._incarnation[name]), ("default", name == self._fleet.default_vm)))
            if vm.gpu_fd1:
                vms[name]["gpu_single_fault_domain"] = True
            if self._service_cfg["service_lifecycle"]:
                vms[name]["service"] = self._service_view(name)
        return collections.OrderedDict((
            ("now", iso_utc(self._now())),
            ("speed", self._speed),
            ("scenario", self.scenario),
            ("config", self._config_view()),
            ("fleet", self._fleet.document()),
            ("vms", vms),
            ("events", [e.view() for e in self._events]),
            ("faults", [f.view(self._clock()) for f in self._faults]),
        ))
