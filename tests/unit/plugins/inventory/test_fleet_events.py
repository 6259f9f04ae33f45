# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_events inventory plugin against the mock's control-plane face over TLS: a scale set of
three VMs, an availability set, a single VM and a zonal VM in a second subscription, with events.
In this process (the plugin's own sign-in, cloud metadata and Resource Graph client; the mock's
fake clock for throttling waits) and as `ansible-inventory` (graph, list, cache) in a subprocess.
One mock for the module; each test reads the audit from where it starts."""

import json
import os
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader

from ansible import constants as C

from ansible_collections.azure_imds.scheduled_events.plugins.doc_fragments import azure_auth, fleet_filters
from ansible_collections.azure_imds.scheduled_events.plugins.inventory import fleet_events
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _fleet
from ansible_collections.azure_imds.scheduled_events.plugins.modules import fleet_event_info
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
    FakeClock, start_mock)
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import (
    AWX_ENV, PUBLISH, SUB1, SUB2, add_event, arm_audit, run_live, set_up)
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import compare_options
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import BIN, FARM
from ansible_collections.azure_imds.scheduled_events.tests.unit.docs.pages import RST, code_blocks

FQCN = "azure_imds.scheduled_events.fleet_events"
GRAPH_PATH = "/providers/Microsoft.ResourceGraph/resources"
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-solo", "default_vm": "solo", "scheduled_events_policy": PUBLISH,
    "groups": [
        {"name": "api-ss", "kind": "scale_set", "vms": ["api0", "api1", "api2"], "resource_group": "rg-api",
         "zones": ["1", "2"]},
        {"name": "web-as", "kind": "availability_set", "vms": ["web0", "web1"], "resource_group": "rg-web"},
        {"name": "db", "kind": "zonal", "vms": ["db0"], "subscription_id": SUB2, "resource_group": "rg-db",
         "location": "northeurope"},
    ],
}
# Fixed EventIds, so the expected inventory is written out in full.
API_REBOOT = "A0000000-0000-4000-8000-000000000001"
API_FREEZE = "A0000000-0000-4000-8000-000000000002"
WEB_REDEPLOY = "A0000000-0000-4000-8000-000000000003"
SOLO_REBOOT = "A0000000-0000-4000-8000-000000000004"
DB_REBOOT = "A0000000-0000-4000-8000-000000000005"
# Text from Azure is never templated: a description that looks like a template stays as it is.
TEMPLATED = "Reboot {{ 6 * 7 }}"
KEYED_GROUPS = [
    {"prefix": "event", "key": "scheduled_events | map(attribute='event_type') | unique"},
    {"prefix": "status", "key": "scheduled_events | map(attribute='event_status') | unique"},
    {"prefix": "scope", "key": "azure_scope_kind"},
]


class Fleet:
    def __init__(self, handle, clock, workdir):
        self.mock, self.clock, self.workdir = handle, clock, workdir

    def graph_queries(self, since=0):
        return [r for r in arm_audit(self.mock)[since:] if r["path"].split("?")[0] == GRAPH_PATH]

    def mark(self):
        return len(arm_audit(self.mock))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fleet_events")
    clock = FakeClock()
    handle = start_mock(arm=True, clock=clock, rate_limit=False, fleet=FLEET, tls_dir=str(workdir / "tls"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("REQUESTS_CA_BUNDLE", handle.ca_path)
            for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ANSIBLE_AZURE_AUTH_SOURCE",
                         "AZURE_POD_IDENTITY_AUTHORITY_HOST"):
                patch.delenv(name, raising=False)
            set_up(handle)
            add_event(handle, ["api0", "api1"], event_id=API_REBOOT, duration=3600)
            add_event(handle, ["api1"], "Freeze", event_id=API_FREEZE, status="Started", duration=3600)
            add_event(handle, ["web0"], "Redeploy", event_id=WEB_REDEPLOY, event_source="User", duration=3600)
            add_event(handle, ["solo"], event_id=SOLO_REBOOT, duration=3600, description=TEMPLATED)
            add_event(handle, ["db0"], event_id=DB_REBOOT, duration=3600)
            yield Fleet(handle, clock, workdir)
    finally:
        handle.stop()


@pytest.fixture(autouse=True)
def clean_faults(fleet):
    yield
    fleet.mock.control("DELETE", "arm/faults")
    fleet.mock.control("POST", "arm/throttle", {"count": 0})


def write_config(directory, config, name="fleet_events.yml", fleet=None):
    doc = {"plugin": FQCN}
    if fleet is not None:
        doc["cloud_environment"] = fleet.mock.arm_url
    doc.update(config)
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


class Parsed:
    def __init__(self, inventory, slept):
        self.inventory, self.slept = inventory, slept

    def hostvars(self, name):
        host = self.inventory.get_host(name)
        return dict((k, v) for k, v in host.get_vars().items() if not k.startswith("inventory_") and k != "group_names")

    @property
    def hosts(self):
        return sorted(self.inventory.hosts)

    def groups(self):
        return dict((name, sorted(h.name for h in group.get_hosts()))
                    for name, group in self.inventory.groups.items() if name not in ("all", "ungrouped"))


def parse(fleet, tmp_path, config, environ=None, cache=False):
    """The plugin as the inventory manager loads it, in this process; sleeps move the mock's clock."""
    path = write_config(tmp_path, config, fleet=fleet)
    plugin = inventory_loader.get(FQCN)
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        fleet.clock.tick(seconds)
    plugin.runtime = _arm.Runtime(environ=dict(AWX_ENV if environ is None else environ), home="/nonexistent",
                                  clock=fleet.clock, sleep=sleep, wall_clock=fleet.clock, rng=lambda: 1.0)
    inventory = InventoryData()
    plugin.parse(inventory, DataLoader(), path, cache=cache)
    return Parsed(inventory, slept)


