# -*- coding: utf-8 -*-
"""Approvals (POST): bodies, modes, unknown ids, approvals by VMs the event does not name."""

import pytest

FLEET = {"groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}


def status_of(client, vm, event_id):
    return dict((e["EventId"], e["EventStatus"]) for e in client.doc(vm=vm)["Events"]).get(event_id)


@pytest.fixture
def pair(start):
    mock, client = start(fleet=FLEET)
    event_id = mock.add_event(event_type="Reboot", resources=["web_0", "web_1"])["event_id"]
    return mock, client, event_id


def test_post_answers_200_with_empty_body(pair):
    _mock, client, event_id = pair
    answer = client.approve("web_0", event_id)
    assert (answer.status, answer.body) == (200, b"")


def test_approval_by_one_named_vm_starts_it_for_all(pair):
    _mock, client, event_id = pair
    client.approve("web_1", event_id)
    for vm in ("web_0", "web_1", "web_2"):
        assert status_of(client, vm, event_id) == "Started"


def test_several_ids_in_one_request(start):
    mock, client = start()
    ids = [mock.add_event(event_type="Reboot")["event_id"] for _attempt in range(2)]
    assert client.approve("vm0", *ids).status == 200
    assert [e["EventStatus"] for e in client.doc()["Events"]] == ["Started", "Started"]
    assert client.doc()["DocumentIncarnation"] == 4


def test_event_ids_match_case_insensitively(pair):
    _mock, client, event_id = pair
    client.approve("web_0", event_id.lower())
    assert status_of(client, "web_0", event_id) == "Started"


def test_already_started_or_approved_by_another_vm_is_200(pair):
    _mock, client, event_id = pair
    assert client.approve("web_0", event_id).status == 200
    assert client.approve("web_1", event_id).status == 200
    assert client.approve("web_0", event_id).status == 200


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'{"StartRequests": {}}',
                                  b'{"StartRequests": [{"Id": "x"}]}', b'{"StartRequests": [{"EventId": 5}]}',
                                  b'{"startrequests": []}'])
def test_malformed_body_is_400(start, body):
    _mock, client = start()
    answer = client.post(body=body)
    assert answer.status == 400
    assert "StartRequests" in answer.json()["error"]


def test_empty_start_requests_is_200(start):
    _mock, client = start()
    assert client.post(body={"StartRequests": []}).status == 200


def test_2017_body_with_document_incarnation_is_accepted(start):
    mock, client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    answer = client.post(body={"DocumentIncarnation": "2", "StartRequests": [{"EventId": event_id}]})
    assert answer.status == 200
    assert status_of(client, None, event_id) == "Started"


def test_unknown_ids_accepted_by_default_and_audited(start):
    mock, client = start()
    assert client.approve("vm0", "00000000-0000-0000-0000-000000000000").status == 200
    (approval,) = mock.audit()["approvals"]
    assert approval["unknown_event_ids"] == ["00000000-0000-0000-0000-000000000000"]


def test_unknown_ids_rejected_when_configured(start):
    mock, client = start(unknown_event_ids="reject")
    known = mock.add_event(event_type="Reboot")["event_id"]
    answer = client.approve("vm0", known, "DEADBEEF-0000-0000-0000-000000000000")
    assert answer.status == 400
    assert "DEADBEEF-0000-0000-0000-000000000000" in answer.json()["error"]
    assert status_of(client, None, known) == "Scheduled"


def test_event_of_another_vm_is_unknown_to_this_vm(start):
    mock, client = start(fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]},
                         unknown_event_ids="reject")
    event_id = mock.add_event(event_type="Reboot", resources=["a"])["event_id"]
    assert client.approve("b", event_id).status == 400
    assert status_of(client, "a", event_id) == "Scheduled"


def test_approval_by_a_set_member_not_in_resources_starts_it_for_all(pair):
    # The documentation's Scope section: events are delivered to, and can be approved by, every
    # VM of the availability set; a secondary may approve for an unresponsive primary.
    mock, client, event_id = pair
    assert client.approve("web_2", event_id).status == 200
    for vm in ("web_0", "web_1", "web_2"):
        assert status_of(client, vm, event_id) == "Started"
    (approval,) = mock.audit()["approvals"]
    assert (approval["vm"], approval["not_in_resources"], approval["started"]) == ("web_2", [event_id], [event_id])
    assert mock.state.event(event_id)["approvals"][0]["in_resources"] is False
    (transition,) = [t for t in mock.audit()["transitions"] if t["to"] == "Started"]
    assert transition["cause"] == "approval"


