#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduled_event_approve
short_description: Approve (start now) Azure Scheduled Events of this VM
version_added: 0.1.0
description:
  - Tells the Azure Instance Metadata Service (IMDS) that the selected scheduled events may start
    now instead of at their C(NotBefore), typically once the VM has been drained.
  - Select the events by O(event_ids), or by the same filters as
    M(azure_imds.scheduled_events.scheduled_event_info). Unlike there, O(this_host_only) defaults
    to V(true), so by default only events that name this VM are approved.
  - Only events in C(Scheduled) status are approved, all of them in one request. Events already
    C(Started) are reported in RV(already_started) and change nothing, so running the task again is
    safe.
  - IMDS answers only from inside the VM, so this module runs on the managed VM. It needs nothing
    there but Python 3.
extends_documentation_fragment:
  - azure_imds.scheduled_events.imds
  - azure_imds.scheduled_events.imds.filters
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the events and reports what it would approve in RV(approved), without posting.
  diff_mode:
    support: none
    details:
      - Approval is not a state IMDS reports back (an approved event may stay C(Scheduled) while Azure
        waits for other tenants), so there is no before and after to compare; RV(approved) is the
        preview in check mode.
  platform:
    platforms: [posix, windows]
options:
  this_host_only:
    description:
      - Approve only events whose C(Resources) name this VM (see O(resource_name)).
      - Approving moves an event for every VM it names; set V(false) to approve, from this VM, events
        that name only other VMs.
      - Ids given in O(event_ids) that are in the document but do not name this VM are returned in
        RV(not_this_host).
    type: bool
    default: true
  leader_only:
    description:
      - Approve an event only when this VM is the first name in its C(Resources), the approver
        Microsoft suggests for a group. Other VMs of the group return the event in RV(not_leader) and
        change nothing, so the same task can run on every VM of an availability set.
    type: bool
    default: false
  fail_on_missing:
    description:
      - Fail, before approving anything, when an id of O(event_ids) is not in the document.
      - By default such ids are only returned in RV(missing); a cancelled or finished event leaves the
        document, which is usually the outcome wanted anyway.
    type: bool
    default: false
notes:
  - IMDS answers 200 to an approval even when another VM of the group has already approved the same
    event; approving twice is harmless.
  - This VM's name is read from IMDS when O(resource_name) is not set and O(this_host_only) or
    O(leader_only) needs it.
  - An event of the document whose C(EventId) cannot be read (not a string, or not a GUID) is never
    approved, since an approval names the event by its C(EventId). The module warns about it and
    goes on with the other events; it is left out of every list it returns.
seealso:
  - module: azure_imds.scheduled_events.scheduled_event_info
  - name: Azure Scheduled Events for Linux VMs
    description: Approval of events and the documented choice of one approver per group.
    link: https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: Read the scheduled events of this VM
  azure_imds.scheduled_events.scheduled_event_info:
    this_host_only: true
  register: scheduled

- name: Approve the events that were read, once the VM is drained
  azure_imds.scheduled_events.scheduled_event_approve:
    event_ids: "{{ scheduled.events | map(attribute='event_id') | list }}"
  when: scheduled.events | length > 0
  register: approval

- name: Report what was approved and what had started already
  ansible.builtin.debug:
    msg: "approved {{ approval.approved }}, already started {{ approval.already_started }}"
  when: approval is not skipped

- name: Read the freezes planned for this VM
  azure_imds.scheduled_events.scheduled_event_info:
    event_types: [Freeze]
    event_statuses: [Scheduled]
    this_host_only: true
  register: freezes

# Microsoft's sample approves a Freeze at once when 0 <= DurationInSeconds < 9; -1 is unknown.
- name: Approve at once the freezes announced as shorter than 9 seconds
  azure_imds.scheduled_events.scheduled_event_approve:
    event_ids: "{{ short }}"
  vars:
    short: "{{ freezes.events | selectattr('duration_in_seconds', 'ge', 0) | selectattr('duration_in_seconds', 'lt', 9)
               | map(attribute='event_id') | list }}"
  when: short | length > 0

- name: On every VM of an availability set, let only the first VM named by each event approve it
  azure_imds.scheduled_events.scheduled_event_approve:
    event_types: [Reboot, Redeploy]
    this_host_only: false
    leader_only: true
  register: group_approval

- name: Show which events another VM is to approve
  ansible.builtin.debug:
    var: group_approval.not_leader
"""

RETURN = r"""
approved:
  description:
    - EventIds posted in the one approval request, exactly as IMDS spelled them. In check mode, the
      ids that would have been posted.
  returned: success
  type: list
  elements: str
  sample: [C7061BAC-AFDC-4513-B24B-AA5F13A16123]
already_started:
  description: Selected EventIds that IMDS already shows as C(Started); nothing is posted for them.
  returned: success
  type: list
  elements: str
  sample: []
