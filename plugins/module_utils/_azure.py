# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The control plane's edge: Azure sign-in (azure.azcollection's options, environment variables and
# auth_source order), the cloud (a name, or a Resource Manager URL read through its metadata
# endpoint) and the credential; the options every control-plane module shares and their checks; the
# errors. How requests then go (clients, throttling, error messages, run) is _arm.py. Runs on the
# controller only; the Azure libraries are imported inside try/except so that a missing one ends in
# missing_required_lib, never in an ImportError.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import configparser
import json
import os
import re

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported, this keeps sanity's compile test quiet
    urlsplit = None

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge

AZURE_IMPORT_ERROR = None
try:
    from azure.core import AzureClouds
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
    from azure.core.pipeline import Pipeline
    from azure.core.pipeline.policies import HeadersPolicy, UserAgentPolicy
    from azure.core.pipeline.transport import RequestsTransport
    from azure.core.rest import HttpRequest
    from azure.identity import (
        AzureAuthorityHosts, AzureCliCredential, ClientSecretCredential, ManagedIdentityCredential)
    # What _arm.py needs, imported here too so that one AZURE_IMPORT_ERROR names any missing library.
    from azure.mgmt.compute import ComputeManagementClient  # noqa: F401 pylint: disable=unused-import
    from azure.mgmt.resourcegraph import ResourceGraphClient  # noqa: F401 pylint: disable=unused-import
except ImportError as exc:  # the module fails with missing_required_lib naming the packages
    AZURE_IMPORT_ERROR = exc

    class HttpResponseError(Exception):  # noqa: N818 - stand-ins keep the except clauses valid
        pass

    ServiceRequestError = ServiceResponseError = HttpResponseError

REQUIRED_LIBRARIES = "azure-identity, azure-core, azure-mgmt-compute and azure-mgmt-resourcegraph"

# azure.azcollection's names (plugins/module_utils/azure_rm_common.py, AZURE_CREDENTIAL_ENV_MAPPING),
# which AWX's "Microsoft Azure Resource Manager" credential sets.
ENV_VARS = {
    "profile": "AZURE_PROFILE",
    "subscription_id": "AZURE_SUBSCRIPTION_ID",
    "client_id": "AZURE_CLIENT_ID",
    "secret": "AZURE_SECRET",
    "tenant": "AZURE_TENANT",
    "cloud_environment": "AZURE_CLOUD_ENVIRONMENT",
}
AUTH_SOURCE_ENV_VAR = "ANSIBLE_AZURE_AUTH_SOURCE"
AUTH_SOURCES = ("auto", "env", "cli", "msi", "credential_file")
CREDENTIAL_FIELDS = ("subscription_id", "client_id", "secret", "tenant", "cloud_environment")

METADATA_API_VERSION = "2022-09-01"
DEFAULT_CLOUD = "AzureCloud"
RESOURCE_GRAPH_API_VERSION = "2022-10-01"
# The newest Compute api-version azure-mgmt-compute 39 knows; 2025-04-01 is the first with
# scheduledEventsPolicy (issue 24, Microsoft Learn: Scheduled Events policy).
DEFAULT_COMPUTE_API_VERSION = "2025-04-01"
MIN_POLICY_API_VERSION = "2025-04-01"
DEFAULT_MAINTENANCE_API_VERSION = "2025-11-01"
MAINTENANCE_API_VERSIONS = ("2023-10-01-preview", "2025-10-01-preview", "2025-11-01")
POLICY_FEATURE = "Microsoft.Compute/SendScheduledEventsPolicy"

_GUID_RE = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")
# Resource group and resource names as Azure allows them (letters, digits, . _ ( ) -); the Resource
# Graph query quotes only values that passed this, so nothing in it needs escaping.
_NAME_RE = re.compile(r"^[A-Za-z0-9._()-]{1,90}$")
_API_VERSION_RE = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
_QUOTA_RESET_RE = re.compile(r"^(\d+):([0-5]\d):([0-5]\d)(\.\d+)?$")


class AzureError(Exception):
    """Every error of the control plane. str() is a complete message for a user."""

    def __init__(self, message, status=None, code=None, url=None):
        self.status = status
        self.code = code
        self.url = url
        super(AzureError, self).__init__(message)

    def to_dict(self):
        return {"status": self.status, "error_code": self.code, "url": self.url}


class AzureInputError(AzureError):
    """A value the user gave cannot be used; found before any request."""


# --------------------------------------------------------------------------------------------
# Options at the edge
# --------------------------------------------------------------------------------------------

