# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Built-in scenarios and the loader for scenario documents and files."""

from __future__ import print_function

import copy
import os

from .checks import MockError, read_json_file


# Descriptions as the service writes them (Microsoft's documentation and its sample mock), and
# timings from the medians that sample publishes: Scheduled 15 min, then Started 5 min for a live
# migration and 10 min for the others.
LIVE_MIGRATION_DESCRIPTION = "Virtual machine is being paused because of a memory-preserving Live Migration operation."
HOST_MAINTENANCE_DESCRIPTION = "Host server is undergoing maintenance."
# Microsoft lists "Host server is undergoing an emergency repair." among its example Descriptions.
EMERGENCY_REPAIR_DESCRIPTION = "Host server is undergoing an emergency repair."
USER_REBOOT_DESCRIPTION = "Virtual machine is going to be restarted as requested by authorized user."
USER_REDEPLOY_DESCRIPTION = "Virtual machine is going to be redeployed as requested by authorized user."
PLATFORM_REDEPLOY_DESCRIPTION = "Virtual machine has encountered a failure."
NOTICE_MEDIAN = 15 * 60
STARTED_MEDIAN = 10 * 60
LIVE_MIGRATION_STARTED_MEDIAN = 5 * 60

BUILTIN_SCENARIOS = {
    "live_migration": {
        "description": "The Microsoft docs' live migration (Freeze) flow for WestNO_0 and WestNO_1: incarnation 1 "
                       "empty, 2 Scheduled (NotBefore Mon, 11 Apr 2022 22:26:58 GMT), 3 Started (5 min, the "
                       "published median), 4 empty.",
        "start_time": "2022-04-11T22:11:53Z",
        "fleet": {"default_vm": "WestNO_0",
                  "groups": [{"name": "WestNO", "kind": "availability_set", "vms": ["WestNO_0", "WestNO_1"]}]},
        "events": [{"at": 5, "event_type": "Freeze", "resources": ["WestNO_0", "WestNO_1"], "notice": NOTICE_MEDIAN,
                    "duration": LIVE_MIGRATION_STARTED_MEDIAN, "description": LIVE_MIGRATION_DESCRIPTION,
                    "event_source": "Platform", "duration_in_seconds": 5,
                    "event_id": "C7061BAC-AFDC-4513-B24B-AA5F13A16123"}],
    },
    "host_agent_maintenance": {
        "description": "Host agent maintenance, the most common event: Freeze of vm0 for about 9 s, Scheduled "
                       "15 min, Started 10 min (health checks after the freeze).",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Freeze", "resources": ["vm0"], "notice": NOTICE_MEDIAN,
                    "duration": STARTED_MEDIAN, "description": HOST_MAINTENANCE_DESCRIPTION,
                    "event_source": "Platform", "duration_in_seconds": 9}],
    },
    "user_reboot": {
        "description": "A user restarts vm0 from the portal: Reboot, EventSource User, Scheduled 15 min, "
                       "Started 10 min.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "event_source": "User", "notice": NOTICE_MEDIAN,
                    "duration": STARTED_MEDIAN, "description": USER_REBOOT_DESCRIPTION}],
    },
    "user_redeploy": {
        "description": "A user redeploys vm0 from the portal: Redeploy, EventSource User, Scheduled 15 min, "
                       "Started 10 min.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"], "event_source": "User",
                    "notice": NOTICE_MEDIAN, "duration": STARTED_MEDIAN, "description": USER_REDEPLOY_DESCRIPTION}],
    },
    "redeploy": {
        "description": "Platform redeploy of vm0 to another host after a failure: Redeploy, 10 min notice.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"], "description": PLATFORM_REDEPLOY_DESCRIPTION}],
    },
    "spot_preempt": {
        "description": "Spot eviction of myspotvm: Preempt with 30 s notice.",
        "fleet": {"default_vm": "myspotvm", "groups": [{"name": "spot", "kind": "zonal", "vms": ["myspotvm"],
                                                        "compute": {"priority": "Spot",
                                                                    "evictionPolicy": "Delete"}}]},
        "events": [{"event_type": "Preempt", "resources": ["myspotvm"], "notice": 30}],
    },
    "vmss_terminate": {
        "description": "Scale-in of instance myvmss_1: Terminate with 5 min notice, seen by the whole placement "
                       "group.",
        "fleet": {"default_vm": "myvmss_1",
                  "groups": [{"name": "myvmss", "kind": "scale_set", "vms": ["myvmss_0", "myvmss_1", "myvmss_2"]}]},
        "events": [{"event_type": "Terminate", "resources": ["myvmss_1"], "notice": 300, "event_source": "User"}],
    },
    "predicted_hardware_failure": {
        "description": "Host hardware predicted to fail: Redeploy of vm0 with NotBefore 3 days ahead.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"], "notice": 3 * 86400,
                    "description": HOST_MAINTENANCE_DESCRIPTION}],
    },
    "hardware_failure": {
        "description": "Unexpected host failure: Reboot of vm0 that appears directly as Started.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "status": "Started",
                    "description": EMERGENCY_REPAIR_DESCRIPTION}],
    },
    "canceled_maintenance": {
        "description": "Host maintenance cancelled by Azure (other hosts failed their health checks): a Freeze of "
                       "vm0 Scheduled, gone after 8 min.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Freeze", "resources": ["vm0"], "notice": NOTICE_MEDIAN, "cancel_at": 8 * 60,
                    "description": HOST_MAINTENANCE_DESCRIPTION, "duration_in_seconds": 9}],
    },
    "cancellation": {
        "description": "A Reboot of vm0 is scheduled, then cancelled after 2 minutes: it leaves the document.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "notice": 900, "cancel_at": 120}],
    },
    "overlapping": {
        "description": "Two overlapping events in availability set avset1: Freeze of web_0, then a Reboot of web_1 "
                       "a minute later while the first is still Scheduled; every member sees both.",
        "fleet": {"default_vm": "web_0",
                  "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]},
        "events": [
            {"at": 0, "event_type": "Freeze", "resources": ["web_0"], "notice": 900, "duration": 60,
             "duration_in_seconds": 7},
            {"at": 60, "event_type": "Reboot", "resources": ["web_1"], "notice": 900},
        ],
    },
    "empty": {
        "description": "No events at all: DocumentIncarnation 1, Events [].",
        "events": [],
    },
}


