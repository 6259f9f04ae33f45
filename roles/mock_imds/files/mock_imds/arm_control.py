# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control API of the control-plane face (`/_mock/arm/...`): principals, grants, features,
configuration, token expiry, throttling and faults, each value checked before anything changes; and
its part of the audit log.

A mixin of MockState, beside ArmEndpoints (arm.py), whose state it changes."""

from __future__ import print_function

import collections
import re

from .arm import ARM_FAULT_KINDS, FEATURE
from .checks import MockError, _check_keys, _number, _string
from .rules import MAX_FAULT_DELAY
from .clock import iso_utc


class ArmControl(object):
    """What `/_mock/arm/...` does; control.py routes there."""

    def arm_control(self, method, parts, doc):
        """/_mock/arm/...: principals, grants, features, config, tokens/expire, throttle, faults."""
        with self._lock:
            route = "/".join(parts)
            if route == "" and method == "GET":
                return 200, self._arm_view()
            if route == "principals" and method == "POST":
                _check_keys(doc, ("client_id", "secret", "tenant"), "arm/principals body")
                client = _string(doc.get("client_id"), "client_id", maximum=128)
                secret = _string(doc.get("secret"), "secret", maximum=256)
                tenant = doc.get("tenant", "common")
                if not isinstance(tenant, str) or not re.match(r"\A[A-Za-z0-9._-]{1,64}\Z", tenant):
                    raise MockError("tenant must be a tenant id or domain (letters, digits, '.', '_', '-'), got %r"
                                    % (tenant,))
                self._principals[client.lower()] = {"client_id": client, "secret": secret, "tenant": tenant}
                return 201, {"client_id": client, "tenant": tenant}
            if route == "grants" and method == "POST":
                _check_keys(doc, ("principal", "role", "scope"), "arm/grants body")
                principal = _string(doc.get("principal"), "principal", maximum=128)
                role = _string(doc.get("role"), "role (e.g. ScheduledEventContributor, Reader)", maximum=64)
                scope = _string(doc.get("scope"), "scope", maximum=1024)
                if not re.match(r"\A/subscriptions/[0-9a-fA-F-]{36}(/resourceGroups/[^/]+(/providers/[^/]+/[^/]+/[^/]+)?)?/?\Z",
                                scope):
                    raise MockError("scope must be /subscriptions/GUID, optionally with /resourceGroups/NAME and "
                                    "/providers/Microsoft.Compute/TYPE/NAME, got %r" % scope[:200])
                self._grants.append((principal.lower(), role.lower(), scope.lower().rstrip("/")))
                return 201, {"principal": principal, "role": role, "scope": scope}
            if route == "grants" and method == "DELETE":
                removed, self._grants = len(self._grants), []
                return 200, {"removed": removed}
            if route == "features" and method == "POST":
                _check_keys(doc, ("subscription_id", "feature", "registered"), "arm/features body")
                sub = _string(doc.get("subscription_id"), "subscription_id", maximum=64).lower()
                feature = _string(doc.get("feature", FEATURE), "feature", maximum=128)
                registered = doc.get("registered")
                if not isinstance(registered, bool):
                    raise MockError("registered must be true or false, got %r" % (registered,))
                (self._unregistered.discard if registered else self._unregistered.add)((sub, feature.lower()))
                return 200, {"subscription_id": sub, "feature": feature, "registered": registered}
            if route == "config" and method == "POST":
                return 200, self._arm_configure(doc)
            if route == "tokens/expire" and method == "POST":
                _check_keys(doc, (), "arm/tokens/expire body")
                now = self._now()
                self._tokens = dict((t, (p, min(e, now))) for t, (p, e) in self._tokens.items())
                return 200, {"expired": len(self._tokens)}
            if route == "throttle" and method == "POST":
                _check_keys(doc, ("count", "retry_after"), "arm/throttle body")
                count = _number(doc.get("count"), "count", minimum=0, maximum=10 ** 6, integer=True)
                after = _number(doc.get("retry_after", 1), "retry_after", minimum=0, maximum=3600, integer=True)
                self._throttle = [count, after]
                return 200, {"count": count, "retry_after": after}
            if route == "faults" and method == "POST":
                return 201, self._arm_add_fault(doc)
            if route == "faults" and method == "DELETE":
                removed, self._arm_faults = len(self._arm_faults), []
                return 200, {"removed": removed}
            raise MockError("no control call %s /_mock/arm/%s; see docs/docsite/rst/mock_imds.rst" % (method, route),
                            404)

    def _arm_configure(self, doc):
        _check_keys(doc, ("token_lifetime", "graph_quota", "graph_window", "graph_retry_after", "history_limit"),
                    "arm/config body")
        values = {}
        if "token_lifetime" in doc:
            values["_token_lifetime"] = _number(doc["token_lifetime"], "token_lifetime", minimum=1, maximum=86400,
                                                integer=True)
        quota = dict(self._quota)
        if "graph_quota" in doc:
            quota["limit"] = _number(doc["graph_quota"], "graph_quota", minimum=1, maximum=10 ** 6, integer=True)
        if "graph_window" in doc:
            quota["window"] = _number(doc["graph_window"], "graph_window", minimum=1, maximum=86400)
        if "graph_retry_after" in doc:
            if not isinstance(doc["graph_retry_after"], bool):
                raise MockError("graph_retry_after must be true or false, got %r" % (doc["graph_retry_after"],))
            quota["retry_after"] = doc["graph_retry_after"]
        if "history_limit" in doc:
            values["_history_limit"] = _number(doc["history_limit"], "history_limit", minimum=0, maximum=10 ** 6,
                                               integer=True)
        values["_quota"] = quota
        for name, value in values.items():
            setattr(self, name, value)
        return self._arm_view()

    def _arm_add_fault(self, doc):
        _check_keys(doc, ("kind", "status", "code", "count", "paths", "methods", "retry_after", "delay", "interval"),
                    "arm fault")
        kind = doc.get("kind")
        if kind not in ARM_FAULT_KINDS:
            raise MockError("arm fault kind must be one of %s, got %r" % (", ".join(ARM_FAULT_KINDS), kind))
        status = None
        if kind == "status":
            status = _number(doc.get("status"), "arm fault status", minimum=400, maximum=599, integer=True)
        elif "status" in doc:
            raise MockError("status only applies to status faults")
        # slow: the real answer after delay seconds; trickle: the real answer a byte every interval seconds.
        delay = interval = None
        if kind == "slow":
            delay = _number(doc.get("delay"), "arm fault delay", minimum=0, maximum=MAX_FAULT_DELAY)
        elif "delay" in doc:
            raise MockError("delay only applies to slow faults")
        if kind == "trickle":
            interval = _number(doc.get("interval"), "arm fault interval", minimum=0.001, maximum=10)
        elif "interval" in doc:
            raise MockError("interval only applies to trickle faults")
        count = doc.get("count")
        count = None if count is None else _number(count, "arm fault count", minimum=1, maximum=10 ** 9, integer=True)
        paths = doc.get("paths") or []
        if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") and len(p) < 1024
                                                  for p in paths):
            raise MockError("arm fault paths must be a list of path prefixes starting with /")
        methods = doc.get("methods") or []
        if not isinstance(methods, list) or not all(m in ("GET", "POST", "PUT", "PATCH", "DELETE") for m in methods):
            raise MockError("arm fault methods must be a list of GET, POST, PUT, PATCH, DELETE")
        after = doc.get("retry_after")
        after = None if after is None else _number(after, "arm fault retry_after", minimum=0, maximum=3600,
                                                   integer=True)
        code = _string(doc.get("code", "ServiceUnavailable" if status != 429 else "TooManyRequests"),
                       "arm fault code", maximum=64)
        fault = {"fault_id": "A%d" % (len(self._arm_faults) + 1), "kind": kind, "status": status, "code": code,
                 "count": count, "paths": paths, "methods": methods, "retry_after": after, "delay": delay,
                 "interval": interval, "hits": 0}
        self._arm_faults.append(fault)
        return dict(fault)

    def _arm_view(self):
        return collections.OrderedDict((
            ("url", self.arm_base_url or None),
            ("principals", [{"client_id": p["client_id"], "tenant": p["tenant"]} for p in self._principals.values()]),
            ("grants", [{"principal": p, "role": r, "scope": s} for p, r, s in self._grants]),
            ("unregistered_features", [{"subscription_id": s, "feature": f} for s, f in sorted(self._unregistered)]),
            ("token_lifetime", self._token_lifetime),
            ("graph_quota", self._quota["limit"]), ("graph_window", self._quota["window"]),
            ("graph_retry_after", self._quota["retry_after"]),
            ("throttle", {"count": self._throttle[0], "retry_after": self._throttle[1]}),
            ("faults", [dict(f) for f in self._arm_faults]),
            ("history_limit", self._history_limit), ("history_forgotten", self._forgotten),
            ("policies", dict((k, v) for k, v in self._policies.items() if v is not None)),
        ))

    def arm_audit(self, since):
        return [collections.OrderedDict((("seq", s), ("time", iso_utc(t)), ("sim_time", iso_utc(st)), ("method", m),
                                         ("path", p), ("status", code), ("principal", who), ("fault", f)))
                for s, t, st, m, p, code, who, f in self._arm_requests if s > since]
