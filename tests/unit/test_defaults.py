"""Each default has one home and every public surface states it.

The IMDS side's shared defaults and bounds live in plugins/module_utils/_defaults.py; what only the
watcher daemon has lives in its config.DEFAULTS. The modules' argspecs and doc fragment, the wait
plugin, the EDA source's documentation and checks, the watcher's configuration and the roles'
defaults and argument specs must say the same values: a change in one place that misses another
fails here.
"""
import os

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.extensions.eda.plugins.event_source import scheduled_events as eda
from ansible_collections.azure_imds.scheduled_events.plugins.action import scheduled_event_wait as wait_action
from ansible_collections.azure_imds.scheduled_events.plugins.doc_fragments.imds import ModuleDocFragment
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _options
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_info
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_wait as wait_docs
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def role_file(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def role_spec(role):
    return role_file(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


def options(documentation):
    return yaml.safe_load(documentation)["options"]


def test_the_doc_fragment_and_the_argspec_state_the_shared_imds_defaults():
    documented = options(ModuleDocFragment.DOCUMENTATION)
    spec = _options.imds_argument_spec()
    for surface in (documented, spec):
        assert surface["api_version"]["default"] == _defaults.DEFAULT_API_VERSION
        assert list(surface["api_version"]["choices"]) == list(_defaults.API_VERSIONS)
        assert float(surface["request_timeout"]["default"]) == _defaults.DEFAULT_REQUEST_TIMEOUT
        assert float(surface["retry_timeout"]["default"]) == _defaults.DEFAULT_RETRY_TIMEOUT


def test_every_poller_polls_at_the_shared_interval_by_default():
    interval = _defaults.DEFAULT_POLL_INTERVAL
    assert scheduled_event_info.argument_spec()["poll_interval"]["default"] == interval
    assert float(options(scheduled_event_info.DOCUMENTATION)["poll_interval"]["default"]) == interval
    assert wait_action.DEFAULT_SLEEP == interval
    assert float(options(wait_docs.DOCUMENTATION)["sleep"]["default"]) == interval
    assert float(options(eda.DOCUMENTATION)["poll_interval"]["default"]) == interval
    assert eda.check_args({})[0]["poll_interval"] == interval
    assert config.DEFAULTS["poll_interval"] == interval
    assert role_file("watcher", "defaults", "main.yml")["watcher_poll_interval"] == interval
    assert role_file("rolling_maintenance", "defaults", "main.yml")["rolling_maintenance_poll_interval"] == interval


def test_the_eda_source_documents_and_applies_the_shared_imds_defaults():
    documented = options(eda.DOCUMENTATION)
    applied = eda.check_args({})[0]
    assert documented["api_version"]["default"] == applied["api_version"] == _defaults.DEFAULT_API_VERSION
    assert documented["api_version"]["choices"] == list(_defaults.API_VERSIONS)
    assert float(documented["request_timeout"]["default"]) == applied["request_timeout"] == _defaults.DEFAULT_REQUEST_TIMEOUT


def test_the_watcher_configuration_takes_the_shared_imds_defaults():
    assert config.DEFAULTS["api_version"] == _defaults.DEFAULT_API_VERSION
    assert role_spec("watcher")["watcher_api_version"]["choices"] == list(_defaults.API_VERSIONS)
    assert config.DEFAULTS["first_request_timeout"] == _defaults.DEFAULT_REQUEST_TIMEOUT
    assert config.DEFAULTS["imds_url"] is None


# watcher role variable -> the daemon's configuration key (a path into config.DEFAULTS)
WATCHER_VARIABLES = {
    "watcher_imds_url": ("imds_url",),
    "watcher_api_version": ("api_version",),
    "watcher_resource_name": ("resource_name",),
    "watcher_poll_interval": ("poll_interval",),
    "watcher_request_timeout": ("request_timeout",),
    "watcher_first_request_timeout": ("first_request_timeout",),
    "watcher_handler_timeout": ("handler_timeout",),
    "watcher_kill_grace": ("kill_grace",),
    "watcher_handler_environment": ("handler_environment",),
    "watcher_approval_policy": ("approval", "policy"),
    "watcher_approval_rules": ("approval", "rules"),
    "watcher_approve_user_events_at_once": ("approval", "user_events_at_once"),
    "watcher_approve_freeze_max_duration": ("approval", "freeze_max_duration"),
    "watcher_approve_leader_only": ("approval", "leader_only"),
}


@pytest.mark.parametrize("variable", sorted(WATCHER_VARIABLES))
def test_the_watcher_roles_defaults_are_the_daemons_own(variable):
    value = config.DEFAULTS
    for key in WATCHER_VARIABLES[variable]:
        value = value[key]
    role_default = role_file("watcher", "defaults", "main.yml")[variable]
    spec_default = role_spec("watcher")[variable].get("default")
    assert role_default == value, "roles/watcher/defaults/main.yml %s is %r, the daemon's default %r" % (
        variable, role_default, value)
    assert spec_default == value, "roles/watcher/meta/argument_specs.yml %s is %r, the daemon's default %r" % (
        variable, spec_default, value)
