# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock's Activity Log: an acknowledge through Resource Manager is recorded with its caller and
time; an approval from inside a VM is not; the documented $filter patterns only; 90 days kept."""

import http.client
import json
from urllib.parse import quote

from .armhelpers import SUB1, SUB2, arm, set_up_principal, token

ACK = "%s/acknowledge?api-version=2025-11-01"
LOG = "/subscriptions/%s/providers/microsoft.insights/eventtypes/management/values?api-version=2015-04-01&$filter=%s"


def activity(handle, bearer, filter_text, subscription=SUB1):
    return arm(handle, "GET", LOG % (subscription, quote(filter_text, safe="")), bearer=bearer)


def event_scope_id(handle, bearer, event_id):
    rows = arm(handle, "POST", "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01", {
        "subscriptions": [SUB1], "query": "maintenanceresources | project id, name"}, bearer=bearer)[2]["data"]
    return [r["id"] for r in rows if r["name"] == event_id][0]


def test_an_acknowledge_is_recorded_with_its_caller_and_time_and_an_imds_approval_is_not(arm_mock, clock):
    set_up_principal(arm_mock)
    outside = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"], "duration": 60})
    inside = arm_mock.control("POST", "events", {"event_type": "Freeze", "resources": ["api0"], "duration": 5})
    bearer = token(arm_mock)
    event_id = event_scope_id(arm_mock, bearer, outside["event_id"])
    clock.tick(30)
    assert arm(arm_mock, "POST", ACK % event_id, bearer=bearer)[0] == 200
    acked_at = arm_mock.control("GET", "state")["now"]
    conn = http.client.HTTPConnection("127.0.0.1", arm_mock.port, timeout=5)
    conn.request("POST", "/vm/api0/metadata/scheduledevents?api-version=2020-07-01",
                 body=json.dumps({"StartRequests": [{"EventId": inside["event_id"]}]}), headers={"Metadata": "true"})
    assert conn.getresponse().status == 200
    conn.close()
    status, _h, doc = activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z' and resourceProvider eq "
                               "'Microsoft.Maintenance'")
    assert status == 200, doc
    records = doc["value"]
    assert [r["status"]["value"] for r in records] == ["Succeeded", "Started"]
    for record in records:
        assert record["operationName"]["value"] == "Microsoft.Maintenance/scheduledevents/acknowledge/action"
        assert record["caller"] == "app-1" and record["resourceId"] == event_id
        assert record["eventTimestamp"] == acked_at and record["category"]["value"] == "Administrative"
    assert records[0]["operationId"] == records[1]["operationId"]
    # The IMDS approval started its event, and left no record: Azure logs control-plane calls only.
    assert arm_mock.control("GET", "events/%s" % inside["event_id"])["status"] == "Started"
    assert not [r for r in records if inside["event_id"] in r["resourceId"]]
    # The same record through resourceUri; nothing for another provider or in another time range.
    by_uri = activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z' and eventTimestamp le '%s' and "
                      "resourceUri eq '%s'" % (acked_at, event_id.lower()))[2]["value"]
    assert len(by_uri) == 2
    assert activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z' and resourceProvider eq "
                    "'Microsoft.Compute'")[2]["value"] == []
    assert activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z' and eventTimestamp le "
                    "'1971-01-03T00:00:00Z'")[2]["value"] == []


def test_records_older_than_ninety_days_are_gone(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    event = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web1"], "duration": 60})
    assert arm(arm_mock, "POST", ACK % event_scope_id(arm_mock, bearer, event["event_id"]), bearer=bearer)[0] == 200
    arm_mock.control("POST", "time/advance", {"seconds": 89 * 86400})
    bearer = token(arm_mock)
    assert len(activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z'")[2]["value"]) == 2
    arm_mock.control("POST", "time/advance", {"seconds": 2 * 86400})
    bearer = token(arm_mock)
    assert activity(arm_mock, bearer, "eventTimestamp ge '1971-01-02T00:00:00Z'")[2]["value"] == []


def test_only_the_documented_filters_and_a_reader_of_the_subscription_are_served(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    for text in ("", "resourceProvider eq 'Microsoft.Maintenance'", "eventTimestamp ge 'yesterday'",
                 "eventTimestamp ge '2026-01-01T00:00:00Z' or 1 eq 1",
                 "eventTimestamp ge '2026-01-01T00:00:00Z' and caller eq 'app-1'"):
        status, _h, doc = activity(arm_mock, bearer, text)
        assert status == 400 and doc["error"]["code"] == "BadRequest", text
    status, _h, doc = activity(arm_mock, bearer, "eventTimestamp ge '2026-01-01T00:00:00Z'", subscription=SUB2)
    assert status == 403 and "Microsoft.Insights/eventtypes/values/read" in doc["error"]["message"]
    status, _h, doc = arm(arm_mock, "GET", (LOG % (SUB1, "x")).replace("2015-04-01", "2024-01-01"), bearer=bearer)
    assert status == 400 and doc["error"]["code"] == "InvalidApiVersionParameter"
