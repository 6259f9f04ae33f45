"""scheduled_event_approve: what is selected, what is posted (once), idempotence and errors."""

import json
import types

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_approve as approve

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import answer
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    check_documented_options, check_examples_use_fqcn, check_result_against_return_doc, doc_answer,
    name_answer, raw_event, recap, run_examples, run_module)

A = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
B = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"
C = "11111111-2222-3333-4444-555555555555"
D = "DDDDDDDD-2222-3333-4444-555555555555"
NAME_PATH = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
EVENTS_PATH = "/metadata/scheduledevents?api-version=2020-07-01"
OK = answer(200, b"")

REBOOT = raw_event(A, "Reboot", resources=("web_0", "web_1"))           # web_0 leads
FREEZE = raw_event(B, "Freeze", resources=("web_0",), duration=5, source="User")
STARTED = raw_event(C, "Redeploy", status="Started", resources=("web_0",))
OTHER = raw_event(D, "Reboot", resources=("web_1", "web_0"))           # web_1 leads
ELSEWHERE = raw_event(D, "Reboot", resources=("web_1", "web_2"))       # does not name web_0


def run(args=None, steps=(), **kwargs):
    return run_module(approve, args or {}, steps, **kwargs)


def start_requests(outcome):
    return [[r["EventId"] for r in body["StartRequests"]] for body in outcome.posted_bodies()]


# -- what it posts -----------------------------------------------------------------------------

def test_approves_every_scheduled_event_of_this_host_in_one_post():
    outcome = run({}, [name_answer("web_0"), doc_answer(REBOOT, FREEZE, STARTED, ELSEWHERE, incarnation=5), OK])
    result = outcome.result
    assert not outcome.failed and result["changed"] is True
    assert outcome.requests == [("GET", NAME_PATH), ("GET", EVENTS_PATH), ("POST", EVENTS_PATH)]
    assert start_requests(outcome) == [[A, B]]
    assert (result["approved"], result["already_started"], result["missing"], result["not_leader"]) == (
        [A, B], [C], [], [])
    assert sorted(e["event_id"] for e in result["events"]) == sorted([A, B, C])
    assert (result["document_incarnation"], result["resource_name"]) == (5, "web_0")
    check_result_against_return_doc(approve, result)


def test_ids_are_posted_as_imds_spells_them_not_as_given():
    outcome = run({"resource_name": "web_0", "event_ids": [A.lower()]}, [doc_answer(REBOOT, FREEZE), OK])
    assert start_requests(outcome) == [[A]]
    assert outcome.result["approved"] == [A] and outcome.result["missing"] == []


def test_already_started_is_not_a_change():
    outcome = run({"resource_name": "web_0"}, [doc_answer(STARTED)])
    assert outcome.result["changed"] is False and outcome.result["already_started"] == [C]
    assert outcome.posted_bodies() == []


def test_second_run_after_the_event_started_is_not_changed():
    first = run({"resource_name": "web_0", "event_ids": [A]}, [doc_answer(REBOOT), OK])
    started_now = dict(REBOOT, EventStatus="Started", NotBefore="")
    second = run({"resource_name": "web_0", "event_ids": [A]}, [doc_answer(started_now, incarnation=2)])
    assert first.result["changed"] is True and second.result["changed"] is False
    assert second.result["already_started"] == [A] and second.posted_bodies() == []


def test_nothing_selected_posts_nothing():
    outcome = run({"resource_name": "web_0"}, [doc_answer()])
    assert outcome.result["changed"] is False and outcome.result["approved"] == []
    assert outcome.requests == [("GET", EVENTS_PATH)]


def test_check_mode_reports_the_same_change_and_posts_nothing():
    steps = [doc_answer(REBOOT, FREEZE)]
    checked = run({"resource_name": "web_0"}, list(steps), check_mode=True)
    real = run({"resource_name": "web_0"}, list(steps) + [OK])
    assert checked.posted_bodies() == []
    assert checked.result == real.result and checked.result["changed"] is True


