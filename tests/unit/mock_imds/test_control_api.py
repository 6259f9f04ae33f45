# -*- coding: utf-8 -*-
"""The /_mock/ control API over HTTP: state, events, faults, time, config, reset, fleet, scenario, audit."""

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds


def call(client, method, path, body=None):
    answer = client.request(method, "/_mock/" + path, body=body, metadata=False)
    return answer.status, (answer.json() if answer.body else None)


def test_state_shape(start):
    mock, client = start(fleet={"groups": [{"name": "ss1", "kind": "vmss", "vms": ["ss_0"]}]},
                         start_time="2024-01-01T00:00:00Z", speed=2)
    status, state = call(client, "GET", "state")
    assert status == 200
    assert state["now"] == "2024-01-01T00:00:00.000Z"
    assert state["speed"] == 2
    assert state["config"]["approval_mode"] == "any" and state["config"]["rate_limit"] is False
    assert state["vms"]["ss_0"] == {"group": "ss1", "kind": "scale_set", "url": mock.vm_url("ss_0"),
                                    "incarnation": 1, "default": False}
    assert state["vms"]["vm0"]["kind"] == "standalone"
    assert state["events"] == []


def test_create_event_201_and_full_view(start):
    _mock, client = start(start_time="2024-01-01T00:00:00Z")
    status, event = call(client, "POST", "events", {
        "event_type": "Reboot", "resources": ["vm0"], "notice": 60, "duration": 30, "event_source": "User",
        "description": "why", "duration_in_seconds": 12, "event_id": "11111111-2222-3333-4444-555555555555"})
    assert status == 201
    assert event["event_id"] == "11111111-2222-3333-4444-555555555555"
    assert event["status"] == "Scheduled"
    assert event["not_before"] == "2024-01-01T00:01:00.000Z"
    assert event["not_before_rfc1123"] == "Mon, 01 Jan 2024 00:01:00 GMT"
    assert event["resources"] == ["vm0"] and event["visible_to"] == ["vm0"]
    assert call(client, "GET", "state")[1]["events"] == [event]
    assert call(client, "GET", "events/" + event["event_id"].lower())[1]["event_id"] == event["event_id"]


def test_create_event_errors(start):
    _mock, client = start()
    assert call(client, "POST", "events", {"event_type": "Reboot", "resources": ["nobody"]})[0] == 400
    assert call(client, "POST", "events", {"resources": ["vm0"]})[0] == 400
    status, body = call(client, "POST", "events", {"event_type": "Reboot", "notise": 5})
    assert status == 400 and "notise" in body["error"]
    event_id = call(client, "POST", "events", {"event_type": "Reboot"})[1]["event_id"]
    status, body = call(client, "POST", "events", {"event_type": "Reboot", "event_id": event_id})
    assert status == 400 and "already exists" in body["error"]


def test_cancel_start_complete(start):
    _mock, client = start()
    first = call(client, "POST", "events", {"event_type": "Reboot"})[1]["event_id"]
    second = call(client, "POST", "events", {"event_type": "Freeze"})[1]["event_id"]
    assert call(client, "POST", "events/%s/cancel" % first) == (200, call(client, "GET", "events/" + first)[1])
    assert call(client, "GET", "events/" + first)[1]["status"] == "cancelled"
    assert call(client, "POST", "events/%s/start" % second)[1]["status"] == "Started"
    status, body = call(client, "POST", "events/%s/start" % second)
    assert status == 400 and "Started" in body["error"]
    assert call(client, "POST", "events/%s/complete" % second)[1]["status"] == "removed"
    assert call(client, "POST", "events/nope/cancel")[0] == 404
    assert call(client, "POST", "events/%s/explode" % second)[0] == 404


