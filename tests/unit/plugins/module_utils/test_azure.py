"""_azure: sign-in order and precedence, clouds, the credential's arguments, errors and the import guard."""

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.plugins.doc_fragments.azure_auth import ModuleDocFragment
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _azure
from ansible_collections.azure_imds.scheduled_events.plugins.modules import fleet_event_info
from ansible_collections.azure_imds.scheduled_events.tests.support.azure_fakes import (
    BASE, METADATA, SUB, SUB2, ScriptedSession, reply, run_azure_module)
from ansible_collections.azure_imds.scheduled_events.tests.support.bad_input import NUMBER_VALUES
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import compare_options

AWX_ENV = {"AZURE_CLIENT_ID": "env-app", "AZURE_SECRET": "env-secret", "AZURE_TENANT": "env-tenant",
           "AZURE_SUBSCRIPTION_ID": SUB}


def params(**given):
    base = dict((key, None) for key in _azure.azure_argument_spec())
    base.update(auth_source="auto", request_timeout=60.0, retry_timeout=120.0)
    base.update(given)
    return base


def test_fragment_matches_argspec():
    spec = dict((k, dict((a, b) for a, b in v.items() if a != "fallback")) for k, v in _azure.azure_argument_spec().items())
    compare_options(ModuleDocFragment.DOCUMENTATION, spec)
    description = " ".join(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]["auth_source"]["description"])
    assert "E(%s)" % _azure.AUTH_SOURCE_ENV_VAR in description


def test_awx_environment_signs_in_unchanged():
    settings = _azure.sign_in_settings(params(), environ=AWX_ENV, home="/nonexistent")
    assert (settings["kind"], settings["client_id"], settings["secret"], settings["tenant"],
            settings["subscription_id"]) == ("client_secret", "env-app", "env-secret", "env-tenant", SUB)


def test_options_win_over_environment_variables():
    settings = _azure.sign_in_settings(params(auth_source="env", subscription_id=SUB2, secret="opt-secret"),
                                       environ=AWX_ENV, home="/nonexistent")
    assert (settings["subscription_id"], settings["secret"], settings["client_id"]) == (SUB2, "opt-secret", "env-app")


def test_credential_file_profile_as_azcollection_reads_it(tmp_path):
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "credentials").write_text(
        "[default]\nsubscription_id=%s\nclient_id=a\nsecret=b\ntenant=c\n[other]\nsubscription_id=%s\n"
        "client_id=d\nsecret=e\ntenant=f\n" % (SUB, SUB2))
    assert _azure.sign_in_settings(params(), environ={}, home=str(tmp_path))["client_id"] == "a"
    chosen = _azure.sign_in_settings(params(auth_source="credential_file", profile="other"), environ={},
                                     home=str(tmp_path))
    assert (chosen["client_id"], chosen["subscription_id"]) == ("d", SUB2)
    with pytest.raises(_azure.AzureInputError, match="profile 'nope' is not a section"):
        _azure.sign_in_settings(params(profile="nope"), environ={}, home=str(tmp_path))


def test_auto_without_anything_falls_back_to_azure_cli_and_msi_takes_env_client_id():
    assert _azure.sign_in_settings(params(), environ={}, home="/nonexistent")["kind"] == "cli"
    msi = _azure.sign_in_settings(params(auth_source="msi"), environ=AWX_ENV, home="/nonexistent")
    assert (msi["kind"], msi["client_id"], msi["secret"]) == ("msi", "env-app", None)


def test_missing_secret_names_what_is_missing():
    with pytest.raises(_azure.AzureInputError, match="secret missing"):
        environ = {"AZURE_CLIENT_ID": "a", "AZURE_TENANT": "t", "AZURE_SUBSCRIPTION_ID": SUB}
        _azure.sign_in_settings(params(auth_source="env"), environ=environ, home="/nonexistent")


def test_named_cloud_keeps_the_real_defaults():
    cloud = _azure.resolve_cloud("AzureCloud")
    assert (cloud.resource_manager, cloud.authority, cloud.scope, cloud.instance_discovery) == (
        "https://management.azure.com/", "https://login.microsoftonline.com", "https://management.azure.com/.default",
        True)
    assert _azure.resolve_cloud("AzureChinaCloud").resource_manager == "https://management.chinacloudapi.cn/"


@pytest.mark.parametrize("document", [METADATA, METADATA[0]])
def test_cloud_url_reads_metadata_and_turns_instance_discovery_off(monkeypatch, document):
    from azure.core.pipeline.transport import RequestsTransport
    session = ScriptedSession([reply(200, document)])
    cloud = _azure.resolve_cloud(BASE, transport=RequestsTransport(session=session))
    assert session.sent[0][1] == BASE + "metadata/endpoints?api-version=2022-09-01"
    assert (cloud.resource_manager, cloud.authority, cloud.scope, cloud.instance_discovery) == (
        BASE, BASE + "login", BASE + "/.default", False)  # audience BASE ends in /: scope <audience>/.default
    made = {}
    monkeypatch.setattr(_azure, "ClientSecretCredential", lambda *a, **k: made.update(args=a, kwargs=k))
    _azure.credential_for({"kind": "client_secret", "tenant": "t", "client_id": "c", "secret": "s"}, cloud)
    assert made["args"] == ("t", "c", "s")
    assert made["kwargs"] == {"authority": BASE + "login", "disable_instance_discovery": True}


def test_missing_libraries_fail_with_missing_required_lib(monkeypatch):
    monkeypatch.setattr(_azure, "AZURE_IMPORT_ERROR", ImportError("No module named 'azure.identity'"))
    outcome = run_azure_module(fleet_event_info, {}, [], cloud=False)
    assert outcome.failed and "azure-identity" in outcome.result["msg"]
    assert "Failed to import the required Python library" in outcome.result["msg"]


@pytest.mark.parametrize("label, value", [v for v in NUMBER_VALUES if v[0] != "zero"])
def test_bad_numbers_are_refused_naming_the_option(label, value):
    outcome = run_azure_module(fleet_event_info, {"request_timeout": value}, [], cloud=False)
    assert outcome.failed and "request_timeout" in outcome.result["msg"] and outcome.requests == []


def test_quota_reset_header_is_read_as_seconds():
    assert _arm.parse_quota_resets_after("00:01:05") == 65
    assert _arm.parse_quota_resets_after("soon") is None