@pytest.mark.parametrize("filters, expected", [
    ({"event_types": ["Freeze"]}, [B]),
    ({"event_sources": ["Platform"]}, [A]),
    ({"event_statuses": ["Scheduled"]}, [A, B]),
    ({"event_ids": [B]}, [B]),
])
def test_filters_choose_what_is_approved(filters, expected):
    outcome = run(dict(filters, resource_name="web_0"), [doc_answer(REBOOT, FREEZE, STARTED), OK])
    assert start_requests(outcome) == [expected]


# -- this host, leaders --------------------------------------------------------------------------

def test_events_of_other_vms_are_left_alone_by_default():
    outcome = run({"resource_name": "web_0"}, [doc_answer(ELSEWHERE)])
    assert outcome.result["changed"] is False and outcome.posted_bodies() == []


def test_event_ids_of_other_vms_are_reported_not_this_host():
    outcome = run({"resource_name": "web_0", "event_ids": [D, A]}, [doc_answer(ELSEWHERE, REBOOT), OK])
    assert outcome.result["not_this_host"] == [D]
    assert start_requests(outcome) == [[A]]


def test_this_host_only_false_approves_events_of_other_vms():
    outcome = run({"resource_name": "web_0", "this_host_only": False}, [doc_answer(ELSEWHERE), OK])
    assert start_requests(outcome) == [[D]] and outcome.result["not_this_host"] == []


def test_leader_only_on_the_leader_approves():
    outcome = run({"resource_name": "web_0", "leader_only": True}, [doc_answer(REBOOT, OTHER), OK])
    assert start_requests(outcome) == [[A]]
    assert outcome.result["not_leader"] == [D] and outcome.result["changed"] is True


def test_leader_only_on_a_follower_changes_nothing():
    outcome = run({"resource_name": "web_1", "leader_only": True}, [doc_answer(REBOOT)])
    assert outcome.result["changed"] is False and outcome.result["not_leader"] == [A]
    assert outcome.posted_bodies() == []


@pytest.mark.parametrize("args, option", [({}, "this_host_only"),
                                          ({"this_host_only": False, "leader_only": True}, "leader_only")])
def test_vm_name_404_fails_when_an_option_needs_it(args, option):
    outcome = run(args, [answer(404, {"error": "Not found"}, reason="Not Found")])
    assert outcome.failed and outcome.result["status"] == 404
    assert "%s needs this VM's name: set resource_name" % option in outcome.result["msg"]
    assert outcome.posted_bodies() == []


def test_vm_name_404_is_tolerated_when_nothing_needs_it():
    outcome = run({"this_host_only": False}, [answer(404, {"error": "Not found"}, reason="Not Found"),
                                              doc_answer(REBOOT), OK])
    assert outcome.result["resource_name"] is None and start_requests(outcome) == [[A]]
    assert outcome.warnings


# -- missing ids -------------------------------------------------------------------------------

def test_missing_id_is_reported_and_does_not_fail():
    outcome = run({"resource_name": "web_0", "event_ids": [A, D.lower()]}, [doc_answer(REBOOT), OK])
    assert not outcome.failed
    assert outcome.result["missing"] == [D.lower()] and outcome.result["approved"] == [A]


def test_fail_on_missing_fails_before_approving_anything():
    outcome = run({"resource_name": "web_0", "event_ids": [A, D], "fail_on_missing": True}, [doc_answer(REBOOT)])
    assert outcome.failed and outcome.result["missing"] == [D]
    assert D in outcome.result["msg"] and "nothing was approved" in outcome.result["msg"]
    assert outcome.posted_bodies() == []


# -- errors and retries --------------------------------------------------------------------------

def test_malformed_event_id_fails_before_any_request():
    outcome = run({"event_ids": ["C7061BAC"]})
    assert outcome.failed and "'C7061BAC'" in outcome.result["msg"]
    assert outcome.requests == []


