# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-plane face: Resource Manager routes, sign-in, Resource Graph, the policy, acknowledge.

A mixin of MockState, like ImdsEndpoints: one lock, one fleet, one clock, one set of events, so
IMDS and Resource Graph are two views of the same event. Its sign-in (tokens, grants) lives in
identity.py and its control calls in arm_control.py, two more mixins of MockState."""

from __future__ import print_function

import base64
import collections
import json
import re
import zlib
from urllib.parse import parse_qsl, unquote

from .activity_log import ACTIVITY_PATH_RE, ActivityLog
from .checks import MockError
from .clock import iso_utc
from .graph import ROW_TYPE, Query, QueryError, table
from .imds import Response
from .policy import FEATURE, POLICY_SINCE, approves, check_policy, merge, publishes
from .rules import CANCELLED, PENDING, REMOVED, SCHEDULED, STARTED, _json_bytes

GRAPH_STATUS = {SCHEDULED: "Scheduled", STARTED: "Started", REMOVED: "Completed", CANCELLED: "Canceled"}
GRAPH_VERSIONS = ("2019-04-01", "2020-04-01-preview", "2021-03-01", "2022-10-01", "2024-04-01")
ACK_VERSIONS = ("2023-10-01-preview", "2025-10-01-preview", "2025-11-01")
METADATA_VERSIONS = ("2019-05-01", "2020-06-01", "2022-09-01")
IDENTITY_VERSIONS = ("2018-02-01", "2019-08-01")
ACK_ROLES = ("scheduledeventcontributor", "contributor", "owner")
WRITE_ROLES = ("contributor", "owner", "virtual machine contributor")
KIND_TYPES = {"virtualmachines": "virtualMachines", "virtualmachinescalesets": "virtualMachineScaleSets",
              "availabilitysets": "availabilitySets"}
SET_TYPE = {"availability_set": "availabilitySets", "scale_set": "virtualMachineScaleSets"}
_COMPUTE_VERSION_RE = re.compile(r"\A(20[12][0-9]-[01][0-9]-[0-3][0-9])(-preview)?\Z")
_ID = r"/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Compute/([A-Za-z]+)/([^/]+)"
_RESOURCE_RE = re.compile(r"\A%s\Z" % _ID, re.I)
_ACK_RE = re.compile(r"\A(%s)/providers/Microsoft\.Maintenance/scheduledevents/([^/]+)/acknowledge\Z" % _ID, re.I)
_LOGIN_RE = re.compile(r"\A/login/([A-Za-z0-9._-]{1,64})/(v2\.0/\.well-known/openid-configuration|oauth2/v2\.0/token)\Z")
DEFAULT_QUOTA = {"limit": 15, "window": 5.0, "retry_after": False}
DEFAULT_TOKEN_LIFETIME = 3600
DEFAULT_HISTORY = 20000
ARM_FAULT_KINDS = ("status", "drop", "reset", "malformed_json", "slow", "trickle")
# The kinds that change how the real answer goes out, not what it says: late, or a byte at a time.
ARM_LATE_KINDS = ("slow", "trickle")


def arm_error(status, code, message, headers=()):
    return Response(status, _json_bytes({"error": {"code": code, "message": message}}), headers=headers)


def _hhmmss(seconds):
    seconds = max(0, int(seconds + 0.999))
    return "%02d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


def vm_id(vm):
    p = vm.placement
    return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
        p.subscription_id, p.resource_group, vm.name)


def set_id(vm):
    p = vm.placement
    return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/%s/%s" % (
        p.subscription_id, p.resource_group, SET_TYPE[vm.kind], vm.group)


class ArmEndpoints(ActivityLog):
    """The Resource Manager side of MockState (lock, fleet, events and clock are MockState's)."""

    def _init_arm(self):
        self.arm_base_url = ""
        self._principals = {}
        self._grants = []
        self._unregistered = set()
        self._tokens = {}
        self._token_lifetime = DEFAULT_TOKEN_LIFETIME
        self._quota = dict(DEFAULT_QUOTA)
        self._quota_used = {}
        self._throttle = [0, 1]
        self._arm_faults = []
        self._arm_requests = collections.deque(maxlen=self._audit_limit)
        self._history_limit = DEFAULT_HISTORY
        self._ended = collections.deque()
        self._forgotten = 0
        self._init_activity_log()
        self._reset_policies()

    def _reset_policies(self):
        self._policies = {}
        for vm in self._fleet.vms.values():
            scope = set_id(vm) if vm.kind in SET_TYPE else vm_id(vm)
            self._policies.setdefault(scope.lower(), vm.placement.policy)

    # -- the event's views ---------------------------------------------------------------------

    def _scope_of(self, event):
        vm = self._fleet.vms[event.resources[0]]
        return (set_id(vm) if vm.kind in SET_TYPE else vm_id(vm)), vm

    def _published_scope(self, event):
        """(scope id, VM) when the policy of the event's scope publishes to Event Grid and Resource Graph
        (scheduledEventsAdditionalPublishingTargets.eventGridAndResourceGraph.enable), else None: the one
        rule both faces follow (Resource Graph rows here, Event Grid notifications in eventgrid.py)."""
        scope, vm = self._scope_of(event)
        return (scope, vm) if publishes(self._policies.get(scope.lower())) else None

    def _policy_start(self, event):
        """The policy approves this event on creation: user Reboot/Redeploy, or all instances down."""
        scope, vm = self._scope_of(event)
        policy = self._policies.get(scope.lower())
        if not policy:
            return False
        if event.event_source == "User" and event.event_type in ("Reboot", "Redeploy"):
            return approves(policy, "userInitiatedReboot" if event.event_type == "Reboot" else "userInitiatedRedeploy")
        if vm.kind in SET_TYPE:
            members = [v.name for v in self._fleet.vms.values() if v.group == vm.group]
            if set(members) <= set(event.resources):
                return approves(policy, "allInstancesDown")
        return False

    def _remember_ended(self, event):
        self._ended.append(event)
        if len(self._ended) > self._history_limit:
            gone = set()
            while len(self._ended) > self._history_limit:
                gone.add(id(self._ended.popleft()))
            self._forgotten += len(gone)
            self._events = [e for e in self._events if id(e) not in gone]
            self._by_id = dict((e.event_id.upper(), e) for e in self._events)

    def _row(self, event, scope, vm):
        zones = vm.placement.zones if vm.kind in SET_TYPE else ([vm.zone] if vm.zone else None)
        props = collections.OrderedDict((
            ("EventId", event.event_id), ("EventType", event.event_type), ("ResourceType", event.resource_type),
            ("Resources", list(event.resources)), ("EventStatus", GRAPH_STATUS[event.status]),
            ("NotBefore", event.entry("2020-07-01")["NotBefore"] if event.status == SCHEDULED else ""),
            ("Description", event.description), ("EventSource", event.event_source),
            ("DurationInSeconds", event.duration_in_seconds)))
        return {"id": "%s/providers/Microsoft.Maintenance/scheduledevents/%s" % (scope, event.event_id),
                "name": event.event_id, "type": ROW_TYPE, "location": vm.placement.location, "zones": zones,
                "resourceGroup": vm.placement.resource_group.lower(), "subscriptionId": vm.placement.subscription_id,
                "properties": props}

    # -- requests --------------------------------------------------------------------------------

    def arm_respond(self, method, path, query, headers, body):
        with self._lock:
            self._tick()
            principal = [None, None]  # who asked, which fault answered
            try:
                response = self._arm_route(method, unquote(path), query, headers, body, principal)
            except QueryError as exc:
                response = Response(400, _json_bytes({"error": {
                    "code": "BadRequest", "message": "The query is invalid.",
                    "details": [{"code": "InvalidQuery", "message": "mock_imds does not understand %s" % exc}]}}))
            fault = principal[1]
            if len(principal) > 2 and response.status is not None:
                late = principal[2]
                response.action = late["kind"]
                response.interval = late["delay"] if late["kind"] == "slow" else late["interval"]
            api = dict(parse_qsl(query)).get("api-version")
            self._arm_requests.append((self._next_seq(), self._wallclock(), self._now(), method,
                                       path + ("?api-version=" + api if api else ""), response.status,
                                       principal[0], fault))
            return response

    def _arm_fault(self, method, path):
        for fault in list(self._arm_faults):
            if fault["methods"] and method not in fault["methods"]:
                continue
            if fault["paths"] and not any(path.lower().startswith(p.lower()) for p in fault["paths"]):
                continue
            fault["hits"] += 1
            if fault["count"] is not None:
                fault["count"] -= 1
                if fault["count"] <= 0:
                    self._arm_faults.remove(fault)
            if fault["kind"] == "status":
                headers = () if fault["retry_after"] is None else (("Retry-After", str(fault["retry_after"])),)
                response = arm_error(fault["status"], fault["code"], "mock_imds fault %s" % fault["fault_id"], headers)
            elif fault["kind"] in ARM_LATE_KINDS:
                response = None  # the request is answered as usual, late (arm_respond)
            elif fault["kind"] == "malformed_json":
                # A 200 whose JSON breaks off: what a proxy or a cut connection can hand a client.
                response = Response(200, b'{"value": [{"id": "/subscriptions/\x00garbled", "properties": {')
            else:
                response = Response(None, action=fault["kind"])
            return response, fault["kind"], fault
        return None

    def _arm_route(self, method, path, query, headers, body, principal):
        pairs = parse_qsl(query, keep_blank_values=True)
        params = dict(pairs)
        if len(params) != len(pairs):
            return arm_error(400, "InvalidQueryParameter", "a query parameter is given twice")
        fault = self._arm_fault(method, path)
        if fault is not None:
            principal[1] = fault[1]
            if fault[0] is not None:
                return fault[0]
            principal.append(fault[2])  # slow or trickle: answered as usual, late
        if path == "/metadata/endpoints" and method == "GET":
            return self._cloud_metadata(params)
        login = _LOGIN_RE.match(path)
        if login:
            return self._login(method, login.group(1), login.group(2), headers, body)
        if self._throttle[0] > 0:
            self._throttle[0] -= 1
            return arm_error(429, "TooManyRequests", "The request is being throttled; retry after %d seconds"
                             % self._throttle[1], (("Retry-After", str(self._throttle[1])),))
        who = self._bearer(headers)
        if isinstance(who, Response):
            return who
        principal[0] = who
        if path.lower() == "/providers/microsoft.resourcegraph/resources":
            if method != "POST":
                return arm_error(405, "MethodNotAllowed", "Resource Graph queries are POST requests")
            return self._graph(who, params, body)
        activity = ACTIVITY_PATH_RE.match(path)
        if activity and method == "GET":
            return self._activity_log(who, params, activity.group(1))
        ack = _ACK_RE.match(path)
        if ack:
            if method != "POST":
                return arm_error(405, "MethodNotAllowed", "acknowledge is a POST request")
            return self._acknowledge(who, params, ack)
        resource = _RESOURCE_RE.match(path)
        if resource:
            return self._compute(who, method, params, resource, body)
        return arm_error(404, "NoRegisteredProviderFound" if "/providers/" in path else "ResourceNotFound",
                         "mock_imds serves no resource at %s" % path[:300])

    def _cloud_metadata(self, params):
        version = params.get("api-version")
        if version not in METADATA_VERSIONS:
            return arm_error(400, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported "
                             "versions are '%s'." % ((version or "")[:40], ",".join(METADATA_VERSIONS)))
        base = self.arm_base_url
        doc = collections.OrderedDict((
            ("portal", base + "/"), ("authentication", collections.OrderedDict((
                ("loginEndpoint", base + "/login/"), ("audiences", [base + "/"]), ("tenant", "common"),
                ("identityProvider", "AAD")))),
            ("media", base + "/"), ("graphAudience", base + "/"), ("graph", base + "/"), ("name", "MockImdsCloud"),
            ("suffixes", collections.OrderedDict((("azureDataLakeStoreFileSystem", "localhost"),
                                                 ("acrLoginServer", "localhost"), ("sqlServerHostname", "localhost"),
                                                 ("azureDataLakeAnalyticsCatalogAndJob", "localhost"),
                                                 ("keyVaultDns", "localhost"), ("storage", "localhost"),
                                                 ("azureFrontDoorEndpointSuffix", "localhost")))),
            ("batch", base + "/"), ("resourceManager", base + "/"), ("vmImageAliasDoc", base + "/"),
            ("activeDirectoryDataLake", base + "/"), ("sqlManagement", base + "/"), ("gallery", base + "/")))
        return Response(200, _json_bytes(doc))

    # -- Resource Graph ------------------------------------------------------------------------------

    def _graph(self, who, params, body):
        version = params.get("api-version")
        if version not in GRAPH_VERSIONS:
            return arm_error(400, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported "
                             "versions are '%s'." % ((version or "")[:40], ",".join(GRAPH_VERSIONS)))
        now = self._now()
        used = self._quota_used.setdefault(who.lower(), collections.deque())
        while used and used[0] <= now - self._quota["window"]:
            used.popleft()
        resets = (used[0] + self._quota["window"] - now) if used else self._quota["window"]
        if len(used) >= self._quota["limit"]:
            headers = [("x-ms-user-quota-remaining", "0"), ("x-ms-user-quota-resets-after", _hhmmss(resets))]
            if self._quota["retry_after"]:
                headers.append(("Retry-After", str(max(1, int(resets + 0.999)))))
            return arm_error(429, "RateLimiting", "Please provide below info when asking for support: the client "
                             "sent too many requests; see x-ms-user-quota-resets-after.", tuple(headers))
        used.append(now)
        quota_headers = (("x-ms-user-quota-remaining", str(self._quota["limit"] - len(used))),
                         ("x-ms-user-quota-resets-after", _hhmmss(used[0] + self._quota["window"] - now)))
        try:
            doc = json.loads(body.decode("utf-8")) if body else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("query"), str):
            return arm_error(400, "BadRequest", "The request body must be a JSON object with a query string")
        subscriptions = doc.get("subscriptions")
        if subscriptions is not None and (not isinstance(subscriptions, list) or not all(
                isinstance(s, str) for s in subscriptions)):
            return arm_error(400, "BadRequest", "subscriptions must be a list of subscription ids")
        options = doc.get("options") or {}
        if not isinstance(options, dict):
            return arm_error(400, "BadRequest", "options must be an object")
        query = Query(doc["query"])
        top = options.get("$top", 100 if not query.take else query.take)
        skip = options.get("$skip", 0)
        for name, value, high in (("$top", top, 1000), ("$skip", skip, 10 ** 9)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                return arm_error(400, "BadRequest", "options.%s must be a whole number from 0 to %d" % (name, high))
        wanted = None if subscriptions is None else set(s.lower() for s in subscriptions)
        rows = []
        for event in self._events:
            if event.status == PENDING:
                continue
            published = self._published_scope(event)
            if published is None:
                continue
            scope, vm = published
            if wanted is not None and vm.placement.subscription_id not in wanted:
                continue
            if not self._roles(who, scope):
                continue
            rows.append(self._row(event, scope, vm))
        rows = query.run(rows)
        fingerprint = zlib.crc32((doc["query"] + "|" + ",".join(sorted(wanted or ()))).encode("utf-8"))
        token = options.get("$skipToken")
        if token is not None:
            try:
                offset, mark = json.loads(base64.urlsafe_b64decode(token.encode("ascii")).decode("ascii"))
                assert mark == fingerprint and isinstance(offset, int) and offset >= 0
            except Exception:  # pylint: disable=broad-except
                return arm_error(400, "BadRequest", "options.$skipToken is not a token this query gave")
            skip = offset
        page = rows[skip:skip + top]
        answer = collections.OrderedDict((("totalRecords", len(rows)), ("count", len(page))))
        answer["data"] = table(page, query.columns) if options.get("resultFormat") == "table" else page
        answer["facets"] = []
        more = skip + len(page) < len(rows)
        answer["resultTruncated"] = "true" if more and not query.pages else "false"
        if more and query.pages:
            answer["$skipToken"] = base64.urlsafe_b64encode(
                json.dumps([skip + len(page), fingerprint]).encode("ascii")).decode("ascii")
        return Response(200, _json_bytes(answer), headers=quota_headers)

    # -- acknowledge ---------------------------------------------------------------------------------

    def _acknowledge(self, who, params, match):
        version = params.get("api-version")
        if version not in ACK_VERSIONS:
            return arm_error(400, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported "
                             "versions are '%s'." % ((version or "")[:40], ",".join(ACK_VERSIONS)))
        scope, subscription, _group, _kind, _name, event_id = match.groups()
        missing = self._unknown_subscription(subscription)
        if missing:
            return missing
        action = "Microsoft.Maintenance/scheduledevents/acknowledge/action"
        if not self._roles(who, scope) & set(ACK_ROLES):
            return self._forbidden(who, action, scope)
        event = self._by_id.get(event_id.upper())
        if event is None or event.status == PENDING or self._scope_of(event)[0].lower() != scope.lower():
            return arm_error(404, "ResourceNotFound", "The scheduled event '%s' was not found under '%s'."
                             % (event_id[:100], scope))
        if event.status != SCHEDULED:
            return arm_error(409, "Conflict", "The scheduled event '%s' cannot be acknowledged: its status is %s."
                             % (event.event_id, GRAPH_STATUS[event.status]))
        now = self._now()
        event.approvals.append(collections.OrderedDict((("vm", None), ("principal", who), ("sim_time", iso_utc(now)),
                                                        ("in_resources", False))))
        start = self._approval_mode == "any" or (self._approval_mode == "all" and event.tenants_approved)
        self._approvals.append((self._next_seq(), self._wallclock(), now, None, [event.event_id], [], [],
                                [event.event_id] if start else []))
        self._log_acknowledge(who, self._scope_of(event)[0], subscription, event.event_id, now)
        if start:
            self._change(event, "start", "acknowledge")
        return Response(200, _json_bytes({"value": "Successfully Approved"}))

    # -- the policy on VMs, scale sets and availability sets --------------------------------------

    def _unknown_subscription(self, subscription):
        known = set(vm.placement.subscription_id for vm in self._fleet.vms.values())
        if subscription.lower() not in known:
            return arm_error(404, "SubscriptionNotFound", "The subscription '%s' could not be found."
                             % subscription[:100])
        return None

    def _find(self, subscription, group, kind, name):
        for vm in self._fleet.vms.values():
            p = vm.placement
            if p.subscription_id != subscription.lower() or p.resource_group.lower() != group.lower():
                continue
            if kind == "virtualMachines" and vm.name.lower() == name.lower():
                return vm
            if vm.kind in SET_TYPE and SET_TYPE[vm.kind] == kind and vm.group.lower() == name.lower():
                return vm
        return None

    def _compute(self, who, method, params, match, body):
        subscription, group, kind_text, name = match.groups()
        kind = KIND_TYPES.get(kind_text.lower())
        version = params.get("api-version") or ""
        if kind is None:
            return arm_error(400, "NoRegisteredProviderFound", "No registered resource provider found for "
                             "resource type '%s'; mock_imds serves virtualMachines, virtualMachineScaleSets and "
                             "availabilitySets." % kind_text[:100])
        if not _COMPUTE_VERSION_RE.match(version) or not "2015-06-15" <= version[:10] <= "2026-12-31":
            return arm_error(400, "InvalidApiVersionParameter", "The api-version '%s' is invalid. Use a Compute "
                             "api-version such as 2025-04-01." % version[:40])
        missing = self._unknown_subscription(subscription)
        if missing:
            return missing
        vm = self._find(subscription, group, kind, name)
        if vm is None:
            return arm_error(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/%s/%s' under resource group "
                             "'%s' was not found. For more details please go to "
                             "https://aka.ms/ARMResourceNotFoundFix" % (kind, name[:100], group[:100]))
        rid = vm_id(vm) if kind == "virtualMachines" else set_id(vm)
        in_set = kind == "virtualMachines" and vm.kind in SET_TYPE
        if method == "GET":
            if not self._roles(who, rid):
                return self._forbidden(who, "Microsoft.Compute/%s/read" % kind, rid)
        elif method in ("PUT", "PATCH"):
            if not self._roles(who, rid) & set(WRITE_ROLES):
                return self._forbidden(who, "Microsoft.Compute/%s/write" % kind, rid)
            try:
                doc = json.loads(body.decode("utf-8")) if body else {}
            except ValueError:
                doc = None
            if not isinstance(doc, dict) or not isinstance(doc.get("properties", {}), dict):
                return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be "
                                 "deserialized.")
            props = doc.get("properties", {})
            if "scheduledEventsPolicy" in props and version[:10] >= POLICY_SINCE:
                if in_set:
                    return arm_error(409, "OperationNotAllowed", "The Scheduled Events Policy of VM '%s' is the "
                                     "one of its set '%s'; change it on the set." % (vm.name, set_id(vm)))
                if (vm.placement.subscription_id, FEATURE.lower()) in self._unregistered:
                    return arm_error(400, "SubscriptionNotRegisteredForFeature", "Subscription '%s' is not "
                                     "registered for feature '%s' required to carry out the requested operation."
                                     % (vm.placement.subscription_id, FEATURE))
                try:
                    new = check_policy(props["scheduledEventsPolicy"])
                except MockError as exc:
                    return arm_error(400, "InvalidParameter", str(exc))
                old = self._policies.get(rid.lower())
                self._policies[rid.lower()] = merge(old or {}, new) if method == "PATCH" and new is not None else new
        else:
            return arm_error(405, "MethodNotAllowed", "mock_imds serves GET, PUT and PATCH here")
        return Response(200, _json_bytes(self._resource(vm, kind, rid, version, in_set)))

    def _resource(self, vm, kind, rid, version, in_set):
        props = collections.OrderedDict((("provisioningState", "Succeeded"),))
        if kind == "virtualMachines":
            props["vmId"] = vm.instance["compute"]["vmId"]
            if in_set:
                key = "availabilitySet" if vm.kind == "availability_set" else "virtualMachineScaleSet"
                props[key] = {"id": set_id(vm)}
        elif kind == "virtualMachineScaleSets":
            props["orchestrationMode"] = "Flexible"
        else:
            props["virtualMachines"] = [{"id": vm_id(v)} for v in self._fleet.vms.values()
                                        if v.group == vm.group and v.kind == vm.kind]
        if version[:10] >= POLICY_SINCE and not in_set:
            policy = self._policies.get(rid.lower())
            if policy is not None:
                props["scheduledEventsPolicy"] = policy
        doc = collections.OrderedDict((("id", rid), ("name", rid.rsplit("/", 1)[1]),
                                       ("type", "Microsoft.Compute/%s" % kind), ("location", vm.placement.location)))
        zones = [vm.zone] if kind == "virtualMachines" and vm.zone else vm.placement.zones
        if zones:
            doc["zones"] = zones
        doc["properties"] = props
        return doc
