# -*- coding: utf-8 -*-
"""What each Scheduled Events api-version shows (the IMDS.md fields-by-version table)."""

import json

import pytest

BASE = ["EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"]
FIELDS = [
    ("2017-03-01", BASE),
    ("2017-08-01", BASE),
    ("2017-11-01", BASE),
    ("2019-01-01", BASE),
    ("2019-04-01", BASE + ["Description"]),
    ("2019-08-01", BASE + ["Description", "EventSource"]),
    ("2020-07-01", BASE + ["Description", "EventSource", "DurationInSeconds"]),
    ("2021-02-01", BASE + ["Description", "EventSource", "DurationInSeconds"]),
    ("2025-04-07", BASE + ["Description", "EventSource", "DurationInSeconds"]),
    ("2018-02-01", BASE),  # instance-only version: served with the 2017-11-01 schema
]


@pytest.mark.parametrize("version,fields", FIELDS)
def test_fields_by_version_in_documented_order(start, version, fields):
    mock, client = start()
    mock.add_event(event_type="Reboot", description="d", event_source="User", duration_in_seconds=30)
    (event,) = client.doc(version=version)["Events"]
    assert list(event) == fields


def test_2017_03_01_prefixes_resources_with_underscore(start):
    mock, client = start(fleet={"groups": [{"name": "a", "kind": "avset", "vms": ["web_0", "web_1"]}]})
    mock.add_event(event_type="Reboot", resources=["web_0", "web_1"])
    assert client.doc(vm="web_0", version="2017-03-01")["Events"][0]["Resources"] == ["_web_0", "_web_1"]
    assert client.doc(vm="web_0", version="2017-08-01")["Events"][0]["Resources"] == ["web_0", "web_1"]


@pytest.mark.parametrize("event_type,hidden_before", [("Preempt", "2017-11-01"), ("Terminate", "2019-01-01")])
def test_event_types_are_hidden_from_versions_that_lack_them(start, event_type, hidden_before):
    mock, client = start()
    mock.add_event(event_type=event_type)
    for version in ("2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2020-07-01"):
        events = client.doc(version=version)["Events"]
        assert len(events) == (0 if version < hidden_before else 1), version


def test_hidden_event_still_counts_for_the_incarnation(start):
    mock, client = start()
    mock.add_event(event_type="Terminate")
    assert client.doc(version="2017-08-01") == {"DocumentIncarnation": 2, "Events": []}


def test_unknown_event_types_are_served_to_every_version(start):
    mock, client = start()
    mock.add_event(event_type="FutureMaintenance")
    for version in ("2017-03-01", "2019-01-01", "2020-07-01"):
        assert client.doc(version=version)["Events"][0]["EventType"] == "FutureMaintenance"


def test_not_before_is_rfc1123_gmt_and_empty_once_started(start):
    mock, client = start(start_time="2022-04-11T22:11:58Z")
    event = mock.add_event(event_type="Reboot", notice=900)
    assert client.doc()["Events"][0]["NotBefore"] == "Mon, 11 Apr 2022 22:26:58 GMT"
    mock.state.event_action(event["event_id"], "start")
    assert client.doc()["Events"][0]["NotBefore"] == ""


def test_document_is_compact_json_with_incarnation_first(start):
    mock, client = start()
    mock.add_event(event_type="Freeze", event_id="0F7E8A52-6D5B-4F0B-9B5B-1D2C3E4F5A6B")
    body = client.get().body
    assert body.startswith(b'{"DocumentIncarnation":2,"Events":[{"EventId":"0F7E8A52-6D5B-4F0B-9B5B-1D2C3E4F5A6B",')
    assert body == json.dumps(json.loads(body), separators=(",", ":")).encode()


def test_generated_event_ids_are_upper_case_guids(start):
    mock, client = start()
    for _attempt in range(3):
        mock.add_event(event_type="Reboot")
    ids = [e["EventId"] for e in client.doc()["Events"]]
    assert len(set(ids)) == 3
    for event_id in ids:
        assert event_id == event_id.upper() and len(event_id) == 36 and event_id.count("-") == 4
