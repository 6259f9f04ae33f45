#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduled_events_policy
short_description: Read and set the Scheduled Events Policy of a VM, scale set or availability set (preview)
version_added: 0.1.0
description:
  - Reads the C(scheduledEventsPolicy) of a virtual machine, a virtual machine scale set or an
    availability set through Azure Resource Manager and changes the parts given. The VMs of a set
    share the set's policy.
  - An option left out keeps Azure's value. The module reads the whole policy, changes it and writes
    it whole with one PATCH, and writes nothing when nothing would change.
  - The policy is a B(preview) of Azure. The subscription must have registered the preview feature
    C(Microsoft.Compute/SendScheduledEventsPolicy) (and, for Resource Graph and Event Grid,
    C(Microsoft.Maintenance/ScheduledEventsActivity)); without it Azure refuses the policy and the
    module's message names the feature (Azure's exact wording is not documented, our observation).
  - The signed-in principal needs write access to the resource (for example Virtual Machine Contributor).
  - With O(auto_approve_user_reboot) or O(auto_approve_user_redeploy), a reboot or redeploy started by a
    user is never C(Scheduled); it appears C(Started) at once, so an in-VM drain that waits for
    C(Scheduled) never runs.
  - Runs on the controller; the VMs need nothing.
extends_documentation_fragment:
  - azure_imds.scheduled_events.azure_auth
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the policy and reports the change it would make, without writing.
  diff_mode:
    support: full
    details: The policy before and after, as ARM spells it.
  platform:
    platforms: posix
options:
  resource_group:
    description: The resource group of the resource.
    type: str
    required: true
  name:
    description: The name of the VM, scale set or availability set.
    type: str
    required: true
  resource_type:
    description:
      - What O(name) is. A VM inside an availability set or scale set is refused, with a message naming
        the set whose policy applies to it.
    type: str
    default: virtual_machine
    choices: [virtual_machine, virtual_machine_scale_set, availability_set]
  publish_to_event_grid_and_resource_graph:
    description:
      - C(scheduledEventsAdditionalPublishingTargets.eventGridAndResourceGraph.enable). Turning it on
        also sets C(scheduledEventsApiVersion) to C(2020-07-01).
    type: bool
  auto_approve_user_reboot:
    description: C(userInitiatedReboot.automaticallyApprove).
    type: bool
  auto_approve_user_redeploy:
    description: C(userInitiatedRedeploy.automaticallyApprove).
    type: bool
  auto_approve_all_instances_down:
    description: C(allInstancesDown.automaticallyApprove).
    type: bool
  api_version:
    description:
      - The Compute api-version of the requests. C(scheduledEventsPolicy) exists from V(2025-04-01) on;
        an older one is refused before any request.
    type: str
    default: '2025-04-01'
seealso:
  - module: azure_imds.scheduled_events.fleet_event_info
  - name: Scheduled Events Policy
    description: Microsoft's description of the policy and its preview.
    link: https://learn.microsoft.com/azure/virtual-machines/scheduled-event-policy
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: Publish a scale set's events to Resource Graph and Event Grid, and let users reboot at once
  azure_imds.scheduled_events.scheduled_events_policy:
    resource_group: rg-web
    name: web-vmss
    resource_type: virtual_machine_scale_set
    publish_to_event_grid_and_resource_graph: true
    auto_approve_user_reboot: true
  register: policy

- name: Show the policy as Azure holds it
  ansible.builtin.debug:
    var: policy.policy
"""

RETURN = r"""
policy:
  description:
    - The C(scheduledEventsPolicy) after the run (in check mode, as it would be), as ARM spells it;
      V({}) when the resource has none.
  returned: success
  type: dict
  sample:
    scheduledEventsAdditionalPublishingTargets:
      eventGridAndResourceGraph:
        enable: true
        scheduledEventsApiVersion: '2020-07-01'
    userInitiatedReboot:
      automaticallyApprove: true
id:
  description: The ARM id of the resource.
  returned: success
  type: str
  sample: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachineScaleSets/web-vmss
