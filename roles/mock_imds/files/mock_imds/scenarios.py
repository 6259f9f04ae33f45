# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Built-in scenarios and the loader for scenario documents and files."""

from __future__ import print_function

import copy
import json
import os

from .checks import MockError


LIVE_MIGRATION_DESCRIPTION = "Virtual machine is being paused because of a memory-preserving Live Migration operation."

BUILTIN_SCENARIOS = {
    "live_migration": {
        "description": "The Microsoft docs' live migration (Freeze) flow for WestNO_0 and WestNO_1: incarnation 1 "
                       "empty, 2 Scheduled (NotBefore Mon, 11 Apr 2022 22:26:58 GMT), 3 Started, 4 empty.",
        "start_time": "2022-04-11T22:11:53Z",
        "fleet": {"default_vm": "WestNO_0",
                  "groups": [{"name": "WestNO", "kind": "availability_set", "vms": ["WestNO_0", "WestNO_1"]}]},
        "events": [{"at": 5, "event_type": "Freeze", "resources": ["WestNO_0", "WestNO_1"], "notice": 900,
                    "duration": 30, "description": LIVE_MIGRATION_DESCRIPTION, "event_source": "Platform",
                    "duration_in_seconds": 5, "event_id": "C7061BAC-AFDC-4513-B24B-AA5F13A16123"}],
    },
    "user_reboot": {
        "description": "A user restarts vm0 from the portal: Reboot, EventSource User, 15 min notice.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "event_source": "User",
                    "description": "Virtual machine is going to be restarted as requested by authorized user."}],
    },
    "redeploy": {
        "description": "Platform redeploy of vm0 to another host: Redeploy, 10 min notice.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Redeploy", "resources": ["vm0"],
                    "description": "Virtual machine is going to be redeployed to another host."}],
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
                    "description": "Virtual machine is going to be redeployed because of a predicted hardware "
                                   "failure on the host."}],
    },
    "hardware_failure": {
        "description": "Unexpected host failure: Reboot of vm0 that appears directly as Started.",
        "fleet": {"default_vm": "vm0"},
        "events": [{"event_type": "Reboot", "resources": ["vm0"], "status": "Started",
                    "description": "Virtual machine is being restarted because of an unexpected host failure."}],
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

SCENARIO_KEYS = ("name", "description", "fleet", "speed", "config", "events", "start_time")
CONFIG_KEYS = ("speed", "rate_limit", "approval_mode", "unknown_event_ids")


def resolve_scenario(name_or_doc):
    """A built-in name, a path to a JSON file, or a scenario document -> (name, document)."""
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
    if os.path.isfile(name_or_doc):
        try:
            with open(name_or_doc, "rb") as handle:
                doc = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise MockError("scenario file %s is not readable JSON (%s); fix the file (format: docs/mock_imds.md)"
                            % (name_or_doc, exc))
        if not isinstance(doc, dict):
            raise MockError("scenario file %s must hold a JSON object with an events list" % name_or_doc)
        return doc.get("name", os.path.basename(name_or_doc)), doc
    raise MockError("unknown scenario %r: use a built-in name (%s) or the path of a scenario JSON file"
                    % (name_or_doc, ", ".join(sorted(BUILTIN_SCENARIOS))), 404)
