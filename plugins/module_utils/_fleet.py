# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The fleet view of Scheduled Events: the Resource Graph query the modules send, a row turned into
# an event (through _event.py's one normaliser, plus where the event lives), the scheduled-event ARM
# id taken apart, and the ids of the VMs an event touches; the filters' checks and the one read that
# fleet_event_info and the fleet_events inventory plugin share (its I/O is the session's).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _azure, _defaults, _edge, _event

# Microsoft.Compute scopes that carry scheduled events, as their ARM type segment.
SCOPE_TYPES = {
    "virtualmachines": "virtualMachines",
    "virtualmachinescalesets": "virtualMachineScaleSets",
    "availabilitysets": "availabilitySets",
}
FLEET_STATUSES = ("Scheduled", "Started", "Completed", "Canceled")
DEFAULT_STATUSES = ("Scheduled", "Started")

_GUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_NAME = r"[A-Za-z0-9._()-]{1,90}"
_EVENT_ID_RE = re.compile(
    r"^/subscriptions/(?P<subscription>%s)/resourceGroups/(?P<group>%s)/providers/Microsoft\.Compute/"
    r"(?P<kind>virtualMachines|virtualMachineScaleSets|availabilitySets)/(?P<name>%s)"
    r"/providers/Microsoft\.Maintenance/scheduledevents/(?P<event>%s)$" % (_GUID, _NAME, _NAME, _GUID),
    re.IGNORECASE)
# A Uniform scale set names its instances <set>_<instance id> in Resources (Microsoft's samples).
_UNIFORM_INSTANCE_RE = re.compile(r"^(?P<set>.+)_(?P<instance>\d+)$")

# The projection keeps id: Resource Graph pages ($skipToken) only when the query projects it.
PROJECTION = "| project id, name, type, location, zones, resourceGroup, subscriptionId, properties"


def parse_event_id(event_id):
    """The parts of a scheduled event's ARM id, or None when it is not one."""
    match = _EVENT_ID_RE.match(event_id) if isinstance(event_id, str) else None
    if not match:
        return None
    kind = SCOPE_TYPES[match.group("kind").lower()]
    scope_id = "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/%s/%s" % (
        match.group("subscription"), match.group("group"), kind, match.group("name"))
    return {"subscription_id": match.group("subscription").lower(), "resource_group": match.group("group"),
            "scope_kind": kind, "scope_name": match.group("name"), "scope_id": scope_id,
            "event_id": match.group("event")}


def same_id(a, b):
    """ARM ids are case-insensitive; Microsoft spells them in mixed case."""
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def _quoted(values):
    # Every value passed the modules' own checks (names of [A-Za-z0-9._()-], statuses and types from
    # fixed lists), so none holds a quote or backslash and KQL needs no escaping.
    return ", ".join("'%s'" % value for value in values)


def build_query(event_statuses=DEFAULT_STATUSES, resource_groups=None, event_types=None, event_sources=None):
    """The KQL fleet_event_info and fleet_event_approve send, one filter a line."""
    lines = ["maintenanceresources", "| where type =~ 'microsoft.maintenance/scheduledevents'"]
    for field, values in (("properties.EventStatus", event_statuses), ("resourceGroup", resource_groups),
                          ("properties.EventType", event_types), ("properties.EventSource", event_sources)):
        if values:
            lines.append("| where %s in~ (%s)" % (field, _quoted(values)))
    lines.append(PROJECTION)
    return "\n".join(lines)


def virtual_machine_ids(scope, resources):
    """The ARM ids of the VMs an event names: the VM itself; for an availability set each VM of
    Resources in the set's resource group; for a scale set the instance <set>/virtualMachines/<n>
    when Resources spells it <set>_<n> (Uniform), else the VM of that name (Flexible: its VMs are
    ordinary VMs of the resource group)."""
    if scope is None:
        return []
    if scope["scope_kind"] == "virtualMachines":
        return [scope["scope_id"]]
    group_vms = "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/" % (
        scope["subscription_id"], scope["resource_group"])
    ids = []
    for name in resources:
        if scope["scope_kind"] == "virtualMachineScaleSets":
            match = _UNIFORM_INSTANCE_RE.match(name)
            if match and match.group("set").lower() == scope["scope_name"].lower():
                ids.append("%s/virtualMachines/%s" % (scope["scope_id"], match.group("instance")))
                continue
        ids.append(group_vms + name)
    return ids


