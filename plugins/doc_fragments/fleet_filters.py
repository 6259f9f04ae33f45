# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # Which scheduled events of the fleet are read from Azure Resource Graph: the filters of
    # fleet_event_info and of the fleet_events inventory plugin (module_utils/_fleet.py's
    # check_filters and build_query). A unit test keeps them equal to fleet_event_info's argspec.
    DOCUMENTATION = r"""
options:
  subscriptions:
    description: The subscriptions (GUIDs) to query. Default the signed-in one (O(subscription_id)).
    type: list
    elements: str
  resource_groups:
    description: Keep only events of these resource groups (compared without regard to case).
    type: list
    elements: str
  event_types:
    description: Keep only these event types (C(Reboot), C(Redeploy), C(Freeze), C(Preempt), C(Terminate)).
    type: list
    elements: str
  event_sources:
    description: Keep only events of these sources.
    type: list
    elements: str
    choices: [Platform, User]
  event_statuses:
    description:
      - Keep only events in these statuses. V(Completed) and V(Canceled) give history, which Resource
        Graph keeps.
    type: list
    elements: str
    choices: [Scheduled, Started, Completed, Canceled]
    default: [Scheduled, Started]
"""
