# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""extensions/eda/eda_configuration.yml: the EDA controller's objects as variables of
infra.aap_configuration's EDA roles. No EDA controller runs here, so these checks cover what can go
wrong in the definitions: a key the roles do not read (silently ignored), a required key missing, a
reference to an object not defined, an activation whose rulebook does not exist or whose extra_vars
the rulebook does not read (a typo: the rulebook falls back to its default or fails to start)."""

import os
import re

import pytest

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import ROOT, load_yaml

EDA = os.path.join(ROOT, "extensions", "eda")
CONFIG = load_yaml(os.path.join(EDA, "eda_configuration.yml"))
# What each role reads from an item of its list: the "Data Structure" table of roles/<role>/README.md
# and the __item.<key> lookups of roles/<role>/tasks/main.yml in github:redhat-cop/infra.aap_configuration
# (commit f2302146d4ad8dd208c32b1b33f82a260c6644fe). Where the README and the tasks differ, the tasks
# decide: the activation's README says organization_name, its tasks read organization.
ROLE_KEYS = {
    "eda_projects": {"required": {"name", "url"},
                     "optional": {"new_name", "description", "organization", "credential", "state"}},
    "eda_decision_environments": {"required": {"name", "image_url"},
                                  "optional": {"new_name", "description", "credential", "organization", "state"}},
    "eda_credentials": {"required": {"name", "credential_type"},
                        "optional": {"new_name", "description", "organization", "inputs", "state"}},
    "eda_rulebook_activations": {"required": {"name", "rulebook", "decision_environment"},
                                 "optional": {"description", "project", "restart_policy", "extra_vars", "awx_token",
                                              "enabled", "state", "organization", "eda_credentials",
                                              "k8s_service_name", "swap_single_source", "event_streams", "log_level"}},
}
# The README's rule for every name: "Must be lower case containing only alphanumeric characters and underscores."
NAME = re.compile(r"\A[a-z0-9_]+\Z")
# The inputs of EDA's built-in "Red Hat Ansible Automation Platform" credential type (AAP 2.5: "an
# automation controller URL and a username and password").
AAP_INPUTS = {"host", "username", "password", "oauth_token", "verify_ssl"}
ITEMS = [(list_name, item) for list_name in ROLE_KEYS for item in CONFIG.get(list_name) or []]
ACTIVATIONS = CONFIG["eda_rulebook_activations"]


def rulebook_text(activation):
    with open(os.path.join(EDA, "rulebooks", activation["rulebook"]), encoding="utf-8") as handle:
        return handle.read()


def test_only_the_roles_variables_are_set():
    assert sorted(CONFIG) == sorted(ROLE_KEYS)
    assert all(CONFIG[name] for name in ROLE_KEYS), "each list holds at least one object"


@pytest.mark.parametrize("list_name, item", ITEMS, ids=["%s:%s" % (n, i["name"]) for n, i in ITEMS])
def test_each_object_has_the_keys_its_role_reads_and_no_other(list_name, item):
    keys = ROLE_KEYS[list_name]
    assert keys["required"] <= set(item), "missing: %s" % sorted(keys["required"] - set(item))
    assert set(item) <= keys["required"] | keys["optional"], "not read by the role: %s" % sorted(
        set(item) - keys["required"] - keys["optional"])
    assert NAME.match(item["name"]), item["name"]


def test_references_name_defined_objects():
    projects = [p["name"] for p in CONFIG["eda_projects"]]
    environments = [d["name"] for d in CONFIG["eda_decision_environments"]]
    credentials = dict((c["name"], c) for c in CONFIG["eda_credentials"])
    for activation in ACTIVATIONS:
        assert activation["project"] in projects
        assert activation["decision_environment"] in environments
        assert set(activation["eda_credentials"]) <= set(credentials)
        assert activation["restart_policy"] in ("always", "never", "on-failure")
    # run_job_template needs the AAP credential on the activation.
    aap = [credentials[n] for a in ACTIVATIONS for n in a["eda_credentials"]
           if credentials[n]["credential_type"] == "Red Hat Ansible Automation Platform"]
    assert aap, "an activation that launches job templates needs a Red Hat Ansible Automation Platform credential"
    for credential in aap:
        assert {"host", "username", "password"} <= set(credential["inputs"]) <= AAP_INPUTS


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=[a["name"] for a in ACTIVATIONS])
def test_the_activation_runs_a_rulebook_that_reads_its_extra_vars(activation):
    path = os.path.join(EDA, "rulebooks", activation["rulebook"])
    assert os.path.isfile(path), "%s does not exist" % path
    text = rulebook_text(activation)
    read = set(re.findall(r"\{\{\s*(central_event_grid_\w+)", text))
    required = set(re.findall(r"\{\{\s*(central_event_grid_\w+)\s*\}\}", text))
    assert set(activation["extra_vars"]) <= read, "not read by %s: %s" % (
        activation["rulebook"], sorted(set(activation["extra_vars"]) - read))
    assert required <= set(activation["extra_vars"]), "the rulebook needs %s" % sorted(required)
    assert "run_job_template" in text
    # The job template it launches is the one the rulebook defaults to.
    default = re.search(r"central_event_grid_job_template \| default\('([^']+)'\)", text).group(1)
    assert activation["extra_vars"]["central_event_grid_job_template"] == default