def info_events(fleet, subscriptions):
    result = run_live(fleet_event_info, {"subscriptions": subscriptions}, fleet.mock, fleet.clock)
    assert not result.get("failed"), result
    return dict((e["event_id"], e) for e in result["events"])


# -- hosts and hostvars ----------------------------------------------------------------------------------

def test_one_host_per_vm_named_by_an_event_with_fleet_event_infos_events(fleet, tmp_path):
    parsed = parse(fleet, tmp_path, {"subscriptions": [SUB1, SUB2]})
    # api2 and web1 have no event; db0 lives in the second subscription.
    assert parsed.hosts == ["api0", "api1", "db0", "solo", "web0"]
    events = info_events(fleet, [SUB1, SUB2])
    api1 = parsed.hostvars("api1")
    # Started (no not_before) first, then by not_before; each event exactly as fleet_event_info returns it.
    assert api1["scheduled_events"] == [events[API_FREEZE], events[API_REBOOT]]
    assert parsed.hostvars("api0")["scheduled_events"] == [events[API_REBOOT]]
    assert parsed.hostvars("db0")["scheduled_events"] == [events[DB_REBOOT]]
    api_set = "/subscriptions/%s/resourceGroups/rg-api/providers/Microsoft.Compute/virtualMachineScaleSets/api-ss" % SUB1
    assert dict((k, v) for k, v in api1.items() if k != "scheduled_events") == {
        "azure_vm_name": "api1",
        "azure_vm_id": "/subscriptions/%s/resourceGroups/rg-api/providers/Microsoft.Compute/virtualMachines/api1" % SUB1,
        "azure_resource_group": "rg-api", "azure_subscription_id": SUB1, "azure_location": "westeurope",
        "azure_zones": ["1", "2"], "azure_scope_kind": "virtualMachineScaleSets", "azure_scope_name": "api-ss",
        "azure_scope_id": api_set}
    web0 = parsed.hostvars("web0")
    assert (web0["azure_scope_kind"], web0["azure_scope_name"], web0["azure_zones"]) == (
        "availabilitySets", "web-as", None)
    solo = parsed.hostvars("solo")
    assert (solo["azure_scope_kind"], solo["azure_vm_id"]) == (
        "virtualMachines", "/subscriptions/%s/resourceGroups/rg-solo/providers/Microsoft.Compute/virtualMachines/solo"
        % SUB1)
    db0 = parsed.hostvars("db0")
    assert (db0["azure_subscription_id"], db0["azure_location"], db0["azure_zones"]) == (SUB2, "northeurope", ["1"])
    # No connection variables: those come from azure_rm (or any other source) by hostname.
    assert not [k for k in api1 if k.startswith("ansible_")]


def test_the_signed_in_subscription_and_the_filters_as_fleet_event_info(fleet, tmp_path):
    mark = fleet.mark()
    assert parse(fleet, tmp_path, {}).hosts == ["api0", "api1", "solo", "web0"]
    assert parse(fleet, tmp_path, {"event_types": ["Freeze"]}).hosts == ["api1"]
    assert parse(fleet, tmp_path, {"event_statuses": ["Started"]}).hosts == ["api1"]
    assert parse(fleet, tmp_path, {"event_sources": ["User"]}).hosts == ["web0"]
    assert parse(fleet, tmp_path, {"resource_groups": ["RG-API"], "event_types": ["Reboot"]}).hosts == ["api0", "api1"]
    queries = fleet.graph_queries(mark)
    assert len(queries) == 5 and all(q["principal"] == AWX_ENV["AZURE_CLIENT_ID"] for q in queries)


