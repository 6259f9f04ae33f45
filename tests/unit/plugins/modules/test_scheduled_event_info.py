"""scheduled_event_info: reading, filtering, annotating, waiting for a change, and failing cleanly."""

import re
import socket

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_info as info

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import READ_TIMEOUT, answer, fail
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    check_documented_options, check_examples_use_fqcn, check_result_against_return_doc, doc_answer, document,
    name_answer, raw_event, recap, run_examples, run_module)

A = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
B = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"
C = "11111111-2222-3333-4444-555555555555"
NAME_PATH = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
EVENTS_PATH = "/metadata/scheduledevents?api-version=2020-07-01"

# Reboot of web_0 in 15 min, Freeze of web_1 (same availability set) in 5 min, a started Redeploy of web_0.
REBOOT = raw_event(A, "Reboot", resources=("web_0", "web_1"), not_before="Mon, 11 Apr 2022 22:15:00 GMT")
FREEZE = raw_event(B, "Freeze", resources=("web_1",), not_before="Mon, 11 Apr 2022 22:05:00 GMT", duration=5,
                   source="User")
STARTED = raw_event(C, "Redeploy", status="Started", resources=("web_0",))
GONE = answer(410, {"error": "Gone"}, reason="Gone")
READ_TIMEOUT_STEP = fail(READ_TIMEOUT)


def run(args=None, steps=(), **kwargs):
    return run_module(info, args or {}, steps, **kwargs)


# -- what it returns ---------------------------------------------------------------------------

def test_returns_document_and_annotated_events_sorted_by_not_before():
    outcome = run({}, [name_answer("web_0"), doc_answer(REBOOT, FREEZE, STARTED, incarnation=7)])
    result = outcome.result
    assert not outcome.failed and result["changed"] is False
    assert outcome.requests == [("GET", NAME_PATH), ("GET", EVENTS_PATH)]
    assert result["document_incarnation"] == 7
    assert result["document"] == document(REBOOT, FREEZE, STARTED, incarnation=7)
    assert result["resource_name"] == "web_0" and result["api_version"] == "2020-07-01"
    assert [e["event_id"] for e in result["events"]] == [C, B, A]
    started, freeze, reboot = result["events"]
    assert (started["not_before"], started["seconds_to_not_before"], started["affects_this_host"]) == (None, None, True)
    assert (freeze["not_before"], freeze["seconds_to_not_before"], freeze["affects_this_host"]) == (
        "2022-04-11T22:05:00Z", 300.0, False)
    assert (reboot["seconds_to_not_before"], reboot["affects_this_host"], reboot["resources"]) == (
        900.0, True, ["web_0", "web_1"])
    assert (freeze["event_source"], freeze["duration_in_seconds"]) == ("User", 5)
    assert (result["watched"], result["polls"]) == (0.0, 1)
    check_result_against_return_doc(info, result)


def test_resource_name_option_is_used_without_asking_imds():
    outcome = run({"resource_name": "web_1"}, [doc_answer(REBOOT, FREEZE)])
    assert outcome.requests == [("GET", EVENTS_PATH)]
    assert [e["affects_this_host"] for e in outcome.result["events"]] == [True, True]
    assert outcome.result["resource_name"] == "web_1"


def test_exact_name_match_only():
    outcome = run({"resource_name": "web_1", "this_host_only": True},
                  [doc_answer(raw_event(A, resources=("web_10", "web_11")))])
    assert outcome.result["events"] == []
    assert len(outcome.result["document"]["Events"]) == 1


def test_event_of_another_vm_in_the_availability_set_is_shown_but_not_this_hosts():
    outcome = run({"resource_name": "web_0"}, [doc_answer(FREEZE)])
    assert [(e["event_id"], e["affects_this_host"]) for e in outcome.result["events"]] == [(B, False)]


def test_this_host_only_drops_events_of_other_vms():
    outcome = run({"resource_name": "web_0", "this_host_only": True}, [doc_answer(REBOOT, FREEZE, STARTED)])
    assert [e["event_id"] for e in outcome.result["events"]] == [C, A]
    assert len(outcome.result["document"]["Events"]) == 3


