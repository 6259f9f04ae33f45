# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The VMs named by current Scheduled Events, read from Azure Resource Graph by the same session,
# query and normaliser as fleet_event_info (module_utils _azure, _arm, _fleet); this file only turns
# the events into hosts.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: fleet_events
short_description: The VMs named by current Scheduled Events, from Azure Resource Graph (preview)
version_added: 0.1.0
description:
  - One host per VM that a current scheduled event names (Reboot, Redeploy, Freeze, Preempt,
    Terminate), read from Azure Resource Graph exactly as M(azure_imds.scheduled_events.fleet_event_info)
    reads them, with the same sign-in, query, filters, paging, throttling and error messages.
  - Each host carries C(scheduled_events), the events that touch it, each exactly as
    M(azure_imds.scheduled_events.fleet_event_info) returns it (events without C(not_before), such as
    V(Started) ones, first, then by C(not_before)), and the plain variables C(azure_vm_name),
    C(azure_vm_id), C(azure_resource_group), C(azure_subscription_id), C(azure_location),
    C(azure_zones) (the zones of the event's scope as Resource Graph reports them),
    C(azure_scope_kind) (V(virtualMachines), V(virtualMachineScaleSets) or V(availabilitySets)),
    C(azure_scope_name) and C(azure_scope_id), taken from the host's first event.
  - The plugin sets no C(ansible_host) and no connection variables. Use it beside
    C(azure.azcollection.azure_rm) in one inventory directory, which gives the same VMs their
    addresses; hosts of the same name merge. See the collection's guide C(fleet_inventory).
  - Hostnames are the VM names (O(hostname_source)). Two VMs of the same name (in two resource groups
    or subscriptions) are named C(<name>_<resource group>) (and C(_<subscription id>) if that is
    still ambiguous), with a warning; use O(hostname_source=id) for names that are always unique.
  - This is a B(preview) of Azure. Events appear in Resource Graph only for VMs whose
    scheduledEventsPolicy publishes them (see M(azure_imds.scheduled_events.scheduled_events_policy)).
    The signed-in principal needs the Reader role on the subscriptions.
  - A Resource Graph row no VM can be named for (not an object, or an id that is no scheduled event's
    id) fails the inventory source, since a VM left out silently would miss its maintenance.
  - Requires a YAML configuration file whose name ends with C(fleet_events.yml) or C(fleet_events.yaml),
    as C(azure.azcollection.azure_rm) wants C(azure_rm.yml). Options not listed here are refused.
  - The cache (O(cache)) holds the events, not the hosts, so O(compose), O(groups), O(keyed_groups) and
    O(hostname_source) apply anew on every run; a change of the filters, the subscriptions or the
    cloud misses the cache.
extends_documentation_fragment:
  - azure_imds.scheduled_events.azure_auth
  - azure_imds.scheduled_events.fleet_filters
  - constructed
  - inventory_cache
options:
  plugin:
    description: Marks this file as a configuration of this plugin.
    type: str
    required: true
    choices: [azure_imds.scheduled_events.fleet_events]
  auth_source:
    env:
      - name: ANSIBLE_AZURE_AUTH_SOURCE
  hostname_source:
    description:
      - V(name) names each host by its VM name as the event's C(Resources) spells it (C(myvmss_1) for an
        instance of a Uniform scale set), which C(azure.azcollection.azure_rm) uses with its
        C(plain_host_names) option set.
      - V(id) names each host by its VM's ARM id, unique across resource groups and subscriptions.
    type: str
    choices: [name, id]
    default: name
notes:
  - O(subscription_id), O(client_id), O(secret) and O(tenant) may be templates, such as a lookup.
  - Only O(auth_source) reads an environment variable as a plugin option (E(ANSIBLE_AZURE_AUTH_SOURCE));
    the credentials' variables (E(AZURE_CLIENT_ID) and the others) are read by the sign-in itself, in the
    order O(auth_source) describes, exactly as for the modules.
seealso:
  - module: azure_imds.scheduled_events.fleet_event_info
  - module: azure_imds.scheduled_events.fleet_event_approve
  - name: The azure.azcollection.azure_rm inventory plugin
    description: Every VM with its addresses; use it beside this plugin.
    link: https://docs.ansible.com/ansible/latest/collections/azure/azcollection/azure_rm_inventory.html
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
# fleet_events.yml: the VMs with a scheduled Reboot or Redeploy, grouped by event type and status.
plugin: azure_imds.scheduled_events.fleet_events
auth_source: env   # AWX's Microsoft Azure Resource Manager credential sets AZURE_CLIENT_ID and the others
subscriptions:
  - 00000000-0000-0000-0000-000000000000
event_types: [Reboot, Redeploy]
keyed_groups:
  # event_Reboot, event_Redeploy
  - prefix: event
    key: scheduled_events | map(attribute='event_type') | unique
  # status_Scheduled, status_Started
  - prefix: status
    key: scheduled_events | map(attribute='event_status') | unique
  # scope_web_as (the availability set or scale set of the event)
  - prefix: scope
    key: azure_scope_name