def test_hostname_source_id_names_hosts_by_arm_id(fleet, tmp_path):
    parsed = parse(fleet, tmp_path, {"hostname_source": "id", "resource_groups": ["rg-web", "rg-solo"]})
    base = "/subscriptions/%s/resourceGroups/%%s/providers/Microsoft.Compute/virtualMachines/%%s" % SUB1
    assert parsed.hosts == [base % ("rg-solo", "solo"), base % ("rg-web", "web0")]
    assert parsed.hostvars(base % ("rg-web", "web0"))["azure_vm_name"] == "web0"


def test_compose_groups_and_keyed_groups(fleet, tmp_path):
    parsed = parse(fleet, tmp_path, {
        "keyed_groups": KEYED_GROUPS,
        "groups": {"started": "scheduled_events | selectattr('event_status', 'equalto', 'Started') | list | length > 0"},
        "compose": {"next_event_id": "scheduled_events[0].event_id", "ansible_host": "azure_vm_name + '.example'",
                    "why": "scheduled_events[0].description"}})
    assert parsed.groups() == {
        "event_Freeze": ["api1"], "event_Reboot": ["api0", "api1", "solo"], "event_Redeploy": ["web0"],
        "status_Scheduled": ["api0", "api1", "solo", "web0"], "status_Started": ["api1"],
        "scope_virtualMachineScaleSets": ["api0", "api1"], "scope_availabilitySets": ["web0"],
        "scope_virtualMachines": ["solo"], "started": ["api1"]}
    assert parsed.hostvars("api1")["next_event_id"] == API_FREEZE
    assert parsed.hostvars("web0")["ansible_host"] == "web0.example"
    assert parsed.hostvars("solo")["why"] == TEMPLATED


def test_strict_makes_a_bad_expression_fatal(fleet, tmp_path):
    config = {"compose": {"x": "no_such_variable.attribute"}}
    assert "x" not in parse(fleet, tmp_path, config).hostvars("solo")
    with pytest.raises(AnsibleError, match="Could not set x for host"):
        parse(fleet, tmp_path, dict(config, strict=True))


def test_vms_that_share_a_name_are_qualified_by_group_then_subscription():
    def row(subscription, group, vm, event):
        return {"id": "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s/providers/"
                      "Microsoft.Maintenance/scheduledevents/%s" % (subscription, group, vm, event),
                "location": "westeurope", "properties": {"EventId": event, "EventType": "Reboot",
                                                         "EventStatus": "Scheduled", "Resources": [vm]}}
    rows = [row(SUB1, "rg-a", "web0", API_REBOOT), row(SUB1, "rg-b", "web0", API_FREEZE),
            row(SUB2, "rg-a", "web0", WEB_REDEPLOY), row(SUB1, "rg-a", "db0", SOLO_REBOOT),
            # the same VM spelled in another case: one host
            row(SUB1, "RG-A", "DB0", DB_REBOOT)]
    hosts, warnings = fleet_events.hosts_from_events(_fleet.events_from_rows(rows))
    assert sorted(hosts) == ["db0", "web0_rg-a_%s" % SUB1, "web0_rg-a_%s" % SUB2, "web0_rg-b"]
    assert [e["event_id"] for e in hosts["db0"]["scheduled_events"]] == [SOLO_REBOOT, DB_REBOOT]
    assert len(warnings) == 1 and "hostname_source: id" in warnings[0] and "web0_rg-b (" in warnings[0]
    by_id, warnings = fleet_events.hosts_from_events(_fleet.events_from_rows(rows), "id")
    assert len(by_id) == 4 and warnings == []


# -- documentation against code ----------------------------------------------------------------------------

def test_the_filters_fragment_is_fleet_event_infos_argspec():
    spec = fleet_event_info.argument_spec()
    documented = yaml.safe_load(fleet_filters.ModuleDocFragment.DOCUMENTATION)["options"]
    compare_options(fleet_filters.ModuleDocFragment.DOCUMENTATION, dict((name, spec[name]) for name in documented))
    assert sorted(documented) == sorted(fleet_events.FILTER_OPTIONS)


