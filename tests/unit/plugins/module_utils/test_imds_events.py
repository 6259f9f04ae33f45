"""Normalising and selecting events: api-version schemas, NotBefore formats, ids and names."""

import json
import os

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _event

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "imds-samples.json")

FULL = {
    "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
    "EventStatus": "Scheduled",
    "EventType": "Freeze",
    "ResourceType": "VirtualMachine",
    "Resources": ["WestNO_0", "WestNO_1"],
    "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
    "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
    "EventSource": "Platform",
    "DurationInSeconds": 5,
}

# What each api-version sends: later fields are absent in earlier versions.
SCHEMA = {
    "2017-03-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"),
    "2017-08-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"),
    "2017-11-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"),
    "2019-01-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"),
    "2019-04-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore", "Description"),
    "2019-08-01": ("EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore", "Description",
                   "EventSource"),
    "2020-07-01": tuple(FULL),
}
KEYS = ["event_id", "event_type", "event_status", "resource_type", "resources", "not_before", "description",
        "event_source", "duration_in_seconds"]


def test_schema_table_covers_every_api_version():
    assert tuple(SCHEMA) == _defaults.API_VERSIONS


@pytest.mark.parametrize("api_version", _defaults.API_VERSIONS)
def test_each_api_version_schema_normalises_to_the_same_keys(api_version):
    raw = dict((k, FULL[k]) for k in SCHEMA[api_version])
    if api_version == "2017-03-01":
        raw["Resources"] = ["_WestNO_0", "_WestNO_1"]
    event = _event.normalize_event(raw, api_version)
    assert list(event) == KEYS
    assert event["event_id"] == "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
    assert event["resources"] == ["WestNO_0", "WestNO_1"]
    assert event["not_before"] == "2022-04-11T22:26:58Z"
    assert event["description"] == (FULL["Description"] if "Description" in raw else None)
    assert event["event_source"] == ("Platform" if "EventSource" in raw else None)
    assert event["duration_in_seconds"] == (5 if "DurationInSeconds" in raw else None)


def test_underscore_is_only_stripped_for_the_2017_03_01_preview():
    raw = dict(FULL, Resources=["_odd_name"])
    assert _event.normalize_event(raw, "2017-08-01")["resources"] == ["_odd_name"]
    assert _event.normalize_event(raw, "2017-03-01")["resources"] == ["odd_name"]


@pytest.mark.parametrize("value, expected", [
    ("Mon, 11 Apr 2022 22:26:58 GMT", "2022-04-11T22:26:58Z"),
    ("Mon, 19 Sep 2016 18:29:47 GMT", "2016-09-19T18:29:47Z"),
    ("2016-09-19T18:29:47Z", "2016-09-19T18:29:47Z"),
    ("2016-09-19T18:29:47.123Z", "2016-09-19T18:29:47Z"),
    ("2016-09-19T20:29:47+02:00", "2016-09-19T18:29:47Z"),
    ("", None),
    ("   ", None),
    (None, None),
])
def test_not_before_formats(value, expected):
    assert _event.normalize_not_before(value) == expected


def test_unreadable_not_before_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="is not a date in RFC 1123 or ISO 8601"):
        _event.normalize_not_before("next tuesday")


def test_unknown_event_type_and_extra_fields_pass_through():
    raw = dict(FULL, EventType="Hibernate", NewField=1, SomeOtherThing="x")
    event = _event.normalize_event(raw)
    assert event["event_type"] == "Hibernate"
    assert event["new_field"] == 1 and event["some_other_thing"] == "x"


def test_event_id_comparison_ignores_case():
    assert _event.same_event_id("c7061bac-afdc-4513-b24b-aa5f13a16123", FULL["EventId"])
    doc = _event.ScheduledEvents({"DocumentIncarnation": 2, "Events": [FULL]})
    assert doc.find("c7061bac-afdc-4513-b24b-aa5f13a16123")["event_id"] == FULL["EventId"]
    selected = _event.select_events(doc.events, event_ids=["c7061bac-afdc-4513-b24b-aa5f13a16123"])
    assert len(selected) == 1


def test_resource_match_is_exact():
    event = _event.normalize_event(dict(FULL, Resources=["web_10", "web_1x", "xweb_1"]))
    assert not _event.affects(event, "web_1")
    assert _event.affects(event, "web_10")
    assert _event.select_events([event], resource_name="web_1", this_host_only=True) == []


