# -*- coding: utf-8 -*-
"""Event lifecycles driven by the simulated clock; incarnations; ids stay stable."""


def statuses(client, vm=None):
    return [(e["EventType"], e["EventStatus"]) for e in client.doc(vm=vm)["Events"]]


def test_scheduled_starts_at_not_before_then_is_removed_after_duration(start):
    mock, client = start()
    event = mock.add_event(event_type="Reboot", notice=900, duration=600)
    first = client.doc()
    assert first["DocumentIncarnation"] == 2
    assert first["Events"][0]["EventStatus"] == "Scheduled"
    mock.advance(899)
    assert statuses(client) == [("Reboot", "Scheduled")]
    mock.advance(1)
    second = client.doc()
    assert second["DocumentIncarnation"] == 3
    assert second["Events"][0]["EventStatus"] == "Started"
    assert second["Events"][0]["EventId"] == first["Events"][0]["EventId"] == event["event_id"]
    mock.advance(599)
    assert statuses(client) == [("Reboot", "Started")]
    mock.advance(1)
    assert client.doc() == {"DocumentIncarnation": 4, "Events": []}


def test_transitions_nobody_polled_still_count(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", notice=10, duration=10)
    mock.advance(3600)
    assert client.doc() == {"DocumentIncarnation": 4, "Events": []}


def test_default_notice_follows_the_timing_table(start):
    mock, _client = start()
    for event_type, notice in (("Freeze", 900), ("Reboot", 900), ("Redeploy", 600), ("Preempt", 30),
                               ("Terminate", 300), ("SomethingNew", 900)):
        assert mock.add_event(event_type=event_type)["notice"] == notice


def test_default_duration_is_600_simulated_seconds(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", status="Started")
    mock.advance(599)
    assert statuses(client) == [("Reboot", "Started")]
    mock.advance(1)
    assert statuses(client) == []


def test_approval_starts_at_once(start):
    mock, client = start()
    event = mock.add_event(event_type="Freeze")
    assert client.approve("vm0", event["event_id"]).status == 200
    assert statuses(client) == [("Freeze", "Started")]
    assert client.doc()["DocumentIncarnation"] == 3


def test_cancellation_removes_a_scheduled_event(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", notice=900, cancel_at=120)
    mock.advance(119)
    assert statuses(client) == [("Reboot", "Scheduled")]
    mock.advance(1)
    assert client.doc() == {"DocumentIncarnation": 3, "Events": []}
    assert mock.state.events()[0]["status"] == "cancelled"


def test_cancel_at_after_not_before_does_nothing(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", notice=60, cancel_at=120, duration=600)
    mock.advance(200)
    assert statuses(client) == [("Reboot", "Started")]


def test_hardware_failure_appears_directly_started(start):
    mock, client = start(scenario="hardware_failure")
    assert client.doc() == {"DocumentIncarnation": 2, "Events": [{
        "EventId": mock.state.events()[0]["event_id"], "EventStatus": "Started", "EventType": "Reboot",
        "ResourceType": "VirtualMachine", "Resources": ["vm0"], "NotBefore": "",
        "Description": "Host server is undergoing an emergency repair.",
        "EventSource": "Platform", "DurationInSeconds": -1}]}


def test_predicted_hardware_failure_has_not_before_days_ahead(start):
    mock, client = start(scenario="predicted_hardware_failure", start_time="2024-03-01T00:00:00Z")
    (event,) = client.doc()["Events"]
    assert (event["EventType"], event["EventStatus"]) == ("Redeploy", "Scheduled")
    assert event["NotBefore"] == "Mon, 04 Mar 2024 00:00:00 GMT"
    mock.advance(2 * 86400)
    assert statuses(client) == [("Redeploy", "Scheduled")]


def test_delayed_event_appears_at_its_time(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", at=60)
    mock.advance(59)
    assert client.doc() == {"DocumentIncarnation": 1, "Events": []}
    mock.advance(1)
    assert statuses(client) == [("Reboot", "Scheduled")]


def test_simultaneous_changes_are_one_incarnation(start):
    mock, client = start()
    mock.load_scenario({"events": [{"event_type": "Reboot"}, {"event_type": "Freeze"}]})
    assert client.doc()["DocumentIncarnation"] == 2
    assert len(client.doc()["Events"]) == 2


def test_incarnation_unchanged_without_a_change(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", notice=900)
    mock.advance(100)
    assert [client.doc()["DocumentIncarnation"] for _attempt in range(3)] == [2, 2, 2]


def test_simulated_time_runs_at_speed(start, clock):
    mock, client = start(speed=60)
    mock.add_event(event_type="Reboot", notice=900, duration=60)
    clock.tick(14.9)
    assert statuses(client) == [("Reboot", "Scheduled")]
    clock.tick(0.1)
    assert statuses(client) == [("Reboot", "Started")]
    mock.state.configure(speed=1)
    clock.tick(59)
    assert statuses(client) == [("Reboot", "Started")]
    clock.tick(1)
    assert statuses(client) == []


def test_control_start_and_complete(start):
    mock, client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    assert mock.state.event_action(event_id, "start")["status"] == "Started"
    assert statuses(client) == [("Reboot", "Started")]
    assert mock.state.event_action(event_id, "complete")["status"] == "removed"
    assert client.doc() == {"DocumentIncarnation": 4, "Events": []}


def test_event_order_is_creation_order(start):
    mock, client = start()
    for event_type in ("Reboot", "Freeze", "Redeploy"):
        mock.add_event(event_type=event_type)
    assert [t for t, _status in statuses(client)] == ["Reboot", "Freeze", "Redeploy"]


def test_zero_notice_appears_and_starts_as_one_change(start):
    mock, client = start()
    mock.add_event(event_type="Reboot", notice=0, at=10)
    mock.advance(10)
    assert client.doc()["DocumentIncarnation"] == 2
    assert statuses(client) == [("Reboot", "Started")]
