"""The IMDS document read field by field: what cannot be read is null with a warning, never an exception."""

import copy
import json

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _event, _imds

GOOD_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
OTHER_ID = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"


def raw(event_id=GOOD_ID, **fields):
    event = {"EventId": event_id, "EventType": "Reboot", "EventStatus": "Scheduled", "ResourceType": "VirtualMachine",
             "Resources": ["web_0", "web_1"], "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
             "Description": "Host server is undergoing maintenance.", "EventSource": "Platform",
             "DurationInSeconds": -1}
    event.update(fields)
    return event


def read(*events, incarnation=3):
    return _event.ScheduledEvents({"DocumentIncarnation": incarnation, "Events": list(events)})


HEALTHY = _event.normalize_event(raw(OTHER_ID))


@pytest.mark.parametrize("field, value, key, expected_value, warning", [
    ("EventId", 12345, "event_id", None, "event #1 (EventId 12345): EventId is not a string (got 12345); read as null."),
    ("EventId", ["x"], "event_id", None, "EventId is not a string"),
    ("EventType", 7, "event_type", None, "EventType is not a string (got 7); read as null."),
    ("EventStatus", {"a": 1}, "event_status", None, "EventStatus is not a string"),
    ("ResourceType", True, "resource_type", None, "ResourceType is not a string"),
    ("Description", 3.5, "description", None, "Description is not a string"),
    ("EventSource", [], "event_source", None, "EventSource is not a string"),
    ("Resources", 7, "resources", [], "Resources is not a list (got 7); read as an empty list."),
    ("Resources", {"web_0": 1}, "resources", [], "Resources is not a list"),
    ("Resources", "web_1", "resources", ["web_1"], "Resources is a single string, not a list; read as the "
                                                   "one-element list ['web_1']."),
    ("Resources", ["web_0", 3, None, "web_1"], "resources", ["web_0", "web_1"],
     "Resources holds entries that are not strings ([3, None]); they were left out."),
    ("NotBefore", "next tuesday", "not_before", None, "is not a date in RFC 1123 or ISO 8601"),
    ("NotBefore", 1649715418, "not_before", None, "NotBefore 1649715418 is not a string; read as null."),
    ("NotBefore", "2022-13-45T25:61:00Z", "not_before", None, "is not a date in RFC 1123 or ISO 8601"),
    ("NotBefore", "Mon, 31 Feb 2022 22:26:58 GMT", "not_before", None, "is not a date in RFC 1123 or ISO 8601"),
    ("NotBefore", "Fri, 31 Dec 99999 23:59:59 GMT", "not_before", None, "is not a date in RFC 1123 or ISO 8601"),
    ("DurationInSeconds", True, "duration_in_seconds", None, "DurationInSeconds is not a whole number (got True)"),
    ("DurationInSeconds", "9", "duration_in_seconds", None, "DurationInSeconds is not a whole number"),
    ("DurationInSeconds", 9.5, "duration_in_seconds", None, "DurationInSeconds is not a whole number"),
    ("DurationInSeconds", float("nan"), "duration_in_seconds", None, "DurationInSeconds is not a whole number"),
])
def test_a_field_of_the_wrong_type_is_read_as_null_with_one_warning_and_the_other_event_is_whole(
        field, value, key, expected_value, warning):
    scheduled = read(raw(**{field: value}), raw(OTHER_ID))
    odd, healthy = scheduled.events
    assert odd[key] == expected_value
    assert healthy == HEALTHY
    assert len(scheduled.warnings) == 1 and warning in scheduled.warnings[0], scheduled.warnings
    assert scheduled.warnings[0].startswith("event #1 ")
    # Every other field of the odd event was still read.
    for other_key, other_value in HEALTHY.items():
        if other_key not in (key, "event_id"):
            assert odd[other_key] == other_value, other_key


def test_a_mix_of_number_and_string_event_ids_reads_every_event():
    scheduled = read(raw(1), raw(GOOD_ID), raw(2.5), raw(None), raw(OTHER_ID))
    assert [e["event_id"] for e in scheduled.events] == [None, GOOD_ID, None, None, OTHER_ID]
    assert [w.split(":")[0] for w in scheduled.warnings] == ["event #1 (EventId 1)", "event #3 (EventId 2.5)"]
    assert scheduled.find(GOOD_ID)["event_id"] == GOOD_ID
    assert _event.select_events(scheduled.events, event_ids=[OTHER_ID]) == [scheduled.events[4]]


