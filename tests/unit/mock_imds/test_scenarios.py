# -*- coding: utf-8 -*-
"""Every built-in scenario loads and shows what its name promises."""

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds


def doc(client, vm=None):
    return client.doc(vm=vm)


@pytest.mark.parametrize("name", sorted(mock_imds.BUILTIN_SCENARIOS))
def test_every_builtin_loads_with_a_description(start, name):
    mock, _client = start(scenario=name)
    state = mock.state.snapshot()
    assert state["scenario"] == name
    assert mock_imds.BUILTIN_SCENARIOS[name]["description"]


def test_user_reboot(start):
    _mock, client = start(scenario="user_reboot")
    (event,) = doc(client)["Events"]
    assert (event["EventType"], event["EventSource"], event["EventStatus"]) == ("Reboot", "User", "Scheduled")


def test_redeploy_has_ten_minutes_notice(start):
    mock, client = start(scenario="redeploy", start_time="2024-01-01T00:00:00Z")
    assert doc(client)["Events"][0]["NotBefore"] == "Mon, 01 Jan 2024 00:10:00 GMT"
    mock.advance(600)
    assert doc(client)["Events"][0]["EventStatus"] == "Started"


def test_spot_preempt_starts_after_30_seconds(start):
    mock, client = start(scenario="spot_preempt")
    assert doc(client)["Events"][0]["EventType"] == "Preempt"
    mock.advance(30)
    assert doc(client)["Events"][0]["EventStatus"] == "Started"


def test_vmss_terminate_is_seen_by_the_whole_scale_set(start):
    _mock, client = start(scenario="vmss_terminate")
    for vm in ("myvmss_0", "myvmss_1", "myvmss_2"):
        (event,) = doc(client, vm)["Events"]
        assert (event["EventType"], event["Resources"]) == ("Terminate", ["myvmss_1"])


def test_cancellation(start):
    mock, client = start(scenario="cancellation")
    assert doc(client)["Events"][0]["EventStatus"] == "Scheduled"
    mock.advance(120)
    assert doc(client) == {"DocumentIncarnation": 3, "Events": []}


def test_overlapping_events_in_one_availability_set(start):
    mock, client = start(scenario="overlapping")
    mock.advance(60)
    for vm in ("web_0", "web_1", "web_2"):
        current = doc(client, vm)
        assert [(e["EventType"], e["Resources"]) for e in current["Events"]] == [
            ("Freeze", ["web_0"]), ("Reboot", ["web_1"])]
        assert current["DocumentIncarnation"] == 3
    mock.advance(840)  # the Freeze starts at 900 s, the Reboot is still Scheduled
    assert [e["EventStatus"] for e in doc(client, "web_2")["Events"]] == ["Started", "Scheduled"]


def test_empty(start):
    _mock, client = start(scenario="empty")
    assert doc(client) == {"DocumentIncarnation": 1, "Events": []}


def test_scenario_speed_and_config_apply(start):
    mock, _client = start(scenario={"speed": 30, "config": {"approval_mode": "all"}, "events": []})
    config = mock.state.config()
    assert (config["speed"], config["approval_mode"]) == (30, "all")


@pytest.mark.parametrize("scenario,message", [
    ({"events": {}}, "list"),
    ({"events": [{"event_type": "Reboot", "cancel_at": 0}]}, "later than at"),
    ({"events": [{"event_type": "Reboot", "status": "Started", "cancel_at": 5}]}, "Scheduled"),
    ({"events": [{"event_type": "Reboot", "status": "Done"}]}, "status"),
    ({"events": [{"event_type": "Reboot", "event_id": "A"}, {"event_type": "Reboot", "event_id": "a"}]}, "twice"),
    ({"evnts": []}, "unknown key"),
    ({"start_time": "soon", "events": []}, "ISO 8601"),
])
def test_bad_scenarios_are_named(start, scenario, message):
    mock, _client = start()
    with pytest.raises(mock_imds.MockError, match=message):
        mock.load_scenario(scenario)