@pytest.mark.parametrize("filters, expected", [
    ({"event_types": ["Freeze", "Redeploy"]}, [C, B]),
    ({"event_statuses": ["Scheduled"]}, [B, A]),
    ({"event_statuses": ["Started"]}, [C]),
    ({"event_sources": ["User"]}, [B]),
    ({"event_ids": [A.lower(), C]}, [C, A]),
    ({"event_types": ["Reboot"], "event_sources": ["User"]}, []),
])
def test_filters(filters, expected):
    args = dict(filters, resource_name="web_0")
    outcome = run(args, [doc_answer(REBOOT, FREEZE, STARTED)])
    assert [e["event_id"] for e in outcome.result["events"]] == expected


def test_event_id_is_returned_exactly_as_imds_spelled_it():
    outcome = run({"resource_name": "web_0", "event_ids": [A.lower()]}, [doc_answer(REBOOT)])
    assert outcome.result["events"][0]["event_id"] == A


def test_unknown_event_type_is_kept_with_a_warning():
    odd = raw_event(A, "Hibernate")
    outcome = run({"resource_name": "web_0", "event_types": ["Hibernate"]}, [doc_answer(odd, FREEZE)])
    assert [e["event_type"] for e in outcome.result["events"]] == ["Hibernate"]
    assert len(outcome.warnings) == 1 and "'Hibernate'" in outcome.warnings[0]


def test_check_mode_reads_the_same():
    steps = [name_answer("web_0"), doc_answer(REBOOT)]
    normal = run({}, list(steps)).result
    checked = run({}, list(steps), check_mode=True).result
    assert checked == normal and checked["changed"] is False


@pytest.mark.parametrize("version", _defaults.API_VERSIONS)
def test_each_api_version_is_requested_and_read(version):
    raw = {"EventId": A, "EventType": "Freeze", "EventStatus": "Scheduled", "ResourceType": "VirtualMachine",
           "Resources": ["_web_0" if version == "2017-03-01" else "web_0"],
           "NotBefore": "Mon, 11 Apr 2022 22:15:00 GMT"}
    outcome = run({"api_version": version, "resource_name": "web_0"}, [doc_answer(raw)])
    assert outcome.requests == [("GET", "/metadata/scheduledevents?api-version=%s" % version)]
    event = outcome.result["events"][0]
    assert event["resources"] == ["web_0"] and event["affects_this_host"] is True
    assert (event["description"], event["event_source"], event["duration_in_seconds"]) == (None, None, None)
    assert outcome.result["api_version"] == version


# -- retries (the shared client's policy, seen through the module) ----------------------------

def test_410_then_429_are_retried_until_a_document_arrives():
    throttled = answer(429, {"error": "Too many requests"}, headers=[("Retry-After", "2")], reason="Too Many Requests")
    outcome = run({"resource_name": "web_0"}, [GONE, GONE, throttled, doc_answer(REBOOT)])
    assert not outcome.failed
    assert outcome.result["events"][0]["event_id"] == A
    assert outcome.clock.sleeps == [1.0, 1.0, 2.0]


# -- errors ------------------------------------------------------------------------------------

def test_malformed_event_id_fails_before_any_request():
    outcome = run({"event_ids": ["not-a-guid"]})
    assert outcome.failed and "'not-a-guid'" in outcome.result["msg"] and "GUID" in outcome.result["msg"]
    assert outcome.requests == []


def test_empty_filter_list_fails_with_the_fix():
    outcome = run({"event_types": []})
    assert outcome.failed and "Leave event_types out" in outcome.result["msg"]


def test_imds_400_fails_with_url_status_and_imds_text():
    bad = answer(400, {"error": "Bad request. api-version is invalid or was not specified in the request."},
                 reason="Bad Request")
    outcome = run({"resource_name": "web_0"}, [bad])
    result = outcome.result
    assert outcome.failed
    assert result["status"] == 400 and result["url"] == "http://127.0.0.1:9" + EVENTS_PATH
    assert result["imds_error"].startswith("Bad request. api-version is invalid")
    assert "api-version is invalid" in result["msg"] and "api_version" in result["msg"]
    assert len(outcome.requests) == 1


def test_nothing_listening_means_not_an_azure_vm():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = "http://127.0.0.1:%d" % port
    outcome = run({"imds_url": url}, real_connections=True)
    assert outcome.failed
    assert outcome.result["msg"].startswith("no Instance Metadata Service at %s: is this an Azure VM?" % url)
    assert outcome.result["status"] is None
    assert outcome.clock.now - 1000.0 <= _defaults.CONNECT_RETRY_WINDOW + 1.0


