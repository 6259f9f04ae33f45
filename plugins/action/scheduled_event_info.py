# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Controller side of azure_imds.scheduled_events.scheduled_event_info (documented in
# plugins/modules/scheduled_event_info.py): the module on a Linux host, or its code here with each
# request to IMDS made by ansible.windows.win_uri on a Windows host (plugin_utils/_host_module.py).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_info
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils._host_module import ImdsModuleAction


class ActionModule(ImdsModuleAction):

    MODULE = scheduled_event_info
    EXECUTE = staticmethod(scheduled_event_info.read)
