"""fleet_event_info: the query, every page, throttling in its order, the filters and bad input."""

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.modules import fleet_event_info as info
from ansible_collections.azure_imds.scheduled_events.tests.support.azure_fakes import (
    SUB, SUB2, reply, run_azure_module)
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    check_examples_use_fqcn, check_result_against_return_doc)

EVENT = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
GRAPH = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"


def row(name="web_0", event=EVENT, status="Scheduled", sub=SUB, resources=None):
    scope = "/subscriptions/%s/resourceGroups/RG-Web/providers/Microsoft.Compute/virtualMachines/%s" % (sub, name)
    return {"id": scope + "/providers/Microsoft.Maintenance/scheduledevents/" + event, "name": event,
            "type": "microsoft.maintenance/scheduledevents", "location": "westeurope", "zones": ["1"],
            "resourceGroup": "rg-web", "subscriptionId": sub,
            "properties": {"EventId": event, "EventType": "Reboot", "ResourceType": "VirtualMachine",
                           "Resources": resources or [name], "EventStatus": status, "NotBefore": "",
                           "Description": "", "EventSource": "User"}}


def page(rows, skip=None):
    body = {"totalRecords": len(rows), "count": len(rows), "data": rows, "facets": [], "resultTruncated": "false"}
    if skip:
        body["$skipToken"] = skip
    return reply(200, body, {"x-ms-user-quota-remaining": "10", "x-ms-user-quota-resets-after": "00:00:05"})


def test_reads_every_page_and_returns_the_documented_keys():
    outcome = run_azure_module(info, {"subscriptions": [SUB, SUB2]}, [
        page([row("web_0")], skip="t1"), page([row("web_1", sub=SUB2)])])
    assert not outcome.failed, outcome.result
    assert [e["resources"] for e in outcome.result["events"]] == [["web_0"], ["web_1"]]
    bodies = outcome.bodies("POST")
    assert bodies[0]["subscriptions"] == [SUB, SUB2] and "$skipToken" not in bodies[0]["options"]
    assert bodies[1]["options"]["$skipToken"] == "t1"
    assert "| project id," in bodies[0]["query"]
    event = outcome.result["events"][0]
    assert event["not_before"] is None and event["duration_in_seconds"] == -1
    assert event["scope_id"].endswith("/virtualMachines/web_0")
    check_result_against_return_doc(info, outcome.result)
    check_examples_use_fqcn(info)


def test_subscription_defaults_to_the_signed_in_one_and_statuses_to_scheduled_and_started():
    outcome = run_azure_module(info, {}, [page([])])
    body = outcome.bodies("POST")[0]
    assert body["subscriptions"] == [SUB]
    assert "properties.EventStatus in~ ('Scheduled', 'Started')" in body["query"]


def test_resource_names_filter_after_the_query_without_case():
    outcome = run_azure_module(info, {"resource_names": ["WEB_1"]}, [page([row("web_0"), row("web_1")])])
    assert [e["resources"] for e in outcome.result["events"]] == [["web_1"]]
    assert "web" not in outcome.bodies("POST")[0]["query"].split("project")[0].lower().replace("'", "")


@pytest.mark.parametrize("headers, expected", [
    ({"Retry-After": "7", "x-ms-user-quota-resets-after": "00:00:03"}, 7.0),
    ({"x-ms-user-quota-resets-after": "00:00:03"}, 3.0),
    ({}, 1.0),   # the 429 rule's first backoff, full jitter
])
def test_throttling_waits_retry_after_then_quota_reset_then_backoff(headers, expected):
    outcome = run_azure_module(info, {}, [reply(429, {"error": {"code": "RateLimiting", "message": "quota"}}, headers),
                                          page([row()])])
    assert not outcome.failed, outcome.result
    assert outcome.clock.sleeps == [expected]


def test_throttling_never_waits_past_retry_timeout():
    outcome = run_azure_module(info, {"retry_timeout": 5}, [
        reply(429, {"error": {"code": "RateLimiting", "message": "quota"}}, {"Retry-After": "30"})])
    assert outcome.failed and outcome.clock.sleeps == []
    assert "retry_timeout" in outcome.result["msg"] and "Retry-After" in outcome.result["msg"]


def test_403_names_the_role():
    outcome = run_azure_module(info, {}, [reply(403, {"error": {"code": "AuthorizationFailed", "message": "no"}})])
    assert outcome.failed and "Reader" in outcome.result["msg"] and outcome.result["status"] == 403


@pytest.mark.parametrize("args, words", [
    ({"subscriptions": ["not-a-guid"]}, "subscriptions must be a subscription GUID"),
    ({"subscription_id": "1234"}, "subscription_id must be a subscription GUID"),
    ({"resource_groups": ["rg'; drop"]}, "resource_groups must be an Azure name"),
    ({"event_types": []}, "event_types is an empty list"),
    ({"retry_timeout": float("nan")}, "retry_timeout must be a number"),
    ({"request_timeout": True}, "request_timeout must be a number"),
])
def test_bad_input_fails_before_any_request(args, words):
    outcome = run_azure_module(info, args, [], cloud=False)
    assert outcome.failed and words in outcome.result["msg"], outcome.result
    assert outcome.requests == []


def test_approvals_days_beyond_what_the_activity_log_keeps_is_refused_by_name():
    for days in (0, 91):
        outcome = run_azure_module(info, {"include_approvals": True, "approvals_days": days}, [])
        assert outcome.failed and "approvals_days must be from 1 to 90" in outcome.result["msg"], outcome.result
        assert outcome.bodies("POST") == []