def test_vm_name_404_goes_on_without_a_name_and_warns():
    not_found = answer(404, {"error": "Not found"}, reason="Not Found")
    outcome = run({}, [not_found, doc_answer(REBOOT)])
    assert not outcome.failed
    assert outcome.result["resource_name"] is None
    assert outcome.result["events"][0]["affects_this_host"] is False
    assert "set resource_name" in outcome.warnings[0].lower()


def test_vm_name_404_fails_when_this_host_only_needs_it():
    not_found = answer(404, {"error": "Not found"}, reason="Not Found")
    outcome = run({"this_host_only": True}, [not_found])
    assert outcome.failed and outcome.result["status"] == 404
    assert "this_host_only needs this VM's name" in outcome.result["msg"]


def test_unreadable_not_before_is_a_warning_and_the_event_is_still_reported():
    odd = dict(REBOOT, NotBefore="next Tuesday")
    outcome = run({"resource_name": "web_0"}, [doc_answer(odd)])
    assert not outcome.failed
    assert [e["event_id"] for e in outcome.result["events"]] == [REBOOT["EventId"]]
    assert outcome.result["events"][0]["not_before"] is None
    assert any("NotBefore" in w and "'next Tuesday'" in w for w in outcome.warnings), outcome.warnings


@pytest.mark.parametrize("args, text", [
    ({"max_wait": 5}, "Set changed_since"),
    ({"max_wait": -1, "changed_since": 1}, "max_wait must be a number from 0 to 86400 (seconds), got -1.0."),
    ({"poll_interval": 0, "changed_since": 1, "max_wait": 5},
     "poll_interval must be a number from 0.2 to 86400 (seconds), got 0.0."),
])
def test_bad_watch_options_fail_before_any_request(args, text):
    outcome = run(dict(args, resource_name="web_0"))
    assert outcome.failed and text in outcome.result["msg"]
    assert outcome.requests == []


# -- waiting for a change (changed_since / max_wait) -------------------------------------------

def watch(steps, changed_since=1, max_wait=10.0, poll_interval=1.0, **args):
    args.update(resource_name="web_0", changed_since=changed_since, max_wait=max_wait, poll_interval=poll_interval)
    return run(args, steps)


def test_watch_returns_as_soon_as_the_incarnation_changes():
    outcome = watch([doc_answer(incarnation=1), doc_answer(incarnation=1), doc_answer(REBOOT, incarnation=4)])
    result = outcome.result
    assert (result["document_incarnation"], result["polls"], result["watched"]) == (4, 3, 2.0)
    assert outcome.clock.sleeps == [1.0, 1.0]
    assert result["events"][0]["event_id"] == A


def test_watch_returns_at_once_when_the_first_read_differs():
    outcome = watch([doc_answer(incarnation=2)])
    assert (outcome.result["polls"], outcome.result["watched"]) == (1, 0.0)
    assert outcome.clock.sleeps == []


def first_read_watch(steps, state="absent", max_wait=10.0):
    return run({"resource_name": "web_0", "watch_unless_state": state, "max_wait": max_wait, "poll_interval": 1.0},
               steps)


def test_watch_unless_state_returns_the_first_read_at_once_when_the_state_holds():
    outcome = first_read_watch([doc_answer(incarnation=3)])
    result = outcome.result
    assert (result["document_incarnation"], result["polls"], result["watched"], result["first_read"]) == (3, 1, 0.0, None)
    assert outcome.clock.sleeps == [] and len(outcome.requests) == 1
    check_result_against_return_doc(info, result)


def test_watch_unless_state_watches_on_from_the_first_read_and_returns_it():
    outcome = first_read_watch([doc_answer(REBOOT, incarnation=3), doc_answer(REBOOT, incarnation=3),
                                doc_answer(incarnation=4)])
    result = outcome.result
    assert (result["document_incarnation"], result["events"], result["polls"], result["watched"]) == (4, [], 3, 2.0)
    assert result["first_read"]["document_incarnation"] == 3
    assert [e["event_id"] for e in result["first_read"]["events"]] == [A]
    assert outcome.clock.sleeps == [1.0, 1.0]
    check_result_against_return_doc(info, result)


