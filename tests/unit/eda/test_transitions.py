# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared transition rule (plugins/module_utils/_transitions.py), with no I/O."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event, _transitions
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import (
    GONE_AFTER_MISSING_POLLS, TRANSITIONS, TransitionTracker)

A = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
B = "F020BA2E-3BDD-4B1A-B4C6-7A1CE3F7C2A1"


def event(event_id=A, status="Scheduled", resources=("web_1",), event_type="Reboot"):
    return {"event_id": event_id, "event_type": event_type, "event_status": status, "resources": list(resources),
            "not_before": "2026-01-01T00:15:00Z" if status == "Scheduled" else None}


def doc(incarnation, *events):
    return {"incarnation": incarnation, "events": list(events)}


def kinds(transitions):
    return [(t["type"], t["scheduled_event"]["event_id"]) for t in transitions]


def test_the_interface_other_code_relies_on():
    assert GONE_AFTER_MISSING_POLLS == 2
    assert TRANSITIONS == ("scheduled", "started", "ended", "cancelled")


def test_scheduled_then_started_then_ended_with_every_field():
    tracker = TransitionTracker("web_1")
    [first] = tracker.observe(doc(1, event()))
    assert first == {"type": "scheduled", "scheduled_event": event(), "document_incarnation": 1,
                     "resource_name": "web_1", "affects_this_host": True, "seen_scheduled": True,
                     "auto_approved": False, "started_before_seen": False}
    assert tracker.observe(doc(1, event())) == []
    [started] = tracker.observe(doc(2, event(status="Started")))
    assert (started["type"], started["scheduled_event"]["event_status"], started["seen_scheduled"]) == (
        "started", "Started", True)
    [ended] = tracker.observe(doc(3))
    assert (ended["type"], ended["document_incarnation"], ended["scheduled_event"]["event_status"]) == (
        "ended", 3, "Started")


def test_an_event_first_seen_started_emits_started_only_and_says_it_was_never_seen_scheduled():
    tracker = TransitionTracker("web_1")
    [started] = tracker.observe(doc(1, event(status="Started", event_type="Preempt")))
    assert started["type"] == "started" and started["seen_scheduled"] is False
    assert kinds(tracker.observe(doc(2))) == [("ended", A)]


def test_gone_while_never_started_is_cancelled():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event()))
    [cancelled] = tracker.observe(doc(2))
    assert cancelled["type"] == "cancelled" and cancelled["seen_scheduled"] is True


def test_one_document_without_the_event_at_the_same_incarnation_is_not_the_end():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(5, event(status="Started")))
    assert tracker.observe(doc(5)) == []
    assert tracker.observe(doc(5, event(status="Started"))) == []     # back: the count starts again
    assert tracker.observe(doc(5)) == []
    assert kinds(tracker.observe(doc(5))) == [("ended", A)]


def test_without_incarnations_two_documents_in_a_row_decide():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(None, event()))
    assert tracker.observe(doc(None)) == []
    assert kinds(tracker.observe(doc(None))) == [("cancelled", A)]


def test_gone_after_missing_polls_is_configurable_and_checked():
    tracker = TransitionTracker("web_1", gone_after_missing_polls=3)
    tracker.observe(doc(1, event()))
    assert tracker.observe(doc(1)) == [] and tracker.observe(doc(1)) == []
    assert kinds(tracker.observe(doc(1))) == [("cancelled", A)]
    for bad in (0, -1, 1.5, True, "2", 10 ** 6):
        with pytest.raises(ValueError, match="gone_after_missing_polls"):
            TransitionTracker(gone_after_missing_polls=bad)


def test_emit_existing_false_remembers_the_first_document_without_events_then_follows_them():
    tracker = TransitionTracker("web_1", emit_existing=False)
    assert tracker.observe(doc(1, event(), event(B, status="Started"))) == []
    assert tracker.observe(doc(2, event(status="Started"), event(B, status="Started"))) == [
        {"type": "started", "scheduled_event": event(status="Started"), "document_incarnation": 2,
         "resource_name": "web_1", "affects_this_host": True, "seen_scheduled": True,
         "auto_approved": False, "started_before_seen": False}]
    assert kinds(tracker.observe(doc(3))) == [("ended", A), ("ended", B)]
    # A new event after the first document is announced.
    assert kinds(tracker.observe(doc(4, event("0E0E0E0E-0000-4000-8000-000000000001")))) == [
        ("scheduled", "0E0E0E0E-0000-4000-8000-000000000001")]


def test_event_ids_are_compared_without_case():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event(A)))
    assert tracker.observe(doc(2, event(A.lower(), status="Started")))[0]["type"] == "started"
    assert tracker.observe(doc(2, event(A.lower(), status="Started"))) == []


