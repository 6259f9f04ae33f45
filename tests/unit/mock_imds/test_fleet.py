# -*- coding: utf-8 -*-
"""Fleets: broadcast in availability sets and scale sets, isolation for zonal VMs, per-VM data."""

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds

FLEET = {"default_vm": "vm0", "groups": [
    {"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_10"]},
    {"name": "ss1", "kind": "scale_set", "vms": ["ss_0", "ss_1"]},
    {"name": "z", "kind": "zonal", "vms": ["z1", "z2"]},
]}
NAME = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"


def event_ids(client, vm):
    return [e["EventId"] for e in client.doc(vm=vm)["Events"]]


def test_availability_set_members_all_see_an_event_naming_one(start):
    mock, client = start(fleet=FLEET)
    event_id = mock.add_event(event_type="Reboot", resources=["web_1"])["event_id"]
    for vm in ("web_0", "web_1", "web_10"):
        assert event_ids(client, vm) == [event_id]
        assert client.doc(vm=vm)["Events"][0]["Resources"] == ["web_1"]
    for vm in ("ss_0", "z1", "z2", "vm0"):
        assert event_ids(client, vm) == []


def test_scale_set_placement_group_sees_its_events(start):
    mock, client = start(fleet=FLEET)
    event_id = mock.add_event(event_type="Terminate", resources=["ss_1"])["event_id"]
    assert event_ids(client, "ss_0") == event_ids(client, "ss_1") == [event_id]
    assert event_ids(client, "web_0") == []


def test_zonal_vms_only_see_events_naming_them(start):
    mock, client = start(fleet=FLEET)
    event_id = mock.add_event(event_type="Reboot", resources=["z1"])["event_id"]
    assert event_ids(client, "z1") == [event_id]
    assert event_ids(client, "z2") == []


def test_incarnation_is_per_vm(start):
    mock, client = start(fleet=FLEET)
    mock.add_event(event_type="Reboot", resources=["z1"])
    mock.add_event(event_type="Reboot", resources=["z1"])
    mock.add_event(event_type="Freeze", resources=["web_0"])
    assert client.doc(vm="z1")["DocumentIncarnation"] == 3
    assert client.doc(vm="z2")["DocumentIncarnation"] == 1
    assert client.doc(vm="web_10")["DocumentIncarnation"] == 2
    assert mock.state.snapshot()["vms"]["z1"]["incarnation"] == 3


@pytest.mark.parametrize("vm", ["web_0", "web_10", "ss_1", "z2", "vm0"])
def test_each_vm_answers_its_own_name(start, vm):
    _mock, client = start(fleet=FLEET)
    answer = client.get(NAME, vm=vm)
    assert (answer.status, answer.text, answer.headers.getheader("Content-Type")) == (
        200, vm, "text/plain; charset=utf-8")


def test_root_serves_the_default_vm(start):
    _mock, client = start(fleet=FLEET, default_vm="web_1")
    assert client.get(NAME).text == "web_1"


def test_default_vm_exists_beside_the_fleet(start):
    mock, client = start(fleet={"groups": [{"name": "g", "kind": "zonal", "vms": ["a"]}]})
    assert list(mock.state.snapshot()["vms"]) == ["vm0", "a"]
    assert client.get(NAME).text == "vm0"


def test_compute_fields_follow_the_group_kind(start):
    _mock, client = start(fleet=FLEET)
    ss = client.get("/metadata/instance/compute?api-version=2021-02-01", vm="ss_1").json()
    assert ss["vmScaleSetName"] == "ss1" and ss["placementGroupId"] and ss["zone"] == ""
    assert ss["osProfile"]["computerName"] != "ss_1"
    zonal = client.get("/metadata/instance/compute?api-version=2021-02-01", vm="z2").json()
    assert zonal["zone"] == "2" and zonal["vmScaleSetName"] == ""
    web = client.get("/metadata/instance/compute?api-version=2021-02-01", vm="web_1").json()
    assert (web["platformFaultDomain"], web["platformUpdateDomain"]) == ("1", "1")
    assert len({client.get("/metadata/instance/compute/vmId?api-version=2021-02-01&format=text", vm=vm).text
                for vm in ("web_0", "web_1", "ss_0")}) == 3


def test_unknown_vm_is_404(start):
    _mock, client = start(fleet=FLEET)
    answer = client.get(vm="web_3")
    assert answer.status == 404
    assert "web_3" in answer.json()["error"]


def test_event_naming_a_vm_outside_the_fleet_is_refused(start):
    mock, _client = start(fleet=FLEET)
    with pytest.raises(mock_imds.MockError, match="web_3"):
        mock.add_event(event_type="Reboot", resources=["web_3"])


@pytest.mark.parametrize("doc,message", [
    ({"groups": [{"name": "a", "kind": "rack", "vms": ["x"]}]}, "kind"),
    ({"groups": [{"name": "a", "kind": "zonal", "vms": []}]}, "non-empty"),
    ({"groups": [{"name": "a", "kind": "zonal", "vms": ["x"]}, {"name": "b", "kind": "zonal", "vms": ["x"]}]},
     "unique"),
    ({"groups": [{"name": "a", "kind": "zonal", "vms": ["bad name"]}]}, "usable VM name"),
    ({"group": []}, "unknown key"),
])
def test_bad_fleet_documents_are_named(doc, message):
    with pytest.raises(mock_imds.MockError, match=message):
        mock_imds.Fleet(doc)


def test_short_fleet_specs():
    assert mock_imds.parse_fleet_spec("avset:web_0,web_1", 1) == {
        "name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1"]}
    assert mock_imds.parse_fleet_spec("vmss:pool:p_0", 2) == {"name": "pool", "kind": "scale_set", "vms": ["p_0"]}
    with pytest.raises(mock_imds.MockError, match="KIND"):
        mock_imds.parse_fleet_spec("rack:a,b")
