# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/docsite/rst/troubleshooting.rst quotes the client's error messages word for word.

Each case below makes plugins/module_utils/_imds.py (and _module_runner.py) fail the way the guide
describes, with the scripted transport and fake clock of the client's unit tests, and the guide
must contain the exact text. A message changed in the code fails here until the guide follows.
"""

import os
import socket

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _imds, _module_runner

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock, ScriptedTransport, answer, fail

GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                     "docs", "docsite", "rst", "troubleshooting.rst")
REAL = "http://169.254.169.254"


def client_for(steps, **kwargs):
    clock = FakeClock()
    transport = ScriptedTransport(clock, steps)
    return _imds.ImdsClient(base_url=REAL, clock=clock, sleep=clock.sleep, rng=lambda: 1.0,
                            connection_factory=transport, environ={}, wall_clock=lambda: 1700000000.0, **kwargs)


def error_of(call):
    with pytest.raises((_edge.ImdsError, _edge.ImdsInputError)) as caught:
        call()
    return str(caught.value)


class NameModule:
    """Just enough of AnsibleModule for _module_runner.resource_name()."""

    def __init__(self):
        self.params = {"resource_name": None}
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)


def not_an_azure_vm():
    client = client_for([fail(socket.timeout("timed out"), on="connect", cost=5.0)] * 3)
    return error_of(client.get_scheduled_events)


def proxy_redirect():
    client = client_for([answer(302, b"", headers=[("Location", "http://proxy.internal:3128/login")],
                                reason="Found")])
    return error_of(client.get_scheduled_events)


def proxy_forwarded_for():
    body = {"error": "Bad request. Requests containing an X-Forwarded-For header are not allowed"}
    client = client_for([answer(400, body, reason="Bad Request")])
    return error_of(client.get_scheduled_events)


def proxy_forbidden():
    client = client_for([answer(403, b"<html>Access denied</html>", reason="Forbidden")])
    return error_of(client.get_scheduled_events)


def rate_limited():
    throttled = answer(429, {"error": "Too many requests"}, headers=[("Retry-After", "2")], reason="Too Many Requests")
    client = client_for([throttled] * 46)
    return error_of(client.get_scheduled_events)


def first_call_too_slow():
    # Default options: the one attempt gets the whole request_timeout (120 s), past retry_timeout.
    client = client_for([fail(socket.timeout("timed out"), cost=120.0)])
    return error_of(client.get_scheduled_events)


def gone_too_long():
    gone = answer(410, {"error": "Gone"}, reason="Gone")
    client = client_for([gone] * 31, retry_timeout=30)
    return error_of(client.get_scheduled_events)


def vm_name_unknown():
    client = client_for([answer(404, {"error": "Not found"}, reason="Not Found")])
    return error_of(lambda: _module_runner.resource_name(NameModule(), client, needed_by="this_host_only"))


CASES = [not_an_azure_vm, proxy_redirect, proxy_forwarded_for, proxy_forbidden, rate_limited, first_call_too_slow,
         gone_too_long, vm_name_unknown]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_the_guide_quotes_the_message_the_client_gives(case):
    message = case()
    with open(GUIDE, encoding="utf-8") as handle:
        guide = handle.read()
    assert message in guide, "docs/docsite/rst/troubleshooting.rst does not quote, word for word:\n%s" % message