@pytest.mark.parametrize("state, holds", [("present", True), ("started", False)])
def test_watch_unless_state_checks_the_matching_events_of_the_first_read(state, holds):
    outcome = first_read_watch([doc_answer(REBOOT, incarnation=3)] * 3, state=state, max_wait=1.5)
    assert (outcome.result["first_read"] is None) == holds
    # Not holding: the first read, a poll_interval, one more read, then the rest of max_wait.
    assert outcome.result["polls"] == (1 if holds else 2)
    assert outcome.clock.sleeps == ([] if holds else [1.0, 0.5])


def test_changed_since_without_max_wait_reads_once():
    outcome = run({"resource_name": "web_0", "changed_since": 1}, [doc_answer(incarnation=1)])
    assert (outcome.result["document_incarnation"], outcome.result["polls"]) == (1, 1)


def test_watch_gives_up_after_max_wait_with_the_last_document():
    outcome = watch([doc_answer(incarnation=1)] * 3, max_wait=2.5)
    # No poll starts once max_wait is over: it could not be answered within it.
    assert (outcome.result["document_incarnation"], outcome.result["polls"], outcome.result["watched"]) == (1, 3, 2.5)
    assert outcome.clock.sleeps == [1.0, 1.0, 0.5]


def test_watch_polls_through_errors_after_a_document():
    bad = answer(400, {"error": "Bad request"}, reason="Bad Request")
    steps = [doc_answer(incarnation=1), bad, answer(500, b"", reason="Internal Server Error"), READ_TIMEOUT_STEP,
             doc_answer(incarnation=2)]
    outcome = watch(steps, max_wait=30.0)
    assert not outcome.failed
    # The third read retries the 500 and the timeout itself, within the time left.
    assert (outcome.result["document_incarnation"], outcome.result["polls"]) == (2, 3)


def test_watch_returns_the_last_document_when_later_polls_fail():
    steps = [doc_answer(REBOOT, incarnation=1)] + [answer(400, {"error": "Bad request"}, reason="Bad Request")] * 2
    outcome = watch(steps, max_wait=2.5)
    assert not outcome.failed
    assert (outcome.result["document_incarnation"], outcome.result["polls"]) == (1, 3)
    assert outcome.result["events"][0]["event_id"] == A


def test_watch_without_any_document_fails_with_the_last_error_within_max_wait():
    busy = answer(503, {"error": "busy"}, reason="Service Unavailable")
    outcome = watch([busy] * 200, max_wait=4.0)
    assert outcome.failed and outcome.result["status"] == 503
    assert "did not succeed within max_wait" in outcome.result["msg"]
    assert outcome.clock.now - 1000.0 <= 4.0
    read_timeouts = [value for kind, value in outcome.transport.log if kind == "settimeout"]
    assert read_timeouts and max(read_timeouts) <= 4.0


def test_watch_fails_at_once_when_nothing_listens():
    steps = [fail(ConnectionRefusedError(111, "Connection refused"), on="connect")] * 100
    outcome = watch(steps, max_wait=600.0)
    assert outcome.failed and "is this an Azure VM?" in outcome.result["msg"]
    assert outcome.clock.now - 1000.0 <= _defaults.CONNECT_RETRY_WINDOW + 1.0


def test_watch_first_request_timeout_is_cut_to_the_time_left():
    outcome = watch([doc_answer(incarnation=2)], max_wait=3.0, request_timeout=120.0)
    assert ("settimeout", 3.0) in outcome.transport.log
    assert not [v for k, v in outcome.transport.log if k == "settimeout" and v > 3.0]


# -- documentation against code ----------------------------------------------------------------

def test_documented_options_match_the_argspec():
    check_documented_options(info)


def test_examples_are_yaml_tasks_with_fqcn():
    check_examples_use_fqcn(info)


# -- end to end: the EXAMPLES, as they are, against the mock -----------------------------------

