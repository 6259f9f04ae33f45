#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduled_event_info
short_description: Read the Azure Scheduled Events of this VM from the Instance Metadata Service
version_added: 0.1.0
description:
  - Reads the Scheduled Events document (the reboots, freezes, redeploys and Spot evictions planned
    for the VM, and deletions of scale set VMs when the scale set has terminate notifications
    enabled) from the Azure Instance Metadata Service (IMDS), and returns the events that pass the
    filters, normalised and sorted by C(NotBefore).
  - IMDS answers only from inside the VM, so this module runs on the managed VM. It needs nothing
    there but Python 3.
  - On a Windows VM (see O(imds_transport)) the module's work runs on the controller and each request
    to IMDS is one run of M(ansible.windows.win_uri) on the VM.
  - Events of an availability set or scale set placement group are shown to every VM of the group;
    RV(events[].affects_this_host) and O(this_host_only) tell those that name this VM.
  - Optionally (O(changed_since), O(max_wait)) it blocks on the host until the document changes,
    which is how M(azure_imds.scheduled_events.scheduled_event_wait) waits without running one
    remote task per poll.
extends_documentation_fragment:
  - azure_imds.scheduled_events.imds
  - azure_imds.scheduled_events.imds.filters
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads, so it does the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: [posix, windows]
options:
  this_host_only:
    description:
      - Keep only events whose C(Resources) name this VM (see O(resource_name)).
    type: bool
    default: false
  changed_since:
    description:
      - Mostly for M(azure_imds.scheduled_events.scheduled_event_wait); lets a task block on the host
        until the document changes.
      - A C(DocumentIncarnation) seen before. With O(max_wait) above V(0), the module polls IMDS every
        O(poll_interval) seconds and returns as soon as the incarnation differs from this value (at
        once if the first read already differs), or after O(max_wait) seconds with the last
        document it read.
      - Compare incarnations only for equality; IMDS may skip numbers.
      - A whole number from 0 to 9223372036854775807, or its decimal text.
      - Declared C(raw) so that a value such as infinity is refused with this option named; Ansible's
        own integer conversion would fail on it without a name.
    type: raw
  max_wait:
    description:
      - Mostly for M(azure_imds.scheduled_events.scheduled_event_wait); lets a task block on the host
        until the document changes.
      - Seconds to wait for a document whose incarnation differs from O(changed_since). V(0) reads
        once and returns. Needs O(changed_since) when above V(0).
      - IMDS failures during the wait are polled through until the time is up; the module fails only
        when it read no document at all, with the last error. Before the first document, failures
        that would repeat (nothing listening, 400, redirects) fail at once.
      - Every read of the wait shares one deadline of O(max_wait) seconds; within it each read keeps
        its own O(request_timeout) and O(retry_timeout). No read starts after it, so the wait ends by
        O(max_wait).
      - A number of seconds from 0 to 86400.
    type: float
    default: 0
  poll_interval:
    description:
      - Mostly for M(azure_imds.scheduled_events.scheduled_event_wait); lets a task block on the host
        until the document changes.
      - Seconds between two reads while waiting. IMDS suggests polling once a second and allows five
        requests per second per VM for all callers together.
      - A number of seconds from 0.2 to 86400.
    type: float
    default: 1
  watch_unless_state:
    description:
      - Mostly for M(azure_imds.scheduled_events.scheduled_event_wait); lets one run do the first read
        and the wait for a change after it.
      - With O(max_wait) above V(0) and no O(changed_since), the module reads the document once (as a
        plain read does) and returns at once when its matching events are in this state; V(absent) means
        none, V(present) at least one, V(started) one of them C(Started). Otherwise it waits up to
        O(max_wait) for the incarnation to differ from that first read's, as O(changed_since) does, and
        returns the first read in RV(first_read).
    type: str
    choices: [absent, present, started]
notes:
  - A field of the document that cannot be read (a value of the wrong type, an unreadable
    C(NotBefore)) is returned as V(null) (C(resources) as an empty list, or as a one-element list when
    IMDS sent one string), and the module warns naming the event and the field. The other events are
    not affected. An entry of C(Events) that is not an object is left out with a warning.
  - A field nested deeper than 32 levels of the document (only an extra field can be) is left out, and
    an unpaired surrogate in any text becomes U+FFFD; the module warns naming the event and the field.
  - This VM's name is read from IMDS when O(resource_name) is not set. If IMDS answers 404 for it and
    O(this_host_only) is false, the module goes on with RV(resource_name=null), warns, and reports
    RV(events[].affects_this_host=false) for every event; with O(this_host_only=true) it fails.
