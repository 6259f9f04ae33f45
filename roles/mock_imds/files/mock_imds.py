# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mock_imds: a local mock of the Azure Instance Metadata Service (IMDS).

It serves /metadata/scheduledevents, /metadata/instance and /metadata/versions for a fleet of
simulated VMs, follows the request rules and the per-api-version schemas of the real service,
drives the event lifecycle from a simulated clock, injects faults on demand and is steered
through a JSON control API under /_mock/.

Python standard library only (3.8+), one file: the mock_imds role copies it to a host as it is.
Run `python3 mock_imds.py --help`; the user documentation is docs/mock_imds.md.
"""

from __future__ import print_function

import argparse
import collections
import copy
import datetime
import email.utils
import ipaddress
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from urllib.parse import parse_qsl, urlsplit

__all__ = ["MockImds", "MockState", "MockError", "BUILTIN_SCENARIOS", "main"]

# --------------------------------------------------------------------------------------------
# What the real service accepts and answers
# --------------------------------------------------------------------------------------------

SCHEDULED_EVENTS_VERSIONS = (
    "2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01", "2019-08-01", "2020-07-01",
)
# The instance metadata versions, as the IMDS documentation lists them (oldest first); this is
# also what /metadata/versions answers.
INSTANCE_VERSIONS = (
    "2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01", "2018-02-01",
    "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11", "2019-04-30", "2019-06-01",
    "2019-06-04", "2019-08-01", "2019-08-15", "2019-11-01", "2020-06-01", "2020-07-15",
    "2020-09-01", "2020-10-01", "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01",
    "2021-05-01", "2021-08-01", "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13",
    "2023-07-01", "2023-11-15", "2024-03-15", "2024-07-17", "2025-04-07",
)
NEWEST_VERSIONS = ("2025-04-07", "2024-07-17", "2024-03-15")
SCHEDULED_EVENTS_ACCEPTS = frozenset(SCHEDULED_EVENTS_VERSIONS + INSTANCE_VERSIONS)
INSTANCE_ACCEPTS = frozenset(INSTANCE_VERSIONS)
# Any accepted api-version is served with the schema of the newest Scheduled Events version
# that is not newer than it (2025-04-07 -> 2020-07-01, 2018-02-01 -> 2017-11-01).
SCHEMA_FOR_VERSION = dict(
    (v, max(s for s in SCHEDULED_EVENTS_VERSIONS if s <= v)) for v in SCHEDULED_EVENTS_ACCEPTS
)
FIELDS_SINCE = (("Description", "2019-04-01"), ("EventSource", "2019-08-01"), ("DurationInSeconds", "2020-07-01"))
EVENT_TYPES_SINCE = {"Preempt": "2017-11-01", "Terminate": "2019-01-01"}
UNDERSCORE_BEFORE = "2017-08-01"  # 2017-03-01 prefixes VM names in Resources with "_"

EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
DEFAULT_NOTICE = {"Freeze": 900, "Reboot": 900, "Redeploy": 600, "Preempt": 30, "Terminate": 300}
DEFAULT_NOTICE_OTHER = 900
DEFAULT_DURATION = 600
MAX_FAULT_DELAY = 120.0
RATE_LIMIT_PER_SECOND = 5

PATH_SCHEDULED_EVENTS = "/metadata/scheduledevents"
PATH_INSTANCE = "/metadata/instance"
PATH_VERSIONS = "/metadata/versions"
CONTROL_PREFIX = "/_mock/"
REDIRECT_TRAP = CONTROL_PREFIX + "redirect-target"

# Lifecycle states. Scheduled and Started are what IMDS shows; the others are the mock's own.
PENDING, SCHEDULED, STARTED, REMOVED, CANCELLED = "pending", "Scheduled", "Started", "removed", "cancelled"
VISIBLE_STATES = (SCHEDULED, STARTED)

APPROVAL_MODES = ("any", "all", "not_before")
UNKNOWN_ID_POLICIES = ("accept", "reject")

KIND_ALIASES = {
    "availability_set": "availability_set", "avset": "availability_set",
    "scale_set": "scale_set", "vmss": "scale_set",
    "zonal": "zonal",
}
BROADCAST_KINDS = ("availability_set", "scale_set")
STANDALONE = "standalone"
DEFAULT_VM_NAME = "vm0"
_VM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_NAMESPACE = uuid.UUID("6f0e2c2a-8f5e-4b7e-9d7a-3c1d2b4a5e60")


def _json_bytes(obj):
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _error_bytes(message):
    return _json_bytes({"error": message})


BODY_NO_METADATA = _error_bytes("Bad request. Required metadata header not specified")
BODY_BAD_API_VERSION = _json_bytes({
    "error": "Bad request. api-version is invalid or was not specified in the request. "
             "For more information refer to aka.ms/azureimds",
    "newest-versions": list(NEWEST_VERSIONS),
})
BODY_FORWARDED = _error_bytes("Bad request. Requests containing an X-Forwarded-For header are not allowed")
BODY_NOT_FOUND = _error_bytes("Not found")
BODY_METHOD = _error_bytes("Method not allowed")
BODY_TOO_MANY = _error_bytes("Too many requests")
BODY_TEXT_NON_LEAF = _error_bytes("Bad request. format=text is only supported for leaf nodes")
BODY_JSON_LEAF = _error_bytes("Bad request. A leaf node needs format=text")
BODY_BAD_FORMAT = _error_bytes("Bad request. format must be json or text")
BODY_BAD_APPROVAL = _error_bytes('Bad request. Expected a body like {"StartRequests":[{"EventId":"..."}]}')
BODY_VERSIONS = _json_bytes({"apiVersions": list(INSTANCE_VERSIONS)})
OWN_BODIES = {404: BODY_NOT_FOUND, 405: BODY_METHOD, 429: BODY_TOO_MANY}

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


class MockError(Exception):
    """A request to the mock (control API, Python API, CLI) that it cannot carry out.

    status is the HTTP status the control API answers with (400 or 404)."""

    def __init__(self, message, status=400):
        super(MockError, self).__init__(message)
        self.status = status


# --------------------------------------------------------------------------------------------
# Time helpers
# --------------------------------------------------------------------------------------------

def iso_utc(epoch):
    """ISO 8601 UTC with milliseconds: 2022-04-11T22:26:58.000Z."""
    if epoch is None:
        return None
    dt = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def rfc1123(epoch):
    """NotBefore as IMDS writes it: Mon, 11 Apr 2022 22:26:58 GMT."""
    return email.utils.formatdate(int(epoch), usegmt=True)


def parse_iso(text):
    """2022-04-11T22:11:53Z (or with an offset; no offset means UTC) -> epoch seconds."""
    if not isinstance(text, str) or not text:
        raise ValueError("not a string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    dt = datetime.datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def _number(value, name, minimum=None, maximum=None, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MockError("%s must be a number, got %r" % (name, value))
    if integer and value != int(value):
        raise MockError("%s must be a whole number, got %r" % (name, value))
    if minimum is not None and value < minimum:
        raise MockError("%s must be >= %s, got %r" % (name, minimum, value))
    if maximum is not None and value > maximum:
        raise MockError("%s must be <= %s, got %r" % (name, maximum, value))
    return int(value) if integer else float(value)


def _choice(value, name, choices):
    if value not in choices:
        raise MockError("%s must be one of %s, got %r" % (name, ", ".join(map(str, choices)), value))
    return value


def _check_keys(doc, allowed, where):
    if not isinstance(doc, dict):
        raise MockError("%s must be a JSON object, got %s" % (where, type(doc).__name__))
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise MockError("%s: unknown key %s (known keys: %s)" % (where, ", ".join(map(repr, unknown)),
                                                                 ", ".join(sorted(allowed))))


# --------------------------------------------------------------------------------------------
# The fleet
# --------------------------------------------------------------------------------------------

class Vm(object):
    __slots__ = ("name", "group", "kind", "index", "members", "instance")

    def __init__(self, name, group, kind, index):
        self.name = name
        self.group = group
        self.kind = kind
        self.index = index
        self.members = frozenset([name])  # who sees an event that names this VM
        self.instance = None


def parse_fleet_spec(spec, number=1):
    """CLI short form `KIND:vm,vm` or `KIND:GROUP:vm,vm` -> a fleet group dict."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or parts[0] not in KIND_ALIASES:
        raise MockError("--fleet %r: expected KIND:VM,VM or KIND:GROUP:VM,VM with KIND one of avset, vmss, "
                        "zonal (or a JSON file path)" % (spec,))
    kind = KIND_ALIASES[parts[0]]
    name = parts[1] if len(parts) == 3 else "%s%d" % (parts[0], number)
    vms = [v for v in parts[-1].split(",") if v]
    return {"name": name, "kind": kind, "vms": vms}