def test_an_event_id_that_is_not_a_guid_is_kept_with_a_warning():
    scheduled = read(raw("12345"))
    assert scheduled.events[0]["event_id"] == "12345"
    assert scheduled.warnings == ["event #1 (EventId '12345'): EventId is not a GUID; it is reported as sent but "
                                  "cannot be approved."]


def test_a_field_text_with_a_newline_cannot_forge_a_line_in_a_warning():
    scheduled = read(raw("x\nFAKE: approved"))
    assert all("\n" not in w for w in scheduled.warnings)


def test_entries_of_events_that_are_not_objects_are_left_out_with_a_warning():
    scheduled = read(1, raw(), "text", None)
    assert [e["event_id"] for e in scheduled.events] == [GOOD_ID]
    assert scheduled.warnings == [
        "event #1 is not a JSON object (got 1); it was left out.",
        "event #3 is not a JSON object (got 'text'); it was left out.",
        "event #4 is not a JSON object (got None); it was left out."]


@pytest.mark.parametrize("incarnation, warning", [
    ("3", "DocumentIncarnation is not a whole number from 0 to 9223372036854775807 (got '3'); read as 0."),
    (True, "got True"), (-1, "got -1"), (2 ** 64, "got 18446744073709551616"), (1.5, "got 1.5"),
])
def test_an_unreadable_document_incarnation_is_zero_with_a_warning(incarnation, warning):
    scheduled = read(raw(), incarnation=incarnation)
    assert scheduled.incarnation == 0 and scheduled.events[0]["event_id"] == GOOD_ID
    assert len(scheduled.warnings) == 1 and warning in scheduled.warnings[0]


def test_a_missing_document_incarnation_is_named():
    scheduled = _event.ScheduledEvents({"Events": []})
    assert scheduled.incarnation == 0 and scheduled.warnings == ["DocumentIncarnation is missing; read as 0."]


def test_an_extra_field_cannot_replace_a_normalised_one():
    event = raw()
    event.update({"event_id": 5, "AffectsThisHost": True, "NewField": 1})
    scheduled = read(event)
    event = scheduled.events[0]
    assert event["event_id"] == GOOD_ID and event["new_field"] == 1 and "affects_this_host" not in event
    assert len(scheduled.warnings) == 2


def test_a_healthy_document_has_no_warnings():
    scheduled = read(raw(), raw(OTHER_ID, Resources=[], NotBefore="", DurationInSeconds=None))
    assert scheduled.warnings == []


@pytest.mark.parametrize("body", [
    json.dumps({"DocumentIncarnation": 1,
                "Events": [{"EventId": 5, "Resources": 5, "NotBefore": 5, "DurationInSeconds": "x"}, 5, [], {}]}),
    '{"DocumentIncarnation": NaN, "Events": [{"DurationInSeconds": Infinity, "NotBefore": "-1"}]}',
    '{"DocumentIncarnation": 1, "Events": [{"Resources": [[[[["deep"]]]]]}]}',
])
def test_nothing_in_a_document_raises(body):
    scheduled = _event.ScheduledEvents(_event.parse_document(body.encode()))
    assert scheduled.warnings
    annotated = _event.annotate_events(scheduled.events, "web_0", now_epoch=1700000000.0)
    assert len(annotated) == len(scheduled.events)


def test_annotate_and_select_take_events_with_unreadable_fields():
    scheduled = read(raw(7, EventStatus=3, Resources=9, NotBefore=[]), raw())
    annotated = _event.annotate_events(scheduled.events, "web_0", now_epoch=1700000000.0)
    assert [e["affects_this_host"] for e in annotated] == [False, True]
    assert _event.select_events(scheduled.events, event_statuses=["Scheduled"], resource_name="web_0",
                                this_host_only=True) == [scheduled.events[1]]


# -- the document's edge: nesting and text (issue 22) ----------------------------------------------

def _with_deep_field(document, depth, where="event"):
    """document as text, with the extra field Nested, depth arrays deep, in its first event (or the
    document itself). Written as text: json.dumps recurses once per level too."""
    target = document["Events"][0] if where == "event" else document
    target["Nested"] = "@deep@"
    return json.dumps(document).replace('"@deep@"', "[" * depth + "]" * depth)