def test_imds_400_on_the_approval_fails_with_the_imds_text():
    bad = answer(400, {"error": "Bad request. Invalid EventId"}, reason="Bad Request")
    outcome = run({"resource_name": "web_0"}, [doc_answer(REBOOT), bad])
    result = outcome.result
    assert outcome.failed and result["status"] == 400 and result["imds_error"] == "Bad request. Invalid EventId"
    assert "Invalid EventId" in result["msg"] and result["url"].endswith(EVENTS_PATH)
    assert len(outcome.posted_bodies()) == 1


def test_410_and_429_on_the_approval_are_retried():
    gone = answer(410, {"error": "Gone"}, reason="Gone")
    throttled = answer(429, b"", headers=[("Retry-After", "1")], reason="Too Many Requests")
    outcome = run({"resource_name": "web_0"}, [doc_answer(REBOOT), gone, throttled, OK])
    assert not outcome.failed and outcome.result["changed"] is True
    assert start_requests(outcome) == [[A], [A], [A]]


def test_nothing_listening_means_not_an_azure_vm():
    steps = [("fail", ConnectionRefusedError(111, "Connection refused"), "connect", 0.0)] * 100
    outcome = run({"resource_name": "web_0"}, steps)
    assert outcome.failed and "is this an Azure VM?" in outcome.result["msg"]


# -- documentation against code ----------------------------------------------------------------

def test_documented_options_match_the_argspec():
    check_documented_options(approve)


def test_examples_are_yaml_tasks_with_fqcn():
    check_examples_use_fqcn(approve)


# -- end to end against the mock -----------------------------------------------------------------