class Fleet(object):
    """VMs by name, their groups and their instance metadata; built from a fleet document."""

    GROUP_KEYS = ("name", "kind", "vms", "compute")

    def __init__(self, doc=None, default_vm=None):
        doc = {} if doc is None else doc
        _check_keys(doc, ("default_vm", "groups"), "fleet")
        groups = doc.get("groups", [])
        if not isinstance(groups, list):
            raise MockError("fleet.groups must be a list of {name, kind, vms} objects")
        self.default_vm = default_vm or doc.get("default_vm") or DEFAULT_VM_NAME
        self._check_name(self.default_vm, "fleet.default_vm")
        self.groups = []
        self.vms = collections.OrderedDict()
        group_names = set()
        for number, group in enumerate(groups):
            where = "fleet.groups[%d]" % number
            _check_keys(group, self.GROUP_KEYS, where)
            name, kind, members = group.get("name"), group.get("kind"), group.get("vms")
            if not isinstance(name, str) or not name or name in group_names:
                raise MockError("%s.name must be a unique non-empty string, got %r" % (where, name))
            group_names.add(name)
            if kind not in KIND_ALIASES:
                raise MockError("%s.kind must be one of availability_set, scale_set, zonal (or avset, vmss), "
                                "got %r" % (where, kind))
            kind = KIND_ALIASES[kind]
            if not isinstance(members, list) or not members:
                raise MockError("%s.vms must be a non-empty list of VM names" % where)
            compute = group.get("compute", {})
            if not isinstance(compute, dict):
                raise MockError("%s.compute must be an object of compute fields to override" % where)
            canon = {"name": name, "kind": kind, "vms": list(members)}
            if compute:
                canon["compute"] = dict(compute)
            self.groups.append(canon)
            vms = []
            for index, vm_name in enumerate(members):
                self._check_name(vm_name, "%s.vms[%d]" % (where, index))
                if vm_name in self.vms:
                    raise MockError("%s: VM %r is already in another group; VM names must be unique"
                                    % (where, vm_name))
                vm = Vm(vm_name, name, kind, index)
                self.vms[vm_name] = vm
                vms.append(vm)
            if kind in BROADCAST_KINDS:
                members_set = frozenset(vm.name for vm in vms)
                for vm in vms:
                    vm.members = members_set
        if self.default_vm not in self.vms:
            standalone = Vm(self.default_vm, None, STANDALONE, 0)
            self.vms[self.default_vm] = standalone
            self.vms.move_to_end(self.default_vm, last=False)
        overrides = dict((g["name"], g.get("compute", {})) for g in self.groups)
        for number, vm in enumerate(self.vms.values()):
            vm.instance = _instance_document(vm, number, overrides.get(vm.group, {}))

    @staticmethod
    def _check_name(name, where):
        if not isinstance(name, str) or not _VM_NAME_RE.match(name):
            raise MockError("%s: %r is not a usable VM name (letters, digits, '_', '.', '-'; up to 80 "
                            "characters, starting with a letter or digit)" % (where, name))

    def document(self):
        return {"default_vm": self.default_vm, "groups": copy.deepcopy(self.groups)}

    def audience(self, resources):
        """The VMs that see an event naming these resources."""
        seen = set()
        for name in resources:
            seen |= self.vms[name].members
        return frozenset(seen)