def test_scale_set_member_approves_for_the_placement_group(start):
    mock, client = start(fleet={"groups": [{"name": "ss", "kind": "scale_set", "vms": ["ss_0", "ss_1", "ss_2"]}]})
    event_id = mock.add_event(event_type="Freeze", resources=["ss_1"])["event_id"]
    assert client.approve("ss_0", event_id).status == 200
    assert status_of(client, "ss_1", event_id) == "Started"


def test_a_vm_outside_the_group_cannot_approve(start):
    fleet = {"groups": [FLEET["groups"][0], {"name": "avset2", "kind": "availability_set", "vms": ["db_0", "db_1"]}]}
    mock, client = start(fleet=fleet)
    event_id = mock.add_event(event_type="Reboot", resources=["web_0"])["event_id"]
    assert client.approve("db_0", event_id).status == 200
    assert status_of(client, "web_0", event_id) == "Scheduled"
    (approval,) = mock.audit()["approvals"]
    assert approval["unknown_event_ids"] == [event_id] and approval["started"] == []


def test_gpu_single_fault_domain_scale_set_sees_and_approves_only_its_own(start):
    fleet = {"groups": [{"name": "gpu", "kind": "scale_set", "vms": ["gpu_0", "gpu_1"],
                         "gpu_single_fault_domain": True}]}
    mock, client = start(fleet=fleet, unknown_event_ids="reject")
    event_id = mock.add_event(event_type="Reboot", resources=["gpu_0"])["event_id"]
    assert client.doc(vm="gpu_1")["Events"] == []
    assert client.approve("gpu_1", event_id).status == 400
    assert status_of(client, "gpu_0", event_id) == "Scheduled"
    assert client.approve("gpu_0", event_id).status == 200
    assert status_of(client, "gpu_0", event_id) == "Started"


def test_mode_all_waits_for_the_other_tenants_of_the_host(start):
    mock, client = start(fleet=FLEET, approval_mode="all")
    event_id = mock.add_event(event_type="Reboot", resources=["web_0", "web_1"])["event_id"]
    client.approve("web_0", event_id)
    assert status_of(client, "web_1", event_id) == "Scheduled"
    assert mock.audit()["approvals"][0]["started"] == []
    view = mock.state.event_action(event_id, "approve_tenants")
    assert view["tenants_approved"] is True and view["status"] == "Started"
    for vm in ("web_0", "web_1", "web_2"):
        assert status_of(client, vm, event_id) == "Started"


def test_mode_all_tenants_first_then_one_group_approval(start):
    mock, client = start(fleet=FLEET, approval_mode="all")
    event_id = mock.add_event(event_type="Reboot", resources=["web_0", "web_1"])["event_id"]
    assert mock.state.event_action(event_id, "approve_tenants")["status"] == "Scheduled"
    client.approve("web_2", event_id)
    assert status_of(client, "web_0", event_id) == "Started"


def test_mode_all_still_starts_at_not_before(start):
    mock, client = start(fleet=FLEET, approval_mode="all")
    event_id = mock.add_event(event_type="Reboot", resources=["web_0", "web_1"], notice=900)["event_id"]
    client.approve("web_0", event_id)
    mock.advance(900)
    assert status_of(client, "web_1", event_id) == "Started"


def test_mode_not_before_records_but_waits(start):
    mock, client = start(approval_mode="not_before")
    event_id = mock.add_event(event_type="Reboot", notice=900)["event_id"]
    client.approve("vm0", event_id)
    assert status_of(client, None, event_id) == "Scheduled"
    assert len(mock.state.event(event_id)["approvals"]) == 1
    mock.advance(900)
    assert status_of(client, None, event_id) == "Started"


def test_approval_of_a_removed_event_is_unknown(start):
    mock, client = start(unknown_event_ids="reject")
    event_id = mock.add_event(event_type="Reboot", status="Started", duration=10)["event_id"]
    mock.advance(10)
    assert client.approve("vm0", event_id).status == 400