groups:
  # VMs whose maintenance has begun
  started: scheduled_events | selectattr('event_status', 'equalto', 'Started') | list | length > 0
compose:
  next_event_id: scheduled_events[0].event_id
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/ansible/fleet_events
cache_timeout: 60
"""

import collections
import hashlib
import os

from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleOptionsError, AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _azure, _edge, _fleet

# The options that reach the sign-in, the session and the query (the rest are the mixins').
AUTH_OPTIONS = tuple(_azure.azure_argument_spec())
FILTER_OPTIONS = ("subscriptions", "resource_groups", "event_types", "event_sources", "event_statuses")
# Options that may be templates, as azure.azcollection.azure_rm templates its credentials.
TEMPLATED_OPTIONS = ("subscription_id", "client_id", "secret", "tenant")
# What a cached entry is: bump when its shape changes, so an old cache is a miss.
CACHE_FORMAT = 1


def vms_of(event):
    """(scope, [(VM name, VM ARM id)]) of an event: the VM of a VM's event; for a scale set or an
    availability set each VM of Resources (_fleet.virtual_machine_ids, in the same order)."""
    scope = _fleet.parse_event_id(event.get("id"))
    if scope is None:
        return None, []
    if scope["scope_kind"] == "virtualMachines":
        return scope, [(scope["scope_name"], scope["scope_id"])]
    return scope, list(zip(event.get("resources") or [], event.get("virtual_machine_ids") or []))


def _event_order(event):
    # Events without a time (in progress) first, then the soonest.
    return (event.get("not_before") is not None, event.get("not_before") or "", event.get("event_id") or "")


def hosts_from_events(events, hostname_source="name"):
    """({hostname: hostvars}, [warnings]) for fleet_event_info's events: one host per VM, its events
    under scheduled_events. VMs are told apart by ARM id without regard to case."""
    vms = collections.OrderedDict()
    for event in sorted(events, key=_event_order):
        scope, named = vms_of(event)
        for name, vm_id in named:
            vm = vms.get(vm_id.lower())
            if vm is None:
                vm = vms[vm_id.lower()] = {
                    "azure_vm_name": name, "azure_vm_id": vm_id,
                    "azure_resource_group": event.get("resource_group") or scope["resource_group"],
                    "azure_subscription_id": event.get("subscription_id") or scope["subscription_id"],
                    "azure_location": event.get("location"), "azure_zones": event.get("zones"),
                    "azure_scope_kind": scope["scope_kind"], "azure_scope_name": scope["scope_name"],
                    "azure_scope_id": scope["scope_id"], "scheduled_events": []}
            if not any(_fleet.same_id(e.get("id"), event.get("id")) for e in vm["scheduled_events"]):
                vm["scheduled_events"].append(event)
    warnings = []
    if hostname_source == "id":
        return dict((vm["azure_vm_id"], vm) for vm in vms.values()), warnings
    names = _unique_names(list(vms.values()), warnings)
    return dict((names[key], vm) for key, vm in vms.items()), warnings


def _unique_names(vms, warnings):
    """{VM id (lower case): hostname}: the VM name, qualified by resource group (then subscription)
    where two VMs share it."""
    def qualified(vm, depth):
        parts = [vm["azure_vm_name"], (vm["azure_resource_group"] or "").lower(), vm["azure_subscription_id"] or ""]
        return "_".join(parts[:depth + 1])

    names = {}
    depth_of = dict((vm["azure_vm_id"].lower(), 0) for vm in vms)
    for depth in (1, 2):
        counts = collections.Counter(qualified(vm, depth_of[vm["azure_vm_id"].lower()]).lower() for vm in vms)
        clashing = [vm for vm in vms if counts[qualified(vm, depth_of[vm["azure_vm_id"].lower()]).lower()] > 1]
        for vm in clashing:
            depth_of[vm["azure_vm_id"].lower()] = depth
    renamed = sorted(vm["azure_vm_id"] for vm in vms if depth_of[vm["azure_vm_id"].lower()])
    for vm in vms:
        names[vm["azure_vm_id"].lower()] = qualified(vm, depth_of[vm["azure_vm_id"].lower()])
    if renamed:
        warnings.append("fleet_events: several VMs share a name, so these hosts are named <name>_<resource group>"
                        "[_<subscription>]: %s. Set hostname_source: id for names that are always unique."
                        % ", ".join("%s (%s)" % (names[i.lower()], i) for i in renamed))
    return names


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "azure_imds.scheduled_events.fleet_events"

    def __init__(self):
        super(InventoryModule, self).__init__()
        # What the session may use instead of the real environment and clocks (_arm.Runtime): tests
        # set it, as the modules' main(runtime) takes one.
        self.runtime = None

    def verify_file(self, path):
        if super(InventoryModule, self).verify_file(path) and path.endswith(("fleet_events.yml", "fleet_events.yaml")):
            return True
        self.display.debug("fleet_events: %s does not end with fleet_events.yml or fleet_events.yaml" % path)
        return False

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        try:
            config = self._read_config_data(path)
        except AnsibleOptionsError as exc:
            raise AnsibleParserError(self._explain(path, exc))
        self._refuse_unknown_options(config, path)
        try:
            params = self._params()
            events = self._events(path, params, cache)
        except (_azure.AzureError, _edge.ImdsInputError) as exc:
            raise AnsibleParserError(to_native(exc))
        hosts, warnings = hosts_from_events(events, self.get_option("hostname_source"))
        for warning in warnings:
            self.display.warning(warning)
        self._populate(hosts)

    def _explain(self, path, exc):
        """ansible-core's message for a value outside an option's choices, with the choices."""
        known = C.config.get_configuration_definitions("inventory", self._load_name) or {}
        try:
            config = self.loader.load_from_file(path, cache="none")
        except AnsibleError:
            config = None
        for name, value in (config.items() if isinstance(config, dict) else ()):
            choices = (known.get(name) or {}).get("choices")
            values = value if isinstance(value, list) else [value]
            bad = [v for v in values if choices and v not in choices]
            if bad:
                shown = ", ".join(_edge.short_repr(v) for v in bad)
                return "%s: %s: %s is not one of %s." % (path, name, shown, ", ".join(str(c) for c in choices))
        return to_native(exc)

    def _refuse_unknown_options(self, config, path):
        known = C.config.get_configuration_definitions("inventory", self._load_name) or {}
        unknown = sorted(str(key) for key in config if key not in known)
        if unknown:
            raise AnsibleParserError(
                "%s: %s %s no option of %s. Check the spelling; the options are: %s." % (
                    path, ", ".join(unknown), "is" if len(unknown) == 1 else "are", self.NAME, ", ".join(sorted(known))))

    def _params(self):
        """The options as the modules' params, checked as the modules check them."""
        params = dict((name, self.get_option(name)) for name in AUTH_OPTIONS + FILTER_OPTIONS)
        for name in TEMPLATED_OPTIONS:
            if isinstance(params[name], str) and self.templar.is_template(params[name]):
                params[name] = self.templar.template(params[name])
        _azure.check_timeouts(params)
        if params["subscription_id"]:
            _azure.check_guid(params["subscription_id"], "subscription_id")
        _fleet.check_filters(params, self.display.warning)
        return params

    def _events(self, path, params, cache):
        """fleet_event_info's events: from the cache when it holds this query's, else from Resource Graph."""
        if _azure.AZURE_IMPORT_ERROR is not None:
            raise AnsibleError("The %s inventory plugin needs the Python packages %s on the controller (the "
                               "collection's meta/ee-requirements.txt lists them): %s"
                               % (self.NAME, _azure.REQUIRED_LIBRARIES, _azure.AZURE_IMPORT_ERROR))
        use_cache = self.get_option("cache")
        key = self.get_cache_key(path)
        wanted = self._cache_stamp(params)
        if use_cache and cache:
            try:
                entry = self._cache[key]
            except KeyError:
                entry = None
            if isinstance(entry, dict) and entry.get("stamp") == wanted and isinstance(entry.get("events"), list):
                return entry["events"]
        session = (self.runtime or _arm.Runtime()).session(params)
        warnings = []
        events = _fleet.read_events(session, params, warnings, placed_only=True)[0]
        for warning in warnings:
            self.display.warning(warning)
        if use_cache:
            self._cache[key] = {"stamp": wanted, "events": events}
        return events

    def _cache_stamp(self, params):
        """What the cached events answered: the query, the subscriptions, the cloud and who asked (a
        digest), all known without a request."""
        runtime = (self.runtime or _arm.Runtime()).kwargs
        environ = os.environ if runtime.get("environ") is None else runtime["environ"]
        settings = _azure.sign_in_settings(params, environ, runtime.get("home"))
        who = "|".join(str(settings.get(k) or "") for k in ("kind", "client_id", "tenant"))
        return {"format": CACHE_FORMAT, "query": _fleet.query_of(params),
                "subscriptions": params["subscriptions"] or [settings.get("subscription_id")],
                "cloud": params["cloud_environment"] or settings.get("cloud_environment")
                or environ.get(_azure.ENV_VARS["cloud_environment"]),
                "principal": hashlib.sha256(who.encode("utf-8")).hexdigest()[:16]}

    def _populate(self, hosts):
        strict = self.get_option("strict")
        for hostname in sorted(hosts):
            hostvars = hosts[hostname]
            self.inventory.add_host(hostname)
            for name, value in hostvars.items():
                self.inventory.set_variable(hostname, name, value)
            self._set_composite_vars(self.get_option("compose"), hostvars, hostname, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, hostname, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, hostname, strict=strict)