def _instance_document(vm, number, overrides):
    """Plausible /metadata/instance content for one VM (every primitive a string, as IMDS does)."""
    subscription = "8d10da13-8125-4ba9-a717-bf7490507b3d"
    group = "mock-imds-rg"
    computer_name = vm.name
    placement_group = ""
    scale_set = ""
    zone = ""
    resource_id = ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s"
                   % (subscription, group, vm.name))
    if vm.kind == "scale_set":
        scale_set = vm.group
        placement_group = str(uuid.uuid5(_NAMESPACE, "pg/" + vm.group))
        computer_name = "%s%06d" % (vm.group[:9], vm.index)
        resource_id = ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/"
                       "%s/virtualMachines/%d" % (subscription, group, vm.group, vm.index))
    elif vm.kind == "zonal":
        zone = str(vm.index % 3 + 1)
    mac_seed = uuid.uuid5(_NAMESPACE, "mac/" + vm.name).hex.upper()
    compute = {
        "azEnvironment": "AzurePublicCloud",
        "additionalCapabilities": {"hibernationEnabled": "false"},
        "evictionPolicy": "",
        "extendedLocation": {"name": "", "type": ""},
        "host": {"id": ""},
        "hostGroup": {"id": ""},
        "isHostCompatibilityLayerVm": "false",
        "licenseType": "",
        "location": "westeurope",
        "name": vm.name,
        "offer": "0001-com-ubuntu-server-jammy",
        "osProfile": {"adminUsername": "azureuser", "computerName": computer_name,
                      "disablePasswordAuthentication": "true"},
        "osType": "Linux",
        "physicalZone": "",
        "placementGroupId": placement_group,
        "plan": {"name": "", "product": "", "publisher": ""},
        "platformFaultDomain": str(vm.index % 2) if vm.kind == "availability_set" else "0",
        "platformSubFaultDomain": "",
        "platformUpdateDomain": str(vm.index % 5) if vm.kind == "availability_set" else "0",
        "priority": "Regular",
        "provider": "Microsoft.Compute",
        "publicKeys": [],
        "publisher": "canonical",
        "resourceGroupName": group,
        "resourceId": resource_id,
        "securityProfile": {"encryptionAtHost": "false", "secureBootEnabled": "true", "securityType": "TrustedLaunch",
                            "virtualTpmEnabled": "true"},
        "sku": "22_04-lts-gen2",
        "subscriptionId": subscription,
        "tags": "mock_imds:true",
        "tagsList": [{"name": "mock_imds", "value": "true"}],
        "userData": "",
        "version": "22.04.202404080",
        "vmId": str(uuid.uuid5(_NAMESPACE, "vm/" + vm.name)),
        "vmScaleSetName": scale_set,
        "vmSize": "Standard_D2s_v5",
        "zone": zone,
    }
    compute.update(overrides)
    network = {"interface": [{
        "ipv4": {
            "ipAddress": [{"privateIpAddress": "10.0.%d.%d" % (number // 250, number % 250 + 4),
                           "publicIpAddress": ""}],
            "subnet": [{"address": "10.0.0.0", "prefix": "16"}],
        },
        "ipv6": {"ipAddress": []},
        "macAddress": "000D3A" + mac_seed[:6],
    }]}
    return {"compute": compute, "network": network}


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------

EVENT_SPEC_KEYS = (
    "at", "event_type", "resources", "notice", "duration", "status", "event_source", "description",
    "duration_in_seconds", "event_id", "resource_type", "cancel_at",
)


class Event(object):
    __slots__ = (
        "event_id", "event_type", "resources", "resource_type", "event_source", "description",
        "duration_in_seconds", "notice", "duration", "initial_status", "audience",
        "status", "appear_at", "not_before", "cancel_at", "started_at", "ended_at", "approvals",
    )

    def next_transition(self):
        """(sim time, action) of the next thing the clock does to this event, or None."""
        if self.status == PENDING:
            return self.appear_at, "appear"
        if self.status == SCHEDULED:
            if self.cancel_at is not None and self.cancel_at <= self.not_before:
                return self.cancel_at, "cancel"
            return self.not_before, "start"
        if self.status == STARTED:
            return self.started_at + self.duration, "remove"
        return None

    def entry(self, schema):
        """The event as IMDS shows it to one api-version schema, or None if that version hides it."""
        since = EVENT_TYPES_SINCE.get(self.event_type)
        if since is not None and schema < since:
            return None
        resources = self.resources
        if schema < UNDERSCORE_BEFORE:
            resources = ["_" + name for name in resources]
        entry = collections.OrderedDict((
            ("EventId", self.event_id),
            ("EventStatus", self.status),
            ("EventType", self.event_type),
            ("ResourceType", self.resource_type),
            ("Resources", list(resources)),
            ("NotBefore", rfc1123(self.not_before) if self.status == SCHEDULED else ""),
        ))
        values = {"Description": self.description, "EventSource": self.event_source,
                  "DurationInSeconds": self.duration_in_seconds}
        for field, field_since in FIELDS_SINCE:
            if schema >= field_since:
                entry[field] = values[field]
        return entry

    def view(self):
        """The control API's full internal view."""
        ends_at = self.started_at + self.duration if self.started_at is not None else None
        return collections.OrderedDict((
            ("event_id", self.event_id),
            ("event_type", self.event_type),
            ("status", self.status),
            ("resources", list(self.resources)),
            ("resource_type", self.resource_type),
            ("event_source", self.event_source),
            ("description", self.description),
            ("duration_in_seconds", self.duration_in_seconds),
            ("notice", self.notice),
            ("duration", self.duration),
            ("appears_at", iso_utc(self.appear_at)),
            ("not_before", iso_utc(self.not_before)),
            ("not_before_rfc1123", rfc1123(self.not_before) if self.not_before is not None else None),
            ("cancel_at", iso_utc(self.cancel_at)),
            ("started_at", iso_utc(self.started_at)),
            ("ends_at", iso_utc(ends_at) if self.status in (PENDING, SCHEDULED, STARTED) else None),
            ("ended_at", iso_utc(self.ended_at)),
            ("visible_to", sorted(self.audience)),
            ("approvals", [dict(a) for a in self.approvals]),
        ))


def normalize_event_spec(spec, where, fleet):
    """Check one event description (control API or scenario) and fill in the defaults."""
    _check_keys(spec, EVENT_SPEC_KEYS, where)
    out = {}
    event_type = spec.get("event_type")
    if not isinstance(event_type, str) or not event_type:
        raise MockError("%s.event_type must be a non-empty string such as %s" % (where, ", ".join(EVENT_TYPES)))
    out["event_type"] = event_type
    resources = spec.get("resources", [fleet.default_vm])
    if not isinstance(resources, list) or not resources or not all(isinstance(r, str) for r in resources):
        raise MockError("%s.resources must be a non-empty list of VM names" % where)
    unknown = [r for r in resources if r not in fleet.vms]
    if unknown:
        raise MockError("%s.resources names VMs that are not in the fleet: %s (fleet: %s); add them to the fleet "
                        "first" % (where, ", ".join(unknown), ", ".join(fleet.vms)))
    out["resources"] = list(resources)
    out["status"] = _choice(spec.get("status", SCHEDULED), where + ".status", VISIBLE_STATES)
    out["at"] = _number(spec.get("at", 0), where + ".at", minimum=0)
    out["notice"] = _number(spec.get("notice", DEFAULT_NOTICE.get(event_type, DEFAULT_NOTICE_OTHER)),
                            where + ".notice", minimum=0)
    out["duration"] = _number(spec.get("duration", DEFAULT_DURATION), where + ".duration", minimum=0)
    out["event_source"] = _choice(spec.get("event_source", "Platform"), where + ".event_source", ("Platform", "User"))
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise MockError("%s.description must be a string" % where)
    out["description"] = description
    out["duration_in_seconds"] = _number(spec.get("duration_in_seconds", -1), where + ".duration_in_seconds",
                                         minimum=-1, integer=True)
    resource_type = spec.get("resource_type", "VirtualMachine")
    if not isinstance(resource_type, str) or not resource_type:
        raise MockError("%s.resource_type must be a non-empty string" % where)
    out["resource_type"] = resource_type
    event_id = spec.get("event_id")
    if event_id is not None and (not isinstance(event_id, str) or not event_id.strip()):
        raise MockError("%s.event_id must be a non-empty string (a GUID, like IMDS uses)" % where)
    out["event_id"] = event_id
    cancel_at = spec.get("cancel_at")
    if cancel_at is not None:
        cancel_at = _number(cancel_at, where + ".cancel_at", minimum=0)
        if out["status"] != SCHEDULED:
            raise MockError("%s.cancel_at only applies to Scheduled events (status is %s)" % (where, out["status"]))
        if cancel_at <= out["at"]:
            raise MockError("%s.cancel_at (%s) must be later than at (%s)" % (where, cancel_at, out["at"]))
    out["cancel_at"] = cancel_at
    return out


# --------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------

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
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise MockError("fault paths must be a list of IMDS paths such as /metadata/scheduledevents "
                        "(or short names such as scheduledevents)")
    return [p.rstrip("/") if p.startswith("/") else "/metadata/" + p.strip("/") for p in value]


def make_fault(spec, fleet, real_now, fault_id):
    _check_keys(spec, FAULT_KEYS, "fault")
    f = Fault()
    f.fault_id = fault_id
    f.kind = _choice(spec.get("kind"), "fault kind", FAULT_KINDS)
    f.vm = spec.get("vm")
    if f.vm is not None and f.vm not in fleet.vms:
        raise MockError("fault vm %r is not in the fleet (%s); omit vm for all VMs" % (f.vm, ", ".join(fleet.vms)),
                        404)
    count = spec.get("count")
    f.remaining = None if count is None else _number(count, "fault count", minimum=1, integer=True)
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
    retry_after = spec.get("retry_after")
    f.retry_after = None if retry_after is None else _number(retry_after, "fault retry_after", minimum=0,
                                                             integer=True)
    f.paths = _fault_paths(spec.get("paths"))
    methods = spec.get("methods")
    if methods is not None and (not isinstance(methods, list) or not all(isinstance(m, str) for m in methods)):
        raise MockError("fault methods must be a list such as [\"GET\"]")
    f.methods = None if methods is None else [m.upper() for m in methods]
    f.location = spec.get("location")
    if f.location is not None and (f.kind != "redirect" or not isinstance(f.location, str)):
        raise MockError("location only applies to redirect faults and must be a URL string")
    f.body = spec.get("body")
    if f.body is not None and (f.kind != "status" or not isinstance(f.body, str)):
        raise MockError("body only applies to status faults and must be a string")
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


# --------------------------------------------------------------------------------------------
# Built-in scenarios
# --------------------------------------------------------------------------------------------

LIVE_MIGRATION_DESCRIPTION = "Virtual machine is being paused because of a memory-preserving Live Migration operation."

BUILTIN_SCENARIOS = {
    "live_migration": {
        "description": "The Microsoft docs' live migration (Freeze) flow for WestNO_0 and WestNO_1: incarnation 1 "
                       "empty, 2 Scheduled (NotBefore Mon, 11 Apr 2022 22:26:58 GMT), 3 Started, 4 empty.",
        "start_time": "2022-04-11T22:11:53Z",
        "fleet": {"default_vm": "WestNO_0",
                  "groups": [{"name": "WestNO", "kind": "availability_set", "vms": ["WestNO_0", "WestNO_1"]}]},
        "events": [{"at": 5, "event_type": "Freeze", "resources": ["WestNO_0", "WestNO_1"], "notice": 900,
                    "duration": 30, "description": LIVE_MIGRATION_DESCRIPTION, "event_source": "Platform",
                    "duration_in_seconds": 5, "event_id": "C7061BAC-AFDC-4513-B24B-AA5F13A16123"}],
    },
    "user_reboot": {
        "description": "A user restarts vm0 from the portal: Reboot, EventSource User, 15 min notice.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "event_source": "User",
                    "description": "Virtual machine is going to be restarted as requested by authorized user."}],
    },
    "redeploy": {
        "description": "Platform redeploy of vm0 to another host: Redeploy, 10 min notice.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"],
                    "description": "Virtual machine is going to be redeployed to another host."}],
    },
    "spot_preempt": {
        "description": "Spot eviction of myspotvm: Preempt with 30 s notice.",
        "fleet": {"default_vm": "myspotvm", "groups": [{"name": "spot", "kind": "zonal", "vms": ["myspotvm"],
                                                        "compute": {"priority": "Spot",
                                                                    "evictionPolicy": "Delete"}}]},
        "events": [{"event_type": "Preempt", "resources": ["myspotvm"], "notice": 30}],
    },
    "vmss_terminate": {
        "description": "Scale-in of instance myvmss_1: Terminate with 5 min notice, seen by the whole placement "
                       "group.",
        "fleet": {"default_vm": "myvmss_1",
                  "groups": [{"name": "myvmss", "kind": "scale_set", "vms": ["myvmss_0", "myvmss_1", "myvmss_2"]}]},
        "events": [{"event_type": "Terminate", "resources": ["myvmss_1"], "notice": 300, "event_source": "User"}],
    },
    "predicted_hardware_failure": {
        "description": "Host hardware predicted to fail: Redeploy of vm0 with NotBefore 3 days ahead.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"], "notice": 3 * 86400,
                    "description": "Virtual machine is going to be redeployed because of a predicted hardware "
                                   "failure on the host."}],
    },
    "hardware_failure": {
        "description": "Unexpected host failure: Reboot of vm0 that appears directly as Started.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "status": "Started",
                    "description": "Virtual machine is being restarted because of an unexpected host failure."}],
    },
    "cancellation": {
        "description": "A Reboot of vm0 is scheduled, then cancelled after 2 minutes: it leaves the document.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "notice": 900, "cancel_at": 120}],
    },
    "overlapping": {
        "description": "Two overlapping events in availability set avset1: Freeze of web_0, then a Reboot of web_1 "
                       "a minute later while the first is still Scheduled; every member sees both.",
        "fleet": {"default_vm": "web_0",
                  "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]},
        "events": [
            {"at": 0, "event_type": "Freeze", "resources": ["web_0"], "notice": 900, "duration": 60,
             "duration_in_seconds": 7},
            {"at": 60, "event_type": "Reboot", "resources": ["web_1"], "notice": 900},
        ],
    },
    "empty": {
        "description": "No events at all: DocumentIncarnation 1, Events [].",
        "events": [],
    },
}

