# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-plane face with Azure's own SDK clients; IMDS and Resource Graph agree on each event."""

import json
import time

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
    MockControlError,
    spawn_mock,
)

from .armhelpers import SUB1, SUB2, arm, compute_client, graph_query, set_up_principal, token

ACK = "%s/acknowledge?api-version=2025-11-01"


def _imds_status(handle, vm, event_id):
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=5)
    conn.request("GET", "/vm/%s/metadata/scheduledevents?api-version=2020-07-01" % vm, headers={"Metadata": "true"})
    doc = json.loads(conn.getresponse().read().decode("utf-8"))
    conn.close()
    return [e["EventStatus"] for e in doc["Events"] if e["EventId"] == event_id]


def _row(handle, bearer, event_id):
    rows = graph_query(handle, bearer)[2]["data"]
    return [r for r in rows if r["name"] == event_id]


def test_acknowledge_starts_the_event_for_every_vm_of_the_set(arm_mock):
    set_up_principal(arm_mock)
    event = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"]})
    bearer = token(arm_mock)
    row = _row(arm_mock, bearer, event["event_id"])[0]
    assert row["id"].endswith("/availabilitySets/web-as/providers/Microsoft.Maintenance/scheduledevents/%s"
                              % event["event_id"])
    assert row["properties"]["EventStatus"] == "Scheduled" and row["resourceGroup"] == "rg-main"
    status, _h, doc = arm(arm_mock, "POST", ACK % row["id"], bearer=bearer)
    assert (status, doc) == (200, {"value": "Successfully Approved"})
    for vm in ("web0", "web1", "web2"):
        assert _imds_status(arm_mock, vm, event["event_id"]) == ["Started"]
    status, _h, doc = arm(arm_mock, "POST", ACK % row["id"], bearer=bearer)
    assert status == 409 and "Started" in doc["error"]["message"]


def test_imds_approval_shows_started_then_completed_in_graph(arm_mock):
    set_up_principal(arm_mock)
    event = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["api0"], "duration": 60})
    arm_mock.control("GET", "state")
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", arm_mock.port, timeout=5)
    conn.request("POST", "/vm/api1/metadata/scheduledevents?api-version=2020-07-01",
                 body=json.dumps({"StartRequests": [{"EventId": event["event_id"]}]}),
                 headers={"Metadata": "true", "Content-Type": "application/json"})
    assert conn.getresponse().status == 200
    conn.close()
    bearer = token(arm_mock)
    row = _row(arm_mock, bearer, event["event_id"])[0]
    assert row["properties"]["EventStatus"] == "Started"
    assert row["resourceGroup"] == "rg-api" and row["zones"] == ["1", "2"]
    arm_mock.control("POST", "time/advance", {"seconds": 61})
    assert _imds_status(arm_mock, "api0", event["event_id"]) == []
    assert _row(arm_mock, bearer, event["event_id"])[0]["properties"]["EventStatus"] == "Completed"
    cancelled = arm_mock.control("POST", "events", {"event_type": "Freeze", "resources": ["web1"]})
    arm_mock.control("POST", "events/%s/cancel" % cancelled["event_id"])
    assert _row(arm_mock, bearer, cancelled["event_id"])[0]["properties"]["EventStatus"] == "Canceled"


def test_policy_auto_approves_a_user_reboot_which_is_never_scheduled(arm_mock):
    set_up_principal(arm_mock, role="Contributor")
    client = compute_client(arm_mock)
    vm = client.virtual_machines.get("rg-main", "web0", api_version="2025-04-01")
    assert vm.availability_set.id.endswith("/availabilitySets/web-as")
    aset = client.availability_sets.get("rg-main", "web-as", api_version="2025-04-01")
    aset.scheduled_events_policy.user_initiated_reboot = {"automaticallyApprove": True}
    updated = client.availability_sets.create_or_update("rg-main", "web-as", aset, api_version="2025-04-01")
    assert updated.scheduled_events_policy.user_initiated_reboot.automatically_approve is True
    event = arm_mock.control("POST", "events", {"event_type": "Reboot", "event_source": "User",
                                                "resources": ["web2"]})
    assert _imds_status(arm_mock, "web0", event["event_id"]) == ["Started"]
    transitions = arm_mock.control("GET", "audit")["transitions"]
    assert [(t["from"], t["to"], t["cause"]) for t in transitions if t["event_id"] == event["event_id"]] == [
        ("pending", "Started", "policy")]
    platform = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web2"]})
    assert _imds_status(arm_mock, "web0", platform["event_id"]) == ["Scheduled"]


def test_policy_on_a_vm_in_a_set_is_refused_naming_the_set(arm_mock):
    set_up_principal(arm_mock, role="Contributor")
    status, _h, doc = arm(arm_mock, "PATCH", "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/"
                          "virtualMachines/web0?api-version=2025-04-01" % SUB1,
                          {"properties": {"scheduledEventsPolicy": {"userInitiatedReboot": {
                              "automaticallyApprove": True}}}}, bearer=token(arm_mock))
    assert status == 409 and "availabilitySets/web-as" in doc["error"]["message"]


def test_unregistered_feature_is_named(arm_mock):
    set_up_principal(arm_mock, role="Owner", scope="/subscriptions/" + SUB2)
    arm_mock.control("POST", "arm/features", {"subscription_id": SUB2, "registered": False})
    status, _h, doc = arm(arm_mock, "PATCH", "/subscriptions/%s/resourceGroups/rg-db/providers/Microsoft.Compute/"
                          "virtualMachines/db0?api-version=2025-04-01" % SUB2,
                          {"properties": {"scheduledEventsPolicy": {"userInitiatedReboot": {
                              "automaticallyApprove": True}}}}, bearer=token(arm_mock))
    assert status == 400 and "Microsoft.Compute/SendScheduledEventsPolicy" in doc["error"]["message"]


