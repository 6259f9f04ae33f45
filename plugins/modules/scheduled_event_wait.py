#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Documentation only: the code is the action plugin plugins/action/scheduled_event_wait.py.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduled_event_wait
short_description: Wait until the Azure Scheduled Events of this VM reach a state
version_added: 0.1.0
description:
  - Waits until the Scheduled Events document of the managed VM, read from the Azure Instance
    Metadata Service (IMDS), reaches a state or satisfies a JMESPath condition, the way
    M(ansible.builtin.wait_for) waits for a port. It lets a rolling playbook say "drain, approve,
    then wait until this VM's maintenance is over", or "do not start the upgrade while the
    platform has maintenance planned here".
  - The VM is polled every O(sleep) seconds by M(azure_imds.scheduled_events.scheduled_event_info),
    run on the managed host for long stretches (up to two minutes) that return as soon as the
    document changes, so a long wait costs a few module runs rather than one per poll. The
    controller decides after each run whether the wait is over. For O(state=absent), V(present),
    V(started) and V(completed) the first run also does the first read and returns at once when the
    state already holds there, so a wait shorter than two minutes is one module run on the host.
  - One deadline, O(timeout), covers everything, O(delay) included; each IMDS request timeout,
    each stretch and each sleep is cut to the time left.
  - The managed host may go away during the wait, as it does when the event is a Reboot, Redeploy
    or Freeze of that very VM. Connection failures, unreachable hosts and IMDS errors are retried
    until the deadline (the connection is reset after each failure, as M(ansible.builtin.reboot)
    does), and the wait resumes from the last document seen. A session that neither answers nor
    fails, as an SSH session does to a VM reset under it, is given up 30 seconds after its run was
    due to end and the connection is reset. Only a failure of the very first read ends the task at
    once, since it means this host or these options cannot work (not an Azure VM, a wrong
    O(imds_url)).
extends_documentation_fragment:
  - azure_imds.scheduled_events.imds
  - azure_imds.scheduled_events.imds.filters
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details:
      - It only reads IMDS, so in check mode it waits exactly as in a normal run, like
        M(ansible.builtin.wait_for). A dry run of a rolling playbook then stops where the real run
        would stop and shows the events that hold it. To skip the wait in a dry run, give the task
        the condition C(not ansible_check_mode) under C(when).
  diff_mode:
    support: none
  platform:
    platforms: [posix, windows]
