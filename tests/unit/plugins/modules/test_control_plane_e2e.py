# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-plane modules meet the mock's control-plane face over TLS (issue 24, must show 2 and
the faults): the modules' own sign-in (azure-identity), cloud metadata, SDK clients and pipeline,
trusting the mock's CA through REQUESTS_CA_BUNDLE. Time is the mock's fake clock: a throttled run
sleeps on it, nothing waits for real seconds. The playbook runs are in tests/unit/playbooks/test_control_plane.py."""

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _azure
from ansible_collections.azure_imds.scheduled_events.plugins.modules import (
    fleet_event_approve, fleet_event_info, scheduled_events_policy)
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
    FakeClock, start_mock)
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import (
    AWX_ENV, CLIENT, FLEET, SECRET, SUB1, SUB2, TENANT, add_event, arm_audit, run_live, set_up)

GRAPH = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def arm(clock, tmp_path, monkeypatch):
    handle = start_mock(arm=True, clock=clock, rate_limit=False, fleet=FLEET, tls_dir=str(tmp_path / "tls"))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", handle.ca_path)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "AZURE_POD_IDENTITY_AUTHORITY_HOST"):
        monkeypatch.delenv(name, raising=False)
    yield handle
    handle.stop()


def statuses(result):
    return dict((e["resources"][0], e["event_status"]) for e in result["events"])


def trail(handle):
    return [(r["method"], r["path"].split("?")[0], r["status"], r["principal"]) for r in arm_audit(handle)]


# -- sign-in ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("given", ["options", "awx_environment"])
def test_service_principal_signs_in_at_the_mock_from_options_or_awx_variables(arm, clock, given):
    set_up(arm)
    event = add_event(arm, ["db0"])
    args = {"subscriptions": [SUB1, SUB2]}
    environ = dict(AWX_ENV)
    if given == "options":
        args.update(client_id=CLIENT, secret=SECRET, tenant=TENANT, subscription_id=SUB1)
        environ = {}
    result = run_live(fleet_event_info, args, arm, clock, environ=environ)
    assert not result.get("failed"), result
    assert [e["event_id"] for e in result["events"]] == [event]
    # Every request, the sign-in's included, went to the mock: cloud metadata, MSAL's discovery of
    # the mock's own tenant (no instance discovery on the public cloud), the token, the query.
    assert trail(arm) == [
        ("GET", "/metadata/endpoints", 200, None),
        ("GET", "/login/%s/v2.0/.well-known/openid-configuration" % TENANT, 200, None),
        ("POST", "/login/%s/oauth2/v2.0/token" % TENANT, 200, None),
        ("POST", "/providers/Microsoft.ResourceGraph/resources", 200, CLIENT)]


def test_options_win_over_the_awx_variables(arm, clock):
    # auth_source env takes the rest (tenant, subscription) from AWX's variables; auto with client_id
    # given would use the options alone, as azure.azcollection does.
    set_up(arm)
    environ = dict(AWX_ENV, AZURE_SECRET="not-the-secret", AZURE_CLIENT_ID="someone-else")
    result = run_live(fleet_event_info, {"auth_source": "env", "client_id": CLIENT, "secret": SECRET}, arm, clock,
                      environ=environ)
    assert not result.get("failed"), result
    assert trail(arm)[-1][3] == CLIENT


def test_a_wrong_secret_fails_with_entras_code_and_no_traceback(arm, clock):
    set_up(arm)
    result = run_live(fleet_event_info, {}, arm, clock, environ=dict(AWX_ENV, AZURE_SECRET="wrong"))
    assert result["failed"]
    assert "AADSTS7000215" in result["msg"] and "Check client_id, secret and tenant" in result["msg"], result
    assert "Traceback" not in result["msg"]
    # Entra answers a wrong secret 401 invalid_client (as the mock does), and nothing reached Resource Manager.
    assert trail(arm)[-1] == ("POST", "/login/%s/oauth2/v2.0/token" % TENANT, 401, None)


def test_managed_identity_signs_in_through_the_mocks_imds(arm, clock, monkeypatch):
    # azure-identity 1.27, azure/identity/_credentials/imds.py: the IMDS base URL comes from
    # AZURE_POD_IDENTITY_AUTHORITY_HOST (default http://169.254.169.254).
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", arm.vm_url("web1"))
    for role in ("Reader", "ScheduledEventContributor"):
        arm.control("POST", "arm/grants", {"principal": "web1-identity", "role": role, "scope": "/subscriptions/" + SUB1})
    event = add_event(arm, ["api0"])
    result = run_live(fleet_event_info, {"auth_source": "msi"}, arm, clock,
                      environ={"AZURE_SUBSCRIPTION_ID": SUB1})
    assert not result.get("failed"), result
    assert [e["event_id"] for e in result["events"]] == [event]
    tokens = [r for r in arm.control("GET", "audit")["requests"] if r["path"].startswith("/metadata/identity/")]
    assert [(t["vm"], t["status"]) for t in tokens] == [("web1", 200)]
    assert trail(arm) == [("GET", "/metadata/endpoints", 200, None),
                          ("POST", "/providers/Microsoft.ResourceGraph/resources", 200, "web1-identity")]


def test_without_a_cloud_setting_the_endpoints_are_azures_own(monkeypatch):
    """The resolved configuration only: nothing is sent (the loopback-only namespace would refuse it)."""
    from azure.core.pipeline.transport import RequestsTransport

    def refuse(*args, **kwargs):
        raise AssertionError("a request was sent")
    monkeypatch.setattr(RequestsTransport, "send", refuse)
    monkeypatch.delenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", raising=False)
    params = dict((k, None) for k in _azure.azure_argument_spec())
    params.update(auth_source="auto", request_timeout=60.0, retry_timeout=120.0)
    session = _arm.Session(params, environ=dict(AWX_ENV), home="/nonexistent")
    assert (session.cloud.resource_manager, session.cloud.authority, session.cloud.scope,
            session.cloud.instance_discovery) == ("https://management.azure.com/", "https://login.microsoftonline.com",
                                                  "https://management.azure.com/.default", True)
    assert session.graph()._client._base_url == "https://management.azure.com/"
    assert session.compute(SUB1)._config.base_url == "https://management.azure.com/"
    assert session.credential._authority == "https://login.microsoftonline.com"
    msi = _arm.Session(dict(params, auth_source="msi"), environ={"AZURE_SUBSCRIPTION_ID": SUB1},
                       home="/nonexistent")
    assert type(msi.credential).__name__ == "ManagedIdentityCredential"
    from azure.identity._credentials.imds import _get_request  # the IMDS request it would send
    assert _get_request(msi.cloud.scope, {}).url.startswith("http://169.254.169.254/metadata/identity/oauth2/token")


# -- faults ------------------------------------------------------------------------------------------

def ids_of(handle, clock, *vms):
    listed = run_live(fleet_event_info, {"subscriptions": [SUB1, SUB2]}, handle, clock)
    return [e["id"] for e in listed["events"] if set(e["resources"]) & set(vms)]


def test_approving_without_scheduled_event_contributor_is_403_naming_the_role(arm, clock):
    set_up(arm, role="Reader")
    add_event(arm, ["db0"])
    result = run_live(fleet_event_approve, {"ids": ids_of(arm, clock, "db0")}, arm, clock)
    assert result["failed"] and result["status"] == 403 and result["error_code"] == "AuthorizationFailed"
    assert "ScheduledEventContributor" in result["msg"]
    assert "Microsoft.Maintenance/scheduledevents/acknowledge/action" in result["msg"], result["msg"]
    assert result["approved"] == []


def test_an_expired_token_fails_with_its_code_and_what_to_do(arm, clock):
    # The token lives an hour; Resource Graph throttles the second run's query for longer, and the
    # wait (on the mock's clock) outlives the token, so the retry carries an expired one, as after a
    # skewed clock. (azure-core renews a token itself 5 minutes before its expiry in real time.)
    set_up(arm)
    add_event(arm, ["db0"])
    arm.control("POST", "arm/config", {"token_lifetime": 3600, "graph_quota": 1, "graph_window": 3700})
    run_live(fleet_event_info, {}, arm, clock)
    result = run_live(fleet_event_info, {"retry_timeout": 4000}, arm, clock)
    assert result["failed"] and result["status"] == 401 and result["error_code"] == "ExpiredAuthenticationToken"
    assert "The access token expired" in result["msg"], result["msg"]
    # Each wait is capped at a minute (the collection's Retry-After cap), so the module asked again
    # each minute of the mock's clock until the token had expired.
    assert 3600 <= sum(result["_slept"]) <= 3700 and set(result["_slept"]) == {60.0}


def test_resource_graph_throttling_waits_for_the_quota_reset_on_the_mocks_clock(arm, clock):
    set_up(arm)
    event = add_event(arm, ["api0"])
    arm.control("POST", "arm/config", {"graph_quota": 1, "graph_window": 20})
    assert run_live(fleet_event_info, {}, arm, clock)["_slept"] == []
    result = run_live(fleet_event_info, {}, arm, clock)
    assert not result.get("failed"), result
    assert [e["event_id"] for e in result["events"]] == [event]
    # No Retry-After from Resource Graph: the wait is x-ms-user-quota-resets-after's 20 s.
    assert result["_slept"] == [20]
    assert [r[2] for r in trail(arm) if r[1] == GRAPH.split("?", maxsplit=1)[0]] == [200, 429, 200]


def test_resource_graph_throttling_longer_than_retry_timeout_fails_at_once(arm, clock):
    set_up(arm)
    arm.control("POST", "arm/config", {"graph_quota": 1, "graph_window": 300})
    run_live(fleet_event_info, {}, arm, clock)
    result = run_live(fleet_event_info, {"retry_timeout": 30}, arm, clock)
    assert result["failed"] and result["status"] == 429
    assert "x-ms-user-quota-resets-after" in result["msg"] and "retry_timeout (30 s)" in result["msg"], result["msg"]
    assert result["_slept"] == []


def test_arm_throttling_is_retried_after_retry_after(arm, clock):
    set_up(arm)
    arm.control("POST", "arm/throttle", {"count": 2, "retry_after": 7})
    result = run_live(scheduled_events_policy, {"resource_group": "rg-db", "name": "db0",
                                                "subscription_id": SUB2}, arm, clock)
    assert not result.get("failed"), result
    assert result["_slept"] == [7, 7] and not result["changed"]
    assert [r[2] for r in trail(arm) if "/virtualMachines/db0" in r[1]] == [429, 429, 200]


def test_a_subscription_without_the_feature_flag_is_told_its_name(arm, clock):
    set_up(arm)
    arm.control("POST", "arm/features", {"subscription_id": SUB2, "registered": False})
    result = run_live(scheduled_events_policy, {"resource_group": "rg-db", "name": "db0", "subscription_id": SUB2,
                                                "auto_approve_user_reboot": True}, arm, clock)
    assert result["failed"], result
    assert "Microsoft.Compute/SendScheduledEventsPolicy" in result["msg"]
    assert "az feature register --namespace Microsoft.Compute --name SendScheduledEventsPolicy" in result["msg"]


def test_a_vm_inside_a_set_is_refused_naming_the_set(arm, clock):
    set_up(arm)
    result = run_live(scheduled_events_policy, {"resource_group": "rg-web", "name": "web1",
                                                "auto_approve_user_reboot": False}, arm, clock)
    assert result["failed"]
    assert "availability set" in result["msg"] and "resource_type availability_set, name web-as" in result["msg"]
    assert [r[0] for r in trail(arm) if "/virtualMachines/web1" in r[1]] == ["GET"]
