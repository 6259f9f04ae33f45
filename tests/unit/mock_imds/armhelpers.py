# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the control-plane face tests share: a fleet in two subscriptions, a signed-in principal and
the Azure SDK clients pointed at the mock."""

import json
import ssl
import urllib.request

SUB1 = "11111111-1111-1111-1111-111111111111"
SUB2 = "22222222-2222-2222-2222-222222222222"
PUBLISH = {"scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {
    "enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-main", "scheduled_events_policy": PUBLISH,
    "groups": [
        {"name": "web-as", "kind": "availability_set", "vms": ["web0", "web1", "web2"]},
        {"name": "api-ss", "kind": "scale_set", "vms": ["api0", "api1"], "resource_group": "RG-Api",
         "zones": ["1", "2"]},
        {"name": "db", "kind": "zonal", "vms": ["db0"], "subscription_id": SUB2, "resource_group": "rg-db",
         "location": "northeurope"},
    ],
}
CLIENT, SECRET, TENANT = "app-1", "s3cret-value", "tenant-1"


def set_up_principal(handle, role="ScheduledEventContributor", scope="/subscriptions/" + SUB1):
    handle.control("POST", "arm/principals", {"client_id": CLIENT, "secret": SECRET, "tenant": TENANT})
    handle.control("POST", "arm/grants", {"principal": CLIENT, "role": role, "scope": scope})


def credential(handle):
    from azure.identity import ClientSecretCredential
    return ClientSecretCredential(TENANT, CLIENT, SECRET, authority=handle.login_url, disable_instance_discovery=True,
                                  connection_verify=handle.ca_path)


def graph_client(handle, cred=None):
    from azure.mgmt.resourcegraph import ResourceGraphClient
    return ResourceGraphClient(cred or credential(handle), base_url=handle.arm_url,
                               credential_scopes=[handle.arm_scope], connection_verify=handle.ca_path)


def compute_client(handle, subscription=SUB1, cred=None):
    from azure.mgmt.compute import ComputeManagementClient
    return ComputeManagementClient(cred or credential(handle), subscription, base_url=handle.arm_url,
                                   credential_scopes=[handle.arm_scope], connection_verify=handle.ca_path)


def token(handle):
    return credential(handle).get_token(handle.arm_scope).token


def arm(handle, method, path, body=None, bearer=None, headers=None):
    """One raw HTTPS request to the face: (status, headers, parsed JSON or None)."""
    context = ssl.create_default_context(cafile=handle.ca_path)
    data = None if body is None else json.dumps(body).encode("utf-8")
    hdrs = dict(headers or {})
    if bearer:
        hdrs["Authorization"] = "Bearer " + bearer
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    request = urllib.request.Request(handle.arm_url + path, data=data, method=method, headers=hdrs)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                         urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as answer:
            raw, status, got = answer.read(), answer.status, answer.headers
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, exc.headers
    return status, got, (json.loads(raw.decode("utf-8")) if raw else None)


EVENTS_QUERY = ("maintenanceresources\n| where type =~ 'microsoft.maintenance/scheduledevents'\n"
                "| project id, name, type, location, zones, resourceGroup, subscriptionId, properties")


def graph_query(handle, bearer, query=EVENTS_QUERY, subscriptions=(SUB1, SUB2), options=None):
    return arm(handle, "POST", "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01",
               {"subscriptions": list(subscriptions), "query": query, "options": options or {}}, bearer=bearer)
