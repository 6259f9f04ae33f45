# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# How the control plane's requests go: one Session per module run (signed in through _azure, the
# Azure SDK's clients given the api-version per call, azure-core's pipeline for the acknowledge call),
# the one retry routine for throttling (Retry-After, then Resource Graph's
# x-ms-user-quota-resets-after, then backoff, within retry_timeout) and the error messages; and run(),
# the modules' main. _azure.py holds who signs in and where Azure is (options, clouds, credentials),
# as _imds.py and _event.py split the in-VM path.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _azure, _edge, _retry
try:
    from azure.core.exceptions import ClientAuthenticationError
    from azure.core.pipeline.policies import BearerTokenCredentialPolicy
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.resourcegraph import ResourceGraphClient
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions
except ImportError:  # _azure.AZURE_IMPORT_ERROR says so, and run() fails with missing_required_lib first
    ClientAuthenticationError = _azure.HttpResponseError

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._azure import (
    AzureError, AzureInputError, DEFAULT_CLOUD, ENV_VARS,
    REQUIRED_LIBRARIES, RESOURCE_GRAPH_API_VERSION, _QUOTA_RESET_RE, _user_agent,
    check_guid, credential_for, resolve_cloud, sign_in_settings)


# --------------------------------------------------------------------------------------------
# A session: credential, clients, one retry routine and the error messages
# --------------------------------------------------------------------------------------------

def parse_quota_resets_after(value):
    """Resource Graph's x-ms-user-quota-resets-after (hh:mm:ss) in seconds, or None."""
    match = _QUOTA_RESET_RE.match((value or "").strip())
    if not match:
        return None
    return int(match.group(1)) * 3600 + int(match.group(2)) * 60 + int(match.group(3)) + float(match.group(4) or 0)


def throttle_delay(headers, rule, attempt, policy, wall_clock):
    """How long to wait before the next attempt: Retry-After, then x-ms-user-quota-resets-after, then
    the backoff of the rule. Returns (seconds, which)."""
    headers = dict((k.lower(), v) for k, v in (headers or {}).items())
    retry_after = _retry.parse_retry_after(headers.get("retry-after"), wall_clock())
    if retry_after is not None:
        return policy.delay(rule, attempt, retry_after), "Retry-After"
    resets = parse_quota_resets_after(headers.get("x-ms-user-quota-resets-after"))
    if resets is not None:
        return policy.delay(rule, attempt, resets), "x-ms-user-quota-resets-after"
    return policy.delay(rule, attempt), "backoff"


def error_body(exc):
    """(code, message) of an ARM error answer {"error": {"code", "message"}}, or (None, text)."""
    response = getattr(exc, "response", None)
    text = None
    try:
        text = response.text() if response is not None else None
        body = json.loads(text) if text else {}
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return error.get("code"), error.get("message")
    except (ValueError, AttributeError, TypeError):
        pass
    return None, (text or str(exc))[:500]


