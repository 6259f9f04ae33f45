# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Resource Graph on the control-plane face: the modules' query, paging, quota, what it refuses."""

from .armhelpers import SUB1, SUB2, graph_client, graph_query, set_up_principal, token

MODULE_QUERY = (
    "maintenanceresources\n"
    "| where type =~ 'microsoft.maintenance/scheduledevents'\n"
    "| where properties.EventStatus in~ ('Scheduled', 'Started')\n"
    "| where resourceGroup in~ ('rg-main', 'rg-db')\n"
    "| where properties.EventType in~ ('Reboot')\n"
    "| where properties.EventSource in~ ('Platform')\n"
    "| project id, name, type, location, zones, resourceGroup, subscriptionId, properties")


def _grant_both(handle):
    set_up_principal(handle, role="Reader")
    handle.control("POST", "arm/grants", {"principal": "app-1", "role": "Reader", "scope": "/subscriptions/" + SUB2})


def test_the_modules_query_through_the_sdk_client(arm_mock):
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions
    _grant_both(arm_mock)
    wanted = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["db0"]})
    arm_mock.control("POST", "events", {"event_type": "Freeze", "resources": ["db0"]})
    arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["api0"]})
    answer = graph_client(arm_mock).resources(QueryRequest(
        subscriptions=[SUB1, SUB2], query=MODULE_QUERY, options=QueryRequestOptions(top=10)),
        api_version="2021-03-01")
    assert answer.total_records == 1 and answer.count == 1
    row = answer.data[0]
    assert row["name"] == wanted["event_id"] and row["subscriptionId"] == SUB2 and row["location"] == "northeurope"
    assert row["id"].startswith("/subscriptions/%s/resourceGroups/rg-db/providers/Microsoft.Compute/"
                                "virtualMachines/db0/providers/Microsoft.Maintenance/scheduledevents/" % SUB2)
    assert row["zones"] == ["1"]


def test_paging_with_skip_token_only_when_id_is_projected(arm_mock):
    _grant_both(arm_mock)
    for _number in range(25):
        arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"]})
    bearer = token(arm_mock)
    seen, options = [], {"$top": 10}
    while True:
        status, headers, doc = graph_query(arm_mock, bearer, options=options)
        assert status == 200 and doc["totalRecords"] == 25
        assert int(headers["x-ms-user-quota-remaining"]) >= 0 and headers["x-ms-user-quota-resets-after"].count(":") == 2
        seen += [r["name"] for r in doc["data"]]
        if "$skipToken" not in doc:
            break
        options = {"$top": 10, "$skipToken": doc["$skipToken"]}
    assert len(seen) == len(set(seen)) == 25
    _s, _h, doc = graph_query(arm_mock, bearer, query="maintenanceresources | project name", options={"$top": 10})
    assert "$skipToken" not in doc and doc["resultTruncated"] == "true"


def test_quota_spent_is_429_with_both_headers_and_resets_on_the_mock_clock(arm_mock, clock):
    _grant_both(arm_mock)
    arm_mock.control("POST", "arm/config", {"graph_quota": 2, "graph_window": 5})
    bearer = token(arm_mock)
    assert [graph_query(arm_mock, bearer)[1]["x-ms-user-quota-remaining"] for _n in range(2)] == ["1", "0"]
    status, headers, doc = graph_query(arm_mock, bearer)
    assert status == 429 and headers["x-ms-user-quota-remaining"] == "0"
    assert headers["x-ms-user-quota-resets-after"] == "00:00:05" and "Retry-After" not in headers
    arm_mock.control("POST", "arm/config", {"graph_retry_after": True})
    assert graph_query(arm_mock, bearer)[1]["Retry-After"] == "5"
    arm_mock.control("POST", "time/advance", {"seconds": 5})
    assert graph_query(arm_mock, bearer)[0] == 200


def test_a_query_it_does_not_understand_is_400_naming_the_part(arm_mock):
    _grant_both(arm_mock)
    status, _h, doc = graph_query(arm_mock, token(arm_mock), query="maintenanceresources | summarize count()")
    assert status == 400 and doc["error"]["code"] == "BadRequest"
    assert "summarize count()" in doc["error"]["details"][0]["message"]
    status, _h, doc = graph_query(arm_mock, token(arm_mock), query="resources | take 1")
    assert status == 400 and "resources" in doc["error"]["details"][0]["message"]


