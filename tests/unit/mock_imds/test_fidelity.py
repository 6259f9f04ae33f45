# -*- coding: utf-8 -*-
"""What the documentation says and the mock now does: the 2017-03-01 header rule, the service's
own lifecycle, GPU single-fault-domain scale sets, the documented descriptions and medians."""

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds

FLEET = {"groups": [{"name": "avset", "kind": "availability_set", "vms": ["web_0", "web_1"]}], "default_vm": "web_0"}
LIFECYCLE = {"service_lifecycle": True}


@pytest.mark.parametrize("path", ["/metadata/scheduledevents?api-version=2017-03-01",
                                  "/metadata/instance?api-version=2017-03-01",
                                  "/metadata/instance?api-version=2017-04-02"])
def test_versions_before_2017_08_01_need_no_metadata_header(start, path):
    _mock, client = start()
    assert client.get(path, metadata=False).status == 200


@pytest.mark.parametrize("version", ["2017-08-01", "2020-07-01", "nope"])
def test_from_2017_08_01_on_the_header_is_enforced(start, version):
    _mock, client = start()
    answer = client.get("/metadata/scheduledevents?api-version=" + version, metadata=False)
    assert answer.status == 400 and "metadata header" in answer.json()["error"]


def test_lifecycle_is_off_by_default(start):
    mock, client = start()
    mock.add_event(event_type="Reboot")
    assert len(client.doc()["Events"]) == 1
    assert "service" not in mock.state.snapshot()["vms"]["vm0"]
    assert mock.state.config()["service_lifecycle"] is False


def test_first_request_enables_the_service_after_two_minutes(start):
    mock, client = start(fleet=FLEET, start_time="2024-01-01T00:00:00Z", **LIFECYCLE)
    before = mock.add_event(event_type="Reboot", resources=["web_0"], notice=3600)["event_id"]
    assert mock.state.snapshot()["vms"]["web_0"]["service"]["enabled_at"] is None
    assert client.doc(vm="web_0")["Events"] == []  # the first call: nothing delivered yet
    service = mock.state.snapshot()["vms"]["web_0"]["service"]
    assert (service["enabled"], service["enabled_at"]) == (False, "2024-01-01T00:02:00.000Z")
    mock.advance(60)
    mock.add_event(event_type="Freeze", resources=["web_0"])  # during the enabling: missed
    mock.advance(60)
    assert mock.state.snapshot()["vms"]["web_0"]["service"]["enabled"] is True
    after = mock.add_event(event_type="Redeploy", resources=["web_0"])["event_id"]
    assert [e["EventId"] for e in client.doc(vm="web_0")["Events"]] == [after]
    assert before not in [e["EventId"] for e in client.doc(vm="web_0")["Events"]]
    # web_1 never asked: its service is off and it sees nothing.
    assert mock.state.snapshot()["vms"]["web_1"]["service"]["enabled_at"] is None


def test_a_day_without_requests_disables_the_service(start):
    mock, client = start(start_time="2024-01-01T00:00:00Z", service_enable_delay=0, **LIFECYCLE)
    client.doc()
    event_id = mock.add_event(event_type="Reboot", notice=7 * 86400)["event_id"]
    incarnation = client.doc()["DocumentIncarnation"]
    assert [e["EventId"] for e in client.doc()["Events"]] == [event_id]
    mock.advance(86399)
    assert [e["EventId"] for e in client.doc()["Events"]] == [event_id]  # a request within 24 h keeps it
    mock.advance(86400)
    assert mock.state.snapshot()["vms"]["vm0"]["service"]["enabled"] is False
    answer = client.doc()  # enables it again: the event of the earlier period is not delivered
    assert answer["Events"] == [] and answer["DocumentIncarnation"] > incarnation


def test_the_first_call_waits_the_real_delay_option_once(start):
    mock, client = start(service_first_call_delay=0.05, **LIFECYCLE)
    path = "/metadata/scheduledevents"
    assert mock.state.admit("vm0", "GET", path).delay == 0.05
    client.doc()
    assert mock.state.admit("vm0", "GET", path).delay == 0
    assert mock.state.admit("vm0", "GET", "/metadata/instance").delay == 0


def test_lifecycle_can_be_switched_on_and_off_through_config(start):
    mock, client = start()
    mock.state.configure({"service_lifecycle": True, "service_enable_delay": 120})
    mock.add_event(event_type="Reboot")
    assert client.doc()["Events"] == []
    mock.state.configure(service_lifecycle=False)
    assert len(client.doc()["Events"]) == 1
    with pytest.raises(mock_imds.MockError, match="service_enable_delay"):
        mock.state.configure(service_enable_delay=601)


def test_gpu_fd1_from_the_command_line_short_form():
    group = mock_imds.parse_fleet_spec("vmss_gpu_fd1:gpu:gpu_0,gpu_1")
    assert group == {"name": "gpu", "kind": "scale_set", "vms": ["gpu_0", "gpu_1"], "gpu_single_fault_domain": True}
    fleet = mock_imds.Fleet({"groups": [group]})
    assert fleet.audience(["gpu_0"]) == frozenset(["gpu_0"])
    assert fleet.vms["gpu_0"].instance["compute"]["vmSize"].startswith("Standard_ND")
    with pytest.raises(mock_imds.MockError, match="only for a scale_set"):
        mock_imds.Fleet({"groups": [{"name": "a", "kind": "avset", "vms": ["a_0"], "gpu_single_fault_domain": True}]})


@pytest.mark.parametrize("name, event_type, source, description, notice, duration, impact", [
    ("host_agent_maintenance", "Freeze", "Platform", "Host server is undergoing maintenance.", 900, 600, 9),
    ("user_reboot", "Reboot", "User", "Virtual machine is going to be restarted as requested by authorized user.",
     900, 600, -1),
    ("user_redeploy", "Redeploy", "User",
     "Virtual machine is going to be redeployed as requested by authorized user.", 900, 600, -1),
    ("hardware_failure", "Reboot", "Platform", "Host server is undergoing an emergency repair.", 900, 600, -1),
    ("live_migration", "Freeze", "Platform",
     "Virtual machine is being paused because of a memory-preserving Live Migration operation.", 900, 300, 5),
])
def test_scenarios_carry_the_documented_descriptions_and_medians(name, event_type, source, description, notice,
                                                                 duration, impact):
    (event,) = mock_imds.BUILTIN_SCENARIOS[name]["events"]
    assert (event["event_type"], event.get("event_source", "Platform"), event["description"]) == \
        (event_type, source, description)
    assert (event.get("notice", 900), event.get("duration", 600), event.get("duration_in_seconds", -1)) == \
        (notice, duration, impact)


@pytest.mark.parametrize("name", ["live_migration", "host_agent_maintenance", "user_reboot", "user_redeploy",
                                  "canceled_maintenance"])
def test_every_timed_scenario_has_a_fast_variant(start, name):
    fast = mock_imds.BUILTIN_SCENARIOS[name + "_fast"]
    slow = mock_imds.BUILTIN_SCENARIOS[name]
    assert fast["events"][0]["notice"] * 60 == slow["events"][0]["notice"]
    mock, _client = start(scenario=name + "_fast")
    assert mock.state.snapshot()["scenario"] == name + "_fast"
