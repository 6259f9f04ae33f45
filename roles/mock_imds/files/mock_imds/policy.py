# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Scheduled Events Policy (Compute api-version 2025-04-01 and newer), as ARM spells it."""

from __future__ import print_function

import copy

from .checks import MockError

POLICY_SINCE = "2025-04-01"
FEATURE = "Microsoft.Compute/SendScheduledEventsPolicy"
APPROVE_KEYS = ("userInitiatedReboot", "userInitiatedRedeploy", "allInstancesDown")
TARGETS = "scheduledEventsAdditionalPublishingTargets"
GRAPH = "eventGridAndResourceGraph"
POLICY_KEYS = (TARGETS,) + APPROVE_KEYS


def _keys(doc, allowed, where):
    if not isinstance(doc, dict):
        raise MockError("%s must be a JSON object, got %r" % (where, doc))
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise MockError("%s: unknown property %s (known: %s)" % (where, ", ".join(unknown), ", ".join(allowed)))


def check_policy(doc, where="scheduledEventsPolicy"):
    """A policy object (or null) checked and copied; what PUT and PATCH carry."""
    if doc is None:
        return None
    _keys(doc, POLICY_KEYS, where)
    for key in APPROVE_KEYS:
        if doc.get(key) is not None:
            _keys(doc[key], ("automaticallyApprove",), "%s.%s" % (where, key))
            value = doc[key].get("automaticallyApprove")
            if value is not None and not isinstance(value, bool):
                raise MockError("%s.%s.automaticallyApprove must be true or false, got %r" % (where, key, value))
    targets = doc.get(TARGETS)
    if targets is not None:
        _keys(targets, (GRAPH,), "%s.%s" % (where, TARGETS))
        graph = targets.get(GRAPH)
        if graph is not None:
            _keys(graph, ("enable", "scheduledEventsApiVersion"), "%s.%s.%s" % (where, TARGETS, GRAPH))
            if graph.get("enable") is not None and not isinstance(graph["enable"], bool):
                raise MockError("%s.%s.%s.enable must be true or false" % (where, TARGETS, GRAPH))
            version = graph.get("scheduledEventsApiVersion")
            if version is not None and (not isinstance(version, str) or len(version) > 32):
                raise MockError("%s.%s.%s.scheduledEventsApiVersion must be a string such as 2020-07-01"
                                % (where, TARGETS, GRAPH))
    return copy.deepcopy(doc)


def merge(old, patch):
    """JSON merge of a PATCH into the stored policy (objects merge, values replace)."""
    if not isinstance(old, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(old)
    for key, value in patch.items():
        out[key] = merge(out.get(key), value) if isinstance(value, dict) else copy.deepcopy(value)
    return out


def publishes(policy):
    return bool(policy and ((policy.get(TARGETS) or {}).get(GRAPH) or {}).get("enable"))


def approves(policy, key):
    return bool(policy and (policy.get(key) or {}).get("automaticallyApprove"))
