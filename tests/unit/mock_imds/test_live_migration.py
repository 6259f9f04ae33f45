# -*- coding: utf-8 -*-
"""Replay of the documented live-migration (Freeze) flow, field for field."""

import copy
import json
import os

from .helpers import SAMPLES

# The NotBefore of the flow as IMDS.md and the Microsoft page (2022 revision) publish it. The samples
# file carries "Mon, 11 Apr 2026 22:26:58 GMT", which no clock can produce: 11 Apr 2026 is a Saturday.
# The built-in scenario keeps a real date, the documented 2022 one; everything else is compared as is.
DOCUMENTED_NOT_BEFORE = "Mon, 11 Apr 2022 22:26:58 GMT"
EMBEDDED_FLOW = [
    {"DocumentIncarnation": 1, "Events": []},
    {"DocumentIncarnation": 2, "Events": [{
        "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "EventStatus": "Scheduled", "EventType": "Freeze",
        "ResourceType": "VirtualMachine", "Resources": ["WestNO_0", "WestNO_1"],
        "NotBefore": "Mon, 11 Apr 2026 22:26:58 GMT",
        "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
        "EventSource": "Platform", "DurationInSeconds": 5}]},
    {"DocumentIncarnation": 3, "Events": [{
        "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "EventStatus": "Started", "EventType": "Freeze",
        "ResourceType": "VirtualMachine", "Resources": ["WestNO_0", "WestNO_1"], "NotBefore": "",
        "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
        "EventSource": "Platform", "DurationInSeconds": 5}]},
    {"DocumentIncarnation": 4, "Events": []},
]


def published_flow():
    """The samples file's payload when it is beside the checkout (as in CI), else the same copy."""
    if os.path.exists(SAMPLES):
        with open(SAMPLES) as handle:
            for sample in json.load(handle)["samples"]:
                if sample["id"] == "docs-linux-live-migration-flow":
                    return sample["payload"]
    return EMBEDDED_FLOW


def expected_flow():
    flow = copy.deepcopy(published_flow())
    for doc in flow:
        for event in doc["Events"]:
            if event["NotBefore"]:
                assert event["NotBefore"].replace("2026", "2022") == DOCUMENTED_NOT_BEFORE
                event["NotBefore"] = DOCUMENTED_NOT_BEFORE
    return flow


def test_flow_by_not_before(start):
    mock, client = start(scenario="live_migration")
    expected = expected_flow()
    for vm in ("WestNO_0", "WestNO_1"):
        assert client.doc(vm=vm) == expected[0]
    mock.advance(5)
    for vm in ("WestNO_0", "WestNO_1"):
        assert client.doc(vm=vm) == expected[1]
    mock.advance(900)
    for vm in ("WestNO_0", "WestNO_1"):
        assert client.doc(vm=vm) == expected[2]
    # Started for 5 minutes, the median Microsoft's sample publishes for a live migration.
    mock.advance(299)
    assert client.doc(vm="WestNO_0") == expected[2]
    mock.advance(1)
    for vm in ("WestNO_0", "WestNO_1"):
        assert client.doc(vm=vm) == expected[3]


def test_flow_by_approval_of_the_first_vm(start):
    mock, client = start(scenario="live_migration")
    expected = expected_flow()
    mock.advance(5)
    assert client.doc(vm="WestNO_1") == expected[1]
    assert client.approve("WestNO_0", "C7061BAC-AFDC-4513-B24B-AA5F13A16123").status == 200
    assert client.doc(vm="WestNO_1") == expected[2]
    mock.advance(300)
    assert client.doc(vm="WestNO_0") == expected[3]


def test_fast_variant_turns_minutes_into_seconds(start):
    mock, client = start(scenario="live_migration_fast")
    mock.advance(5)
    (event,) = client.doc(vm="WestNO_1")["Events"]
    assert (event["EventStatus"], event["NotBefore"]) == ("Scheduled", "Mon, 11 Apr 2022 22:12:13 GMT")
    mock.advance(15)
    assert client.doc(vm="WestNO_1")["Events"][0]["EventStatus"] == "Started"
    mock.advance(5)
    assert client.doc(vm="WestNO_1")["Events"] == []


def test_raw_bytes_match_the_published_order_of_fields(start):
    mock, client = start(scenario="live_migration")
    mock.advance(5)
    expected = json.dumps(expected_flow()[1], separators=(",", ":")).encode()
    assert client.get(vm="WestNO_0").body == expected


def test_default_vm_of_the_scenario_is_westno_0(start):
    _mock, client = start(scenario="live_migration")
    answer = client.get("/metadata/instance/compute/name?api-version=2021-02-01&format=text")
    assert answer.text == "WestNO_0"


def test_transitions_in_the_audit(start):
    mock, client = start(scenario="live_migration")
    mock.advance(1205)
    client.doc()
    steps = [(t["from"], t["to"], t["sim_time"], t["cause"]) for t in mock.audit()["transitions"]]
    assert steps == [
        ("pending", "Scheduled", "2022-04-11T22:11:58.000Z", "at"),
        ("Scheduled", "Started", "2022-04-11T22:26:58.000Z", "not_before"),
        ("Started", "removed", "2022-04-11T22:31:58.000Z", "duration"),
    ]