def test_leader_is_the_first_name_in_resources():
    event = _event.normalize_event(FULL)
    assert _event.is_leader(event, "WestNO_0") and not _event.is_leader(event, "WestNO_1")


def test_select_by_every_filter():
    events = [_event.normalize_event(dict(FULL, EventId="%08d-0000-0000-0000-000000000000" % i, EventType=t,
                                          EventStatus=s, EventSource=src, Resources=r))
              for i, (t, s, src, r) in enumerate([("Freeze", "Scheduled", "Platform", ["a"]),
                                                  ("Reboot", "Started", "User", ["b"]),
                                                  ("Reboot", "Scheduled", "User", ["a", "b"])])]

    def ids(selected):
        return [e["event_id"][:8] for e in selected]

    assert ids(_event.select_events(events, event_types=["Reboot"])) == ["00000001", "00000002"]
    assert ids(_event.select_events(events, event_statuses=["Scheduled"])) == ["00000000", "00000002"]
    assert ids(_event.select_events(events, event_sources=["User"])) == ["00000001", "00000002"]
    assert ids(_event.select_events(events, resource_name="a", this_host_only=True)) == ["00000000", "00000002"]
    assert ids(_event.select_events(events, resource_name="a", this_host_only=False)) == ["00000000", "00000001",
                                                                                          "00000002"]


def test_annotate_adds_affects_and_seconds_and_sorts_started_first():
    scheduled = _event.normalize_event(dict(FULL, EventId="B" * 8 + "-0000-0000-0000-000000000000"))
    later = _event.normalize_event(dict(FULL, EventId="C" * 8 + "-0000-0000-0000-000000000000",
                                        NotBefore="Tue, 12 Apr 2022 22:26:58 GMT", Resources=["other"]))
    started = _event.normalize_event(dict(FULL, EventId="A" * 8 + "-0000-0000-0000-000000000000",
                                          EventStatus="Started", NotBefore=""))
    now = _event.not_before_epoch("2022-04-11T22:16:58Z")
    out = _event.annotate_events([later, scheduled, started], "WestNO_0", now_epoch=now)
    assert [e["event_id"][0] for e in out] == ["A", "B", "C"]
    assert [e["seconds_to_not_before"] for e in out] == [None, 600.0, 87000.0]
    assert [e["affects_this_host"] for e in out] == [True, True, False]
    assert isinstance(out[1]["seconds_to_not_before"], float)


def test_published_live_migration_documents_normalise():
    with open(SAMPLES) as handle:
        samples = dict((s["id"], s) for s in json.load(handle)["samples"])
    flow = samples["docs-linux-live-migration-flow"]["payload"]
    docs = [_event.ScheduledEvents(d) for d in flow]
    assert [d.incarnation for d in docs] == [1, 2, 3, 4]
    assert docs[1].events[0]["not_before"] == "2026-04-11T22:26:58Z"
    assert docs[2].events[0]["event_status"] == "Started" and docs[2].events[0]["not_before"] is None
    preempt = _event.ScheduledEvents(samples["docs-spot-preempt-simulated"]["payload"], "2019-08-01")
    assert preempt.events[0]["duration_in_seconds"] is None and preempt.events[0]["description"] == ""


@pytest.mark.parametrize("body", [b"", b"null", b"{}", b"{\"Events\": {}}", b"[[[[[[[[" * 200000])
def test_parse_document_refuses_what_is_not_a_document(body):
    with pytest.raises(_edge.ImdsResponseError):
        _event.parse_document(body, url="http://127.0.0.1:9/x")


def test_unreadable_not_before_is_read_as_null_with_a_warning_naming_event_and_field():
    scheduled = _event.ScheduledEvents({"DocumentIncarnation": 1, "Events": [dict(FULL, NotBefore="next tuesday")]})
    assert scheduled.events[0]["not_before"] is None
    assert scheduled.events[0]["event_id"] == FULL["EventId"]
    assert len(scheduled.warnings) == 1
    assert scheduled.warnings[0].startswith("event #1 (EventId %s): NotBefore" % FULL["EventId"])
    assert "'next tuesday'" in scheduled.warnings[0]