seealso:
  - module: azure_imds.scheduled_events.scheduled_event_approve
  - name: Azure Scheduled Events for Linux VMs
    description: What each event type means and how much notice it comes with.
    link: https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: Read the scheduled events of this VM
  azure_imds.scheduled_events.scheduled_event_info:
  register: scheduled

- name: Show what the platform has planned
  ansible.builtin.debug:
    msg: "{{ item.event_type }} {{ item.event_id }} ({{ item.event_status }}) in {{ item.seconds_to_not_before }} s"
  loop: "{{ scheduled.events }}"
  loop_control:
    label: "{{ item.event_id }}"

- name: Only the reboots and redeploys that name this VM
  azure_imds.scheduled_events.scheduled_event_info:
    event_types: [Reboot, Redeploy]
    this_host_only: true
  register: impactful

- name: Drain this VM when one is coming
  ansible.builtin.debug:
    msg: "Draining {{ impactful.resource_name }} before {{ impactful.events[0].not_before }}"
  when: impactful.events | length > 0

- name: Block on the VM for up to a minute until the document changes
  azure_imds.scheduled_events.scheduled_event_info:
    changed_since: "{{ scheduled.document_incarnation }}"
    max_wait: 60
  register: changed

- name: Say whether it changed
  ansible.builtin.debug:
    msg: >-
      {{ 'Incarnation ' ~ changed.document_incarnation ~ ' after ' ~ changed.watched ~ ' s'
         if changed.document_incarnation != scheduled.document_incarnation
         else 'No change within a minute' }}
"""

RETURN = r"""
document_incarnation:
  description:
    - C(DocumentIncarnation) of the document read. It grows whenever the events change; compare it
      for equality only, since readers can see gaps.
  returned: success
  type: int
  sample: 3
events:
  description:
    - The events that pass the filters, sorted by C(NotBefore) (started events first).
    - Fields that the requested O(api_version) does not report are V(null).
  returned: success
  type: list
  elements: dict
  contains:
    event_id:
      description: C(EventId), a GUID, exactly as IMDS spelled it.
      type: str
      returned: success
      sample: C7061BAC-AFDC-4513-B24B-AA5F13A16123
    event_type:
      description: C(Freeze), C(Reboot), C(Redeploy), C(Preempt), C(Terminate) or a type Azure added later.
      type: str
      returned: success
      sample: Reboot
    event_status:
      description: C(Scheduled) (starts after RV(events[].not_before) or on approval) or C(Started).
      type: str
      returned: success
      sample: Scheduled
    resource_type:
      description: C(ResourceType), C(VirtualMachine).
      type: str
      returned: success
      sample: VirtualMachine
    resources:
      description:
        - Names of the VMs the event affects. The leading underscore of api-version 2017-03-01 is removed.
      type: list
      elements: str
      returned: success
      sample: [web_0, web_1]
    not_before:
      description: C(NotBefore) in ISO 8601 UTC, V(null) once the event started.
      type: str
      returned: success
      sample: '2022-04-11T22:26:58Z'
    description:
      description: C(Description) (api-version 2019-04-01 and later). It can be empty (our observation, not
        documented by Microsoft).
      type: str
      returned: success
      sample: Host server is undergoing maintenance.
    event_source:
      description: C(Platform) or C(User) (api-version 2019-08-01 and later).
      type: str
      returned: success
      sample: Platform
    duration_in_seconds:
      description: Expected impact in seconds, V(-1) when unknown (api-version 2020-07-01).
      type: int
      returned: success
      sample: 9
    affects_this_host:
      description: Whether RV(events[].resources) names this VM (RV(resource_name)), by exact match.
      type: bool
      returned: success
      sample: true
    seconds_to_not_before:
      description: Seconds from now to C(NotBefore), negative when it has passed, V(null) when started.
      type: float
      returned: success
      sample: 842.5
  sample:
    - event_id: C7061BAC-AFDC-4513-B24B-AA5F13A16123
      event_type: Reboot
      event_status: Scheduled
      resource_type: VirtualMachine
      resources: [web_0, web_1]
      not_before: '2022-04-11T22:26:58Z'
      description: Host server is undergoing maintenance.
      event_source: Platform
      duration_in_seconds: -1
      affects_this_host: true
      seconds_to_not_before: 842.5
document:
  description: The Scheduled Events document exactly as IMDS sent it, not filtered.
  returned: success
  type: dict
  sample:
    DocumentIncarnation: 3
    Events:
      - EventId: C7061BAC-AFDC-4513-B24B-AA5F13A16123
        EventStatus: Scheduled
        EventType: Reboot
        ResourceType: VirtualMachine
        Resources: [web_0, web_1]
        NotBefore: Mon, 11 Apr 2022 22:26:58 GMT
        Description: Host server is undergoing maintenance.
        EventSource: Platform
        DurationInSeconds: -1
