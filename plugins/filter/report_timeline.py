# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: report_timeline
short_description: Place a fleet's scheduled events on one time axis, a row per VM (the report's HTML page)
version_added: 0.1.0
description:
  - Takes the events of M(azure_imds.scheduled_events.fleet_event_info) (with O(azure_imds.scheduled_events.fleet_event_info#module:include_approvals))
    and, optionally, those the hosts read from IMDS, and gives the model the report role's HTML page
    draws (a row per VM; each event's notice and impact window, in percent of the axis; who approved it).
  - Only times Azure gives are drawn. A Scheduled event has its notice left (from O(now) to C(NotBefore))
    and its expected impact (C(NotBefore) plus C(DurationInSeconds)); an event approved through Resource
    Manager has its impact from the approval in the Activity Log. Resource Graph keeps no other time;
    any other started or ended event is listed undated.
  - Text from outside (names, descriptions, callers) comes back without NUL, other control characters or
    lone surrogates; it still needs HTML escaping where it is written.
positional: _input, imds_events, now, history_days, vms
options:
  _input:
    description: The events of M(azure_imds.scheduled_events.fleet_event_info).
    type: list
    elements: dict
    required: true
  imds_events:
    description: Events read from IMDS (the report's own fleet view); an EventId already in O(_input) is skipped.
    type: list
    elements: dict
  now:
    description: The report's time (ISO 8601), the right end of the history.
    type: str
    required: true
  history_days:
    description: How many days before O(now) the axis starts.
    type: int
    default: 7
  vms:
    description: VM names that get a row even without an event.
    type: list
    elements: str
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: The page model of a week of the fleet's events
  ansible.builtin.set_fact:
    page: "{{ fleet.events | azure_imds.scheduled_events.report_timeline([], now(utc=true, fmt='%Y-%m-%dT%H:%M:%SZ'), 7) }}"
"""

RETURN = r"""
_value:
  description:
    - The page model, with V(generated_at), V(range_start), V(range_end), V(now_x), V(ticks), V(rows) (each
      V(vm), V(blocks) placed on the axis, V(undated)), V(types), V(event_count) and V(unknown_approval).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils._report_timeline import report_timeline


def timeline(fleet_events, imds_events=None, now=None, history_days=7, vms=None):
    try:
        return report_timeline(fleet_events, imds_events, now, history_days, vms)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("report_timeline: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"report_timeline": timeline}