options:
  state:
    description:
      - What the events that pass the filters must do for the wait to end.
      - V(absent) - no event passes the filters.
      - V(present) - at least one event passes the filters.
      - V(started) - an event that passes the filters has C(EventStatus) C(Started).
      - V(completed) - every event that passed the filters at the first read has left the document
        (finished or cancelled; IMDS has no Completed status). EventIds are compared without regard
        to case, against every event of the document, so an event that only changed status has
        not completed. When no event passes the filters at the first read, the wait ends at once.
      - V(changed) - C(DocumentIncarnation) differs from O(since_incarnation), or, without it, from
        its value at the first read.
      - When O(condition) is set and O(state) is not, the condition alone decides. When both are
        set, both must hold. When neither is set, V(absent) applies.
    type: str
    choices: [absent, present, started, completed, changed]
  condition:
    description:
      - A JMESPath expression evaluated on the controller against the raw document, as IMDS sent it
        (C(DocumentIncarnation), C(Events) with C(EventId), C(EventType), C(EventStatus),
        C(Resources), C(NotBefore), ...). The filters do not apply to it.
      - The wait can end when the result is true by JMESPath's rule - anything but V(false),
        V(null), an empty string, an empty list or an empty object. A number, V(0) included, is
        true, so compare counts explicitly with C(==) (see the examples).
      - See O(state) for how it combines with O(state).
      - Needs the Python library C(jmespath) on the controller (not on the managed host). An
        invalid expression is reported before anything is read.
    type: str
  since_incarnation:
    description:
      - With O(state=changed), the C(DocumentIncarnation) to move away from, typically that of an
        earlier M(azure_imds.scheduled_events.scheduled_event_info) read; when the document already
        differs, the wait ends at once.
      - Only valid with O(state=changed).
      - A whole number from 0 to 9223372036854775807, or its decimal text.
      - Declared C(raw) so that a value such as infinity is refused with this option named; Ansible's
        own integer conversion would fail on it without a name.
    type: raw
  seen_event_ids:
    description:
      - EventIds the play saw before this wait, such as those it approved. An event is reported in
        RV(auto_approved) or RV(started_before_seen) only when this wait sees it for the first time and
        it is C(Started) then; an EventId listed here was seen before, so it is neither.
    type: list
    elements: str
    default: []
  this_host_only:
    description:
      - Keep only events whose C(Resources) name this VM (see O(resource_name)); events of an
        availability set or of a scale set placement group are otherwise shown to every VM of the
        group.
    type: bool
    default: false
  timeout:
    description:
      - Maximum number of seconds to wait, O(delay) included. On timeout the task fails with O(msg).
      - The default covers a Reboot from its announcement to its end (15 minutes of notice, then
        about 10 minutes Started).
      - V(0) reads the document once.
      - A number of seconds from 0 to 86400.
    type: float
    default: 1800
  delay:
    description:
      - Number of seconds to wait before the first read.
      - The first read also sets the starting point of O(state=completed) and O(state=changed).
      - A number of seconds from 0 to 86400.
    type: float
    default: 0
  sleep:
    description:
      - Number of seconds between two reads of the document on the managed host, and between two
        attempts after a failure.
      - IMDS allows five requests per second per VM across every caller, and Microsoft recommends
        once a second.
      - A number of seconds from 0.2 to 86400.
    type: float
    default: 1
  progress_interval:
    description:
      - Every O(progress_interval) seconds of waiting, one line at default verbosity, so that a long
        wait shows in a job log (AWX, CI) before it ends. It names the host, what is waited for,
        the matching events seen now (type, the first 8 characters of the EventId, status), how many
        events the wait has seen, the time elapsed and O(timeout).
      - 'For example C(scheduled_event_wait web_0: waiting for state=started; now: Reboot 7D5C1C4A Scheduled
        (DocumentIncarnation 3\); 1 event seen; 2m00s elapsed of 30m00s).'
      - While the host does not answer (a VM being rebooted), the line says so, with the last error.
      - V(0) turns the lines off; otherwise a number of seconds from 1 to 86400.
    type: float
    default: 60
  msg:
    description:
      - The failure message when O(timeout) passes, replacing the default message, which names the
        state waited for, the document last seen and the last error.
    type: str