def azure_argument_spec():
    """Options of plugins/doc_fragments/azure_auth.py (a unit test keeps the two equal)."""
    return dict(
        auth_source=dict(type="str", default="auto", choices=list(AUTH_SOURCES),
                         fallback=(_env_fallback, [AUTH_SOURCE_ENV_VAR])),
        profile=dict(type="str"),
        subscription_id=dict(type="str"),
        client_id=dict(type="str", no_log=True),
        secret=dict(type="str", no_log=True),
        tenant=dict(type="str", no_log=True),
        cloud_environment=dict(type="str"),
        request_timeout=dict(type="float", default=60.0),
        retry_timeout=dict(type="float", default=120.0),
    )


def _env_fallback(*names):
    from ansible.module_utils.basic import env_fallback  # pylint: disable=import-outside-toplevel
    return env_fallback(*names)


def check_guid(value, name):
    if not isinstance(value, str) or not _GUID_RE.match(value):
        raise AzureInputError("%s must be a subscription GUID such as 00000000-0000-0000-0000-000000000000, got %s. "
                              "Copy it from 'az account show --query id' or the portal." % (name, _edge.short_repr(value)))
    return value.lower()


def check_name(value, name):
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise AzureInputError("%s must be an Azure name of 1 to 90 letters, digits, '.', '_', '(', ')' or '-', got %s."
                              % (name, _edge.short_repr(value)))
    return value


def check_api_version(value, name, minimum=None, choices=None):
    if not isinstance(value, str) or not _API_VERSION_RE.match(value):
        raise AzureInputError("%s must be an api-version such as 2025-04-01, got %s." % (name, _edge.short_repr(value)))
    if choices is not None and value not in choices:
        raise AzureInputError("%s %s is not one this module knows; use one of: %s." % (name, value, ", ".join(choices)))
    if minimum is not None and value[:10] < minimum:
        raise AzureInputError("%s %s is older than %s, the first api-version that carries scheduledEventsPolicy; "
                              "use %s or newer." % (name, value, minimum, minimum))
    return value


def check_timeouts(params):
    """request_timeout and retry_timeout: finite, in range (the IMDS options' ranges)."""
    params["request_timeout"] = _edge.check_number(params["request_timeout"], "request_timeout",
                                                   0.1, 86400.0)
    params["retry_timeout"] = _edge.check_number(params["retry_timeout"], "retry_timeout", 0.0, 86400.0)


# --------------------------------------------------------------------------------------------
# Sign-in: which credentials, from where (azure.azcollection's order)
# --------------------------------------------------------------------------------------------

def read_credential_file(profile, home):
    """The [profile] section of ~/.azure/credentials as azure.azcollection reads it (None if absent)."""
    path = os.path.join(home, ".azure", "credentials")
    config = configparser.ConfigParser(interpolation=None)
    try:
        config.read(path)
    except (configparser.Error, OSError, UnicodeDecodeError) as exc:
        raise AzureInputError("%s cannot be read (%s). Fix the file or choose another auth_source." % (path, exc))
    if not config.has_section(profile):
        return None
    return dict((key, config.get(profile, key)) for key in config.options(profile) if key in ENV_VARS)


def cli_default_subscription(home):
    """The subscription 'az account set' chose (isDefault in ~/.azure/azureProfile.json), or None."""
    path = os.path.join(os.environ.get("AZURE_CONFIG_DIR") or os.path.join(home, ".azure"), "azureProfile.json")
    try:
        with open(path, "rb") as handle:
            profile = json.loads(handle.read().decode("utf-8-sig"))
    except (OSError, ValueError):
        return None
    subscriptions = profile.get("subscriptions") if isinstance(profile, dict) else None
    for subscription in subscriptions if isinstance(subscriptions, list) else []:
        if isinstance(subscription, dict) and subscription.get("isDefault"):
            return subscription.get("id")
    return None


