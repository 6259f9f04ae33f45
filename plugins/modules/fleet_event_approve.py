#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_event_approve
short_description: Approve Scheduled Events from outside the VMs, through Azure Resource Manager (preview)
version_added: 0.1.0
description:
  - Acknowledges (approves, starts now) scheduled events by their ARM ids, as
    M(azure_imds.scheduled_events.fleet_event_info) returns them, through the Maintenance Resource
    Provider (C(POST <id>/acknowledge)), the control-plane counterpart of
    M(azure_imds.scheduled_events.scheduled_event_approve).
  - The Maintenance Resource Provider has no read of an event, so the module reads the events' state
    from Azure Resource Graph first. An event already C(Started), C(Completed) or C(Canceled), or
    answered with a conflict (409), is returned in RV(already) and not acknowledged again, so running
    the task again changes nothing. An id Resource Graph does not know fails the task, naming it,
    before anything is acknowledged.
  - This is a B(preview) of Azure (feature flags C(Microsoft.Compute/SendScheduledEventsPolicy) and
    C(Microsoft.Maintenance/ScheduledEventsActivity); the acknowledge call is GA since api-version
    2025-11-01). The signed-in principal needs the C(ScheduledEventContributor) role (or Owner or
    Contributor) on the VM, scale set or availability set, and Reader for Resource Graph.
  - What Azure answers for an event already started or over is not documented; a 409 is read as
    "already" (our observation, mirrored by the collection's mock).
  - Runs on the controller; the VMs need nothing.
extends_documentation_fragment:
  - azure_imds.scheduled_events.azure_auth
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the events and returns in RV(approved) what it would acknowledge, sending nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  ids:
    description: ARM ids of scheduled events, the C(id) of each of RV(azure_imds.scheduled_events.fleet_event_info#module:events).
    type: list
    elements: str
    required: true
  api_version:
    description: The Microsoft.Maintenance api-version of the acknowledge call.
    type: str
    default: '2025-11-01'
    choices: ['2023-10-01-preview', '2025-10-01-preview', '2025-11-01']
seealso:
  - module: azure_imds.scheduled_events.fleet_event_info
  - module: azure_imds.scheduled_events.scheduled_event_approve
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: List the planned reboots of the fleet
  azure_imds.scheduled_events.fleet_event_info:
    event_types: [Reboot]
    event_statuses: [Scheduled]
  register: fleet

- name: Approve them (the VMs were drained before)
  azure_imds.scheduled_events.fleet_event_approve:
    ids: "{{ fleet.events | map(attribute='id') | list }}"
  when: fleet.events | length > 0
"""

RETURN = r"""
approved:
  description: Ids acknowledged by this run, as Resource Graph spells them (in check mode, those that would be).
  returned: success
  type: list
  elements: str
  sample:
    - "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web_0\
      /providers/Microsoft.Maintenance/scheduledevents/C7061BAC-AFDC-4513-B24B-AA5F13A16123"
already:
  description: Ids already C(Started), C(Completed) or C(Canceled), or answered with a conflict; nothing was sent for them.
  returned: success
  type: list
  elements: str
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm, _azure, _fleet


def argument_spec():
    spec = _azure.azure_argument_spec()
    spec.update(
        ids=dict(type="list", elements="str", required=True),
        api_version=dict(type="str", default=_azure.DEFAULT_MAINTENANCE_API_VERSION,
                         choices=list(_azure.MAINTENANCE_API_VERSIONS)),
    )
    return spec


def check(module):
    ids = module.params["ids"]
    if not ids:
        raise _azure.AzureInputError("ids is an empty list: give the ids of fleet_event_info's events.")
    bad = [i for i in ids if _fleet.parse_event_id(i) is None]
    if bad:
        raise _azure.AzureInputError(
            "not a scheduled event's ARM id (/subscriptions/<GUID>/resourceGroups/<group>/providers/Microsoft.Compute/"
            "<virtualMachines|virtualMachineScaleSets|availabilitySets>/<name>/providers/Microsoft.Maintenance/"
            "scheduledevents/<EventId>): %s. Take the ids from fleet_event_info's events." % ", ".join(
                _azure._edge.short_repr(b) for b in bad))


def approve(module, session):
    wanted = [_fleet.parse_event_id(i) for i in module.params["ids"]]
    subscriptions = sorted(set(w["subscription_id"] for w in wanted))
    groups = sorted(set(w["resource_group"].lower() for w in wanted))
    query = _fleet.build_query(_fleet.FLEET_STATUSES, groups)
    known = dict((event["id"].lower(), event) for event in _fleet.events_from_rows(session.query_all(
        subscriptions, query)) if event["id"])
    unknown = [i for i in module.params["ids"] if i.lower() not in known]
    if unknown:
        module.fail_json(msg="Resource Graph knows no scheduled event with the id %s (it may not be published yet: "
                             "Resource Graph lags IMDS, and shows only events of scopes whose scheduledEventsPolicy "
                             "publishes them). Nothing was acknowledged." % ", ".join(unknown),
                         approved=[], already=[], status=None, error_code=None, url=None)
    approved, already, seen = [], [], set()
    for given in module.params["ids"]:
        event = known[given.lower()]
        if event["id"].lower() in seen:
            continue
        seen.add(event["id"].lower())
        if event["event_status"] != "Scheduled":
            already.append(event["id"])
            continue
        if not module.check_mode:
            try:
                session.post(event["id"] + "/acknowledge", module.params["api_version"],
                             "Acknowledging %s" % event["id"], scope=event["scope_id"])
            except _azure.AzureError as exc:
                if exc.status == 409:
                    already.append(event["id"])
                    continue
                module.fail_json(msg="%s Acknowledged before this: %s." % (exc, ", ".join(approved) or "none"),
                                 approved=approved, already=already, **exc.to_dict())
        approved.append(event["id"])
    module.exit_json(changed=bool(approved), approved=approved, already=already)


def main(runtime=None):
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    _arm.run(module, approve, runtime, check=check)


if __name__ == "__main__":
    main()