missing:
  description:
    - Ids of O(event_ids), as given, that are not in the document (cancelled, finished, or never
      there). See O(fail_on_missing).
  returned: success
  type: list
  elements: str
  sample: []
not_leader:
  description:
    - With O(leader_only), selected C(Scheduled) EventIds whose C(Resources) start with another VM,
      which is to approve them; nothing is posted for them.
  returned: success
  type: list
  elements: str
  sample: []
not_this_host:
  description:
    - Ids of O(event_ids) that are in the document but do not name this VM, left alone because
      O(this_host_only) is V(true).
  returned: success
  type: list
  elements: str
  sample: []
events:
  description:
    - The selected events (approved, already started or left to the leader) as they were before the
      approval, in the form M(azure_imds.scheduled_events.scheduled_event_info) returns its RV(events),
      including C(affects_this_host) and C(seconds_to_not_before).
  returned: success
  type: list
  elements: dict
  sample:
    - event_id: C7061BAC-AFDC-4513-B24B-AA5F13A16123
      event_type: Freeze
      event_status: Scheduled
      resource_type: VirtualMachine
      resources: [web_0]
      not_before: '2022-04-11T22:26:58Z'
      description: Host server is undergoing maintenance.
      event_source: Platform
      duration_in_seconds: 9
      affects_this_host: true
      seconds_to_not_before: 842.5
document_incarnation:
  description: C(DocumentIncarnation) of the document the selection was made from.
  returned: success
  type: int
  sample: 3
resource_name:
  description:
    - This VM's name as used for O(this_host_only) and O(leader_only), from O(resource_name) or IMDS;
      V(null) when IMDS did not know it and neither option needed it.
  returned: success
  type: str
  sample: web_0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event, _module_runner, _options


def argument_spec():
    spec = _options.imds_argument_spec()
    spec.update(_options.filter_argument_spec())
    spec.update(
        this_host_only=dict(type="bool", default=True),
        leader_only=dict(type="bool", default=False),
        fail_on_missing=dict(type="bool", default=False),
    )
    return spec


class Plan:
    """What one run does with each selected event; the same in check mode and for real."""

    def __init__(self, events, name, leader_only):
        self.events = []
        self.approve = []
        self.already_started = []
        self.not_leader = []
        #: Warnings for selected events that are never approved because their EventId could not be read.
        self.unapprovable = []
        for event in events:
            if not _event.is_event_id(event["event_id"]):
                # Without its own EventId an approval would start nothing or, worse, another event.
                problem = ("could not be read" if event["event_id"] is None
                           else "%r is not a GUID" % (event["event_id"],))
                self.unapprovable.append(
                    "Not approved: a selected event (EventType %r) whose EventId %s (see the warning about the document). "
                    "An approval names the event by its EventId, so this one cannot be approved; the other events "
                    "are handled as usual." % (event.get("event_type"), problem))
                continue
            self.events.append(event)
            if event["event_status"] == "Started":
                self.already_started.append(event["event_id"])
            elif event["event_status"] != "Scheduled":
                continue
            elif leader_only and not _event.is_leader(event, name):
                self.not_leader.append(event["event_id"])
            else:
                self.approve.append(event["event_id"])


def needs_name(params):
    for option in ("this_host_only", "leader_only"):
        if params[option]:
            return option
    return None


def approve(module, client, runtime):
    params = module.params
    name = _module_runner.resource_name(module, client, needed_by=needs_name(params))
    scheduled = client.get_scheduled_events()
    _module_runner.report_unreadable(module, scheduled)
    wanted = params["event_ids"] or []
    missing = [event_id for event_id in wanted if scheduled.find(event_id) is None]
    if missing and params["fail_on_missing"]:
        module.fail_json(
            msg="EventIds not in the Scheduled Events document (incarnation %d): %s. They may have been cancelled "
                "or finished; nothing was approved. Read current ids with scheduled_event_info, or set "
                "fail_on_missing to false." % (scheduled.incarnation, ", ".join(missing)),
            missing=missing, document_incarnation=scheduled.incarnation)
    selected = _event.select_events(scheduled.events, resource_name=name, this_host_only=params["this_host_only"],
                                    **_options.filter_kwargs(params))
    not_this_host = []
    if params["this_host_only"]:
        not_this_host = [event_id for event_id in wanted
                         if scheduled.find(event_id) is not None and not _event.affects(scheduled.find(event_id), name)]
    plan = Plan(selected, name, params["leader_only"])
    for warning in plan.unapprovable:
        module.warn(warning)
    if plan.approve and not module.check_mode:
        client.approve(plan.approve)
    module.exit_json(
        changed=bool(plan.approve),
        approved=plan.approve,
        already_started=plan.already_started,
        missing=missing,
        not_leader=plan.not_leader,
        not_this_host=not_this_host,
        events=_module_runner.annotated(plan.events, name, runtime),
        document_incarnation=scheduled.incarnation,
        resource_name=name,
    )


def main(runtime=None):
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    _module_runner.run(module, approve, runtime)


if __name__ == "__main__":
    main()