def test_the_plugin_documents_what_it_reads_with_the_modules_sign_in_options():
    plugin = inventory_loader.get(FQCN)  # registers the documented options with the configuration
    options = C.config.get_configuration_definitions("inventory", plugin._load_name)
    auth = yaml.safe_load(azure_auth.ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(fleet_events.AUTH_OPTIONS + fleet_events.FILTER_OPTIONS) <= set(options)
    for name, doc in auth.items():
        assert (options[name]["type"], options[name].get("default"), options[name].get("choices")) == (
            doc["type"], doc.get("default"), doc.get("choices")), name
    # The one option an environment variable sets, as azure.azcollection's ANSIBLE_AZURE_AUTH_SOURCE.
    assert [name for name, doc in options.items() if name in auth and doc.get("env")] == ["auth_source"]
    assert options["auth_source"]["env"] == [{"name": "ANSIBLE_AZURE_AUTH_SOURCE"}]
    assert options["hostname_source"]["choices"] == ["name", "id"]
    assert fleet_events.EXAMPLES.lstrip().startswith("---")
    assert yaml.safe_load(fleet_events.EXAMPLES)["plugin"] == FQCN


# -- verify_file and bad configuration --------------------------------------------------------------------

@pytest.mark.parametrize("name, accepted", [
    ("fleet_events.yml", True), ("prod.fleet_events.yaml", True), ("fleet_events.yml.bak", False),
    ("azure_rm.yml", False), ("fleet_events.json", False)])
def test_verify_file_wants_a_name_ending_in_fleet_events_yml(tmp_path, name, accepted):
    path = tmp_path / name
    path.write_text("plugin: %s\n" % FQCN)
    assert inventory_loader.get(FQCN).verify_file(str(path)) is accepted


@pytest.mark.parametrize("config, message", [
    ({"event_status": ["Started"]}, "event_status is no option of %s. Check the spelling" % FQCN),
    ({"event_statuses": ["Pending"]}, "event_statuses: 'Pending' is not one of Scheduled, Started, Completed, Canceled"),
    ({"event_types": []}, "event_types is an empty list, which would match no event"),
    ({"subscriptions": ["sub-1"]}, "subscriptions must be a subscription GUID"),
    ({"subscription_id": "nope"}, "subscription_id must be a subscription GUID"),
    ({"request_timeout": 0}, "request_timeout must be a number from 0.1 to 86400 (seconds), got 0.0"),
    ({"hostname_source": "ip"}, "hostname_source: 'ip' is not one of name, id"),
    ({"resource_groups": ["rg'a"]}, "resource_groups must be an Azure name"),
    ({"cloud_environment": "http://127.0.0.1:1/"}, "is not an https:// URL"),
    ({"auth_source": "sometimes"}, "auth_source: 'sometimes' is not one of auto, env, cli, msi, credential_file"),
])
def test_bad_configuration_is_refused_naming_the_option(fleet, tmp_path, config, message):
    mark = fleet.mark()
    with pytest.raises(AnsibleError) as raised:
        parse(fleet, tmp_path, config)
    assert message in str(raised.value), str(raised.value)
    assert "Traceback" not in str(raised.value)
    # Refused before any request reached Resource Manager.
    assert fleet.graph_queries(mark) == []


def test_missing_credentials_are_named_with_where_to_set_them(fleet, tmp_path):
    with pytest.raises(AnsibleParserError, match="needs client_id, secret and tenant; secret missing"):
        parse(fleet, tmp_path, {"auth_source": "env"}, environ=dict(AWX_ENV, AZURE_SECRET=""))


def test_a_wrong_secret_fails_with_the_modules_sign_in_message(fleet, tmp_path):
    with pytest.raises(AnsibleParserError) as raised:
        parse(fleet, tmp_path, {}, environ=dict(AWX_ENV, AZURE_SECRET="wrong"))
    assert "AADSTS7000215" in str(raised.value) and "Check client_id, secret and tenant" in str(raised.value)


def test_credentials_from_the_configuration_may_be_templates(fleet, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_SECRET", AWX_ENV["AZURE_SECRET"])
    config = {"client_id": AWX_ENV["AZURE_CLIENT_ID"], "tenant": AWX_ENV["AZURE_TENANT"], "subscription_id": SUB1,
              "secret": "{{ lookup('ansible.builtin.env', 'FLEET_SECRET') }}"}
    assert parse(fleet, tmp_path, config, environ={}).hosts == ["api0", "api1", "solo", "web0"]


def test_ansible_azure_auth_source_is_read_from_the_environment(fleet, tmp_path, monkeypatch):
    # auth_source cli would not use the service principal of the environment: the run fails at
    # Azure CLI's sign-in, which proves the variable was read (no az on this machine).
    monkeypatch.setenv("ANSIBLE_AZURE_AUTH_SOURCE", "cli")
    with pytest.raises(AnsibleParserError, match="Signing in to Azure with cli"):
        parse(fleet, tmp_path, {})


# -- Resource Manager's faults -----------------------------------------------------------------------------

def test_a_403_from_resource_graph_names_the_role(fleet, tmp_path):
    fleet.mock.control("POST", "arm/faults", {"kind": "status", "status": 403, "code": "AuthorizationFailed",
                                              "count": 1, "paths": [GRAPH_PATH]})
    with pytest.raises(AnsibleParserError) as raised:
        parse(fleet, tmp_path, {})
    message = str(raised.value)
    assert message.startswith("Querying Resource Graph: HTTP 403 AuthorizationFailed"), message
    assert "reading needs Reader" in message


def test_throttling_waits_for_retry_after_on_the_mocks_clock(fleet, tmp_path):
    mark = fleet.mark()
    fleet.mock.control("POST", "arm/throttle", {"count": 2, "retry_after": 7})
    parsed = parse(fleet, tmp_path, {})
    assert parsed.hosts == ["api0", "api1", "solo", "web0"]
    assert parsed.slept == [7, 7]
    assert [q["status"] for q in fleet.graph_queries(mark)] == [429, 429, 200]


def test_throttling_past_retry_timeout_fails_with_the_modules_message(fleet, tmp_path):
    fleet.mock.control("POST", "arm/throttle", {"count": 5, "retry_after": 60})
    with pytest.raises(AnsibleParserError) as raised:
        parse(fleet, tmp_path, {"retry_timeout": 30})
    assert "HTTP 429" in str(raised.value) and "would pass retry_timeout (30 s)" in str(raised.value), str(raised.value)


def test_a_row_no_vm_can_be_named_for_fails_the_source(fleet, tmp_path, monkeypatch):
    rows = [{"id": "/subscriptions/%s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm" % SUB1,
             "properties": {"EventId": API_REBOOT, "EventStatus": "Scheduled", "Resources": ["vm"]}}]
    monkeypatch.setattr(_arm.Session, "query_all", lambda self, subscriptions, query: list(rows))
    with pytest.raises(AnsibleParserError, match=r"Resource Graph row #1 has the id .* which is not a scheduled "
                                                 r"event's id, so no VM can be named for it"):
        parse(fleet, tmp_path, {})
    rows[:] = ["not an object"]
    with pytest.raises(AnsibleParserError, match="Resource Graph row #1 is not an object"):
        parse(fleet, tmp_path, {})


# -- ansible-inventory ---------------------------------------------------------------------------------------

def plain(value):
    """ansible-inventory's JSON with the untrusted strings ({"__ansible_unsafe": text}) as text."""
    if isinstance(value, dict):
        return value["__ansible_unsafe"] if set(value) == {"__ansible_unsafe"} else dict(
            (k, plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def ansible_inventory(fleet, source, *options, **environ):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "AZURE_")))
    env.update(environ)
    env.update(AWX_ENV, REQUESTS_CA_BUNDLE=fleet.mock.ca_path, ANSIBLE_COLLECTIONS_PATH=FARM, ANSIBLE_NOCOLOR="1",
               ANSIBLE_INVENTORY_UNPARSED_FAILED="true", ANSIBLE_LOCAL_TEMP=str(fleet.workdir / "tmp"))
    proc = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", source] + list(options),
                          env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, check=False)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