def test_an_event_that_comes_back_is_not_scheduled_again_but_can_still_start_and_end():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event()))
    assert kinds(tracker.observe(doc(2))) == [("cancelled", A)]
    assert tracker.observe(doc(3, event())) == []
    assert kinds(tracker.observe(doc(4, event(status="Started")))) == [("started", A)]
    assert kinds(tracker.observe(doc(5))) == [("ended", A)]
    assert tracker.observe(doc(6, event(status="Started"))) == []
    assert tracker.observe(doc(7)) == []


def test_a_started_event_seen_scheduled_again_is_not_scheduled_anew():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event(status="Started")))
    assert tracker.observe(doc(2, event())) == []


def test_affects_this_host_is_an_exact_match_and_follows_the_event_annotation():
    tracker = TransitionTracker("web_1")
    annotated = dict(event(resources=["web_10"]), affects_this_host=True, seconds_to_not_before=12.5)
    [transition] = tracker.observe(doc(1, annotated))
    assert transition["affects_this_host"] is False
    assert transition["scheduled_event"]["affects_this_host"] is False
    assert transition["scheduled_event"]["seconds_to_not_before"] == 12.5
    [nameless] = TransitionTracker(None).observe(doc(1, event()))
    assert nameless["affects_this_host"] is False and nameless["resource_name"] is None


def test_events_without_a_readable_event_id_are_left_out():
    tracker = TransitionTracker("web_1")
    transitions = tracker.observe(doc(1, event(None), event(""), event("   "), "not an event", event(B)))
    assert kinds(transitions) == [("scheduled", B)]
    assert list(tracker.records) == [B.lower()]


def test_a_stable_order_document_order_first_then_gone_events_by_event_id():
    tracker = TransitionTracker("web_1")
    assert kinds(tracker.observe(doc(1, event(B), event(A)))) == [("scheduled", B), ("scheduled", A)]
    assert kinds(tracker.observe(doc(2))) == [("cancelled", A), ("cancelled", B)]


def test_the_client_s_document_object_is_read_as_well():
    scheduled = _event.ScheduledEvents({"DocumentIncarnation": 7, "Events": [{
        "EventId": A, "EventType": "Freeze", "ResourceType": "VirtualMachine", "Resources": ["web_1"],
        "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "",
        "EventSource": "Platform", "DurationInSeconds": 9}]})
    [transition] = TransitionTracker("web_1").observe(scheduled)
    assert transition["document_incarnation"] == 7
    assert transition["scheduled_event"]["event_type"] == "Freeze"
    assert transition["scheduled_event"]["duration_in_seconds"] == 9


@pytest.mark.parametrize("bad, field", [
    ({"incarnation": -1, "events": []}, "document_incarnation"),
    ({"incarnation": True, "events": []}, "document_incarnation"),
    ({"incarnation": 1, "events": None}, "events"),
    ({"incarnation": 1}, "events"),
])
def test_a_document_it_cannot_read_is_refused_naming_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        TransitionTracker().observe(bad)


def test_bad_constructor_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match="resource_name"):
        TransitionTracker(resource_name=3)
    with pytest.raises(ValueError, match="emit_existing"):
        TransitionTracker(emit_existing="no")


def test_snapshot_is_json_and_restore_goes_on_where_it_stopped():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event(), event(B, status="Started")))
    assert kinds(tracker.observe(doc(1, event(status="Started")))) == [("started", A)]   # B missing once
    data = json.loads(json.dumps(tracker.snapshot()))
    restored = TransitionTracker.restore(data)
    assert restored.resource_name == "web_1"
    assert kinds(restored.observe(doc(1, event(status="Started")))) == [("ended", B)]
    assert kinds(restored.observe(doc(3))) == [("ended", A)]
    # kwargs win over the snapshot
    assert TransitionTracker.restore(data, resource_name="web_2").resource_name == "web_2"


def test_restore_keeps_emit_existing_from_muting_a_tracker_that_already_read_documents():
    tracker = TransitionTracker("web_1", emit_existing=False)
    tracker.observe(doc(1))
    restored = TransitionTracker.restore(tracker.snapshot(), emit_existing=False)
    assert kinds(restored.observe(doc(2, event()))) == [("scheduled", A)]


def _snapshot():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, event()))
    tracker.observe(doc(2))
    return tracker.snapshot()


@pytest.mark.parametrize("change, field", [
    (lambda s: s.update(version=2), "version"),
    (lambda s: s.update(documents_seen=-1), "documents_seen"),
    (lambda s: s.update(records=[]), "records"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].update(emitted=["done"]), "emitted"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].update(emitted=["cancelled", "cancelled"]),
     "emitted"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].update(gone="yes"), "gone"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].update(missing_polls=-2), "missing_polls"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].update(seen_incarnation="1"),
     "seen_incarnation"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"].pop("seen_started"), "seen_started"),
    (lambda s: s["records"]["c7061bac-afdc-4513-b24b-aa5f13a16123"]["event"].update(event_id=B), "event_id"),
    (lambda s: s["records"].update(other="x"), "records\\['other'\\]"),
    (lambda s: s.update(gone_order=[]), "gone_order"),
])
def test_restore_refuses_a_snapshot_it_cannot_trust_naming_the_field(change, field):
    data = _snapshot()
    change(data)
    with pytest.raises(ValueError, match=field):
        TransitionTracker.restore(data)
    with pytest.raises(ValueError, match="JSON object"):
        TransitionTracker.restore([])