def _fast_variant(name):
    """The same scenario with minutes turned into seconds, for tests that run on the real clock
    (what Microsoft's sample calls dev timing)."""
    doc = copy.deepcopy(BUILTIN_SCENARIOS[name])
    for event in doc["events"]:
        for key in ("at", "notice", "duration", "cancel_at"):
            if key in event and event[key] >= 60:
                event[key] = event[key] // 60
    doc["description"] = "Fast variant (minutes become seconds) of %s: %s" % (name, doc["description"])
    return doc


for _name in ("live_migration", "host_agent_maintenance", "user_reboot", "user_redeploy", "canceled_maintenance"):
    BUILTIN_SCENARIOS[_name + "_fast"] = _fast_variant(_name)

SCENARIO_KEYS = ("name", "description", "fleet", "speed", "config", "events", "start_time")
CONFIG_KEYS = ("speed", "rate_limit", "approval_mode", "unknown_event_ids", "service_lifecycle", "service_enable_delay",
               "service_first_call_delay", "service_idle_disable")


def resolve_scenario(name_or_doc, files=True):
    """A built-in name, a path to a JSON file (files=True: the command line, never the control
    API, which must not read the host's files), or a scenario document -> (name, document)."""
    if isinstance(name_or_doc, dict):
        if set(name_or_doc) == {"name"}:
            name_or_doc = name_or_doc["name"]
        else:
            return name_or_doc.get("name", "custom"), name_or_doc
    if not isinstance(name_or_doc, str) or not name_or_doc:
        raise MockError("a scenario is a built-in name (%s), a JSON file path or a scenario object"
                        % ", ".join(sorted(BUILTIN_SCENARIOS)))
    if name_or_doc in BUILTIN_SCENARIOS:
        return name_or_doc, copy.deepcopy(BUILTIN_SCENARIOS[name_or_doc])
    if files and os.path.isfile(name_or_doc):
        doc = read_json_file(name_or_doc, "scenario file", "fix the file (format: docs/docsite/rst/mock_imds.rst)")
        if not isinstance(doc, dict):
            raise MockError("scenario file %s must hold a JSON object with an events list" % name_or_doc)
        return doc.get("name", os.path.basename(name_or_doc)), doc
    raise MockError("unknown scenario %r: use a built-in name (%s)%s"
                    % (name_or_doc[:200], ", ".join(sorted(BUILTIN_SCENARIOS)),
                       " or the path of a scenario JSON file" if files else " or a scenario object"), 404)
