# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # Azure sign-in of the control-plane modules, with azure.azcollection's option names and
    # environment variables. plugins/module_utils/_azure.py builds the matching argspec; a unit test
    # keeps them equal.
    DOCUMENTATION = r"""
options:
  auth_source:
    description:
      - Where the credentials come from, as in azure.azcollection.
      - V(auto) takes the first of O(profile) given, O(client_id) given, the environment (when
        E(AZURE_PROFILE) or E(AZURE_SUBSCRIPTION_ID) is set), the C(default) profile of
        C(~/.azure/credentials), and Azure CLI's sign-in (C(az login)).
      - V(env) reads E(AZURE_CLIENT_ID), E(AZURE_SECRET), E(AZURE_TENANT), E(AZURE_SUBSCRIPTION_ID) and
        E(AZURE_CLOUD_ENVIRONMENT) (or the profile E(AZURE_PROFILE) names). AWX's built-in
        C(Microsoft Azure Resource Manager) credential sets these.
      - V(credential_file) reads the O(profile) section (default C(default)) of C(~/.azure/credentials),
        with the keys C(subscription_id), C(client_id), C(secret), C(tenant) and C(cloud_environment).
      - V(msi) signs in with the managed identity of the machine the task runs on (O(client_id) picks a
        user-assigned one); V(cli) with Azure CLI's sign-in.
      - Options given to the task win over what the source gives.
      - When not set, E(ANSIBLE_AZURE_AUTH_SOURCE) is used, as in azure.azcollection.
    type: str
    default: auto
    choices: [auto, env, cli, msi, credential_file]
  profile:
    description: A section of C(~/.azure/credentials) to read the credentials from.
    type: str
  subscription_id:
    description:
      - The subscription (a GUID), checked before any request. Falls back to E(AZURE_SUBSCRIPTION_ID) or
        the source of O(auth_source).
    type: str
  client_id:
    description: The service principal's (or a user-assigned managed identity's) client id. E(AZURE_CLIENT_ID).
    type: str
  secret:
    description: The service principal's secret. E(AZURE_SECRET).
    type: str
  tenant:
    description: The tenant (directory) id. E(AZURE_TENANT).
    type: str
  cloud_environment:
    description:
      - A cloud name (V(AzureCloud), V(AzureChinaCloud) or V(AzureUSGovernment)) or the https URL of a
        Resource Manager endpoint. Falls back to E(AZURE_CLOUD_ENVIRONMENT), then V(AzureCloud).
      - For a URL, the modules read C(<url>/metadata/endpoints?api-version=2022-09-01) and sign in at
        its C(authentication.loginEndpoint) for its first audience (token scope C(<audience>/.default),
        as Azure CLI builds it), with MSAL's instance discovery off. A private CA (a test mock) is
        trusted through E(REQUESTS_CA_BUNDLE).
    type: str
  request_timeout:
    description:
      - Seconds one request to Azure may take (connecting is bounded by the lesser of this and 30).
      - A number of seconds from 0.1 to 86400.
    type: float
    default: 60
  retry_timeout:
    description:
      - Overall deadline in seconds for retrying throttled (429) and failed (5xx) requests. The wait
        before a retry is C(Retry-After) when Azure sends it, else Resource Graph's
        C(x-ms-user-quota-resets-after), else a backoff; a wait that would pass this deadline fails at
        once saying so.
      - A number of seconds from 0 to 86400.
    type: float
    default: 120
requirements:
  - azure-identity
  - azure-core
  - azure-mgmt-compute
  - azure-mgmt-resourcegraph
notes:
  - These modules run on the controller (or an execution environment) and talk to Azure Resource
    Manager; the managed VMs need nothing. The Python packages are listed in the collection's
    C(meta/ee-requirements.txt).
"""