def test_events_appear_only_where_the_policy_publishes_and_the_principal_may_read(arm_mock):
    set_up_principal(arm_mock, role="Reader")  # SUB1 only
    arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["db0"]})  # SUB2
    mine = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"]})
    _s, _h, doc = graph_query(arm_mock, token(arm_mock))
    assert [r["name"] for r in doc["data"]] == [mine["event_id"]]


def test_ten_thousand_events_across_three_subscriptions_page_through(clock, tmp_path, monkeypatch):
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

    from .armhelpers import PUBLISH
    subs = ["%d%s" % (n, "1111111-1111-1111-1111-111111111111") for n in (3, 4, 5)]
    fleet = {"scheduled_events_policy": PUBLISH, "groups": [
        {"name": "set%d" % n, "kind": "availability_set", "vms": ["vm%d_%d" % (n, i) for i in range(10)],
         "subscription_id": sub} for n, sub in enumerate(subs)]}
    handle = start_mock(arm=True, clock=clock, rate_limit=False, fleet=fleet, tls_dir=str(tmp_path / "tls"))
    try:
        handle.control("POST", "arm/principals", {"client_id": "app-1", "secret": "s3cret-value", "tenant": "tenant-1"})
        for sub in subs:
            handle.control("POST", "arm/grants", {"principal": "app-1", "role": "Reader", "scope": "/subscriptions/" + sub})
        handle.mock.state.load_scenario({"events": [
            {"event_type": "Reboot", "resources": ["vm%d_%d" % (number % 3, number % 10)]}
            for number in range(10000)]}, files=False)
        handle.control("POST", "arm/config", {"graph_quota": 1000})
        bearer = token(handle)
        seen, options = 0, {"$top": 1000}
        while True:
            status, _h, doc = graph_query(handle, bearer, subscriptions=subs, options=options)
            assert status == 200 and doc["totalRecords"] == 10000
            seen += doc["count"]
            if "$skipToken" not in doc:
                break
            options = {"$top": 1000, "$skipToken": doc["$skipToken"]}
        assert seen == 10000
    finally:
        handle.stop()


# The two queries of Microsoft's page "Scheduled Events in Azure Resource Graph" (section "Querying
# Azure Resource Graph to View VM Events"), as written there.
MICROSOFT_ALL = '''
maintenanceresources
| where type == "microsoft.maintenance/scheduledevents"
'''
MICROSOFT_COLUMNS = (
    '\nMaintenanceresources\n'
    '| where type == "microsoft.maintenance/scheduledevents"\n'
    '| sort by tostring(properties.EventStatus), tostring(properties.EventId) asc\n'
    '| project resourceGroup, zones, properties.EventStatus, properties.NotBefore, properties.Resources, '
    'properties.EventId, properties.TargetResourceId, properties.EventType, properties.Description\n')


def test_microsofts_documented_queries_run_as_written(arm_mock):
    _grant_both(arm_mock)
    ids = [arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": [vm]})["event_id"]
           for vm in ("web0", "db0", "api0")]
    arm_mock.control("POST", "events/%s/start" % ids[1])
    bearer = token(arm_mock)
    status, _headers, doc = graph_query(arm_mock, bearer, query=MICROSOFT_ALL)
    assert status == 200 and sorted(r["name"] for r in doc["data"]) == sorted(ids)
    status, _headers, doc = graph_query(arm_mock, bearer, query=MICROSOFT_COLUMNS)
    assert status == 200, doc
    rows = doc["data"]
    assert set(rows[0]) == {"resourceGroup", "zones", "properties_EventStatus", "properties_NotBefore",
                            "properties_Resources", "properties_EventId", "properties_TargetResourceId",
                            "properties_EventType", "properties_Description"}
    # EventStatus descending (Kusto's default), then EventId ascending.
    keys = [(r["properties_EventStatus"], r["properties_EventId"]) for r in rows]
    assert [k[0] for k in keys] == ["Started", "Scheduled", "Scheduled"]
    assert keys[1][1] < keys[2][1]
