"""fleet_event_approve: state read first, approved/already split, 409, unknown ids, check mode, bad ids."""

from ansible_collections.azure_imds.scheduled_events.plugins.modules import fleet_event_approve as approve
from ansible_collections.azure_imds.scheduled_events.tests.support.azure_fakes import SUB, reply, run_azure_module
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    check_examples_use_fqcn, check_result_against_return_doc)
from ansible_collections.azure_imds.scheduled_events.tests.unit.plugins.modules.test_fleet_event_info import page, row

A = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
B = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"
C = "11111111-2222-3333-4444-555555555555"
ACK = reply(200, {"value": "Successfully approved scheduled event"})


def event_id(name, event):
    return row(name, event)["id"]


def test_scheduled_are_acknowledged_started_are_already_and_409_is_already():
    rows = [row("web_0", A), row("web_1", B, status="Started"), row("web_2", C)]
    ids = [event_id("web_0", A).lower(), event_id("web_1", B), event_id("web_2", C)]
    outcome = run_azure_module(approve, {"ids": ids}, [
        page(rows), ACK, reply(409, {"error": {"code": "Conflict", "message": "The event is Started."}})])
    assert not outcome.failed, outcome.result
    assert outcome.result["approved"] == [event_id("web_0", A)]
    assert outcome.result["already"] == [event_id("web_1", B), event_id("web_2", C)]
    assert outcome.result["changed"] is True
    posts = [path for method, path in outcome.requests if method == "POST"][1:]
    assert posts == [event_id("web_0", A) + "/acknowledge?api-version=2025-11-01",
                     event_id("web_2", C) + "/acknowledge?api-version=2025-11-01"]
    check_result_against_return_doc(approve, outcome.result)
    check_examples_use_fqcn(approve)


def test_second_run_changes_nothing():
    outcome = run_azure_module(approve, {"ids": [event_id("web_0", A)]}, [page([row("web_0", A, status="Started")])])
    assert outcome.result["changed"] is False and outcome.result["already"] == [event_id("web_0", A)]


def test_check_mode_sends_no_acknowledgement():
    outcome = run_azure_module(approve, {"ids": [event_id("web_0", A)]}, [page([row("web_0", A)])], check_mode=True)
    assert outcome.result["approved"] == [event_id("web_0", A)] and outcome.result["changed"] is True
    assert [m for m, _path in outcome.requests] == ["GET", "POST"]   # metadata, Resource Graph only


def test_unknown_id_fails_naming_it_before_any_acknowledgement():
    unknown = event_id("web_9", C)
    outcome = run_azure_module(approve, {"ids": [event_id("web_0", A), unknown]}, [page([row("web_0", A)])])
    assert outcome.failed and unknown in outcome.result["msg"] and "Nothing was acknowledged" in outcome.result["msg"]
    assert len(outcome.requests) == 2


def test_403_names_scheduled_event_contributor():
    outcome = run_azure_module(approve, {"ids": [event_id("web_0", A)]}, [
        page([row("web_0", A)]), reply(403, {"error": {"code": "AuthorizationFailed", "message": "denied"}})])
    assert outcome.failed and "ScheduledEventContributor" in outcome.result["msg"]


def test_expired_token_is_named():
    outcome = run_azure_module(approve, {"ids": [event_id("web_0", A)]}, [
        page([row("web_0", A)]), reply(401, {"error": {"code": "ExpiredAuthenticationToken", "message": "expired"}},
                                       {"WWW-Authenticate": 'Bearer error="invalid_token"'})])
    assert outcome.failed and "token expired" in outcome.result["msg"]


def test_an_id_that_is_no_scheduled_event_id_fails_before_any_request():
    outcome = run_azure_module(approve, {"ids": ["/subscriptions/%s/resourceGroups/rg" % SUB, "abc"]}, [], cloud=False)
    assert outcome.failed and "not a scheduled event's ARM id" in outcome.result["msg"]
    assert "'abc'" in outcome.result["msg"] and outcome.requests == []
