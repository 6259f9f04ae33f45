# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control-plane modules against the mock's control-plane face, for real: a fleet in two
subscriptions, a service principal with its role, and a module run in this process whose HTTPS goes
to the mock (azure-identity's credential and the SDK clients unreplaced; only the clock and the
sleep are the mock's clock, so a throttled run waits on the mock's time, never on real seconds)."""

import os
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    ModuleExit, _exit_json, _fail_json)

SUB1 = "11111111-1111-1111-1111-111111111111"
SUB2 = "22222222-2222-2222-2222-222222222222"
CLIENT, SECRET, TENANT = "app-fleet", "s3cret-value", "tenant-1"
PUBLISH = {"scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {
    "enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
# web-as does not publish yet: the playbook turns its publishing on. api-ss (a scale set) and db (a
# zonal VM in the second subscription) publish from the start.
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-web", "scheduled_events_policy": PUBLISH,
    "groups": [
        {"name": "web-as", "kind": "availability_set", "vms": ["web0", "web1", "web2"],
         "scheduled_events_policy": {}},
        {"name": "api-ss", "kind": "scale_set", "vms": ["api0", "api1"], "resource_group": "rg-api",
         "zones": ["1", "2"]},
        {"name": "db", "kind": "zonal", "vms": ["db0", "db1"], "subscription_id": SUB2, "resource_group": "rg-db",
         "location": "northeurope"},
    ],
}
AWX_ENV = {"AZURE_CLIENT_ID": CLIENT, "AZURE_SECRET": SECRET, "AZURE_TENANT": TENANT,
           "AZURE_SUBSCRIPTION_ID": SUB1}


def set_up(handle, role="ScheduledEventContributor", subscriptions=(SUB1, SUB2)):
    """The service principal, with role on each subscription and Virtual Machine Contributor (which
    may write the policy, not acknowledge)."""
    handle.control("POST", "arm/principals", {"client_id": CLIENT, "secret": SECRET, "tenant": TENANT})
    for subscription in subscriptions:
        for granted in (role, "Virtual Machine Contributor"):
            handle.control("POST", "arm/grants", {"principal": CLIENT, "role": granted,
                                                  "scope": "/subscriptions/" + subscription})


def add_event(handle, vms, event_type="Reboot", **spec):
    spec.update(event_type=event_type, resources=list(vms))
    return handle.control("POST", "events", spec)["event_id"]


def arm_audit(handle):
    return handle.control("GET", "audit")["arm_requests"]


def run_live(module, args, handle, clock, environ=None, check_mode=False, diff=False):
    """module.main() in this process against the mock: the module's own sign-in, cloud and clients
    (REQUESTS_CA_BUNDLE must name the mock's CA); sleeps move the mock's clock. Returns the result."""
    args = dict(args)
    args.setdefault("cloud_environment", handle.arm_url)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    environ = dict(AWX_ENV if environ is None else environ)
    environ.update((k, v) for k, v in os.environ.items() if k == "REQUESTS_CA_BUNDLE")
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.tick(seconds)
    runtime = _arm.Runtime(environ=environ, home="/nonexistent", clock=clock, sleep=sleep,
                           wall_clock=clock, rng=lambda: 1.0)
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json):
        try:
            module.main(runtime)
        except ModuleExit as exc:
            result = exc.result
            result["_slept"] = slept
            return result
    raise AssertionError("main() returned without exit_json or fail_json")