def test_examples_run_against_the_mock(tmp_path):
    # Events arrive every 2 seconds of real time (speed 10, one every 20 simulated seconds), so
    # the example that blocks until the document changes returns quickly.
    scenario = {"fleet": {"default_vm": "web_0",
                          "groups": [{"name": "avset", "kind": "availability_set", "vms": ["web_0", "web_1"]}]},
                "speed": 10,
                "events": [{"at": 20 * i, "event_type": ("Reboot", "Freeze")[i % 2], "resources": ["web_0"],
                            "notice": 900} for i in range(1, 30)]}
    with start_mock(rate_limit=True) as mock:
        mock.control("POST", "scenario", scenario)
        mock.control("POST", "events", {"event_type": "Redeploy", "resources": ["web_0"], "notice": 600})
        completed = run_examples(info, mock.url, tmp_path)
        audit = mock.control("GET", "audit")
    assert completed.returncode == 0, completed.stdout
    counts = recap(completed.stdout)
    assert counts["failed"] == 0 and counts["ok"] == 6, completed.stdout
    assert "Draining web_0 before" in completed.stdout
    assert re.search(r'"msg": "Incarnation \d+ after [0-9.]+ s"', completed.stdout), completed.stdout
    assert any("/metadata/scheduledevents" in r["path"] for r in audit["requests"])


def test_unreadable_not_before_beside_a_healthy_event_leaves_the_healthy_one_whole():
    outcome = run({"resource_name": "vm0"}, [doc_answer(raw_event(A, not_before="next tuesday"), raw_event(B))])
    assert not outcome.failed
    by_id = dict((e["event_id"], e) for e in outcome.result["events"])
    assert by_id[A]["not_before"] is None and by_id[B]["not_before"] is not None
    assert [w for w in outcome.warnings if "NotBefore" in w] == [
        "Scheduled Events document (incarnation 1): event #1 (EventId %s): NotBefore 'next tuesday' is not a date "
        "in RFC 1123 or ISO 8601 (no such format); read as null." % A]


# -- numbers and documents at the edge (issue 10) --------------------------------------------------

@pytest.mark.parametrize("option, value, text", [
    ("request_timeout", float("nan"), "request_timeout must be a number from 0.1 to 86400 (seconds), got nan."),
    ("request_timeout", 1e308, "request_timeout must be a number from 0.1 to 86400 (seconds), got 1e+308."),
    ("request_timeout", 0, "request_timeout must be a number from 0.1 to 86400 (seconds), got 0.0."),
    ("request_timeout", True, "request_timeout must be a number from 0.1 to 86400 (seconds), got True."),
    ("retry_timeout", float("nan"), "retry_timeout must be a number from 0 to 86400 (seconds), got nan."),
    ("retry_timeout", "-inf", "retry_timeout must be a number from 0 to 86400 (seconds), got '-inf'."),
    ("max_wait", float("inf"), "max_wait must be a number from 0 to 86400 (seconds), got inf."),
    ("poll_interval", 0.001, "poll_interval must be a number from 0.2 to 86400 (seconds), got 0.001."),
    ("poll_interval", float("nan"), "poll_interval must be a number from 0.2 to 86400 (seconds), got nan."),
    ("poll_interval", False, "poll_interval must be a number from 0.2 to 86400 (seconds), got False."),
    ("changed_since", -1, "changed_since must be a whole number from 0 to 9223372036854775807, got -1."),
    ("changed_since", 2 ** 64, "changed_since must be a whole number from 0 to 9223372036854775807, got "
                               "18446744073709551616."),
])
def test_bad_numbers_are_refused_before_any_request_with_the_option_and_range(option, value, text):
    outcome = run({"resource_name": "web_0", option: value})
    assert outcome.failed and outcome.requests == []
    assert outcome.result["msg"] == text


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://127.0.0.1:99999", "http://[::1", "http://a b",
                                 "http://127.0.0.1\x07"])
def test_a_bad_imds_url_is_a_clean_failure_before_any_request(url):
    outcome = run({"resource_name": "web_0", "imds_url": url})
    assert outcome.failed and outcome.requests == []
    assert outcome.result["msg"].startswith("imds_url ")


def test_a_mix_of_malformed_events_is_reported_with_warnings_never_an_exception():
    events = [dict(raw_event(A), EventId=1, Resources=7), raw_event(B), dict(raw_event(A), Resources="web_0"),
              dict(raw_event(A), NotBefore=5, DurationInSeconds=True)]
    outcome = run({"resource_name": "web_0"}, [doc_answer(*events)])
    assert not outcome.failed
    assert len(outcome.result["events"]) == 4
    assert sorted(e["affects_this_host"] for e in outcome.result["events"]) == [False, True, True, True]
    assert len(outcome.warnings) == 5, outcome.warnings
    check_result_against_return_doc(info, outcome.result)