class Session:
    """One module run's connection to Azure. transport, credential and the clocks are injectable."""

    def __init__(self, params, environ=None, home=None, transport=None, credential=None, clock=None, sleep=None,
                 wall_clock=None, rng=None):
        if _azure.AZURE_IMPORT_ERROR is not None:
            raise AzureError("missing: %s" % _azure.AZURE_IMPORT_ERROR)
        self.request_timeout = params["request_timeout"]
        self.retry_timeout = params["retry_timeout"]
        self.settings = sign_in_settings(params, environ, home)
        environ = os.environ if environ is None else environ
        self.cloud = resolve_cloud(params.get("cloud_environment") or self.settings.get("cloud_environment")
                                   or environ.get(ENV_VARS["cloud_environment"]) or DEFAULT_CLOUD,
                                   transport=transport, timeout=self.request_timeout)
        self.transport = transport
        self.credential = credential or credential_for(self.settings, self.cloud, transport)
        self.clock = clock or time.monotonic
        self.sleep = sleep or time.sleep
        self.wall_clock = wall_clock or time.time
        self.policy = _retry.RetryPolicy(rng)
        self.requests = 0
        self._clients = {}

    @property
    def subscription_id(self):
        if not self.settings.get("subscription_id"):
            raise AzureInputError("No subscription is known for %s. Set subscription_id (or AZURE_SUBSCRIPTION_ID)."
                                  % self.settings["source"])
        return self.settings["subscription_id"]

    def _client_kwargs(self):
        kwargs = dict(base_url=self.cloud.resource_manager, credential_scopes=[self.cloud.scope], retry_total=0,
                      user_agent=_user_agent())
        if self.cloud.cloud_setting is not None:
            kwargs["cloud_setting"] = self.cloud.cloud_setting
        if self.transport is not None:
            kwargs["transport"] = self.transport
        return kwargs

    def graph(self):
        if "graph" not in self._clients:
            self._clients["graph"] = ResourceGraphClient(self.credential, **self._client_kwargs())
        return self._clients["graph"]

    def compute(self, subscription_id):
        key = ("compute", subscription_id)
        if key not in self._clients:
            self._clients[key] = ComputeManagementClient(self.credential, subscription_id, **self._client_kwargs())
        return self._clients[key]

    def _arm_pipeline(self):
        if "arm" not in self._clients:
            self._clients["arm"] = _azure.Pipeline(
                transport=self.transport or _azure.RequestsTransport(),
                policies=[_azure.HeadersPolicy(), _azure.UserAgentPolicy(base_user_agent=_user_agent()),
                          BearerTokenCredentialPolicy(self.credential, self.cloud.scope)])
        return self._clients["arm"]

    def query_resources(self, subscriptions, query, skip_token=None, top=1000, deadline=None):
        """One page of a Resource Graph query: (rows, skip_token)."""
        options = QueryRequestOptions(top=top, skip_token=skip_token, result_format="objectArray")
        request = QueryRequest(subscriptions=subscriptions, query=query, options=options)
        answer = self.call(lambda timeouts: self.graph().resources(request, api_version=RESOURCE_GRAPH_API_VERSION,
                                                                   **timeouts),
                           "Querying Resource Graph", deadline=deadline, scope="the subscriptions %s"
                           % ", ".join(subscriptions))
        return list(answer.data or []), answer.skip_token

    def query_all(self, subscriptions, query, max_pages=10000):
        """Every row of a query, page after page ($skipToken); each page has retry_timeout for its retries."""
        rows, skip_token = self.query_resources(subscriptions, query)
        pages = 1
        while skip_token:
            if pages >= max_pages:
                raise AzureError("Resource Graph kept answering with a $skipToken after %d pages; stopped. Narrow the "
                                 "query with resource_groups or event_statuses." % pages)
            page, skip_token = self.query_resources(subscriptions, query, skip_token=skip_token)
            rows.extend(page)
            pages += 1
        return rows

    def post(self, path, api_version, what, scope, deadline=None):
        """A POST through azure-core's pipeline (the Maintenance RP has no SDK client here). Returns
        (status, JSON body or None)."""
        url = "%s%s?api-version=%s" % (self.cloud.resource_manager, path.lstrip("/"), api_version)

        def send(timeouts):
            request = _azure.HttpRequest("POST", url, json={}, headers={"Accept": "application/json"})
            response = self._arm_pipeline().run(request, **timeouts).http_response
            if response.status_code >= 400:
                raise _azure.HttpResponseError(response=response)
            try:
                return response.status_code, json.loads(response.text() or "null")
            except ValueError:
                return response.status_code, None
        return self.call(send, what, deadline=deadline, scope=scope, url=url)

    def get(self, url, what, scope, deadline=None):
        """A GET through the same pipeline, of a full URL (a nextLink) or a path with its query. Returns
        the JSON body."""
        if not url.startswith(("https://", "http://")):
            url = self.cloud.resource_manager + url.lstrip("/")

        def send(timeouts):
            request = _azure.HttpRequest("GET", url, headers={"Accept": "application/json"})
            response = self._arm_pipeline().run(request, **timeouts).http_response
            if response.status_code >= 400:
                raise _azure.HttpResponseError(response=response)
            try:
                return json.loads(response.text() or "null")
            except ValueError:
                raise AzureError("%s: the answer of %s is not JSON." % (what, url.split("?")[0]), url=url)
        return self.call(send, what, deadline=deadline, scope=scope, url=url)

    def deadline(self):
        return _edge.Deadline(self.retry_timeout, clock=self.clock, name="retry_timeout")

    def call(self, send, what, deadline=None, scope=None, url=None, feature=None):
        """send(timeouts) under the one retry routine: 429 and 5xx are retried (Retry-After first, then
        x-ms-user-quota-resets-after, then backoff), never past retry_timeout; the rest become AzureError."""
        deadline = deadline or self.deadline()
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            remaining = deadline.remaining()
            timeout = max(0.1, min(self.request_timeout, remaining) if attempt > 1 else self.request_timeout)
            try:
                return send({"connection_timeout": min(timeout, 30.0), "read_timeout": timeout})
            except ClientAuthenticationError as exc:
                if getattr(exc, "response", None) is None or exc.status_code is None:
                    raise self.sign_in_error(exc)
                raise self.http_error(exc, what, scope, url, feature)
            except _azure.HttpResponseError as exc:  # pylint: disable=duplicate-except
                status = exc.status_code
                rule = _retry.RETRY_TABLE.get(("http", status))
                if rule is None:
                    raise self.http_error(exc, what, scope, url, feature)
                headers = exc.response.headers if exc.response is not None else {}
                delay, which = throttle_delay(headers, rule, attempt, self.policy, self.wall_clock)
                if delay > deadline.remaining():
                    code, message = error_body(exc)
                    raise AzureError(
                        "%s: HTTP %s%s after %d attempt(s); waiting %.1f s (%s) would pass retry_timeout (%s s). "
                        "Raise retry_timeout, or query fewer subscriptions at a time." % (
                            what, status, " %s: %s" % (code, message) if code else "", attempt, delay, which,
                            _edge.format_number(self.retry_timeout)), status=status, code=code, url=url)
                self.sleep(delay)
            except (_azure.ServiceRequestError, _azure.ServiceResponseError) as exc:
                raise AzureError("%s: no answer from %s (%s). Check cloud_environment, the network and, for a private "
                                 "CA, REQUESTS_CA_BUNDLE." % (what, self.cloud.resource_manager, exc), url=url)

    def sign_in_error(self, exc):
        message = str(getattr(exc, "message", None) or exc).strip().splitlines()[0][:400]
        return AzureError("Signing in to Azure with %s (%s) failed: %s. Check client_id, secret and tenant (or the "
                          "managed identity or 'az login'), and that the login endpoint %s is the right one."
                          % (self.settings["kind"].replace("_", " "), self.settings["source"], message,
                             self.cloud.authority or "of the cloud"))

    def http_error(self, exc, what, scope=None, url=None, feature=None):
        status = exc.status_code
        code, message = error_body(exc)
        head = "%s: HTTP %s %s: %s" % (what, status, code or "", message)
        hint = ""
        lowered = ("%s %s" % (code, message)).lower()
        if feature and ("feature" in lowered or feature.split("/")[-1].lower() in lowered):
            hint = ("The subscription has not registered the preview feature %s: run 'az feature register "
                    "--namespace %s --name %s' and then 'az provider register -n %s'." % (
                        feature, feature.split("/")[0], feature.split("/")[1], feature.split("/")[0]))
        elif status == 401 and code == "ExpiredAuthenticationToken":
            hint = "The access token expired: run the task again (and check the controller's clock)."
        elif status == 401:
            hint = "Resource Manager refused the token: check tenant, client_id and cloud_environment."
        elif status == 403:
            hint = ("The signed-in principal lacks the role for this on %s: acknowledging needs "
                    "ScheduledEventContributor (or Owner or Contributor), reading needs Reader."
                    % (scope or "the scope"))
        elif status == 404 and code == "SubscriptionNotFound":
            hint = "Check subscription_id."
        elif status == 404:
            hint = "Check the resource group and name (%s)." % (scope or "")
        elif code in ("InvalidApiVersionParameter", "NoRegisteredProviderFound"):
            hint = "Choose another api_version."
        return AzureError(" ".join(part for part in (head.rstrip(" :") + ".", hint) if part), status=status,
                          code=code, url=url)