SCENARIO_KEYS = ("name", "description", "fleet", "speed", "config", "events", "start_time")
CONFIG_KEYS = ("speed", "rate_limit", "approval_mode", "unknown_event_ids")


def resolve_scenario(name_or_doc):
    """A built-in name, a path to a JSON file, or a scenario document -> (name, document)."""
    if isinstance(name_or_doc, dict):
        if set(name_or_doc) == {"name"}:
            name_or_doc = name_or_doc["name"]
        else:
            return name_or_doc.get("name", "custom"), name_or_doc
    if not isinstance(name_or_doc, str) or not name_or_doc:
        raise MockError("a scenario is a built-in name (%s), a JSON file path or a scenario object"
                        % ", ".join(sorted(BUILTIN_SCENARIOS)))
    if name_or_doc in BUILTIN_SCENARIOS:
        return name_or_doc, copy.deepcopy(BUILTIN_SCENARIOS[name_or_doc])
    if os.path.isfile(name_or_doc):
        try:
            with open(name_or_doc, "rb") as handle:
                doc = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise MockError("scenario file %s is not readable JSON (%s); fix the file (format: docs/mock_imds.md)"
                            % (name_or_doc, exc))
        if not isinstance(doc, dict):
            raise MockError("scenario file %s must hold a JSON object with an events list" % name_or_doc)
        return doc.get("name", os.path.basename(name_or_doc)), doc
    raise MockError("unknown scenario %r: use a built-in name (%s) or the path of a scenario JSON file"
                    % (name_or_doc, ", ".join(sorted(BUILTIN_SCENARIOS))), 404)