def test_faults_endpoints(start):
    _mock, client = start()
    status, fault = call(client, "POST", "faults", {"kind": "status", "status": 503, "count": 2})
    assert status == 201 and fault["fault_id"]
    assert call(client, "GET", "faults")[1][0]["count"] == 2
    assert client.get().status == 503
    assert call(client, "GET", "faults")[1][0]["count"] == 1
    assert call(client, "DELETE", "faults/" + fault["fault_id"]) == (200, {"removed": 1})
    assert call(client, "DELETE", "faults/" + fault["fault_id"])[0] == 404
    call(client, "POST", "faults", {"kind": "drop"})
    assert call(client, "DELETE", "faults") == (200, {"removed": 1})
    assert call(client, "DELETE", "faults?vm=nobody")[0] == 404
    assert call(client, "POST", "faults", {"kind": "nope"})[0] == 400


def test_time_advance(start):
    _mock, client = start(start_time="2024-01-01T00:00:00Z")
    assert call(client, "POST", "time/advance", {"seconds": 90})[1]["now"] == "2024-01-01T00:01:30.000Z"
    assert call(client, "POST", "time/advance", {"seconds": -1})[0] == 400
    assert call(client, "POST", "time/advance", {})[0] == 400


def test_config(start):
    _mock, client = start()
    status, config = call(client, "POST", "config", {"speed": 10, "rate_limit": True, "approval_mode": "all",
                                                     "unknown_event_ids": "reject"})
    assert status == 200
    assert (config["speed"], config["rate_limit"], config["approval_mode"], config["unknown_event_ids"]) == (
        10, True, "all", "reject")
    assert call(client, "GET", "config")[1] == config
    assert call(client, "POST", "config", {"approval_mode": "some"})[0] == 400
    assert call(client, "POST", "config", {"speed": 0})[0] == 400
    assert call(client, "POST", "config", {"sped": 2})[0] == 400


