# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-plane face: Resource Manager routes, sign-in, Resource Graph, the policy, acknowledge.

A mixin of MockState, like ImdsEndpoints: one lock, one fleet, one clock, one set of events, so
IMDS and Resource Graph are two views of the same event. Its control calls live in arm_control."""

from __future__ import print_function

import base64
import collections
import json
import re
import secrets
import zlib
from urllib.parse import parse_qsl, unquote

from .checks import MockError, _check_keys, _number, _string
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
ARM_FAULT_KINDS = ("status", "drop", "reset", "malformed_json")


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


class ArmEndpoints(object):
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
            elif fault["kind"] == "malformed_json":
                # A 200 whose JSON breaks off: what a proxy or a cut connection can hand a client.
                response = Response(200, b'{"value": [{"id": "/subscriptions/\x00garbled", "properties": {')
            else:
                response = Response(None, action=fault["kind"])
            return response, fault["kind"]
        return None

    def _arm_route(self, method, path, query, headers, body, principal):
        pairs = parse_qsl(query, keep_blank_values=True)
        params = dict(pairs)
        if len(params) != len(pairs):
            return arm_error(400, "InvalidQueryParameter", "a query parameter is given twice")
        fault = self._arm_fault(method, path)
        if fault is not None:
            principal[1] = fault[1]
            return fault[0]
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

    # -- sign-in ------------------------------------------------------------------------------------

    def _login(self, method, tenant, what, headers, body):
        base = "%s/login/%s" % (self.arm_base_url, tenant)
        if what.startswith("v2.0"):
            if method != "GET":
                return Response(405, _json_bytes({"error": "invalid_request"}))
            return Response(200, _json_bytes(collections.OrderedDict((
                ("token_endpoint", base + "/oauth2/v2.0/token"),
                ("token_endpoint_auth_methods_supported", ["client_secret_post", "private_key_jwt",
                                                           "client_secret_basic"]),
                ("jwks_uri", base + "/discovery/v2.0/keys"), ("response_modes_supported", ["query", "fragment", "form_post"]),
                ("subject_types_supported", ["pairwise"]), ("id_token_signing_alg_values_supported", ["RS256"]),
                ("response_types_supported", ["code", "id_token", "code id_token", "id_token token"]),
                ("scopes_supported", ["openid", "profile", "email", "offline_access"]),
                ("issuer", base + "/v2.0"), ("request_uri_parameter_supported", False),
                ("authorization_endpoint", base + "/oauth2/v2.0/authorize"),
                ("device_authorization_endpoint", base + "/oauth2/v2.0/devicecode"),
                ("end_session_endpoint", base + "/oauth2/v2.0/logout"), ("tenant_region_scope", "EU"),
                ("cloud_instance_name", "mock_imds"), ("cloud_graph_host_name", "localhost")))))
        if method != "POST":
            return Response(405, _json_bytes({"error": "invalid_request"}))
        form = dict(parse_qsl(body.decode("utf-8", "replace")))

        def refuse(status, error, code, text):
            return Response(status, _json_bytes(collections.OrderedDict((
                ("error", error), ("error_description", "%s: %s" % (code, text)), ("error_codes", [int(code[6:])]),
                ("timestamp", iso_utc(self._wallclock())), ("trace_id", "00000000-0000-0000-0000-000000000000"),
                ("correlation_id", "00000000-0000-0000-0000-000000000000")))))
        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type", "AADSTS70003",
                          "The app requested an unsupported grant type; mock_imds serves client_credentials")
        client = form.get("client_id", "")
        sp = self._principals.get(client.lower())
        if sp is None or sp["tenant"].lower() != tenant.lower():
            return refuse(400, "unauthorized_client", "AADSTS700016", "Application with identifier '%s' was not "
                          "found in the directory '%s'." % (client[:100], tenant))
        if not secrets.compare_digest(form.get("client_secret", ""), sp["secret"]):
            return refuse(401, "invalid_client", "AADSTS7000215", "Invalid client secret provided. Ensure the "
                          "secret being sent in the request is the client secret value, not the client secret ID, "
                          "for a secret added to app '%s'." % sp["client_id"])
        scope = form.get("scope", "")
        if not self._audience_ok(scope.split(" ")[0].rsplit("/.default", 1)[0]):
            return refuse(400, "invalid_resource", "AADSTS500011", "The resource principal named %s was not found "
                          "in the tenant named %s." % (scope[:200], tenant))
        return Response(200, _json_bytes(self._issue(sp["client_id"])))

    def _audience_ok(self, resource):
        return resource.rstrip("/") == self.arm_base_url and bool(self.arm_base_url)

    def _issue(self, principal):
        token = "mock." + secrets.token_urlsafe(24)
        if len(self._tokens) > 100000:
            now = self._now()
            self._tokens = dict((t, v) for t, v in self._tokens.items() if v[1] > now)
        self._tokens[token] = (principal, self._now() + self._token_lifetime)
        return collections.OrderedDict((("token_type", "Bearer"), ("expires_in", self._token_lifetime),
                                        ("ext_expires_in", self._token_lifetime), ("access_token", token)))

    def identity_token(self, vm, params):
        """The managed-identity token path of IMDS (/metadata/identity/oauth2/token), lock held."""
        if params.get("api-version") not in IDENTITY_VERSIONS:
            return Response(400, _json_bytes({"error": "invalid_request",
                                              "error_description": "Required query variable 'api-version' is "
                                              "missing or not one of %s" % ", ".join(IDENTITY_VERSIONS)}))
        resource = params.get("resource", "")
        if not self._audience_ok(resource):
            return Response(400, _json_bytes({"error": "invalid_resource", "error_description":
                                              "AADSTS500011: The resource principal named %s was not found in "
                                              "the tenant." % resource[:200]}))
        issued = self._issue("%s-identity" % vm)
        now = int(self._now())
        return Response(200, _json_bytes(collections.OrderedDict((
            ("access_token", issued["access_token"]), ("client_id", "%s-identity" % vm),
            ("expires_in", str(self._token_lifetime)), ("expires_on", str(now + self._token_lifetime)),
            ("ext_expires_in", str(self._token_lifetime)), ("not_before", str(now)), ("resource", resource),
            ("token_type", "Bearer")))))

    def _bearer(self, headers):
        value = headers.get("Authorization") or ""
        if not value.lower().startswith("bearer "):
            return arm_error(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                             "missing.")
        found = self._tokens.get(value[7:].strip())
        if found is None:
            return arm_error(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if found[1] <= self._now():
            challenge = ('Bearer authorization_uri="%s/login/", error="invalid_token", error_description="The '
                         'access token has expired."' % self.arm_base_url)
            return arm_error(401, "ExpiredAuthenticationToken", "The access token expiry UTC time '%s' is earlier "
                             "than current UTC time '%s'." % (iso_utc(found[1]), iso_utc(self._now())),
                             (("WWW-Authenticate", challenge),))
        return found[0]

    def _roles(self, principal, scope):
        scope = scope.lower()
        return set(role for who, role, where in self._grants
                   if who == principal.lower() and (scope == where or scope.startswith(where.rstrip("/") + "/")))

    def _forbidden(self, principal, action, scope):
        return arm_error(403, "AuthorizationFailed", "The client '%s' with object id '%s' does not have "
                         "authorization to perform action '%s' over scope '%s' or the scope is invalid. If access "
                         "was recently granted, please refresh your credentials."
                         % (principal, principal, action, scope))

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
            scope, vm = self._scope_of(event)
            if wanted is not None and vm.placement.subscription_id not in wanted:
                continue
            if not publishes(self._policies.get(scope.lower())) or not self._roles(who, scope):
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

    # -- control ---------------------------------------------------------------------------------

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
        _check_keys(doc, ("kind", "status", "code", "count", "paths", "methods", "retry_after"), "arm fault")
        kind = doc.get("kind")
        if kind not in ARM_FAULT_KINDS:
            raise MockError("arm fault kind must be one of %s, got %r" % (", ".join(ARM_FAULT_KINDS), kind))
        status = None
        if kind == "status":
            status = _number(doc.get("status"), "arm fault status", minimum=400, maximum=599, integer=True)
        elif "status" in doc:
            raise MockError("status only applies to status faults")
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
                 "count": count, "paths": paths, "methods": methods, "retry_after": after, "hits": 0}
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