@pytest.mark.parametrize("depth", [600, 100000])
def test_an_extra_field_nested_past_the_bound_is_left_out_and_the_event_beside_it_is_read(depth):
    body = _with_deep_field({"DocumentIncarnation": 3, "Events": [raw(OTHER_ID), raw()]}, depth)
    scheduled = _event.ScheduledEvents(_event.parse_document(body.encode()))
    assert [e["event_id"] for e in scheduled.events] == [OTHER_ID, GOOD_ID]
    assert scheduled.events[0] == HEALTHY and scheduled.events[1] == _event.normalize_event(raw())
    assert scheduled.warnings == ["event #1 (EventId %s): the field 'Nested' nests deeper than %d levels; it was "
                                  "left out." % (OTHER_ID, _defaults.MAX_NESTING)]
    assert "Nested" not in scheduled.document["Events"][0]
    # What each consumer does with it next: copy it (the watcher's state), write it out (a module).
    copy.deepcopy(scheduled.document)
    json.dumps([scheduled.document, scheduled.events])


def test_a_deep_field_of_the_document_itself_is_left_out_too():
    body = _with_deep_field({"DocumentIncarnation": 3, "Events": [raw()]}, 5000, where="document")
    scheduled = _event.ScheduledEvents(_event.parse_document(body))
    assert scheduled.incarnation == 3 and [e["event_id"] for e in scheduled.events] == [GOOD_ID]
    assert scheduled.warnings == ["the document: the field 'Nested' nests deeper than %d levels; it was left out."
                                  % _defaults.MAX_NESTING]
    assert sorted(scheduled.document) == ["DocumentIncarnation", "Events"]


def test_nesting_up_to_the_bound_is_kept_as_sent():
    # The document, Events and the event are three levels: the field may add MAX_NESTING - 3.
    depth = _defaults.MAX_NESTING - 3
    body = _with_deep_field({"DocumentIncarnation": 3, "Events": [raw()]}, depth)
    scheduled = _event.ScheduledEvents(_event.parse_document(body))
    assert scheduled.warnings == []
    assert json.dumps(scheduled.events[0]["nested"]) == "[" * depth + "]" * depth
    deeper = _event.ScheduledEvents(_event.parse_document(_with_deep_field(
        {"DocumentIncarnation": 3, "Events": [raw()]}, depth + 1)))
    assert "nested" not in deeper.events[0] and "nests deeper" in deeper.warnings[0]


def test_brackets_inside_strings_do_not_count_as_nesting():
    description = "[" * 5000 + "{" * 5000 + " \\\" ]"
    scheduled = _event.ScheduledEvents(_event.parse_document(json.dumps(
        {"DocumentIncarnation": 3, "Events": [raw(Description=description)]})))
    assert scheduled.warnings == [] and scheduled.events[0]["description"] == description


def test_unpaired_surrogates_become_u_fffd_with_a_warning_and_pairs_stay():
    body = json.dumps({"DocumentIncarnation": 3, "Events": [
        raw(Description=u"Host \ud800 server \udfff", Resources=[u"web_0", u"web_\udc80"],
            **{u"Extra\ud800": {u"note": u"\ud83d\ude00 \ud83d"}}),
        raw(OTHER_ID, Description=u"fine \ud83d\ude00")]})
    scheduled = _event.ScheduledEvents(_event.parse_document(body))
    first, second = scheduled.events
    assert first["description"] == u"Host \ufffd server \ufffd"
    assert first["resources"] == [u"web_0", u"web_\ufffd"]
    assert first[u"extra\ufffd"] == {u"note": u"\U0001F600 \ufffd"}
    assert second["description"] == u"fine \U0001F600"
    assert scheduled.warnings == [
        "event #1 (EventId %s): %s holds unpaired surrogates (\\ud800-\\udfff, not text); each became U+FFFD."
        % (GOOD_ID, name) for name in ("'Resources'", "'Description'", repr(u"Extra\ufffd"))]
    # Every string the document holds can now be written as UTF-8.
    json.dumps([scheduled.document, scheduled.events], ensure_ascii=False).encode("utf-8")


def test_an_imds_error_text_with_an_unpaired_surrogate_is_text():
    assert _imds._imds_error_text(b'{"error": "Bad request \\ud800"}') == u"Bad request \ufffd"
    assert _imds._imds_error_text(("{\"error\": %s}" % ("[" * 100000 + "]" * 100000)).encode())