def test_gone_events_are_remembered_up_to_a_bound():
    tracker = TransitionTracker("web_1")
    total = _transitions.REMEMBER_GONE_EVENTS + 5
    ids = ["%08X-0000-4000-8000-000000000000" % i for i in range(total)]
    for number, event_id in enumerate(ids):
        tracker.observe(doc(2 * number + 1, event(event_id)))
        tracker.observe(doc(2 * number + 2))
    assert len(tracker.records) == _transitions.REMEMBER_GONE_EVENTS
    assert ids[0].lower() not in tracker.records and ids[-1].lower() in tracker.records


# -- random sequences ----------------------------------------------------------------------------

IDS = [A, B, "0E0E0E0E-0000-4000-8000-000000000001"]
DOCUMENTS = st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.sampled_from(IDS),
                                                                 st.sampled_from(["Scheduled", "Started"])),
                                                       max_size=3)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS, st.booleans())
def test_random_sequences_keep_the_rule(steps, emit_existing):
    tracker = TransitionTracker("web_1", emit_existing=emit_existing)
    incarnation = 0
    emitted = {}
    ever_started = set()
    for number, (new_incarnation, present) in enumerate(steps):
        incarnation += 1 if new_incarnation else 0
        events = [event(event_id, status) for event_id, status in present]
        transitions = tracker.observe(doc(incarnation, *events))
        if number == 0 and not emit_existing:
            assert transitions == []
        for event_id, status in present:
            if status == "Started":
                ever_started.add(event_id)
        for transition in transitions:
            key = transition["scheduled_event"]["event_id"]
            kinds_so_far = emitted.setdefault(key, [])
            # Each type at most once per event; scheduled only ever first; ended only after a Started.
            assert transition["type"] not in kinds_so_far
            if transition["type"] == "scheduled":
                assert kinds_so_far == []
            if transition["type"] == "ended":
                assert key in ever_started
            if transition["type"] == "cancelled":
                assert "started" not in kinds_so_far
            kinds_so_far.append(transition["type"])
        # Nothing announced as gone is in this document.
        ids_here = set(event_id for event_id, _status in present)
        assert not [t for t in transitions if t["type"] in ("ended", "cancelled")
                    and t["scheduled_event"]["event_id"] in ids_here]
        # The snapshot round-trips through JSON at every step.
        tracker = TransitionTracker.restore(json.loads(json.dumps(tracker.snapshot())), emit_existing=emit_existing)


# -- an event first seen Started: the Scheduled Events Policy, or started before it was seen -------

def sourced(source, **kwargs):
    result = event(**kwargs)
    result["event_source"] = source
    return result


@pytest.mark.parametrize("source, seen_before, status, expected", [
    ("User", False, "Started", _transitions.AUTO_APPROVED),
    ("Platform", False, "Started", _transitions.STARTED_BEFORE_SEEN),
    (None, False, "Started", _transitions.STARTED_BEFORE_SEEN),
    ("User", True, "Started", None),
    ("User", False, "Scheduled", None),
])
def test_unseen_start_is_the_one_rule(source, seen_before, status, expected):
    assert _transitions.unseen_start(sourced(source, status=status), seen_before) == expected


def test_a_user_event_first_seen_started_is_marked_auto_approved_on_its_started_and_ended():
    tracker = TransitionTracker("web_1")
    [started] = tracker.observe(doc(1, sourced("User", status="Started")))
    assert started["type"] == "started" and started["auto_approved"] is True
    assert started["started_before_seen"] is False and started["seen_scheduled"] is False
    [ended] = tracker.observe(doc(2))
    assert ended["type"] == "ended" and ended["auto_approved"] is True


def test_a_user_event_seen_scheduled_then_started_is_not_auto_approved():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, sourced("User")))
    [started] = tracker.observe(doc(2, sourced("User", status="Started")))
    assert started["type"] == "started" and started["auto_approved"] is False
    assert started["started_before_seen"] is False


def test_a_platform_event_first_seen_started_only_started_before_it_was_seen():
    tracker = TransitionTracker("web_1")
    [started] = tracker.observe(doc(1, sourced("Platform", status="Started")))
    assert started["auto_approved"] is False and started["started_before_seen"] is True


def test_a_restored_tracker_does_not_take_a_known_event_as_first_seen_and_reads_older_snapshots():
    tracker = TransitionTracker("web_1")
    tracker.observe(doc(1, sourced("User")))
    data = json.loads(json.dumps(tracker.snapshot()))
    for record in data["records"].values():
        del record["unseen_start"]          # as a snapshot written before the field existed
    again = TransitionTracker.restore(data)
    [started] = again.observe(doc(2, sourced("User", status="Started")))
    assert started["auto_approved"] is False