def sign_in_settings(params, environ=None, home=None):
    """Where the credentials come from and what they are: a dict with kind (client_secret, msi, cli),
    source (a phrase for messages) and the CREDENTIAL_FIELDS. Options win over what the source gives.

    auto follows azure.azcollection: the profile option, then client_id given as an option, then the
    environment (when AZURE_PROFILE or AZURE_SUBSCRIPTION_ID is set), then the default profile of
    ~/.azure/credentials, then Azure CLI.
    """
    environ = os.environ if environ is None else environ
    home = home or os.path.expanduser("~")
    given = dict((key, params.get(key)) for key in ENV_VARS)
    env = dict((key, environ.get(var) or None) for key, var in ENV_VARS.items())
    auth_source = params.get("auth_source") or "auto"

    def profile_source(profile, explicit):
        found = read_credential_file(profile, home)
        if found is None and explicit:
            raise AzureInputError("profile %r is not a section of %s. Add it, or choose another auth_source."
                                  % (profile, os.path.join(home, ".azure", "credentials")))
        return found, "profile %s of ~/.azure/credentials" % profile

    def env_source():
        if env["profile"]:
            return profile_source(env["profile"], True)
        return env, "environment variables (AZURE_CLIENT_ID, AZURE_SECRET, AZURE_TENANT, AZURE_SUBSCRIPTION_ID)"

    found, kind = None, "client_secret"
    if auth_source == "msi":
        found, kind, source = {"client_id": env["client_id"], "subscription_id": env["subscription_id"],
                               "cloud_environment": env["cloud_environment"]}, "msi", "managed identity"
    elif auth_source == "cli":
        found, kind, source = {"subscription_id": env["subscription_id"] or cli_default_subscription(home),
                               "cloud_environment": env["cloud_environment"]}, "cli", "Azure CLI"
    elif auth_source == "env":
        found, source = env_source()
    elif auth_source == "credential_file":
        found, source = profile_source(given["profile"] or "default", True)
    elif given["profile"]:
        found, source = profile_source(given["profile"], True)
    elif given["client_id"]:
        found, source = {}, "module options"
    elif env["profile"] or env["subscription_id"]:
        found, source = env_source()
    else:
        found, source = profile_source("default", False)
        if not found or not found.get("subscription_id"):
            found, kind, source = {"subscription_id": cli_default_subscription(home)}, "cli", "Azure CLI"
    settings = dict((key, (found or {}).get(key)) for key in CREDENTIAL_FIELDS)
    for key in CREDENTIAL_FIELDS:
        if given.get(key):
            settings[key] = given[key]
    if kind == "msi" or kind == "cli":
        settings["secret"] = None
        if kind == "cli":
            settings["client_id"] = None
    else:
        missing = [key for key in ("client_id", "secret", "tenant") if not settings.get(key)]
        if missing:
            raise AzureInputError(
                "Signing in with a service principal from %s needs client_id, secret and tenant; %s missing. Set "
                "the options or AZURE_CLIENT_ID, AZURE_SECRET and AZURE_TENANT (AWX's Microsoft Azure Resource "
                "Manager credential sets them), or use auth_source msi or cli." % (source, ", ".join(missing)))
    settings.update(kind=kind, source=source)
    if settings.get("subscription_id"):
        settings["subscription_id"] = check_guid(settings["subscription_id"], "subscription_id")
    return settings


# --------------------------------------------------------------------------------------------
# The cloud: a name or a Resource Manager URL
# --------------------------------------------------------------------------------------------

class Cloud:
    def __init__(self, name, resource_manager, authority, audience, instance_discovery=True, cloud_setting=None):
        self.name = name
        self.resource_manager = resource_manager.rstrip("/") + "/"
        self.authority = authority
        # The audience as the cloud names it, then /.default, as Azure CLI builds it (resource_to_scopes):
        # an audience with a trailing slash (https://management.core.windows.net/) gives a double slash,
        # which is how Microsoft identity platform spells the scope of such a resource.
        self.scope = audience + "/.default"
        self.instance_discovery = instance_discovery
        self.cloud_setting = cloud_setting


def named_clouds():
    """azure.azcollection's cloud names, with the endpoints azure-core and azure-identity know."""
    return {
        "AzureCloud": (AzureClouds.AZURE_PUBLIC_CLOUD, AzureAuthorityHosts.AZURE_PUBLIC_CLOUD),
        "AzureChinaCloud": (AzureClouds.AZURE_CHINA_CLOUD, AzureAuthorityHosts.AZURE_CHINA),
        "AzureUSGovernment": (AzureClouds.AZURE_US_GOVERNMENT, AzureAuthorityHosts.AZURE_GOVERNMENT),
    }