# --------------------------------------------------------------------------------------------
# The modules' glue
# --------------------------------------------------------------------------------------------

class Runtime:
    """What one module run may have replaced: environment, home, transport, credential and clocks."""

    def __init__(self, environ=None, home=None, transport=None, credential=None, clock=None, sleep=None,
                 wall_clock=None, rng=None):
        self.kwargs = dict(environ=environ, home=home, transport=transport, credential=credential, clock=clock,
                           sleep=sleep, wall_clock=wall_clock, rng=rng)

    def session(self, params):
        return Session(params, **self.kwargs)


def run(module, execute, runtime=None, check=None):
    """check(params) then execute(module, session); every error ends in one fail_json, never a traceback."""
    if _azure.AZURE_IMPORT_ERROR is not None:
        from ansible.module_utils.basic import missing_required_lib  # pylint: disable=import-outside-toplevel
        module.fail_json(msg=missing_required_lib(REQUIRED_LIBRARIES), exception=str(_azure.AZURE_IMPORT_ERROR))
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _options  # noqa: E501 pylint: disable=import-outside-toplevel
    try:
        _options.check_numbers(module.params, _options.raw_module_args())
        if module.params.get("subscription_id"):
            check_guid(module.params["subscription_id"], "subscription_id")
        if check is not None:
            check(module)
        execute(module, (runtime or Runtime()).session(module.params))
    except AzureError as exc:
        module.fail_json(msg=str(exc), **exc.to_dict())
    except _edge.ImdsInputError as exc:
        module.fail_json(msg=str(exc), status=None, error_code=None, url=None)