def test_reset_keeps_fleet_and_clears_the_rest(start):
    mock, client = start(fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a"]}]})
    call(client, "POST", "events", {"event_type": "Reboot", "resources": ["a"]})
    call(client, "POST", "faults", {"kind": "slow", "delay": 0})
    client.doc(vm="a")
    status, state = call(client, "POST", "reset")
    assert status == 200
    assert state["events"] == [] and state["faults"] == [] and state["vms"]["a"]["incarnation"] == 1
    assert mock.audit()["requests"] == []
    assert list(state["vms"]) == ["vm0", "a"]
    state = call(client, "POST", "reset", {"fleet": {"default_vm": "b"}})[1]
    assert list(state["vms"]) == ["b"]


def test_fleet_replace(start):
    _mock, client = start()
    status, state = call(client, "POST", "fleet", {"groups": [{"name": "g", "kind": "avset", "vms": ["x", "y"]}]})
    assert status == 200 and list(state["vms"]) == ["vm0", "x", "y"]
    assert call(client, "GET", "fleet")[1]["groups"][0]["kind"] == "availability_set"
    assert client.doc(vm="x")["DocumentIncarnation"] == 1
    assert call(client, "POST", "fleet", {"groups": [{"name": "g", "kind": "rack", "vms": ["x"]}]})[0] == 400


def test_scenario_by_name_and_by_document(start):
    _mock, client = start()
    state = call(client, "POST", "scenario", {"name": "vmss_terminate"})[1]
    assert state["scenario"] == "vmss_terminate"
    assert [e["event_type"] for e in state["events"]] == ["Terminate"]
    assert state["vms"]["myvmss_0"]["incarnation"] == 2
    state = call(client, "POST", "scenario", {"description": "mine", "fleet": {"default_vm": "solo"},
                                              "events": [{"event_type": "Freeze", "resources": ["solo"]}]})[1]
    assert list(state["vms"]) == ["solo"] and state["events"][0]["event_type"] == "Freeze"
    status, body = call(client, "POST", "scenario", {"name": "nope"})
    assert status == 404 and "live_migration" in body["error"]


def test_failed_scenario_load_changes_nothing(start):
    _mock, client = start()
    event_id = call(client, "POST", "events", {"event_type": "Reboot"})[1]["event_id"]
    status, body = call(client, "POST", "scenario", {"events": [{"event_type": "Reboot", "resources": ["x"]}]})
    assert status == 400 and "scenario.events[0]" in body["error"]
    assert [e["event_id"] for e in call(client, "GET", "state")[1]["events"]] == [event_id]


def test_scenarios_listing(start):
    _mock, client = start()
    names = call(client, "GET", "scenarios")[1]
    assert set(names) == set(mock_imds.BUILTIN_SCENARIOS)


def test_errors_are_json_naming_the_problem(start):
    _mock, client = start()
    assert call(client, "GET", "nothing")[0] == 404
    assert call(client, "PUT", "state")[0] == 404
    answer = client.request("POST", "/_mock/events", body=b"{not json", metadata=False,
                            headers={"Content-Type": "application/json"})
    assert answer.status == 400 and "not JSON" in answer.json()["error"]
    assert call(client, "POST", "events", [1, 2])[0] == 400


def test_audit_records_requests_approvals_and_transitions_in_order(start):
    mock, client = start(start_time="2024-01-01T00:00:00Z",
                         fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]})
    event_id = mock.add_event(event_type="Reboot", resources=["a"], duration=60)["event_id"]
    client.doc(vm="a")
    client.approve("a", event_id)
    mock.advance(60)
    client.doc(vm="b")
    audit = call(client, "GET", "audit")[1]
    requests = audit["requests"]
    assert [(r["vm"], r["method"], r["path"], r["status"]) for r in requests] == [
        ("a", "GET", "/metadata/scheduledevents?api-version=2020-07-01", 200),
        ("a", "POST", "/metadata/scheduledevents?api-version=2020-07-01", 200),
        ("b", "GET", "/metadata/scheduledevents?api-version=2020-07-01", 200)]
    assert requests[0]["time"].endswith("Z") and len(requests[0]["time"]) == 24
    assert requests[0]["sim_time"] == "2024-01-01T00:00:00.000Z"
    (approval,) = audit["approvals"]
    assert (approval["vm"], approval["event_ids"], approval["started"]) == ("a", [event_id], [event_id])
    assert [(t["from"], t["to"], t["cause"]) for t in audit["transitions"]] == [
        ("pending", "Scheduled", "at"), ("Scheduled", "Started", "approval"), ("Started", "removed", "duration")]
    seqs = [t["seq"] for t in audit["transitions"]]
    assert seqs[0] < requests[0]["seq"] < approval["seq"] == seqs[1] - 1 < seqs[2] < requests[2]["seq"]
    # a request is recorded once answered: the POST comes right after the approval it caused
    assert approval["seq"] < requests[1]["seq"]
    since = call(client, "GET", "audit?since=%d" % requests[1]["seq"])[1]
    assert [r["vm"] for r in since["requests"]] == ["b"] and since["approvals"] == []
    only_b = call(client, "GET", "audit?vm=b")[1]
    assert [r["vm"] for r in only_b["requests"]] == ["b"] and only_b["transitions"] == []
    assert call(client, "GET", "audit?since=x")[0] == 400
    assert call(client, "GET", "audit?vm=nobody")[0] == 404


def test_control_needs_no_metadata_header_and_logs_nothing_to_audit(start):
    mock, client = start()
    for _attempt in range(3):
        assert call(client, "GET", "state")[0] == 200
    assert mock.audit()["requests"] == []


@pytest.mark.parametrize("bind", ["0.0.0.0", "10.1.2.3", "example.org"])
def test_non_loopback_bind_is_refused(bind):
    with pytest.raises(mock_imds.MockError, match="127.0.0.1"):
        mock_imds.MockImds(bind=bind)


def test_ipv6_loopback(clock):
    with mock_imds.MockImds(bind="::1", clock=clock) as mock:
        assert mock.url.startswith("http://[::1]:")
