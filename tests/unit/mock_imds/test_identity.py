# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sign-in against the control-plane face with azure-identity, as the modules do."""

import pytest

from .armhelpers import CLIENT, SUB1, TENANT, arm, credential, set_up_principal


def test_cloud_metadata_names_the_mocks_login_and_audience(arm_mock):
    status, _headers, doc = arm(arm_mock, "GET", "/metadata/endpoints?api-version=2022-09-01")
    assert status == 200
    assert doc["resourceManager"] == arm_mock.arm_url + "/"
    assert doc["authentication"] == {"loginEndpoint": arm_mock.arm_url + "/login/",
                                     "audiences": [arm_mock.arm_url + "/"], "tenant": "common",
                                     "identityProvider": "AAD"}


def test_client_secret_credential_signs_in_and_the_token_opens_arm(arm_mock):
    set_up_principal(arm_mock)
    token = credential(arm_mock).get_token(arm_mock.arm_scope)
    status, _headers, _doc = arm(arm_mock, "GET", "/subscriptions/%s/resourceGroups/rg-main/providers/"
                                 "Microsoft.Compute/virtualMachines/web0?api-version=2025-04-01" % SUB1, bearer=token.token)
    assert status == 200
    audit = arm_mock.control("GET", "audit")["arm_requests"]
    assert [(r["method"], r["principal"], r["status"]) for r in audit][-1] == ("GET", CLIENT, 200)
    assert all(token.token not in r["path"] for r in audit)


def test_wrong_secret_is_aadsts7000215(arm_mock):
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import ClientSecretCredential
    set_up_principal(arm_mock)
    bad = ClientSecretCredential(TENANT, CLIENT, "wrong", authority=arm_mock.login_url,
                                 disable_instance_discovery=True, connection_verify=arm_mock.ca_path)
    with pytest.raises(ClientAuthenticationError, match="AADSTS7000215"):
        bad.get_token(arm_mock.arm_scope)


def test_expired_token_is_401_with_a_challenge(arm_mock, clock):
    set_up_principal(arm_mock)
    arm_mock.control("POST", "arm/config", {"token_lifetime": 600})
    token = credential(arm_mock).get_token(arm_mock.arm_scope).token
    arm_mock.control("POST", "time/advance", {"seconds": 601})
    status, headers, doc = arm(arm_mock, "GET", "/subscriptions/%s/resourceGroups/rg-main/providers/"
                               "Microsoft.Compute/virtualMachines/web0?api-version=2025-04-01" % SUB1, bearer=token)
    assert status == 401 and doc["error"]["code"] == "ExpiredAuthenticationToken"
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]


def test_missing_and_unknown_tokens(arm_mock):
    path = "/subscriptions/%s/resourceGroups/rg-main/providers/Microsoft.Compute/virtualMachines/web0" \
           "?api-version=2025-04-01" % SUB1
    assert arm(arm_mock, "GET", path)[2]["error"]["code"] == "AuthenticationFailed"
    assert arm(arm_mock, "GET", path, bearer="nope")[2]["error"]["code"] == "InvalidAuthenticationToken"


def test_managed_identity_credential_through_the_imds_face(arm_mock, monkeypatch):
    from azure.identity import ManagedIdentityCredential
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", arm_mock.vm_url("web1"))
    arm_mock.control("POST", "arm/grants", {"principal": "web1-identity", "role": "Reader",
                                            "scope": "/subscriptions/" + SUB1})
    token = ManagedIdentityCredential().get_token(arm_mock.arm_scope).token
    status, _headers, doc = arm(arm_mock, "GET", "/subscriptions/%s/resourceGroups/rg-main/providers/"
                                "Microsoft.Compute/availabilitySets/web-as?api-version=2025-04-01" % SUB1,
                                bearer=token)
    assert status == 200 and doc["name"] == "web-as"
    assert arm_mock.control("GET", "audit")["arm_requests"][-1]["principal"] == "web1-identity"