# --------------------------------------------------------------------------------------------
# The state: fleet, clock, events, faults, audit. Every public method takes the lock.
# --------------------------------------------------------------------------------------------

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


CLOCK_CAUSES = {"appear": "at", "start": "not_before", "cancel": "cancel_at", "remove": "duration"}


class MockState(object):
    """Everything the mock knows, behind one lock. Lifecycle transitions are computed lazily from
    the clock whenever state is touched, so advancing simulated time is instant.

    clock: a callable giving real monotonic seconds (time.monotonic); simulated time is
    start_time + elapsed * speed + advanced seconds. Rate limiting and fault durations use the
    same clock, unscaled. wallclock (time.time) only stamps the audit."""

    def __init__(self, fleet=None, default_vm=None, speed=1.0, start_time=None, rate_limit=True,
                 approval_mode="any", unknown_event_ids="accept", clock=None, wallclock=None, audit_limit=100000):
        self._lock = threading.Lock()
        self._clock = clock or time.monotonic
        self._wallclock = wallclock or time.time
        self._fleet = fleet if isinstance(fleet, Fleet) else Fleet(fleet, default_vm)
        self._speed = 1.0
        self._rate_limit = 0
        self._approval_mode = "any"
        self._unknown_ids = "accept"
        self._apply_config(self._parse_config({"speed": speed, "rate_limit": rate_limit,
                                               "approval_mode": approval_mode,
                                               "unknown_event_ids": unknown_event_ids}))
        self._set_start(self._wallclock() if start_time is None else self._start_epoch(start_time))
        self._audit_limit = audit_limit
        self.base_url = ""
        self.scenario = None
        self._fault_serial = 0
        self._reset_runtime()

    # -- helpers (lock held) -----------------------------------------------------------------

    @staticmethod
    def _start_epoch(value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return parse_iso(value)
        except (TypeError, ValueError):
            raise MockError("start_time %r is not an ISO 8601 time such as 2022-04-11T22:11:53Z" % (value,))

    def _set_start(self, epoch):
        self._sim_base = epoch
        self._real_base = self._clock()

    def _now(self):
        return self._sim_base + (self._clock() - self._real_base) * self._speed

    def _reset_runtime(self):
        self._events = []            # every event, in creation order
        self._live = []              # events in a visible state, in creation order
        self._by_id = {}             # upper-case id -> event
        self._next_due = float("inf")
        self._faults = []
        self._incarnation = dict((name, 1) for name in self._fleet.vms)
        self._doc_cache = dict((name, {}) for name in self._fleet.vms)
        self._windows = dict((name, collections.deque()) for name in self._fleet.vms)
        self._seq = 0
        self._requests = collections.deque(maxlen=self._audit_limit)
        self._approvals = collections.deque(maxlen=self._audit_limit)
        self._transitions = collections.deque(maxlen=self._audit_limit)

    def _next_seq(self):
        self._seq += 1
        return self._seq

    @staticmethod
    def _parse_config(cfg):
        """Check a config object; returns the attribute values it sets (nothing is changed yet)."""
        _check_keys(cfg, CONFIG_KEYS, "config")
        values = {}
        if "speed" in cfg:
            speed = _number(cfg["speed"], "speed", minimum=0)
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
                value = _number(value, "rate_limit (true, false or requests per second)", minimum=0, integer=True)
            values["_rate_limit"] = value
        if "approval_mode" in cfg:
            values["_approval_mode"] = _choice(cfg["approval_mode"], "approval_mode", APPROVAL_MODES)
        if "unknown_event_ids" in cfg:
            values["_unknown_ids"] = _choice(cfg["unknown_event_ids"], "unknown_event_ids", UNKNOWN_ID_POLICIES)
        return values

    def _apply_config(self, values):
        if "_speed" in values and hasattr(self, "_sim_base"):
            self._set_start(self._now())  # keep simulated time continuous across a speed change
        for name, value in values.items():
            setattr(self, name, value)

    def _config_view(self):
        return collections.OrderedDict((
            ("speed", self._speed),
            ("rate_limit", self._rate_limit > 0),
            ("rate_limit_per_second", self._rate_limit),
            ("approval_mode", self._approval_mode),
            ("unknown_event_ids", self._unknown_ids),
            ("default_vm", self._fleet.default_vm),
        ))

    def _bump(self, names):
        for name in names:
            self._incarnation[name] += 1
            self._doc_cache[name] = {}

    def _record_transition(self, event, to, sim_time, cause):
        self._transitions.append((self._next_seq(), self._wallclock(), sim_time, event.event_id, event.status, to,
                                  cause))
        event.status = to

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
            self._record_transition(event, event.initial_status, at, cause)
            if event.initial_status == STARTED:
                event.started_at = at
            return event.audience
        if action == "start":
            self._record_transition(event, STARTED, at, cause)
            event.started_at = at
            return event.audience
        was_visible = event.status in VISIBLE_STATES
        self._record_transition(event, CANCELLED if action == "cancel" else REMOVED, at, cause)
        event.ended_at = at
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

    def _create_event(self, norm, base):
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
        self._events.append(event)
        self._by_id[event_id.upper()] = event
        return event

    def _document(self, vm, schema):
        cache = self._doc_cache[vm]
        body = cache.get(schema)
        if body is None:
            entries = []
            for event in self._live:
                if vm in event.audience:
                    entry = event.entry(schema)
                    if entry is not None:
                        entries.append(entry)
            body = _json_bytes(collections.OrderedDict((("DocumentIncarnation", self._incarnation[vm]),
                                                        ("Events", entries))))
            cache[schema] = body
        return body

    def _audit_request(self, arrival, sim_time, vm, method, path, status, fault):
        self._requests.append((self._next_seq(), arrival, sim_time, vm, method, path, status, fault))

    # -- the IMDS side -----------------------------------------------------------------------

    def default_vm(self):
        return self._fleet.default_vm

    def has_vm(self, name):
        return name in self._fleet.vms

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
            if not self._faults:
                return ADMIT
            delay = 0.0
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
        metadata = headers.get("Metadata")
        if metadata is None or metadata.strip().lower() != "true":
            return Response(400, BODY_NO_METADATA)
        params = _parse_query(query)
        if params is None:
            return Response(400, _error_bytes("Bad request. Duplicate query parameters are not allowed"))
        if path == PATH_SCHEDULED_EVENTS:
            allowed, accepts = ("GET", "POST"), SCHEDULED_EVENTS_ACCEPTS
        elif path == PATH_INSTANCE or path.startswith(PATH_INSTANCE + "/"):
            allowed, accepts = ("GET",), INSTANCE_ACCEPTS
        elif path == PATH_VERSIONS:
            allowed, accepts = ("GET",), None
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
            if vm not in event.resources or self._approval_mode == "not_before":
                continue
            approvers = set(a["vm"] for a in event.approvals if a["in_resources"])
            if self._approval_mode == "any" or approvers.issuperset(event.resources):
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

    # -- the control side ---------------------------------------------------------------------

    def now(self):
        with self._lock:
            return self._now()

    def advance(self, seconds):
        seconds = _number(seconds, "seconds", minimum=0)
        with self._lock:
            self._sim_base += seconds
            now = self._tick()
            return {"now": iso_utc(now), "advanced": seconds}

    def configure(self, **cfg):
        with self._lock:
            values = self._parse_config(cfg)
            self._tick()
            self._apply_config(values)
            return self._config_view()

    def config(self):
        with self._lock:
            return self._config_view()

    def reset(self, fleet=None, start_time=None):
        with self._lock:
            self._reset(fleet, start_time)
            return self._snapshot()

    def _reset(self, fleet=None, start_time=None):
        if fleet is not None:
            self._fleet = fleet if isinstance(fleet, Fleet) else Fleet(fleet)
        if start_time is not None:
            self._set_start(self._start_epoch(start_time))
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

    def load_scenario(self, name_or_doc, fleet=None, default_vm=None, start_time=None, config=None):
        """Reset, then load a scenario. fleet (a fleet document), default_vm, start_time and config
        given here win over the scenario's own: the CLI passes its explicit options this way.
        Everything is checked first: a scenario that fails to load changes nothing."""
        name, doc = resolve_scenario(name_or_doc)
        _check_keys(doc, SCENARIO_KEYS, "scenario")
        events = doc.get("events", [])
        if not isinstance(events, list):
            raise MockError("scenario.events must be a list of event objects")
        new_fleet = None
        if fleet is not None or doc.get("fleet") is not None or default_vm is not None:
            new_fleet = Fleet(fleet if fleet is not None else doc.get("fleet"), default_vm)
        cfg = dict(doc.get("config") or {})
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
            event = self._create_event(norm, self._now())
            self._refresh_due()
            self._tick()
            return event.view()

    def event_action(self, event_id, action):
        with self._lock:
            self._tick()
            event = self._event(event_id)
            allowed = {"cancel": (PENDING, SCHEDULED), "start": (SCHEDULED,), "complete": (SCHEDULED, STARTED)}
            if action not in allowed:
                raise MockError("unknown event action %r: use cancel, start or complete" % action, 404)
            if event.status not in allowed[action]:
                raise MockError("cannot %s event %s: it is %s (%s needs %s)"
                                % (action, event.event_id, event.status, action, " or ".join(allowed[action])))
            self._change(event, {"complete": "remove"}.get(action, action), "control")
            return event.view()

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
            self._fault_serial += 1
            fault = make_fault(spec, self._fleet, self._clock(), "F%d" % self._fault_serial)
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
            return {"requests": requests, "approvals": approvals, "transitions": transitions, "last_seq": self._seq}

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


_QUERY_CACHE = {}


def _parse_query(query):
    """Query string -> dict, None if a parameter repeats. Cached: clients repeat the same few."""
    try:
        return _QUERY_CACHE[query]
    except KeyError:
        pass
    pairs = parse_qsl(query, keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs):
        params = None
    if len(_QUERY_CACHE) > 1024:
        _QUERY_CACHE.clear()
    _QUERY_CACHE[query] = params
    return params


# --------------------------------------------------------------------------------------------
# Control API (/_mock/...)
# --------------------------------------------------------------------------------------------

def _query_args(query):
    params = _parse_query(query)
    if params is None:
        raise MockError("duplicate query parameters")
    return params


def _since(params):
    value = params.get("since")
    if value is None:
        return None
    if not value.isdigit():
        raise MockError("since must be a sequence number (an integer), got %r" % value)
    return int(value)


def _control_vm(state, params):
    vm = params.get("vm")
    if vm is not None and not state.has_vm(vm):
        raise MockError("no VM named %r in the fleet" % vm, 404)
    return vm


def control(state, method, path, query, body):
    """Run one control call; returns (status, JSON-able object). path starts after /_mock/."""
    try:
        doc = json.loads(body.decode("utf-8")) if body and body.strip() else {}
    except ValueError as exc:
        raise MockError("the request body is not JSON (%s)" % exc)
    parts = [p for p in path.split("/") if p]
    route = "/".join(parts[:1])
    params = _query_args(query)
    if method == "POST" and not isinstance(doc, dict):
        raise MockError("the request body must be a JSON object")
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
            return 200, state.configure(**doc)
    if route == "reset" and len(parts) == 1 and method == "POST":
        _check_keys(doc, ("fleet", "start_time"), "reset body")
        return 200, state.reset(fleet=doc.get("fleet"), start_time=doc.get("start_time"))
    if route == "fleet" and len(parts) == 1:
        if method == "GET":
            return 200, state.fleet()
        if method == "POST":
            return 200, state.set_fleet(doc)
    if route == "scenario" and len(parts) == 1 and method == "POST":
        return 200, state.load_scenario(doc)
    if route == "scenarios" and len(parts) == 1 and method == "GET":
        return 200, dict((name, s["description"]) for name, s in sorted(BUILTIN_SCENARIOS.items()))
    if route == "audit" and len(parts) == 1 and method == "GET":
        return 200, state.audit(since=_since(params), vm=_control_vm(state, params))
    if route == "redirect-target" and len(parts) == 1:
        state.record_followed_redirect(method, CONTROL_PREFIX + path + ("?" + query if query else ""))
        raise MockError("mock_imds: a client followed a redirect; IMDS clients must never follow redirects")
    raise MockError("no control call %s /_mock/%s; see docs/mock_imds.md for the control API" % (method, path), 404)


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

_REASONS = dict((s.value, s.phrase) for s in HTTPStatus)
_DATE_CACHE = [0, ""]


def _http_date():
    now = int(time.time())
    if _DATE_CACHE[0] != now:
        _DATE_CACHE[1] = email.utils.formatdate(now, usegmt=True)
        _DATE_CACHE[0] = now
    return _DATE_CACHE[1]


class _Headers(dict):
    """Request headers by lower-case name (the first occurrence wins); get() ignores case."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    MAX_HEADERS = 100

    def version_string(self):
        return "mock_imds"

    def setup(self):
        BaseHTTPRequestHandler.setup(self)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self):
        try:
            BaseHTTPRequestHandler.finish(self)
        finally:
            self.server.connections.discard(self.connection)

    def handle_one_request(self):
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._dispatch()
        except (socket.timeout, ConnectionError, OSError):
            self.close_connection = True

    def parse_request(self):
        """Replaces BaseHTTPRequestHandler.parse_request, whose email-based header parser costs
        more than everything else the mock does for a request. Same outcome for HTTP/1.0 and 1.1:
        command, path, request_version, headers, close_connection, 100-continue."""
        self.command = None
        self.request_version = "HTTP/1.0"
        self.close_connection = True
        self.requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            self.send_error(400, "Bad request line %r" % self.requestline)
            return False
        self.command, self.path, version = words
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            self.send_error(505, "HTTP version %s is not supported" % version)
            return False
        self.request_version = version
        headers = _Headers()
        last = None
        for _attempt in range(self.MAX_HEADERS + 1):
            raw = self.rfile.readline(65537)
            if len(raw) > 65536:
                self.send_error(431, "Header line too long")
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
            text = raw.decode("iso-8859-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and last is not None:  # obsolete line folding
                headers[last] += " " + text.strip()
                continue
            name, colon, value = text.partition(":")
            if not colon or not name or name != name.strip():
                self.send_error(400, "Bad header line %r" % text)
                return False
            name = name.lower()
            last = name if name not in headers else None
            headers.setdefault(name, value.strip())
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.close_connection = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                self._write(Response(411, _error_bytes("Send a Content-Length; chunked bodies are not supported")))
                self.close_connection = True
                return None
            return b""
        if not length.strip().isdigit() or int(length) > 1 << 20:
            self.close_connection = True
            self._write(Response(400, _error_bytes("Bad Content-Length")))
            return None
        return self.rfile.read(int(length)) if int(length) else b""

    def _dispatch(self):
        started = time.monotonic()
        mock = self.server.mock
        state = mock.state
        raw = self.path
        if not raw.startswith("/"):
            parts = urlsplit(raw)
            raw = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        path, _sep, query = raw.partition("?")
        body = self._read_body()
        if body is None:
            return
        if path.startswith(CONTROL_PREFIX):
            response = self._control(state, path[len(CONTROL_PREFIX):], query, body)
            vm = "-"
        else:
            if path.startswith("/vm/"):
                vm, _sep, rest = path[4:].partition("/")
                path = "/" + rest
            else:
                vm = state.default_vm()
            if not state.has_vm(vm):
                response = Response(404, _error_bytes("mock_imds: no VM named %s in the fleet" % vm))
            else:
                response = self._imds(mock, state, vm, path, query, body)
        if mock.log is not None:
            # Logged before the answer is sent, so that the log keeps the order of the requests
            # even when the client's next request arrives on another connection.
            status = response.status if response is not None else "-"
            elapsed = (time.monotonic() - started) * 1000
            mock.log('%s %s "%s %s" %s %.1fms' % (self.client_address[0], vm, self.command, self.path, status, elapsed))
        if response is not None:
            self._write(response)

    def _imds(self, mock, state, vm, path, query, body):
        arrival = time.time()
        admission = state.admit(vm, self.command, path)
        if admission.delay and mock.stopping.wait(admission.delay):
            self.close_connection = True
            return None
        response = state.respond(vm, self.command, path, query, self.headers, body, admission, arrival)
        if response.action == "drop":
            self.close_connection = True
            return None
        if response.action == "reset":
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return None
        return response

    def _control(self, state, path, query, body):
        try:
            status, obj = control(state, self.command, path, query, body)
        except MockError as exc:
            status, obj = exc.status, {"error": str(exc)}
        return Response(status, (json.dumps(obj, indent=2) + "\n").encode("utf-8"))

    def _write(self, response):
        length = response.size if response.action == "oversize" else len(response.body)
        parts = ["HTTP/1.1 %d %s\r\n" % (response.status, _REASONS.get(response.status, "Unknown")),
                 "Date: %s\r\nContent-Length: %d\r\n" % (_http_date(), length)]
        if response.content_type:
            parts.append("Content-Type: %s\r\n" % response.content_type)
        for name, value in response.headers:
            parts.append("%s: %s\r\n" % (name, value))
        if self.close_connection:
            parts.append("Connection: close\r\n")
        parts.append("\r\n")
        data = "".join(parts).encode("latin-1")
        if self.command != "HEAD":
            data += response.body
        if response.action == "trickle":
            self._trickle(data, response.interval)
        elif response.action == "oversize":
            self.wfile.write(data)
            self._pad(length - len(response.body))
        else:
            self.wfile.write(data)

    def _trickle(self, data, interval):
        # One byte at a time, headers included, so that a client with a per-read timeout never
        # times out while a client with a per-request deadline must give up.
        stopping = self.server.mock.stopping
        self.close_connection = True
        for index in range(len(data)):
            if stopping.wait(interval if index else 0):
                return
            try:
                self.wfile.write(data[index:index + 1])
                self.wfile.flush()
            except OSError:
                return

    def _pad(self, remaining):
        # JSON allows white space after the document: the padded answer stays valid JSON, so only
        # a client's size cap can refuse it.
        chunk = b" " * 65536
        try:
            while remaining > 0:
                self.wfile.write(chunk[:remaining])
                remaining -= len(chunk)
        except OSError:
            self.close_connection = True

    def log_message(self, fmt, *args):
        log = self.server.mock.log
        if log is not None:
            log("%s %s" % (self.client_address[0], fmt % args))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def server_bind(self):
        # HTTPServer.server_bind would look the address up in DNS (getfqdn): keep it numeric.
        TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class _Server6(_Server):
    address_family = socket.AF_INET6


def check_bind(bind, allow_remote):
    if bind == "localhost":
        return
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        raise MockError("--bind %r is not a numeric IP address; use 127.0.0.1 (or ::1)" % (bind,))
    if not address.is_loopback and not allow_remote:
        raise MockError("refusing to listen on %s: the control API lets anyone who reaches it change the events; "
                        "use 127.0.0.1, or pass --allow-remote (allow_remote=True) on an isolated network" % bind)


class MockImds(object):
    """The mock server. Use start() / stop() or a with block; state lives in .state (a MockState).

    All keyword arguments but bind, port, allow_remote, log and scenario go to MockState:
    fleet, default_vm, speed, start_time, rate_limit, approval_mode, unknown_event_ids, clock,
    wallclock, audit_limit."""

    def __init__(self, bind="127.0.0.1", port=0, allow_remote=False, log=None, scenario=None, **state_kwargs):
        check_bind(bind, allow_remote)
        self.bind = bind
        self.requested_port = port
        self.log = log
        self.state = MockState(**state_kwargs)
        if scenario is not None:
            self.state.load_scenario(scenario)
        self.stopping = threading.Event()
        self.port = None
        self._server = None
        self._thread = None

    @property
    def url(self):
        host = "[%s]" % self.bind if ":" in self.bind else self.bind
        return "http://%s:%d" % (host, self.port)

    @property
    def control_url(self):
        return self.url + CONTROL_PREFIX

    def vm_url(self, name):
        return "%s/vm/%s" % (self.url, name)

    def start(self):
        server_class = _Server6 if ":" in self.bind else _Server
        self._server = server_class((self.bind, self.requested_port), _Handler)
        self._server.mock = self
        self._server.connections = set()
        self.port = self._server.server_address[1]
        self.state.base_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mock_imds", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        for conn in list(self._server.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # Shortcuts to the state for tests and scripts.
    def advance(self, seconds):
        return self.state.advance(seconds)

    def add_event(self, spec=None, **kwargs):
        return self.state.add_event(spec, **kwargs)

    def add_fault(self, spec=None, **kwargs):
        return self.state.add_fault(spec, **kwargs)["fault_id"]

    def clear_faults(self, vm=None):
        return self.state.clear_faults(vm=vm)

    def audit(self, since=None, vm=None):
        return self.state.audit(since=since, vm=vm)

    def load_scenario(self, name_or_doc):
        return self.state.load_scenario(name_or_doc)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, "mock_imds: error: %s (see --help)\n" % message)


def _build_parser():
    parser = _ArgumentParser(
        prog="mock_imds.py",
        description="Mock Azure Instance Metadata Service (scheduled events, instance metadata) for tests. "
                    "Control API under /_mock/; see docs/mock_imds.md.")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    parser.add_argument("--port-file", help="write the port actually used to this file once listening")
    parser.add_argument("--scenario", help="built-in scenario name or scenario JSON file (--list-scenarios)")
    parser.add_argument("--fleet", action="append", default=[],
                        help="fleet JSON file, or KIND:VM,VM / KIND:GROUP:VM,VM with KIND avset, vmss or zonal; "
                             "repeatable")
    parser.add_argument("--default-vm", help="VM served at the root /metadata/... (default vm0)")
    parser.add_argument("--speed", type=float, help="simulated seconds per real second (default 1)")
    parser.add_argument("--start-time", help="simulated time at start, ISO 8601 (default now)")
    parser.add_argument("--no-rate-limit", action="store_true", help="turn off the 5 requests/s per VM limit")
    parser.add_argument("--approval-mode", choices=APPROVAL_MODES, help="who must approve before an event starts")
    parser.add_argument("--unknown-event-ids", choices=UNKNOWN_ID_POLICIES,
                        help="answer to approvals of unknown EventIds: accept (200, default) or reject (400)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a non-loopback --bind (the control API is unauthenticated)")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines on stderr")
    parser.add_argument("--list-scenarios", action="store_true", help="print the built-in scenarios and exit")
    return parser


def _cli_fleet(specs):
    """--fleet options -> one fleet document (None without any)."""
    if not specs:
        return None
    groups = []
    doc_default = None
    for spec in specs:
        if spec.endswith(".json") or os.path.isfile(spec):
            try:
                with open(spec, "rb") as handle:
                    doc = json.loads(handle.read().decode("utf-8"))
            except (OSError, ValueError) as exc:
                raise MockError("--fleet %s is not readable JSON (%s); give a fleet JSON file or KIND:VM,VM"
                                % (spec, exc))
            _check_keys(doc, ("default_vm", "groups"), "fleet file %s" % spec)
            groups.extend(doc.get("groups") or [])
            doc_default = doc.get("default_vm") or doc_default
        else:
            groups.append(parse_fleet_spec(spec, number=len(groups) + 1))
    return {"groups": groups, "default_vm": doc_default or DEFAULT_VM_NAME}


def _notify_systemd():
    """Tell systemd (Type=notify) that the mock listens; nothing without a NOTIFY_SOCKET."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(b"READY=1")
    except OSError:
        pass


def _print(line, stream=None):
    stream = stream or sys.stdout
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def main(argv=None):
    args = _build_parser().parse_args(argv)
    if args.list_scenarios:
        for name, scenario in sorted(BUILTIN_SCENARIOS.items()):
            _print("%-28s %s" % (name, scenario["description"]))
        return 0
    if not 0 <= args.port <= 65535:
        _print("mock_imds: error: --port %d is out of range; use 1-65535, or 0 for any free port" % args.port,
               sys.stderr)
        return 2
    log = None if args.quiet else (lambda line: _print("mock_imds: " + line, sys.stderr))
    try:
        fleet = _cli_fleet(args.fleet)
        config = {}
        if args.speed is not None:
            config["speed"] = args.speed
        if args.no_rate_limit:
            config["rate_limit"] = False
        if args.approval_mode:
            config["approval_mode"] = args.approval_mode
        if args.unknown_event_ids:
            config["unknown_event_ids"] = args.unknown_event_ids
        mock = MockImds(bind=args.bind, port=args.port, allow_remote=args.allow_remote, log=log, fleet=fleet,
                        default_vm=args.default_vm, start_time=args.start_time, **config)
        if args.scenario:
            mock.state.load_scenario(args.scenario, fleet=fleet, default_vm=args.default_vm,
                                     start_time=args.start_time, config=config)
    except MockError as exc:
        _print("mock_imds: error: %s" % exc, sys.stderr)
        return 2
    try:
        mock.start()
    except OSError as exc:
        _print("mock_imds: error: cannot listen on %s:%d (%s); choose another --port, or 0 for any free port"
               % (args.bind, args.port, exc.strerror or exc), sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: stop.set())
    signal.signal(signal.SIGINT, lambda *_args: stop.set())
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as handle:
            handle.write("%d\n" % mock.port)
        os.replace(tmp, args.port_file)
    _print("mock_imds: listening on %s" % mock.url)
    for name in mock.state.snapshot()["vms"]:
        _print("mock_imds: vm %s at %s" % (name, mock.vm_url(name)))
    _print("mock_imds: control at %s" % mock.control_url)
    _notify_systemd()
    while not stop.wait(0.5):
        pass
    mock.stop()
    if args.port_file:
        try:
            os.remove(args.port_file)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
