"""Test doubles for the control-plane modules: a requests session that plays a script under
azure-core's RequestsTransport (so the SDK clients and the pipeline run for real), a credential
that hands out a fixed token, and a module runner with them and a fake clock."""

import io
import json
from unittest import mock

import requests
import urllib3
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import RequestsTransport

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _arm
from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import (
    ModuleExit, _exit_json, _fail_json)

BASE = "https://127.0.0.1:8443/"
SUB = "00000000-0000-0000-0000-00000000000a"
SUB2 = "00000000-0000-0000-0000-00000000000b"
METADATA = [{"name": "Mock", "resourceManager": BASE,
             "authentication": {"loginEndpoint": BASE + "login/", "audiences": [BASE], "tenant": "common",
                                "identityProvider": "AAD"}}]


class FakeCredential:
    def __init__(self):
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.append(scopes)
        return AccessToken("token-1", 4102444800)


def reply(status=200, body=None, headers=None):
    return (status, body, headers or {})


class ScriptedSession(requests.Session):
    """requests.Session whose request() plays (status, body, headers) answers in order."""

    def __init__(self, answers):
        super(ScriptedSession, self).__init__()
        self.answers = list(answers)
        self.sent = []   # (method, url, json body or None, headers)

    def request(self, method, url, **kwargs):  # pylint: disable=arguments-differ
        data = kwargs.get("data")
        body = json.loads(data) if data else None
        self.sent.append((method, url, body, dict(kwargs.get("headers") or {})))
        if not self.answers:
            raise AssertionError("unexpected request %s %s" % (method, url))
        status, payload, headers = self.answers.pop(0)
        response = requests.Response()
        response.status_code = status
        content = json.dumps(payload).encode() if payload is not None else b""
        response.raw = urllib3.response.HTTPResponse(body=io.BytesIO(content), preload_content=False,
                                                     status=status, headers=dict(headers))
        response.headers.update({"Content-Type": "application/json"})
        response.headers.update(headers)
        response.url = url
        response.request = requests.Request(method, url).prepare()
        return response


class AzureRun:
    def __init__(self, result, warnings, session, clock):
        self.result = result
        self.warnings = warnings
        self.session = session
        self.clock = clock

    @property
    def failed(self):
        return bool(self.result.get("failed"))

    @property
    def requests(self):
        """(method, path with query) of every request, the base URL left out."""
        return [(m, u[len(BASE) - 1:] if u.startswith(BASE) else u) for m, u, _body, _headers in self.session.sent]

    def bodies(self, method):
        return [b for m, _url, b, _headers in self.session.sent if m == method]


def run_azure_module(module, args, answers=(), check_mode=False, diff=False, environ=None, cloud=True, home="/nonexistent"):
    """Run module.main() with the scripted session. cloud=True puts the metadata answer first and
    cloud_environment at BASE."""
    clock = FakeClock()
    answers = list(answers)
    args = dict(args)
    if cloud:
        args.setdefault("cloud_environment", BASE)
        answers.insert(0, reply(200, METADATA))
    args.setdefault("auth_source", "env")
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    environ = {"AZURE_CLIENT_ID": "app", "AZURE_SECRET": "s3cret", "AZURE_TENANT": "tenant-1",
               "AZURE_SUBSCRIPTION_ID": SUB} if environ is None else environ
    session = ScriptedSession(answers)
    runtime = _arm.Runtime(environ=environ, home=home, transport=RequestsTransport(session=session),
                           credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                           wall_clock=lambda: 1649714400.0, rng=lambda: 1.0)
    warnings = []
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json), \
            mock.patch.object(basic.AnsibleModule, "warn", lambda self, text: warnings.append(text)):
        try:
            module.main(runtime)
        except ModuleExit as exc:
            return AzureRun(exc.result, warnings, session, clock)
    raise AssertionError("main() returned without exit_json or fail_json")
