# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Activity Log of the control-plane face: who acknowledged which scheduled event, and when.

Azure Monitor's REST API (azure-rest-api-specs, monitor, Microsoft.Insights 2015-04-01,
ActivityLogs_List): GET /subscriptions/{sub}/providers/microsoft.insights/eventtypes/management/values
with a $filter of eventTimestamp ge/le and at most one of resourceGroupName, resourceUri,
resourceProvider, correlationId ("No other syntax is allowed"), pages linked by nextLink. Records are
EventData (caller, eventTimestamp, operationName, resourceId, status...). An acknowledge through the
Maintenance Resource Provider writes a Started and a Succeeded record; an approval POSTed to IMDS from
inside a VM writes none, as in Azure. Records older than 90 days of the mock's clock are gone
(Microsoft: "Activity log events are retained in Azure for 90 days and then deleted").

A mixin of MockState through ArmEndpoints (arm.py), which calls _log_acknowledge and _activity_log."""

from __future__ import print_function

import base64
import collections
import json
import re
import uuid
from urllib.parse import quote

from .clock import iso_utc, parse_iso
from .imds import Response
from .rules import _json_bytes

ACTIVITY_VERSIONS = ("2015-04-01",)
ACTIVITY_RETENTION = 90 * 86400.0
ACTIVITY_PAGE = 200
ACK_OPERATION = "Microsoft.Maintenance/scheduledevents/acknowledge/action"
_TIME = r"eventTimestamp\s+(ge|le)\s+'([^']{1,64})'"
_FIELD = r"(resourceGroupName|resourceUri|resourceProvider|correlationId)\s+eq\s+'([^']{1,1000})'"
_FILTER_RE = re.compile(r"\A\s*%s(?:\s+and\s+%s)?(?:\s+and\s+%s)?\s*\Z" % (_TIME, _TIME, _FIELD), re.I)
ACTIVITY_PATH_RE = re.compile(r"\A/subscriptions/([^/]+)/providers/microsoft\.insights/eventtypes/management/values\Z",
                              re.I)


def _bad_filter(message):
    return Response(400, _json_bytes({"error": {"code": "BadRequest", "message": message}}))


class ActivityLog(object):
    """The records; the lock, clock and fleet are MockState's."""

    def _init_activity_log(self):
        self._activity = collections.deque(maxlen=self._audit_limit)

    def _log_acknowledge(self, who, event_scope, subscription, event_id, now):
        """Started then Succeeded, one operation, at the instant of the approval (eventTimestamp)."""
        tenant = (self._principals.get(who.lower()) or {}).get("tenant")
        resource_id = "%s/providers/Microsoft.Maintenance/scheduledevents/%s" % (event_scope, event_id)
        group = event_scope.split("/")[4]
        operation = str(uuid.uuid4())
        for status, sub_status in (("Started", ""), ("Succeeded", "OK")):
            self._activity.append((now, collections.OrderedDict((
                ("authorization", {"action": ACK_OPERATION, "scope": resource_id}),
                ("caller", who), ("channels", "Operation"),
                ("claims", {"appid": who}),
                ("correlationId", operation),
                ("description", ""),
                ("eventDataId", str(uuid.uuid4())),
                ("eventName", {"value": "BeginRequest" if status == "Started" else "EndRequest",
                               "localizedValue": "Begin request" if status == "Started" else "End request"}),
                ("category", {"value": "Administrative", "localizedValue": "Administrative"}),
                ("httpRequest", {"clientRequestId": str(uuid.uuid4()), "clientIpAddress": "127.0.0.1",
                                 "method": "POST"}),
                ("id", "%s/events/%s/ticks/%d" % (resource_id, operation, int(now * 10 ** 7))),
                ("level", "Informational"),
                ("resourceGroupName", group),
                ("resourceProviderName", {"value": "Microsoft.Maintenance", "localizedValue": "Microsoft.Maintenance"}),
                ("resourceId", resource_id),
                ("resourceType", {"value": "Microsoft.Maintenance/scheduledevents",
                                  "localizedValue": "Microsoft.Maintenance/scheduledevents"}),
                ("operationId", operation),
                ("operationName", {"value": ACK_OPERATION, "localizedValue": "Acknowledge Scheduled Event"}),
                ("properties", {"statusCode": "OK"} if status == "Succeeded" else {}),
                ("status", {"value": status, "localizedValue": status}),
                ("subStatus", {"value": sub_status, "localizedValue": "OK (HTTP Status Code: 200)" if sub_status else ""}),
                ("eventTimestamp", iso_utc(now)),
                ("submissionTimestamp", iso_utc(now)),
                ("subscriptionId", subscription.lower()),
                ("tenantId", tenant or ""),
            ))))

    def _activity_log(self, who, params, subscription):
        if params.get("api-version") not in ACTIVITY_VERSIONS:
            return Response(400, _json_bytes({"error": {"code": "InvalidApiVersionParameter", "message": (
                "The api-version '%s' is invalid. The supported versions are '%s'." % (
                    (params.get("api-version") or "")[:40], ",".join(ACTIVITY_VERSIONS)))}}))
        missing = self._unknown_subscription(subscription)
        if missing:
            return missing
        scope = "/subscriptions/" + subscription
        if not self._roles(who, scope):
            return self._forbidden(who, "Microsoft.Insights/eventtypes/values/read", scope)
        text = params.get("$filter") or ""
        match = _FILTER_RE.match(text)
        if not match:
            return _bad_filter("The $filter '%s' is not one the Activity Log takes: eventTimestamp ge '<time>' and "
                               "eventTimestamp le '<time>', and at most one of resourceGroupName, resourceUri, "
                               "resourceProvider or correlationId eq '<value>'." % text[:200])
        bounds = {}
        for op, value in (match.group(1, 2), match.group(3, 4)):
            if op is None:
                continue
            try:
                bounds[op.lower()] = parse_iso(value)
            except ValueError:
                return _bad_filter("eventTimestamp '%s' is not an ISO 8601 time." % value[:64])
        if "ge" not in bounds:
            return _bad_filter("The $filter needs eventTimestamp ge '<time>'.")
        now = self._now()
        low, high = max(bounds["ge"], now - ACTIVITY_RETENTION), bounds.get("le", now)
        field, wanted = (match.group(5) or "").lower(), (match.group(6) or "").lower()
        rows = []
        for at, record in self._activity:
            at = int(at * 1000) / 1000.0  # as eventTimestamp shows it (milliseconds)
            if not low <= at <= high or record["subscriptionId"] != subscription.lower():
                continue
            if field and wanted != {
                    "resourcegroupname": record["resourceGroupName"], "resourceuri": record["resourceId"],
                    "resourceprovider": record["resourceProviderName"]["value"],
                    "correlationid": record["correlationId"]}[field].lower():
                continue
            rows.append(record)
        rows.reverse()  # newest first, as the Activity Log lists
        skip = 0
        token = params.get("$skipToken")
        if token:
            try:
                skip = int(json.loads(base64.urlsafe_b64decode(token.encode("ascii")).decode("ascii")))
            except (ValueError, TypeError):
                return _bad_filter("$skipToken is not a token this API gave.")
        page = rows[skip:skip + ACTIVITY_PAGE]
        answer = collections.OrderedDict((("value", page),))
        if skip + len(page) < len(rows):
            token = base64.urlsafe_b64encode(json.dumps(skip + len(page)).encode("ascii")).decode("ascii")
            answer["nextLink"] = ("%s/subscriptions/%s/providers/microsoft.insights/eventtypes/management/values"
                                  "?api-version=2015-04-01&$filter=%s&$skipToken=%s"
                                  % (self.arm_base_url, subscription, quote(text, safe=""), token))
        return Response(200, _json_bytes(answer))