def _check_cloud_url(value):
    problem = None
    try:
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname:
            problem = "is not an https:// URL with a host (Azure SDKs send tokens over TLS only)"
        elif parts.username or parts.password or parts.query or parts.fragment:
            problem = "carries credentials, a query or a fragment"
        elif parts.port is not None and not 1 <= parts.port <= 65535:
            problem = "has a port outside 1-65535"
        elif len(parts.hostname) > 253 or not all(0 < len(label) <= 63 for label in parts.hostname.split(".")):
            problem = "has a host name that is no DNS name (labels of 1 to 63 characters, 253 in all)"
    except ValueError as exc:
        problem = "is not a valid URL (%s)" % exc
    if problem or any(c.isspace() or ord(c) < 32 or ord(c) >= 127 for c in value):
        raise AzureInputError("cloud_environment %s %s. Give a cloud name (%s) or the URL of a Resource Manager "
                              "endpoint such as https://management.azure.com/." % (
                                  _edge.short_repr(value), problem or "holds whitespace or non-ASCII characters",
                                  ", ".join(sorted(named_clouds()))))
    return value.rstrip("/") + "/"


def resolve_cloud(value, transport=None, timeout=60.0):
    """A Cloud for a name of named_clouds() or for a Resource Manager URL (its metadata endpoint is read)."""
    value = value or DEFAULT_CLOUD
    clouds = named_clouds()
    if value in clouds:
        setting, host = clouds[value]
        endpoints = _arm_endpoints(setting)
        return Cloud(value, endpoints["resource_manager"], "https://" + host,
                     endpoints["credential_scopes"][0][:-len("/.default")], cloud_setting=setting)
    if "://" not in value:
        raise AzureInputError("cloud_environment %r is not a cloud this module knows. Use one of %s, or the URL "
                              "of a Resource Manager endpoint." % (value, ", ".join(sorted(clouds))))
    base = _check_cloud_url(value)
    url = "%smetadata/endpoints?api-version=%s" % (base, METADATA_API_VERSION)
    pipeline = Pipeline(transport=transport or RequestsTransport(), policies=[HeadersPolicy(), UserAgentPolicy(
        base_user_agent=_user_agent())])
    request = HttpRequest("GET", url, headers={"Accept": "application/json"})
    try:
        response = pipeline.run(request, connection_timeout=min(timeout, 30.0), read_timeout=timeout).http_response
    except (ServiceRequestError, ServiceResponseError) as exc:
        raise AzureError("Reading the cloud metadata at %s failed: %s. Check cloud_environment and, for a "
                         "private CA, REQUESTS_CA_BUNDLE." % (url, exc), url=url)
    if response.status_code != 200:
        raise AzureError("The cloud metadata at %s answered HTTP %d. Check cloud_environment."
                         % (url, response.status_code), status=response.status_code, url=url)
    return _cloud_from_metadata(response.text(), base, url)


def _arm_endpoints(setting):
    from azure.mgmt.core.tools import get_arm_endpoints  # pylint: disable=import-outside-toplevel
    return get_arm_endpoints(setting)


def _cloud_from_metadata(text, base, url):
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, list):
        # Azure's own endpoint answers a list of clouds: take the one served at this URL.
        matching = [c for c in document if isinstance(c, dict)
                    and str(c.get("resourceManager", "")).rstrip("/").lower() == base.rstrip("/").lower()]
        document = matching[0] if matching else (document[0] if len(document) == 1 else None)
    try:
        authentication = document["authentication"]
        login = authentication["loginEndpoint"]
        audience = authentication["audiences"][0]
        resource_manager = document.get("resourceManager") or base
        if not all(isinstance(v, str) and v.startswith("https://") for v in (login, audience, resource_manager)):
            raise TypeError("not https URLs")
    except (KeyError, IndexError, TypeError) as exc:
        raise AzureError("The cloud metadata at %s does not name resourceManager, authentication.loginEndpoint and "
                         "authentication.audiences as https URLs (%s). Check cloud_environment." % (url, exc), url=url)
    return Cloud(document.get("name") or base, resource_manager, login.rstrip("/"), audience,
                 instance_discovery=False)


def credential_for(settings, cloud, transport=None):
    """An azure-identity credential for sign_in_settings() on cloud (as azure.azcollection maps them)."""
    extra = {} if transport is None else {"transport": transport}
    if settings["kind"] == "msi":
        if settings.get("client_id"):
            extra["client_id"] = settings["client_id"]
        return ManagedIdentityCredential(**extra)
    if settings["kind"] == "cli":
        return AzureCliCredential(tenant_id=settings.get("tenant") or None)
    return ClientSecretCredential(settings["tenant"], settings["client_id"], settings["secret"],
                                  authority=cloud.authority,
                                  disable_instance_discovery=not cloud.instance_discovery, **extra)


def _user_agent():
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import USER_AGENT
    return USER_AGENT