AVSET = {"default_vm": "web_0",
         "groups": [{"name": "avset", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}


def test_approval_reaches_the_mock_as_one_post_and_starts_the_events():
    # Rate limiting off: the fake clock would let the client retry a 429 without waiting.
    with start_mock(fleet=AVSET, rate_limit=False) as mock:
        first = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_0", "web_1"]})["event_id"]
        second = mock.control("POST", "events", {"event_type": "Freeze", "resources": ["web_0"]})["event_id"]
        mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_2"]})
        outcome = run({"imds_url": mock.vm_url("web_0")}, real_connections=True)
        again = run({"imds_url": mock.vm_url("web_0")}, real_connections=True)
        audit = mock.control("GET", "audit")
    assert sorted(outcome.result["approved"]) == sorted([first, second])
    assert [(a["vm"], sorted(a["event_ids"])) for a in audit["approvals"]] == [("web_0", sorted([first, second]))]
    posts = [r for r in audit["requests"] if r["method"] == "POST" and "/metadata/" in r["path"]]
    assert len(posts) == 1
    assert again.result["changed"] is False and sorted(again.result["already_started"]) == sorted([first, second])


def test_examples_run_against_the_mock(tmp_path):
    with start_mock(fleet=AVSET) as mock:
        mine = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_0", "web_1"]})["event_id"]
        theirs = mock.control("POST", "events", {"event_type": "Redeploy", "resources": ["web_1", "web_0"]})["event_id"]
        elsewhere = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_1", "web_2"]})["event_id"]
        completed = run_examples(approve, mock.vm_url("web_0"), tmp_path)
        audit = mock.control("GET", "audit")
    assert completed.returncode == 0, completed.stdout
    counts = recap(completed.stdout)
    assert counts["failed"] == 0 and counts["changed"] == 1, completed.stdout
    assert [sorted(a["event_ids"]) for a in audit["approvals"]] == [sorted([mine, theirs])], audit["approvals"]
    not_leader = completed.stdout.split("group_approval.not_leader", 1)[1]
    assert elsewhere in not_leader and mine not in not_leader


# -- a document it cannot fully read (issue 10) --------------------------------------------------

def test_an_event_whose_event_id_cannot_be_read_is_never_approved_and_the_others_are():
    numeric = dict(raw_event(A, "Reboot", resources=("web_0",)), EventId=12345)
    not_a_guid = dict(raw_event(A, "Freeze", resources=("web_0",)), EventId="12345")
    outcome = run({"resource_name": "web_0"}, [doc_answer(numeric, not_a_guid, FREEZE), OK])
    result = outcome.result
    assert not outcome.failed and result["changed"]
    assert start_requests(outcome) == [[B]]
    assert result["approved"] == [B] and [e["event_id"] for e in result["events"]] == [B]
    refused = [w for w in outcome.warnings if w.startswith("Not approved:")]
    assert len(refused) == 2
    assert "EventId could not be read" in refused[0] and "EventId '12345' is not a GUID" in refused[1]
    assert any("event #1 (EventId 12345): EventId is not a string" in w for w in outcome.warnings)


def test_only_unreadable_events_post_nothing():
    numeric = dict(raw_event(A, "Reboot", resources=("web_0",)), EventId=7)
    outcome = run({"resource_name": "web_0"}, [doc_answer(numeric)])
    assert not outcome.failed and not outcome.result["changed"]
    assert outcome.posted_bodies() == [] and outcome.result["approved"] == []


def test_resources_as_one_string_names_this_vm():
    single = dict(raw_event(A, "Reboot"), Resources="web_0")
    outcome = run({"resource_name": "web_0"}, [doc_answer(single), OK])
    assert outcome.result["approved"] == [A]
    assert any("Resources is a single string" in w for w in outcome.warnings)


@pytest.mark.parametrize("option, value", [("request_timeout", float("nan")), ("retry_timeout", float("inf")),
                                           ("request_timeout", 1e308), ("request_timeout", 0),
                                           ("retry_timeout", -1), ("request_timeout", True), ("retry_timeout", "nan")])
def test_bad_numbers_are_refused_before_any_request(option, value):
    outcome = run({"resource_name": "web_0", option: value})
    assert outcome.failed and outcome.requests == []
    assert outcome.result["msg"].startswith("%s must be a number from " % option), outcome.result["msg"]
    assert "got %r." % (value,) in outcome.result["msg"] or "got %r." % (float(value),) in outcome.result["msg"]


# -- text that is not text (issue 22) --------------------------------------------------------------

def test_an_unpaired_surrogate_in_a_description_does_not_fail_the_approval_it_sent(tmp_path):
    # It used to POST the approval and then fail ("Refusing to deserialize an invalid UTF8 string
    # value"), so that the playbook believed nothing was approved.
    tasks = yaml.safe_dump([{"name": "Approve", "azure_imds.scheduled_events.scheduled_event_approve": {},
                             "register": "approval"},
                            {"name": "Show", "ansible.builtin.debug": {"var": "approval.events[0].description"}}])
    with start_mock(fleet=AVSET, rate_limit=False) as mock:
        view = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_0"]})
        event = raw_event(view["event_id"], "Reboot", resources=("web_0",), not_before=view["not_before_rfc1123"],
                          description=u"Host server \ud800 is undergoing maintenance.")
        mock.control("POST", "faults", {"kind": "status", "status": 200, "methods": ["GET"],
                                        "paths": ["scheduledevents"],
                                        "body": json.dumps({"DocumentIncarnation": 2, "Events": [event]})})
        completed = run_examples(types.SimpleNamespace(EXAMPLES=tasks, __name__="lone_surrogate"),
                                 mock.vm_url("web_0"), tmp_path)
        audit = mock.control("GET", "audit")
    assert [a["event_ids"] for a in audit["approvals"]] == [[view["event_id"]]]
    counts = recap(completed.stdout)
    assert completed.returncode == 0 and counts["failed"] == 0 and counts["changed"] == 1, completed.stdout
    assert u"Host server \ufffd is undergoing maintenance." in completed.stdout