resource_name:
  description:
    - The VM name used for RV(events[].affects_this_host) and O(this_host_only), from O(resource_name)
      or IMDS; V(null) when IMDS did not know it (see the notes).
  returned: success
  type: str
  sample: web_0
api_version:
  description: The api-version the document was read with.
  returned: success
  type: str
  sample: '2020-07-01'
watched:
  description: Seconds spent waiting for a change (O(max_wait)); V(0.0) when the module did not wait.
  returned: success
  type: float
  sample: 4.02
polls:
  description:
    - How many times the module read the document, failed reads included. One read retries
      retryable failures by itself within O(retry_timeout).
  returned: success
  type: int
  sample: 5
first_read:
  description:
    - The first document read, when O(watch_unless_state) made the module wait after it; RV(events),
      RV(document) and RV(document_incarnation) are those of the last read.
    - V(null) when the module did not wait after a first read.
  returned: success
  type: dict
  contains:
    document_incarnation:
      description: C(DocumentIncarnation) of the first read.
      type: int
      sample: 3
    events:
      description: The events of the first read that passed the filters, as RV(events).
      type: list
      elements: dict
      sample: []
  sample:
    document_incarnation: 3
    events: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _event, _imds, _module_runner, _options

# Microsoft suggests polling once a second.


def argument_spec():
    spec = _options.imds_argument_spec()
    spec.update(_options.filter_argument_spec())
    spec.update(
        this_host_only=dict(type="bool", default=False),
        changed_since=dict(type="raw"),
        max_wait=dict(type="float", default=0.0),
        poll_interval=dict(type="float", default=_defaults.DEFAULT_POLL_INTERVAL),
        watch_unless_state=dict(type="str", choices=list(STATE_HOLDS)),
    )
    return spec


# watch_unless_state: whether the matching events of a read are in the state.
STATE_HOLDS = dict(
    absent=lambda events: not events,
    present=bool,
    started=lambda events: any(e.get("event_status") == "Started" for e in events),
)


def check_watch_options(params):
    # The ranges of the numbers were checked where they entered (_options.check_numbers).
    if params["max_wait"] > 0 and params["changed_since"] is None and params["watch_unless_state"] is None:
        raise _edge.ImdsInputError(
            "max_wait waits for the document to change from changed_since, which is not set. Set changed_since to "
            "the document_incarnation of an earlier read, or leave max_wait out to read once.")


def read(module, client, runtime):
    params = module.params
    check_watch_options(params)
    name = _module_runner.resource_name(module, client, needed_by="this_host_only" if params["this_host_only"] else None)
    first_read = None
    if params["changed_since"] is not None and params["max_wait"] > 0:
        watch = _imds.watch_document(client, params["changed_since"], params["max_wait"], params["poll_interval"],
                                     clock=runtime.clock, sleep=runtime.sleep)
        scheduled, watched, polls = watch.events, watch.watched, watch.polls
    else:
        started = runtime.clock()
        scheduled, watched, polls = client.get_scheduled_events(), 0.0, 1
        # The first read is part of the wait: the watch after it gets what is left of max_wait.
        left = params["max_wait"] - (runtime.clock() - started)
        if params["watch_unless_state"] is not None and left > 0 \
                and not STATE_HOLDS[params["watch_unless_state"]](_select(params, scheduled, name)):
            first = scheduled
            first_read = dict(document_incarnation=first.incarnation,
                              events=_module_runner.annotated(_select(params, first, name), name, runtime))
            runtime.sleep(min(params["poll_interval"], left))
            left = params["max_wait"] - (runtime.clock() - started)
            if left > 0:
                watch = _imds.watch_document(client, first.incarnation, left, params["poll_interval"],
                                             clock=runtime.clock, sleep=runtime.sleep)
                scheduled, polls = watch.events, watch.polls + 1
            watched = runtime.clock() - started
            if scheduled.incarnation != first.incarnation:
                _module_runner.report_unreadable(module, first)
    _module_runner.report_unreadable(module, scheduled)
    selected = _select(params, scheduled, name)
    module.exit_json(
        changed=False,
        document_incarnation=scheduled.incarnation,
        events=_module_runner.annotated(selected, name, runtime),
        document=scheduled.document,
        resource_name=name,
        api_version=client.api_version,
        watched=round(float(watched), 3),
        polls=polls,
        first_read=first_read,
    )


def _select(params, scheduled, name):
    return _event.select_events(scheduled.events, resource_name=name, this_host_only=params["this_host_only"],
                                **_options.filter_kwargs(params))


def main(runtime=None):
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    _module_runner.run(module, read, runtime)


if __name__ == "__main__":
    main()