def event_from_row(row, position, warnings, label=None):
    """One Resource Graph row as an event: scheduled_event_info's keys (the same normaliser) plus id,
    subscription_id, resource_group, location, zones, scope_id and virtual_machine_ids. The same
    resource as Event Grid's data.resourceInfo reads the same; label names it in warnings."""
    label = label or "Resource Graph row #%d" % position
    if not isinstance(row, dict):
        warnings.append("%s is not an object; it was left out." % label)
        return None
    properties = row.get("properties") if isinstance(row.get("properties"), dict) else {}
    event = _event.normalize_event(properties, position=position, warnings=warnings)
    if "DurationInSeconds" not in properties:
        # Microsoft: -1 when the duration is not known.
        event["duration_in_seconds"] = -1
    row_id = row.get("id") if isinstance(row.get("id"), str) else None
    scope = parse_event_id(row_id)
    if row_id is not None and scope is None:
        warnings.append("%s: id %r is not a scheduled event's id; it cannot be approved." % (label, row_id[:200]))
    zones = row.get("zones")
    event.update(
        id=row_id,
        subscription_id=(row.get("subscriptionId") or (scope or {}).get("subscription_id")),
        resource_group=row.get("resourceGroup") or (scope or {}).get("resource_group"),
        location=row.get("location"),
        zones=[str(z) for z in zones] if isinstance(zones, list) else None,
        scope_id=scope["scope_id"] if scope else None,
        virtual_machine_ids=virtual_machine_ids(scope, event["resources"]),
    )
    return event


def events_from_rows(rows, resource_names=None, warnings=None):
    """Events of the rows whose Resources name one of resource_names (all when None), compared
    without regard to case, by _event's matching."""
    warnings = [] if warnings is None else warnings
    events = []
    for position, row in enumerate(rows, 1):
        event = event_from_row(row, position, warnings)
        if event is None:
            continue
        if resource_names and not _event.affects_any(event, resource_names, ignore_case=True):
            continue
        events.append(event)
    return events


FILTERS = ("subscriptions", "resource_groups", "resource_names", "event_types", "event_sources", "event_statuses")


def check_filters(params, warn):
    """fleet_event_info's filters (the FILTERS in params) checked before any request; params gets
    subscriptions as lower-case GUIDs (None when not given). warn(message) is told of unknown types."""
    for name in FILTERS:
        if params.get(name) is not None and len(params[name]) == 0:
            raise _azure.AzureInputError("%s is an empty list, which would match no event. Leave %s out to not "
                                         "filter on it." % (name, name))
    params["subscriptions"] = [_azure.check_guid(s, "subscriptions") for s in params.get("subscriptions") or []] or None
    for name in ("resource_groups", "resource_names", "event_types"):
        for value in params.get(name) or []:
            _azure.check_name(value, name)
    for event_type in params.get("event_types") or []:
        if event_type not in _defaults.KNOWN_EVENT_TYPES:
            warn("event_types: %r is not a Scheduled Events type this collection knows (%s); it is kept in the "
                 "filter since Azure may add types." % (event_type, ", ".join(_defaults.KNOWN_EVENT_TYPES)))


def query_of(params):
    """The KQL of the filters in params."""
    return build_query(params.get("event_statuses") or DEFAULT_STATUSES, params.get("resource_groups"),
                       params.get("event_types"), params.get("event_sources"))


def row_problem(row):
    """Why no VM can be named for a Resource Graph row, or None."""
    if not isinstance(row, dict):
        return "is not an object"
    if parse_event_id(row.get("id")) is None:
        return "has the id %s, which is not a scheduled event's id" % _edge.short_repr(row.get("id"), 200)
    return None


def read_events(session, params, warnings, placed_only=False):
    """The events of every page of the query the filters make: (events, subscriptions, query).
    session is _arm.Session (its query_all does the I/O); warnings gets the rows' warnings. With
    placed_only, a row no VM can be named for is an AzureError instead of a warning."""
    subscriptions = params.get("subscriptions") or [session.subscription_id]
    query = query_of(params)
    rows = session.query_all(subscriptions, query)
    for position, row in enumerate(rows if placed_only else (), 1):
        problem = row_problem(row)
        if problem:
            raise _azure.AzureError("Resource Graph row #%d %s, so no VM can be named for it: %s. Resource Graph "
                                    "answered something this collection does not know; report it with the row."
                                    % (position, problem, _edge.short_repr(row, 300)))
    return events_from_rows(rows, params.get("resource_names"), warnings), subscriptions, query
