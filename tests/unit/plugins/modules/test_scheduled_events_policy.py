"""scheduled_events_policy: read-modify-write, idempotence, diff, check mode, sets, feature flag, api_version."""

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_events_policy as policy
from ansible_collections.azure_imds.scheduled_events.tests.support.azure_fakes import SUB, reply, run_azure_module
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    check_examples_use_fqcn, check_result_against_return_doc)

VM = "/subscriptions/%s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web_0" % SUB
CURRENT = {"userInitiatedReboot": {"automaticallyApprove": False},
           "userInitiatedRedeploy": {"automaticallyApprove": True}}


def vm(policy_value=None, **properties):
    if policy_value is not None:
        properties["scheduledEventsPolicy"] = policy_value
    return reply(200, {"id": VM, "name": "web_0", "location": "westeurope", "properties": properties})


def run(args, answers, **kwargs):
    base = {"resource_group": "rg", "name": "web_0"}
    base.update(args)
    return run_azure_module(policy, base, answers, **kwargs)


def test_changes_only_what_is_given_and_writes_the_whole_policy_once():
    wanted = {"userInitiatedReboot": {"automaticallyApprove": True},
              "userInitiatedRedeploy": {"automaticallyApprove": True},
              "scheduledEventsAdditionalPublishingTargets": {
                  "eventGridAndResourceGraph": {"enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
    outcome = run({"auto_approve_user_reboot": True, "publish_to_event_grid_and_resource_graph": True},
                  [vm(CURRENT), vm(wanted)], diff=True)
    assert not outcome.failed, outcome.result
    assert outcome.requests[1:] == [("GET", VM + "?api-version=2025-04-01"), ("PATCH", VM + "?api-version=2025-04-01")]
    assert outcome.bodies("PATCH") == [{"properties": {"scheduledEventsPolicy": wanted}}]
    assert outcome.result["changed"] is True and outcome.result["policy"] == wanted
    assert outcome.result["diff"]["before"] == {"scheduledEventsPolicy": CURRENT}
    assert outcome.result["diff"]["after"] == {"scheduledEventsPolicy": wanted}
    check_result_against_return_doc(policy, dict((k, v) for k, v in outcome.result.items() if k != "diff"))
    check_examples_use_fqcn(policy)


def test_nothing_to_change_writes_nothing():
    outcome = run({"auto_approve_user_redeploy": True}, [vm(CURRENT)])
    assert outcome.result["changed"] is False and [m for m, _path in outcome.requests] == ["GET", "GET"]


def test_check_mode_reports_the_change_and_writes_nothing():
    outcome = run({"auto_approve_all_instances_down": False}, [vm(CURRENT)], check_mode=True)
    assert outcome.result["changed"] is True
    assert outcome.result["policy"]["allInstancesDown"] == {"automaticallyApprove": False}
    assert [m for m, _path in outcome.requests] == ["GET", "GET"]


@pytest.mark.parametrize("key, kind, option", [
    ("availabilitySet", "availability set", "availability_set"),
    ("virtualMachineScaleSet", "scale set", "virtual_machine_scale_set")])
def test_a_vm_in_a_set_is_refused_naming_its_set(key, kind, option):
    owner = "/subscriptions/%s/resourceGroups/rg/providers/Microsoft.Compute/x/set-1" % SUB
    outcome = run({"auto_approve_user_reboot": True}, [vm(CURRENT, **{key: {"id": owner}})])
    assert outcome.failed and kind in outcome.result["msg"] and "set-1" in outcome.result["msg"]
    assert option in outcome.result["msg"] and "PATCH" not in [m for m, _path in outcome.requests]


def test_missing_feature_flag_is_named():
    outcome = run({"auto_approve_user_reboot": True}, [vm(CURRENT), reply(
        400, {"error": {"code": "FeatureNotRegistered", "message": "Subscription is not registered for feature."}})])
    assert outcome.failed and "Microsoft.Compute/SendScheduledEventsPolicy" in outcome.result["msg"]


def test_404_says_what_to_check():
    outcome = run({}, [reply(404, {"error": {"code": "ResourceNotFound", "message": "not found"}})])
    assert outcome.failed and "Check the resource group and name" in outcome.result["msg"]


def test_scale_sets_and_availability_sets_use_their_paths():
    outcome = run({"resource_type": "availability_set", "auto_approve_user_reboot": True},
                  [reply(200, {"id": "x", "properties": {}}), reply(200, {"id": "x", "properties": {}})])
    assert not outcome.failed, outcome.result
    assert all("/availabilitySets/web_0?" in path for _method, path in outcome.requests[1:])


@pytest.mark.parametrize("args, words", [
    ({"api_version": "2024-11-01"}, "2025-04-01"),
    ({"api_version": "latest"}, "must be an api-version"),
    ({"name": "web 0"}, "name must be an Azure name"),
    ({"subscription_id": "nope"}, "subscription GUID"),
    ({"cloud_environment": "http://127.0.0.1:9/"}, "https://"),
    ({"cloud_environment": "Mars"}, "not a cloud this module knows"),
])
def test_bad_input_fails_before_any_request(args, words):
    outcome = run(args, [], cloud=False)
    assert outcome.failed and words in outcome.result["msg"], outcome.result
    assert outcome.requests == []