def test_acknowledge_without_the_role_is_403_naming_principal_action_scope(arm_mock):
    set_up_principal(arm_mock, role="Reader")
    event = arm_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"]})
    bearer = token(arm_mock)
    row = _row(arm_mock, bearer, event["event_id"])[0]
    status, _h, doc = arm(arm_mock, "POST", ACK % row["id"], bearer=bearer)
    assert status == 403 and doc["error"]["code"] == "AuthorizationFailed"
    message = doc["error"]["message"]
    assert "app-1" in message and "Microsoft.Maintenance/scheduledevents/acknowledge/action" in message
    assert "/availabilitySets/web-as" in message
    assert _imds_status(arm_mock, "web0", event["event_id"]) == ["Scheduled"]


def test_arm_throttling_answers_429_with_retry_after(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    arm_mock.control("POST", "arm/throttle", {"count": 1, "retry_after": 7})
    path = "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/availabilitySets/web-as" \
           "?api-version=2025-04-01" % SUB1
    status, headers, doc = arm(arm_mock, "GET", path, bearer=bearer)
    assert status == 429 and headers["Retry-After"] == "7"
    assert arm(arm_mock, "GET", path, bearer=bearer)[0] == 200


def test_unknown_subscription_resource_and_api_version(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    base = "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/virtualMachines/%s?api-version=%s"
    assert arm(arm_mock, "GET", base % ("33333333-3333-3333-3333-333333333333", "web0", "2025-04-01"),
               bearer=bearer)[2]["error"]["code"] == "SubscriptionNotFound"
    assert arm(arm_mock, "GET", base % (SUB1, "nope", "2025-04-01"), bearer=bearer)[2]["error"]["code"] == \
        "ResourceNotFound"
    assert arm(arm_mock, "GET", base % (SUB1, "web0", "latest"), bearer=bearer)[2]["error"]["code"] == \
        "InvalidApiVersionParameter"


@pytest.mark.parametrize("path, body, named", [
    ("arm/principals", {"client_id": "", "secret": "x"}, "client_id"),
    ("arm/principals", {"client_id": "a", "secret": "x", "tenant": "a/b"}, "tenant"),
    ("arm/grants", {"principal": "a", "role": "Reader", "scope": "/nowhere"}, "scope"),
    ("arm/features", {"subscription_id": SUB1, "registered": "no"}, "registered"),
    ("arm/config", {"token_lifetime": 0}, "token_lifetime"),
    ("arm/config", {"graph_quota": 1.5}, "graph_quota"),
    ("arm/config", {"history_limit": -1}, "history_limit"),
    ("arm/config", {"bogus": 1}, "bogus"),
    ("arm/throttle", {"count": -1}, "count"),
    ("arm/faults", {"kind": "explode"}, "kind"),
    ("arm/faults", {"kind": "status", "status": 200}, "status"),
])
def test_bad_control_values_are_named(arm_mock, path, body, named):
    with pytest.raises(MockControlError) as caught:
        arm_mock.control("POST", path, body)
    assert caught.value.status == 400 and named in caught.value.body["error"]


def test_arm_fault_answers_its_status_once(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    arm_mock.control("POST", "arm/faults", {"kind": "status", "status": 503, "count": 1,
                                            "paths": ["/subscriptions/"]})
    path = "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/availabilitySets/web-as" \
           "?api-version=2025-04-01" % SUB1
    assert arm(arm_mock, "GET", path, bearer=bearer)[0] == 503
    assert arm(arm_mock, "GET", path, bearer=bearer)[0] == 200
    assert [r["fault"] for r in arm_mock.control("GET", "audit")["arm_requests"]][-2:] == ["status", None]


def test_spawned_mock_serves_the_face():
    with spawn_mock(["--quiet"], arm=True) as handle:
        status, _h, doc = arm(handle, "GET", "/metadata/endpoints?api-version=2022-09-01")
        assert status == 200 and doc["resourceManager"] == handle.arm_url + "/"


def test_slow_and_trickle_faults_deliver_the_real_answer_late(arm_mock):
    set_up_principal(arm_mock)
    bearer = token(arm_mock)
    path = "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/availabilitySets/web-as" \
           "?api-version=2025-04-01" % SUB1
    plain = arm(arm_mock, "GET", path, bearer=bearer)
    arm_mock.control("POST", "arm/faults", {"kind": "slow", "delay": 0.05, "count": 1, "paths": ["/subscriptions/"]})
    began = time.monotonic()
    slow = arm(arm_mock, "GET", path, bearer=bearer)
    assert time.monotonic() - began >= 0.05
    arm_mock.control("POST", "arm/faults", {"kind": "trickle", "interval": 0.001, "count": 1,
                                            "paths": ["/subscriptions/"]})
    trickled = arm(arm_mock, "GET", path, bearer=bearer)
    # The same answer each time: a late or slow delivery changes how it goes out, not what it says.
    assert slow[0] == trickled[0] == plain[0] == 200 and slow[2] == trickled[2] == plain[2]
    assert [r["fault"] for r in arm_mock.control("GET", "audit")["arm_requests"]][-3:] == [None, "slow", "trickle"]
    for bad, named in (({"kind": "slow"}, "arm fault delay"), ({"kind": "slow", "delay": 1e9}, "arm fault delay"),
                       ({"kind": "trickle", "interval": 0}, "arm fault interval"),
                       ({"kind": "status", "status": 503, "delay": 1}, "delay only applies to slow faults")):
        with pytest.raises(MockControlError) as refused:
            arm_mock.control("POST", "arm/faults", bad)
        assert refused.value.status == 400 and named in json.dumps(refused.value.body), refused.value.body