notes:
  - The default O(imds_url) is the real service; set O(imds_url) or E(AZURE_IMDS_URL) on the managed
    host to test against the mock (role P(azure_imds.scheduled_events.mock_imds#role)).
  - O(request_timeout) and O(retry_timeout) apply to each IMDS read and are cut to the time left.
  - The connection plugin's C(timeout) (for example SSH's C(ConnectTimeout)) is also cut to the time
    left while the host cannot be reached, then restored.
seealso:
  - module: azure_imds.scheduled_events.scheduled_event_info
  - module: azure_imds.scheduled_events.scheduled_event_approve
  - module: ansible.builtin.wait_for
  - module: ansible.builtin.wait_for_connection
  - name: Azure Scheduled Events for Linux VMs
    description: What each event type means and how much notice it comes with.
    link: https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
# A rolling upgrade of one VM: let the platform do its planned maintenance now, while the VM is
# drained anyway, then hold the upgrade until no maintenance is planned.
- name: Read the reboots and redeploys planned for this VM
  azure_imds.scheduled_events.scheduled_event_info:
    event_types: [Reboot, Redeploy]
    this_host_only: true
  register: planned

- name: Drain this VM, approve its events and wait until they are over
  when: planned.events | length > 0
  block:
    - name: Take this VM out of service (replace with your load balancer's module)
      ansible.builtin.debug:
        msg: "Draining {{ planned.resource_name }} for {{ planned.events | map(attribute='event_type') | join(', ') }}"

    - name: Approve the events so that they may start now rather than at NotBefore
      azure_imds.scheduled_events.scheduled_event_approve:
        event_ids: "{{ planned.events | map(attribute='event_id') }}"

    # An approval is a request, not a start: on a host shared with other tenants Azure waits for
    # them or for NotBefore (15 minutes of notice for a Reboot), and a change of the document may
    # be about another event. So wait for these EventIds to leave the document, with a timeout
    # that covers NotBefore and the maintenance itself (about 10 minutes Started).
    - name: Wait until every approved event has left the document; the VM may reboot meanwhile
      azure_imds.scheduled_events.scheduled_event_wait:
        state: completed
        event_ids: "{{ planned.events | map(attribute='event_id') }}"
        timeout: 1800
        sleep: 5
        msg: The maintenance of this VM did not end within 30 minutes; it stays out of service.

- name: Do not start the upgrade while the platform has maintenance planned for this VM
  azure_imds.scheduled_events.scheduled_event_wait:
    state: absent
    event_types: [Freeze, Reboot, Redeploy]
    this_host_only: true
    timeout: 600
    msg: Maintenance is still planned for this VM after 10 minutes; upgrade it in a later run.
  register: gate

- name: Show how long the gate held the upgrade
  ansible.builtin.debug:
    msg: "Held for {{ gate.elapsed }} s; document {{ gate.document_incarnation }}"

- name: Wait until no VM of the availability set has a Reboot planned (JMESPath on the raw document)
  azure_imds.scheduled_events.scheduled_event_wait:
    condition: "length(Events[?EventType=='Reboot']) == `0`"
    timeout: 600
"""

RETURN = r"""
elapsed:
  description: Seconds the wait took, O(delay) included.
  returned: always
  type: float
  sample: 23.104
polls:
  description:
    - How many times the Scheduled Events document was requested on the managed host during the wait
      (failed requests included).
  returned: always
  type: int
  sample: 24
events:
  description:
    - The events that passed the filters in the last document read, normalised and annotated as
      RV(azure_imds.scheduled_events.scheduled_event_info#module:events) describes them.
    - Empty when no document could be read.
  returned: always
  type: list
  elements: dict
  sample:
    - event_id: 5A3C4D2E-9B1F-4E8A-A1C3-7D6E5F4A3B2C
      event_type: Freeze
      event_status: Started
      resource_type: VirtualMachine
      resources: [web_0]
      not_before:
      description: Virtual machine is being paused because of a memory-preserving Live Migration operation.
      event_source: Platform
      duration_in_seconds: 5
      affects_this_host: true
      seconds_to_not_before:
auto_approved:
  description:
    - EventIds of the matching events with C(EventSource) V(User) that this wait saw first as C(Started)
      (and that are not in O(seen_event_ids)). They were approved automatically by the Scheduled Events
      Policy (C(userInitiatedReboot) or C(userInitiatedRedeploy) C(automaticallyApprove)), so no drain was possible.
      M(azure_imds.scheduled_events.scheduled_events_policy) shows and changes that policy.
    - An event seen C(Scheduled) before it started is never listed.
  returned: always
  type: list
  elements: str
  sample: [C7061BAC-AFDC-4513-B24B-AA5F13A16123]
started_before_seen:
  description:
    - EventIds of the other matching events (C(EventSource) V(Platform) or none) that this wait saw first
      as C(Started). They started before they were seen (a C(NotBefore) that passed between two reads,
      a Preempt, a host failure), so no drain was possible either.
  returned: always
  type: list
  elements: str
  sample: []
document_incarnation:
  description:
    - C(DocumentIncarnation) of the last document read. Compare it for equality only, since readers
      can see gaps.
  returned: when a document was read
  type: int
  sample: 4
document:
  description: The last document read, exactly as IMDS sent it (not filtered).
  returned: when a document was read
  type: dict
  sample:
    DocumentIncarnation: 4
    Events: []
msg:
  description: Why the wait failed (O(msg) on timeout).
  returned: failure
  type: str
  sample: >-
    Timed out after 600.0s (timeout=600) waiting for state=absent; last seen: DocumentIncarnation 2 with 1
    matching event (Reboot C7061BAC-AFDC-4513-B24B-AA5F13A16123 Scheduled).
"""
