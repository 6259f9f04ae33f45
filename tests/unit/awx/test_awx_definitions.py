# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""extensions/awx/: job templates point at real playbooks, and surveys ask for variables they read.

AWX cannot run here, so these checks cover what can go wrong in the definitions themselves:
a template naming a playbook that does not exist, a survey variable no playbook reads (a typo
silently ignored at launch), a survey answer the playbook would refuse, a schedule or project
reference that points nowhere.
"""

import os
import re
import subprocess

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM, PLAYBOOK_NAMES, PLAYBOOKS, ROOT, load_yaml, playbook_options

AWX = os.path.join(ROOT, "extensions", "awx")
PROJECT = os.path.join(AWX, "project")
CONFIG = load_yaml(os.path.join(AWX, "controller_configuration.yml"))
TEMPLATES = CONFIG["controller_templates"]
SURVEY_TYPES = ("text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect")
COLLECTION_PLAYBOOK = re.compile(r"import_playbook:\s*azure_imds\.scheduled_events\.(\w+)\s*$", re.M)


def collection_playbook_of(template):
    """The collection playbook a job template runs, through its project playbook."""
    path = os.path.join(PROJECT, template["playbook"])
    with open(path, encoding="utf-8") as handle:
        found = COLLECTION_PLAYBOOK.findall(handle.read())
    assert len(found) == 1, "%s must import exactly one collection playbook, found %s" % (path, found)
    return found[0]


def survey_items():
    for template in TEMPLATES:
        for question in template["survey_spec"]["spec"]:
            yield template, question


def _ids(items):
    return ["%s:%s" % (t["playbook"], q["variable"]) for t, q in items]


SURVEY = list(survey_items())


# -- templates and playbooks -----------------------------------------------------------------------

def test_every_collection_playbook_has_exactly_one_job_template():
    assert sorted(collection_playbook_of(t) for t in TEMPLATES) == sorted(PLAYBOOK_NAMES)


@pytest.mark.parametrize("template", TEMPLATES, ids=[t["name"] for t in TEMPLATES])
def test_the_job_template_points_at_a_project_playbook_that_runs_a_collection_playbook(template):
    assert os.path.isfile(os.path.join(PROJECT, template["playbook"])), template["playbook"]
    name = collection_playbook_of(template)
    assert os.path.isfile(os.path.join(PLAYBOOKS, name + ".yml")), "playbooks/%s.yml does not exist" % name


@pytest.mark.parametrize("template", TEMPLATES, ids=[t["name"] for t in TEMPLATES])
def test_the_job_template_uses_the_defined_project_and_execution_environment(template):
    projects = [p["name"] for p in CONFIG["controller_projects"]]
    environments = [e["name"] for e in CONFIG["controller_execution_environments"]]
    assert template["project"] in projects
    assert template["execution_environment"] in environments
    assert template["job_type"] in ("run", "check")


def test_schedules_run_existing_templates_with_a_valid_rule():
    names = [t["name"] for t in TEMPLATES]
    assert CONFIG["controller_schedules"], "the guide promises a schedule for the report"
    for schedule in CONFIG["controller_schedules"]:
        assert schedule["unified_job_template"] in names
        assert re.match(r"^DTSTART:\d{8}T\d{6}Z RRULE:FREQ=(MINUTELY|HOURLY|DAILY|WEEKLY);INTERVAL=\d+$",
                        schedule["rrule"]), schedule["rrule"]


def test_the_project_playbooks_pass_a_syntax_check():
    # One ansible-playbook run checks them all (it names the playbook of an error): a run per
    # template cost a start of Ansible each.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1")
    playbooks = sorted(set(os.path.join(PROJECT, template["playbook"]) for template in TEMPLATES))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i", "localhost,"] + playbooks,
                          env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          check=False)
    assert proc.returncode == 0, proc.stdout.decode()
    for playbook in playbooks:
        assert "playbook: %s" % playbook in proc.stdout.decode(), proc.stdout.decode()


# -- surveys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", TEMPLATES, ids=[t["name"] for t in TEMPLATES])
def test_the_survey_is_well_formed(template):
    assert template["survey_enabled"] is True
    spec = template["survey_spec"]["spec"]
    variables = [q["variable"] for q in spec]
    assert len(variables) == len(set(variables)), "a variable is asked twice"
    for question in spec:
        assert question["question_name"] and question["type"] in SURVEY_TYPES, question
        choices = question.get("choices")
        if question["type"] in ("multiplechoice", "multiselect"):
            assert choices, question
            default = question.get("default")
            for value in (default if isinstance(default, list) else [default] if default is not None else []):
                assert value in choices, question
        if question["type"] == "integer" and "default" in question:
            assert question.get("min", question["default"]) <= question["default"] <= question.get(
                "max", question["default"]), question


@pytest.mark.parametrize("template, question", SURVEY, ids=_ids(SURVEY))
def test_every_survey_answer_passes_the_argument_spec(template, question):
    playbook = collection_playbook_of(template)
    options = playbook_options(playbook)
    name = question["variable"]
    assert name in options, "%s asks for %s, which %s never reads (neither its roles' argument specs nor its play " \
        "keywords)" % (template["name"], name, playbook)
    answers = []
    if "default" in question:
        answers.append(question["default"])
    if question["type"] == "multiplechoice":
        answers.extend(question["choices"])
    elif question["type"] == "multiselect":
        answers.append(list(question["choices"]))
    if options[name] is None:
        # A play keyword's variable (hosts, serial, ...): Ansible itself reads the answer, as text.
        assert question["type"] in ("text", "integer"), question
        return
    validator = ArgumentSpecValidator({name: options[name]})
    for answer in answers:
        result = validator.validate({name: answer}, validate_role_argument_spec=True)
        assert not result.error_messages, (answer, result.error_messages)


# -- the Azure credential of the fleet_maintenance template ------------------------------------------

# AWX's managed credential type "Microsoft Azure Resource Manager" (namespace azure_rm), as defined by
# awx-plugins (src/awx_plugins/credentials/plugins.py): its input fields, the required ones, and what
# its injector (src/awx_plugins/credentials/injectors.py, azure_rm) puts in the job's environment.
AZURE_RM_TYPE = "Microsoft Azure Resource Manager"
AZURE_RM_FIELDS = ("subscription", "username", "password", "client", "secret", "tenant", "cloud_environment")
AZURE_RM_REQUIRED = ("subscription",)


def azure_rm_injector(inputs):
    """The environment awx-plugins' injectors.azure_rm sets for a credential's inputs."""
    env = {"AZURE_SUBSCRIPTION_ID": inputs.get("subscription", "")}
    if inputs.get("client", "") and inputs.get("tenant", ""):
        env.update(AZURE_CLIENT_ID=inputs["client"], AZURE_TENANT=inputs["tenant"], AZURE_SECRET=inputs.get("secret", ""))
    else:
        env.update(AZURE_AD_USER=inputs.get("username", ""), AZURE_PASSWORD=inputs.get("password", ""))
    if "cloud_environment" in inputs:
        env["AZURE_CLOUD_ENVIRONMENT"] = inputs["cloud_environment"]
    return env


def fleet_template():
    found = [t for t in TEMPLATES if t["playbook"] == "fleet_maintenance.yml"]
    assert len(found) == 1, found
    return found[0]


def test_the_fleet_maintenance_template_carries_an_azure_resource_manager_credential():
    credentials = dict((c["name"], c) for c in CONFIG["controller_credentials"])
    azure = [credentials[name] for name in fleet_template()["credentials"] if name in credentials
             and credentials[name]["credential_type"] == AZURE_RM_TYPE]
    assert len(azure) == 1, fleet_template()["credentials"]
    inputs = azure[0]["inputs"]
    assert set(inputs) <= set(AZURE_RM_FIELDS), set(inputs) - set(AZURE_RM_FIELDS)
    assert set(AZURE_RM_REQUIRED) <= set(inputs)
    # A service principal: client and tenant given, so the injector sets AZURE_CLIENT_ID/SECRET/TENANT.
    assert sorted(azure_rm_injector(inputs)) == ["AZURE_CLIENT_ID", "AZURE_SECRET", "AZURE_SUBSCRIPTION_ID", "AZURE_TENANT"]
    # The template runs on the controller in the EE, and may take the event of a rulebook as extra vars.
    assert fleet_template()["ask_variables_on_launch"] is True
    assert fleet_template()["allow_simultaneous"] is False


def test_what_the_credential_injects_signs_the_modules_in_with_nothing_set_in_the_play():
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _azure
    inputs = {"subscription": "11111111-1111-1111-1111-111111111111", "client": "app-fleet", "secret": "s3cret",
              "tenant": "tenant-1", "cloud_environment": "AzureUSGovernment"}
    env = azure_rm_injector(inputs)
    # The variables the modules read are the injector's, name for name.
    assert set(_azure.ENV_VARS.values()) - {"AZURE_PROFILE"} == set(env)
    # fleet_maintenance passes no sign-in option by default (fleet_maintenance_azure is {}).
    settings = _azure.sign_in_settings({"auth_source": "auto"}, environ=env, home="/nonexistent")
    assert (settings["kind"], settings["client_id"], settings["secret"], settings["tenant"], settings["subscription_id"],
            settings["cloud_environment"]) == ("client_secret", "app-fleet", "s3cret", "tenant-1",
                                               "11111111-1111-1111-1111-111111111111", "AzureUSGovernment")
    role = load_yaml(os.path.join(ROOT, "roles", "fleet_maintenance", "defaults", "main.yml"))
    assert role["fleet_maintenance_azure"] == {}
