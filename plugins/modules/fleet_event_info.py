#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_event_info
short_description: List the Scheduled Events of a whole fleet from Azure Resource Graph (preview)
version_added: 0.1.0
description:
  - Reads Scheduled Events of every VM of one or more subscriptions from Azure Resource Graph (the
    table C(maintenanceresources), rows of type C(microsoft.maintenance/scheduledevents)), without a
    connection to any VM. Works for Windows and Linux VMs alike.
  - This is a B(preview) of Azure. Events appear in Resource Graph only for VMs whose
    scheduledEventsPolicy publishes them (see M(azure_imds.scheduled_events.scheduled_events_policy)),
    in subscriptions that registered the preview features C(Microsoft.Compute/SendScheduledEventsPolicy)
    and C(Microsoft.Maintenance/ScheduledEventsActivity). Resource Graph lags IMDS and has a quota per
    user; the in-VM path (M(azure_imds.scheduled_events.scheduled_event_info)) stays the fastest.
  - The signed-in principal needs read access (the Reader role) on the subscriptions.
  - Every page is read (the query projects the row C(id), without which Resource Graph sends no
    C($skipToken)). A throttled query (429) waits for C(Retry-After), else for
    C(x-ms-user-quota-resets-after), else a backoff, and never past O(retry_timeout).
  - Runs on the controller; the VMs need nothing. Always C(changed=false).
extends_documentation_fragment:
  - azure_imds.scheduled_events.azure_auth
  - azure_imds.scheduled_events.fleet_filters
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  resource_names:
    description:
      - Keep only events whose C(Resources) name one of these VMs, compared without regard to case
        (filtered after the query).
    type: list
    elements: str
  include_approvals:
    description:
      - Also read who approved each event from outside the VMs, and when, from the Azure Activity Log
        of each subscription (records of C(Microsoft.Maintenance/scheduledevents/acknowledge/action) with
        their C(caller) and C(eventTimestamp)), and return them in each event's C(approvals) (see RV(events)).
      - Resource Graph's rows carry no approver. An approval sent to IMDS from inside a VM is in no log
        Azure keeps; such an event, and one never approved (it starts at C(NotBefore)), has no approvals.
      - Needs read access to the Activity Log (the Reader role on the subscriptions).
    type: bool
    default: false
  approvals_days:
    description:
      - How many days back the Activity Log is read with O(include_approvals). Azure keeps the Activity
        Log 90 days.
    type: int
    default: 7
seealso:
  - module: azure_imds.scheduled_events.fleet_event_approve
  - module: azure_imds.scheduled_events.scheduled_events_policy
  - module: azure_imds.scheduled_events.scheduled_event_info
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: List the planned reboots of two subscriptions
  azure_imds.scheduled_events.fleet_event_info:
    subscriptions:
      - 00000000-0000-0000-0000-000000000000
      - 11111111-1111-1111-1111-111111111111
    event_types: [Reboot, Redeploy]
  register: fleet

- name: Show which VMs each event touches
  ansible.builtin.debug:
    msg: "{{ item.id }}: {{ item.virtual_machine_ids }}"
  loop: "{{ fleet.events }}"
"""

RETURN = r"""
events:
  description:
    - The events, with the keys of M(azure_imds.scheduled_events.scheduled_event_info)'s RV(events)
      normalised by the same code (C(not_before) V(null) when blank, C(duration_in_seconds) V(-1) when
      absent), plus where each lives.
      - With O(include_approvals), each event also has C(approvals), the acknowledgements of this event
        through Resource Manager found in the Activity Log, oldest first, each with C(approved_by) (the
        caller), C(approved_at) (its C(eventTimestamp)), C(operation_id) and C(source) V(activity_log);
        empty when it was approved inside a VM, or not at all.
  returned: success
  type: list
  elements: dict
  sample:
    - event_id: C7061BAC-AFDC-4513-B24B-AA5F13A16123
      event_type: Reboot
      event_status: Scheduled
      resource_type: VirtualMachine
      resources: [web_0]
      not_before: '2022-04-11T22:26:58Z'
      description: Virtual machine is going to be restarted as requested by authorized user.
      event_source: User
      duration_in_seconds: -1
      id: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web_0\
        /providers/Microsoft.Maintenance/scheduledevents/C7061BAC-AFDC-4513-B24B-AA5F13A16123"
      subscription_id: 00000000-0000-0000-0000-000000000000
      resource_group: rg-web
      location: westeurope
      zones: ['1']
      scope_id: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web_0
      virtual_machine_ids:
        - /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web_0
subscriptions:
  description: The subscriptions queried.
  returned: success
  type: list
  elements: str
  sample: [00000000-0000-0000-0000-000000000000]
query:
  description: The Resource Graph query sent (KQL).
  returned: success
  type: str
  sample: "maintenanceresources | where type =~ 'microsoft.maintenance/scheduledevents' | ..."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _activity, _arm, _azure, _defaults, _fleet


def argument_spec():
    spec = _azure.azure_argument_spec()
    spec.update(
        subscriptions=dict(type="list", elements="str"),
        resource_groups=dict(type="list", elements="str"),
        resource_names=dict(type="list", elements="str"),
        event_types=dict(type="list", elements="str"),
        event_sources=dict(type="list", elements="str", choices=list(_defaults.EVENT_SOURCES)),
        event_statuses=dict(type="list", elements="str", choices=list(_fleet.FLEET_STATUSES),
                            default=list(_fleet.DEFAULT_STATUSES)),
        include_approvals=dict(type="bool", default=False),
        approvals_days=dict(type="int", default=7),
    )
    return spec


def check(module):
    _fleet.check_filters(module.params, module.warn)
    if not 1 <= module.params["approvals_days"] <= _activity.ACTIVITY_RETENTION_DAYS:
        raise _azure.AzureInputError("approvals_days must be from 1 to %d (Azure keeps the Activity Log %d days), got %d."
                                     % (_activity.ACTIVITY_RETENTION_DAYS, _activity.ACTIVITY_RETENTION_DAYS,
                                        module.params["approvals_days"]))


def read(module, session):
    warnings = []
    events, subscriptions, query = _fleet.read_events(session, module.params, warnings)
    for warning in warnings:
        module.warn(warning)
    if module.params["include_approvals"]:
        _activity.join_approvals(events, _activity.read_approvals(session, subscriptions, module.params["approvals_days"]))
    module.exit_json(changed=False, events=events, subscriptions=subscriptions, query=query)


def main(runtime=None):
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    _arm.run(module, read, runtime, check=check)


if __name__ == "__main__":
    main()