GRAPH = """\
@all:
  |--@ungrouped:
  |--@event_Reboot:
  |  |--api0
  |  |--api1
  |  |--db0
  |  |--solo
  |--@status_Scheduled:
  |  |--api0
  |  |--api1
  |  |--db0
  |  |--solo
  |  |--web0
  |--@scope_virtualMachineScaleSets:
  |  |--api0
  |  |--api1
  |--@event_Freeze:
  |  |--api1
  |--@status_Started:
  |  |--api1
  |--@scope_virtualMachines:
  |  |--db0
  |  |--solo
  |--@event_Redeploy:
  |  |--web0
  |--@scope_availabilitySets:
  |  |--web0
"""


def test_ansible_inventory_graph_then_list_from_the_cache(fleet, tmp_path):
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    write_config(inventory, {"cloud_environment": fleet.mock.arm_url, "subscriptions": [SUB1, SUB2],
                             "keyed_groups": KEYED_GROUPS, "cache": True,
                             "cache_plugin": "ansible.builtin.jsonfile",
                             "cache_connection": str(tmp_path / "cache")})
    source = os.path.join(str(inventory), "fleet_events.yml")
    mark = fleet.mark()
    code, out, err = ansible_inventory(fleet, source, "--graph")
    assert code == 0, err
    assert out == GRAPH
    assert len(fleet.graph_queries(mark)) == 1

    # A second source in the same directory stands in for azure_rm: hosts merge by name, so its
    # connection variables join the plugin's.
    (inventory / "addresses.yml").write_text(yaml.safe_dump({"all": {"hosts": {"api1": {"ansible_host": "10.0.0.5"}}}}))
    mark = fleet.mark()
    code, out, err = ansible_inventory(fleet, str(inventory), "--list")
    assert code == 0, err
    assert fleet.graph_queries(mark) == []  # the cache answered
    listed = json.loads(out)
    hostvars = listed["_meta"]["hostvars"]
    # What Azure said is marked untrusted (never templated), as ansible-core marks any plugin's data.
    assert hostvars["solo"]["scheduled_events"][0]["description"] == {"__ansible_unsafe": TEMPLATED}
    assert hostvars["api1"]["ansible_host"] == "10.0.0.5"  # from a YAML file: trusted
    hostvars = plain(hostvars)
    events = info_events(fleet, [SUB1, SUB2])
    assert hostvars["api1"]["scheduled_events"] == [events[API_FREEZE], events[API_REBOOT]]
    assert hostvars["web0"]["scheduled_events"] == [events[WEB_REDEPLOY]]
    assert sorted(listed["event_Reboot"]["hosts"]) == ["api0", "api1", "db0", "solo"]

    # --flush-cache asks Resource Graph again, as does a change of the filters.
    mark = fleet.mark()
    assert ansible_inventory(fleet, source, "--graph", "--flush-cache")[0] == 0
    assert len(fleet.graph_queries(mark)) == 1
    write_config(inventory, {"cloud_environment": fleet.mock.arm_url, "event_types": ["Freeze"], "cache": True,
                             "cache_plugin": "ansible.builtin.jsonfile", "cache_connection": str(tmp_path / "cache")})
    code, out, err = ansible_inventory(fleet, source, "--graph")
    assert (code, out) == (0, "@all:\n  |--@ungrouped:\n  |  |--api1\n"), err
    assert len(fleet.graph_queries(mark)) == 2