"""

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _azure

KINDS = {
    "virtual_machine": ("virtual_machines", "virtualMachines"),
    "virtual_machine_scale_set": ("virtual_machine_scale_sets", "virtualMachineScaleSets"),
    "availability_set": ("availability_sets", "availabilitySets"),
}
# option -> (path in the policy, value the option sets)
SETTINGS = (
    ("auto_approve_user_reboot", ("userInitiatedReboot", "automaticallyApprove")),
    ("auto_approve_user_redeploy", ("userInitiatedRedeploy", "automaticallyApprove")),
    ("auto_approve_all_instances_down", ("allInstancesDown", "automaticallyApprove")),
)
PUBLISHING = ("scheduledEventsAdditionalPublishingTargets", "eventGridAndResourceGraph")
PUBLISHED_API_VERSION = "2020-07-01"


def argument_spec():
    spec = _azure.azure_argument_spec()
    spec.update(
        resource_group=dict(type="str", required=True),
        name=dict(type="str", required=True),
        resource_type=dict(type="str", default="virtual_machine", choices=list(KINDS)),
        publish_to_event_grid_and_resource_graph=dict(type="bool"),
        auto_approve_user_reboot=dict(type="bool"),
        auto_approve_user_redeploy=dict(type="bool"),
        auto_approve_all_instances_down=dict(type="bool"),
        api_version=dict(type="str", default=_azure.DEFAULT_COMPUTE_API_VERSION),
    )
    return spec


def check(module):
    params = module.params
    _azure.check_name(params["resource_group"], "resource_group")
    _azure.check_name(params["name"], "name")
    _azure.check_api_version(params["api_version"], "api_version", minimum=_azure.MIN_POLICY_API_VERSION)


def desired_policy(current, params):
    """current changed by the options given; an option left out keeps Azure's value."""
    policy = copy.deepcopy(current)
    for option, (section, key) in SETTINGS:
        if params[option] is not None:
            policy.setdefault(section, {})
            if not isinstance(policy[section], dict):
                policy[section] = {}
            policy[section][key] = params[option]
    publish = params["publish_to_event_grid_and_resource_graph"]
    if publish is not None:
        targets = policy.setdefault(PUBLISHING[0], {})
        if not isinstance(targets, dict):
            targets = policy[PUBLISHING[0]] = {}
        target = targets.setdefault(PUBLISHING[1], {})
        if not isinstance(target, dict):
            target = targets[PUBLISHING[1]] = {}
        target["enable"] = publish
        if publish:
            target["scheduledEventsApiVersion"] = PUBLISHED_API_VERSION
    return policy


def apply(module, session):
    params = module.params
    operations, arm_type = KINDS[params["resource_type"]]
    subscription = session.subscription_id
    scope_id = "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/%s/%s" % (
        subscription, params["resource_group"], arm_type, params["name"])
    group = getattr(session.compute(subscription), operations)
    what = "Reading the scheduledEventsPolicy of %s" % scope_id
    resource = session.call(lambda t: group.get(params["resource_group"], params["name"],
                                                api_version=params["api_version"], **t),
                            what, scope=scope_id, feature=_azure.POLICY_FEATURE).as_dict()
    properties = resource.get("properties") or {}
    if arm_type == "virtualMachines":
        for key, kind in (("availabilitySet", "availability set"), ("virtualMachineScaleSet", "scale set")):
            owner = (properties.get(key) or {}).get("id")
            if owner:
                module.fail_json(msg="The VM %s is in the %s %s, whose scheduledEventsPolicy applies to it. Set the "
                                     "policy there: resource_type %s, name %s." % (
                                         params["name"], kind, owner, "availability_set" if key == "availabilitySet"
                                         else "virtual_machine_scale_set", owner.rstrip("/").rsplit("/", 1)[-1]),
                                 status=None, error_code=None, url=None)
    before = properties.get("scheduledEventsPolicy") or {}
    after = desired_policy(before, params)
    changed = after != before
    if changed and not module.check_mode:
        body = {"properties": {"scheduledEventsPolicy": after}}
        what = "Writing the scheduledEventsPolicy of %s" % scope_id

        def send(timeouts):
            if arm_type == "availabilitySets":
                return group.update(params["resource_group"], params["name"], body,
                                    api_version=params["api_version"], **timeouts)
            # polling=False: the PATCH's own answer carries the policy; no sleep between polls.
            return group.begin_update(params["resource_group"], params["name"], body,
                                      api_version=params["api_version"], polling=False, **timeouts).result()
        written = session.call(send, what, scope=scope_id, feature=_azure.POLICY_FEATURE)
        written = written.as_dict() if written is not None else {}
        after = (written.get("properties") or {}).get("scheduledEventsPolicy") or after
    module.exit_json(changed=changed, policy=after, id=resource.get("id") or scope_id,
                     diff={"before": {"scheduledEventsPolicy": before}, "after": {"scheduledEventsPolicy": after}})


def main(runtime=None):
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    _arm.run(module, apply, runtime, check=check)


if __name__ == "__main__":
    main()
