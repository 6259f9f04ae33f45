# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# Who approved a scheduled event from outside, and when: the Azure Activity Log's records of
# Microsoft.Maintenance/scheduledevents/acknowledge/action (Azure Monitor REST API, ActivityLogs_List,
# api-version 2015-04-01). Resource Graph's rows carry no such field. An approval POSTed to IMDS from
# inside a VM is not a Resource Manager call and is in no log that Azure keeps.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

try:
    from urllib.parse import quote
except ImportError:  # pragma: no cover - Python 2 is not supported, this keeps sanity's compile test quiet
    quote = None

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _fleet

ACTIVITY_API_VERSION = "2015-04-01"
ACK_OPERATION = "microsoft.maintenance/scheduledevents/acknowledge/action"
# Microsoft: "Activity log events are retained in Azure for 90 days and then deleted."
ACTIVITY_RETENTION_DAYS = 90
MAX_PAGES = 1000


def iso_days_ago(now_epoch, days):
    moment = datetime.datetime.fromtimestamp(now_epoch - days * 86400.0, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def activity_path(subscription, since):
    """The documented "events for a resource provider" filter of ActivityLogs_List."""
    text = "eventTimestamp ge '%s' and resourceProvider eq 'Microsoft.Maintenance'" % since
    return "subscriptions/%s/providers/microsoft.insights/eventtypes/management/values?api-version=%s&$filter=%s" % (
        subscription, ACTIVITY_API_VERSION, quote(text, safe=""))


def _value(field):
    return field.get("value") if isinstance(field, dict) else field


def approval_from_record(record):
    """(event id upper-case, approval dict) of a Succeeded acknowledge record, else None."""
    if not isinstance(record, dict):
        return None
    if str(_value(record.get("operationName")) or "").lower() != ACK_OPERATION:
        return None
    if str(_value(record.get("status")) or "").lower() != "succeeded":
        return None
    parsed = _fleet.parse_event_id(str(record.get("resourceId") or ""))
    if parsed is None:
        return None
    return parsed["event_id"].upper(), {
        "approved_by": record.get("caller"),
        "approved_at": record.get("eventTimestamp"),
        "operation_id": record.get("operationId"),
        "source": "activity_log",
    }


def read_approvals(session, subscriptions, days):
    """{EVENT ID: [approvals, oldest first]} from the Activity Log of each subscription over `days`."""
    since = iso_days_ago(session.wall_clock(), days)
    found = {}
    for subscription in subscriptions:
        url = activity_path(subscription, since)
        pages = 0
        while url:
            pages += 1
            if pages > MAX_PAGES:
                break
            doc = session.get(url, "Reading the Activity Log", "the subscription %s" % subscription)
            doc = doc if isinstance(doc, dict) else {}
            for record in doc.get("value") or []:
                approval = approval_from_record(record)
                if approval is not None:
                    found.setdefault(approval[0], []).append(approval[1])
            url = doc.get("nextLink")
    for approvals in found.values():
        approvals.sort(key=lambda a: str(a["approved_at"]))
    return found


def join_approvals(events, approvals):
    """Each event gains `approvals` (a list, empty when the Activity Log holds none for it)."""
    for event in events:
        event["approvals"] = approvals.get(str(event.get("event_id") or "").upper(), [])
    return events