def test_ansible_inventory_shows_the_error_without_a_traceback(fleet, tmp_path):
    fleet.mock.control("POST", "arm/faults", {"kind": "status", "status": 403, "code": "AuthorizationFailed",
                                              "count": 1, "paths": [GRAPH_PATH]})
    source = write_config(tmp_path, {"cloud_environment": fleet.mock.arm_url})
    code, out, err = ansible_inventory(fleet, source, "--list")
    assert code != 0
    assert "Querying Resource Graph: HTTP 403 AuthorizationFailed" in err, err
    assert "Traceback" not in err


# -- the guide ----------------------------------------------------------------------------------------------

GUIDE = os.path.join(RST, "fleet_inventory.rst")


def guide_configurations():
    return [yaml.safe_load(block) for block in code_blocks(GUIDE, "yaml")
            if "plugin: azure_imds.scheduled_events.fleet_events" in block]


def test_the_guides_configuration_gives_the_guides_graph(fleet, tmp_path):
    first = code_blocks(GUIDE, "yaml")[0]
    assert first.startswith("# inventory/fleet_events.yml\n")
    (tmp_path / "fleet_events.yml").write_text(first)
    code, out, err = ansible_inventory(fleet, str(tmp_path / "fleet_events.yml"), "--graph",
                                       AZURE_CLOUD_ENVIRONMENT=fleet.mock.arm_url)
    assert code == 0, err
    shown = [block for block in code_blocks(GUIDE, "text") if block.startswith("@all:")]
    assert [out] == shown


def test_every_configuration_of_the_guide_is_accepted(fleet, tmp_path):
    configurations = guide_configurations()
    assert len(configurations) == 3
    for config in configurations:
        config.pop("plugin")
        if "cache_connection" in config:
            config["cache_connection"] = str(tmp_path / "cache")
        assert "solo" in parse(fleet, tmp_path, config).hosts
