# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet: VMs, their groups (who sees whose events) and their instance metadata."""

from __future__ import print_function

import collections
import copy
import re
import uuid

from .checks import MockError, _check_keys, _string
from .policy import check_policy
from .rules import BROADCAST_KINDS, DEFAULT_VM_NAME, KIND_ALIASES, STANDALONE, _NAMESPACE, _VM_NAME_RE


# Enough for a large fleet benchmark; every VM carries its own instance document in memory.
MAX_FLEET_VMS = 5000
# CLI short kinds that are a scale set with the GPU single-fault-domain flag set.
GPU_FD1_KINDS = ("vmss_gpu_fd1", "scale_set_gpu_fd1")
GPU_FD1_KEY = "gpu_single_fault_domain"


# Where a group's VMs live in Azure Resource Manager, unless the fleet document says otherwise.
DEFAULT_SUBSCRIPTION = "8d10da13-8125-4ba9-a717-bf7490507b3d"
DEFAULT_RESOURCE_GROUP = "mock-imds-rg"
DEFAULT_LOCATION = "westeurope"
PLACEMENT_KEYS = ("subscription_id", "resource_group", "location", "zones")
_GUID_RE = re.compile(r"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
# Resource group names as Azure allows them: letters, digits, '_', '-', '.', '(', ')'; not ending in '.'.
_RESOURCE_GROUP_RE = re.compile(r"\A[A-Za-z0-9_().-]{0,89}[A-Za-z0-9_()-]\Z")
_LOCATION_RE = re.compile(r"\A[a-z0-9]{1,40}\Z")
_ZONE_RE = re.compile(r"\A[1-9]\Z")


class Placement(object):
    """Subscription, resource group, location and zones of a group (or of the standalone VM)."""
    __slots__ = ("subscription_id", "resource_group", "location", "zones", "policy")

    def __init__(self, subscription_id, resource_group, location, zones, policy=None):
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self.location = location
        self.zones = zones
        self.policy = policy


def _placement(doc, where, inherit=None):
    """The placement keys of a fleet document or group, checked; missing ones come from inherit."""
    base = inherit or Placement(DEFAULT_SUBSCRIPTION, DEFAULT_RESOURCE_GROUP, DEFAULT_LOCATION, None)
    subscription = doc.get("subscription_id", base.subscription_id)
    if not isinstance(subscription, str) or not _GUID_RE.match(subscription):
        raise MockError("%s.subscription_id must be a GUID such as %s, got %r"
                        % (where, DEFAULT_SUBSCRIPTION, subscription))
    group = doc.get("resource_group", base.resource_group)
    if not isinstance(group, str) or not _RESOURCE_GROUP_RE.match(group):
        raise MockError("%s.resource_group must be a resource group name (1-90 letters, digits, '_', '-', '.', "
                        "'(' or ')', not ending in '.'), got %r" % (where, group))
    location = doc.get("location", base.location)
    if not isinstance(location, str) or not _LOCATION_RE.match(location):
        raise MockError("%s.location must be an Azure region name in lower case such as westeurope, got %r"
                        % (where, location))
    zones = doc.get("zones", base.zones)
    if zones is not None and (not isinstance(zones, list) or not zones or len(zones) > 3 or not all(
            isinstance(z, str) and _ZONE_RE.match(z) for z in zones)):
        raise MockError("%s.zones must be a list of 1 to 3 zone names such as [\"1\", \"2\"], or null, got %r"
                        % (where, zones))
    policy = check_policy(doc["scheduled_events_policy"], where + ".scheduled_events_policy") \
        if "scheduled_events_policy" in doc else base.policy
    return Placement(subscription.lower(), group, location, None if zones is None else list(zones), policy)


class Vm(object):
    __slots__ = ("name", "group", "kind", "index", "members", "instance", "gpu_fd1", "placement")

    def __init__(self, name, group, kind, index, gpu_fd1=False, placement=None):
        self.name = name
        self.group = group
        self.kind = kind
        self.index = index
        self.gpu_fd1 = gpu_fd1
        self.members = frozenset([name])  # who sees an event that names this VM
        self.instance = None
        self.placement = placement

    @property
    def zone(self):
        """The VM's own zone: one of its group's zones (zonal VMs in turn over 1, 2, 3 by default)."""
        zones = self.placement.zones
        if zones is None and self.kind == "zonal":
            zones = ["1", "2", "3"]
        return zones[self.index % len(zones)] if zones else ""


def parse_fleet_spec(spec, number=1):
    """CLI short form `KIND:vm,vm` or `KIND:GROUP:vm,vm` -> a fleet group dict."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or (parts[0] not in KIND_ALIASES and parts[0] not in GPU_FD1_KINDS):
        raise MockError("--fleet %r: expected KIND:VM,VM or KIND:GROUP:VM,VM with KIND one of avset, vmss, "
                        "vmss_gpu_fd1, zonal (or a JSON file path)" % (spec,))
    name = parts[1] if len(parts) == 3 else "%s%d" % (parts[0], number)
    vms = [v for v in parts[-1].split(",") if v]
    if parts[0] in GPU_FD1_KINDS:
        return {"name": name, "kind": "scale_set", "vms": vms, GPU_FD1_KEY: True}
    return {"name": name, "kind": KIND_ALIASES[parts[0]], "vms": vms}


class Fleet(object):
    """VMs by name, their groups and their instance metadata; built from a fleet document."""

    GROUP_KEYS = ("name", "kind", "vms", "compute", GPU_FD1_KEY, "scheduled_events_policy") + PLACEMENT_KEYS
    DOC_KEYS = ("default_vm", "groups", "scheduled_events_policy") + PLACEMENT_KEYS

    def __init__(self, doc=None, default_vm=None):
        doc = {} if doc is None else doc
        _check_keys(doc, self.DOC_KEYS, "fleet")
        self.placement = _placement(doc, "fleet")
        self._doc_extra = dict((k, copy.deepcopy(doc[k])) for k in self.DOC_KEYS[2:] if k in doc)
        groups = doc.get("groups", [])
        if not isinstance(groups, list) or len(groups) > MAX_FLEET_VMS:
            raise MockError("fleet.groups must be a list of at most %d {name, kind, vms} objects" % MAX_FLEET_VMS)
        self.default_vm = default_vm or doc.get("default_vm") or DEFAULT_VM_NAME
        self._check_name(self.default_vm, "fleet.default_vm")
        self.groups = []
        self.vms = collections.OrderedDict()
        group_names = set()
        for number, group in enumerate(groups):
            where = "fleet.groups[%d]" % number
            _check_keys(group, self.GROUP_KEYS, where)
            name, kind, members = group.get("name"), group.get("kind"), group.get("vms")
            _string(name, where + ".name", maximum=80)
            if name in group_names:
                raise MockError("%s.name must be unique: %r names two groups" % (where, name))
            group_names.add(name)
            if not isinstance(kind, str) or kind not in KIND_ALIASES:
                raise MockError("%s.kind must be one of availability_set, scale_set, zonal (or avset, vmss), "
                                "got %r" % (where, kind))
            kind = KIND_ALIASES[kind]
            if not isinstance(members, list) or not members:
                raise MockError("%s.vms must be a non-empty list of VM names" % where)
            if len(self.vms) + len(members) > MAX_FLEET_VMS:
                raise MockError("fleet: at most %d VMs in all; split the test or use fewer VMs" % MAX_FLEET_VMS)
            compute = group.get("compute", {})
            if not isinstance(compute, dict):
                raise MockError("%s.compute must be an object of compute fields to override" % where)
            gpu_fd1 = group.get(GPU_FD1_KEY, False)
            if not isinstance(gpu_fd1, bool) or (gpu_fd1 and kind != "scale_set"):
                raise MockError("%s.%s must be true or false, and true only for a scale_set (GPU VMs in a scale set "
                                "with one fault domain see only their own events), got %r" % (where, GPU_FD1_KEY, gpu_fd1))
            placement = _placement(group, where, self.placement)
            canon = {"name": name, "kind": kind, "vms": list(members)}
            canon.update((k, copy.deepcopy(group[k])) for k in PLACEMENT_KEYS + ("scheduled_events_policy",)
                         if k in group)
            if compute:
                canon["compute"] = dict(compute)
            if gpu_fd1:
                canon[GPU_FD1_KEY] = True
            self.groups.append(canon)
            vms = []
            for index, vm_name in enumerate(members):
                self._check_name(vm_name, "%s.vms[%d]" % (where, index))
                if vm_name in self.vms:
                    raise MockError("%s: VM %r is already in another group; VM names must be unique"
                                    % (where, vm_name))
                vm = Vm(vm_name, name, kind, index, gpu_fd1, placement)
                self.vms[vm_name] = vm
                vms.append(vm)
            if kind in BROADCAST_KINDS and not gpu_fd1:
                members_set = frozenset(vm.name for vm in vms)
                for vm in vms:
                    vm.members = members_set
        if self.default_vm not in self.vms:
            standalone = Vm(self.default_vm, None, STANDALONE, 0, placement=self.placement)
            self.vms[self.default_vm] = standalone
            self.vms.move_to_end(self.default_vm, last=False)
        overrides = dict((g["name"], g.get("compute", {})) for g in self.groups)
        for number, vm in enumerate(self.vms.values()):
            vm.instance = _instance_document(vm, number, overrides.get(vm.group, {}))

    @staticmethod
    def _check_name(name, where):
        if not isinstance(name, str) or not _VM_NAME_RE.fullmatch(name):
            raise MockError("%s: %r is not a usable VM name (letters, digits, '_', '.', '-'; up to 80 "
                            "characters, starting with a letter or digit)" % (where, name))

    def document(self):
        doc = {"default_vm": self.default_vm, "groups": copy.deepcopy(self.groups)}
        doc.update(copy.deepcopy(self._doc_extra))
        return doc

    def audience(self, resources):
        """The VMs that see an event naming these resources."""
        seen = set()
        for name in resources:
            seen |= self.vms[name].members
        return frozenset(seen)


def _instance_document(vm, number, overrides):
    """Plausible /metadata/instance content for one VM (every primitive a string, as IMDS does)."""
    subscription = vm.placement.subscription_id
    group = vm.placement.resource_group
    computer_name = vm.name
    placement_group = ""
    scale_set = ""
    zone = ""
    resource_id = ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s"
                   % (subscription, group, vm.name))
    if vm.kind == "scale_set":
        scale_set = vm.group
        placement_group = str(uuid.uuid5(_NAMESPACE, "pg/" + vm.group))
        computer_name = "%s%06d" % (vm.group[:9], vm.index)
        resource_id = ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/"
                       "%s/virtualMachines/%d" % (subscription, group, vm.group, vm.index))
    if vm.kind == "zonal" or vm.placement.zones:
        zone = vm.zone
    mac_seed = uuid.uuid5(_NAMESPACE, "mac/" + vm.name).hex.upper()
    compute = {
        "azEnvironment": "AzurePublicCloud",
        "additionalCapabilities": {"hibernationEnabled": "false"},
        "evictionPolicy": "",
        "extendedLocation": {"name": "", "type": ""},
        "host": {"id": ""},
        "hostGroup": {"id": ""},
        "isHostCompatibilityLayerVm": "false",
        "licenseType": "",
        "location": vm.placement.location,
        "name": vm.name,
        "offer": "0001-com-ubuntu-server-jammy",
        "osProfile": {"adminUsername": "azureuser", "computerName": computer_name,
                      "disablePasswordAuthentication": "true"},
        "osType": "Linux",
        "physicalZone": "",
        "placementGroupId": placement_group,
        "plan": {"name": "", "product": "", "publisher": ""},
        "platformFaultDomain": str(vm.index % 2) if vm.kind == "availability_set" else "0",
        "platformSubFaultDomain": "",
        "platformUpdateDomain": str(vm.index % 5) if vm.kind == "availability_set" else "0",
        "priority": "Regular",
        "provider": "Microsoft.Compute",
        "publicKeys": [],
        "publisher": "canonical",
        "resourceGroupName": group,
        "resourceId": resource_id,
        "securityProfile": {"encryptionAtHost": "false", "secureBootEnabled": "true", "securityType": "TrustedLaunch",
                            "virtualTpmEnabled": "true"},
        "sku": "22_04-lts-gen2",
        "subscriptionId": subscription,
        "tags": "mock_imds:true",
        "tagsList": [{"name": "mock_imds", "value": "true"}],
        "userData": "",
        "version": "22.04.202404080",
        "vmId": str(uuid.uuid5(_NAMESPACE, "vm/" + vm.name)),
        "vmScaleSetName": scale_set,
        "vmSize": "Standard_ND96asr_v4" if vm.gpu_fd1 else "Standard_D2s_v5",
        "zone": zone,
    }
    compute.update(overrides)
    network = {"interface": [{
        "ipv4": {
            "ipAddress": [{"privateIpAddress": "10.0.%d.%d" % (number // 250, number % 250 + 4),
                           "publicIpAddress": ""}],
            "subnet": [{"address": "10.0.0.0", "prefix": "16"}],
        },
        "ipv6": {"ipAddress": []},
        "macAddress": "000D3A" + mac_seed[:6],
    }]}
    return {"compute": compute, "network": network}
