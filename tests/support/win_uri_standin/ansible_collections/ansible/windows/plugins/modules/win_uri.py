# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# A STAND-IN for ansible.windows.win_uri, for tests only: a Python module that takes the options
# and gives the results ansible.windows documents for win_uri (its DOCUMENTATION, RETURN and the
# web_request doc fragment), so that the collection's win_uri path runs end to end on a Linux test
# host against the mock IMDS. It is not win_uri: no PowerShell, no .NET, no Windows. It sits in a
# collections directory of its own that only the win_uri path's tests put on the collections path;
# tests/unit/plugins/action/test_win_uri_standin.py compares it with the real win_uri (taken from
# the ansible package by tests/harness/prepare.d/26-windows-collection.sh), so a drift fails a test.
# Only the options the collection passes are implemented; any other is refused as unsupported.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: win_uri
short_description: Test stand-in for ansible.windows.win_uri (Python, for Linux test hosts)
description:
  - Sends one HTTP request as M(ansible.windows.win_uri) does and returns what it returns. For the
    tests of azure_imds.scheduled_events only.
options:
  url:
    description: The URL.
    type: str
    required: true
  url_method:
    description: The HTTP method.
    type: str
    default: GET
    aliases: [method]
  headers:
    description: Extra headers.
    type: dict
  body:
    description: The body of the request.
    type: raw
  content_type:
    description: The Content-Type header.
    type: str
  http_agent:
    description: The User-Agent header.
    type: str
    default: ansible-httpget
  return_content:
    description: Return the body as RV(content) (and RV(json) for a JSON type).
    type: bool
    default: false
  status_code:
    description: The statuses that count as success; any other fails the module.
    type: list
    elements: int
    default: [200]
  url_timeout:
    description: Seconds before the request times out; V(0) for none.
    type: int
    default: 30
    aliases: [timeout]
  use_proxy:
    description: Use the proxy of the environment.
    type: bool
    default: true
  follow_redirects:
    description: Which redirects to follow.
    type: str
    default: safe
    choices: [all, none, safe]
  maximum_redirection:
    description: How many redirects to follow at most; V(0) follows none.
    type: int
    default: 50
author:
  - azure_imds.scheduled_events maintainers (@azure-imds)
"""

EXAMPLES = r"""
---
- name: GET through the stand-in
  ansible.windows.win_uri:
    url: http://127.0.0.1:8080/metadata/scheduledevents?api-version=2020-07-01
    headers:
      Metadata: "true"
    return_content: true
"""

RETURN = r"""
elapsed:
  description: Seconds the request took.
  returned: always
  type: float
  sample: 0.02
url:
  description: The URL.
  returned: always
  type: str
  sample: http://127.0.0.1:8080/
status_code:
  description: The HTTP status of the answer.
  returned: success
  type: int
  sample: 200
status_description:
  description: Its reason phrase.
  returned: success
  type: str
  sample: OK
content:
  description: The body as text.
  returned: success and return_content is True
  type: str
  sample: '{"DocumentIncarnation": 1, "Events": []}'
content_length:
  description: The byte size of the answer, V(-1) when it was not announced.
  returned: success
  type: int
  sample: 40
json:
  description: The body parsed, for a JSON or text type.
  returned: success and return_content is True and the type is JSON or text
  type: dict
  sample: {"DocumentIncarnation": 1, "Events": []}
"""

import json
import os
import re
import signal
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib import error as urllib_error
from ansible.module_utils.six.moves.urllib import request as urllib_request

# .NET's messages for the failures that win_uri reports as "Unhandled exception ..." (WebException).
TIMED_OUT = "The operation has timed out."
NO_CONNECTION = "Unable to connect to the remote server"
CLOSED = "The underlying connection was closed: An unexpected error occurred on a receive."
JSON_CANDIDATES = ("text", "json", "javascript")
JSON_DEPTH_LIMIT = 100


def nesting(value):
    """How deep lists and objects nest in value, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def argument_spec():
    return dict(
        url=dict(type="str", required=True),
        url_method=dict(type="str", default="GET", aliases=["method"]),
        headers=dict(type="dict"),
        body=dict(type="raw"),
        content_type=dict(type="str"),
        http_agent=dict(type="str", default="ansible-httpget"),
        return_content=dict(type="bool", default=False),
        status_code=dict(type="list", elements="int", default=[200]),
        url_timeout=dict(type="int", default=30, aliases=["timeout"]),
        use_proxy=dict(type="bool", default=True),
        follow_redirects=dict(type="str", default="safe", choices=["all", "none", "safe"]),
        maximum_redirection=dict(type="int", default=50),
    )


def snake_header(name):
    """A header's result key as win_uri makes it: '-' removed, then snake case (Retry-After: retry_after)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.replace("-", "")).lower()


class _Redirects(urllib_request.HTTPRedirectHandler):
    def __init__(self, follow, method, maximum):
        self.follow = follow
        self.method = method
        self.max_redirections = maximum

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        allowed = self.follow == "all" or (self.follow == "safe" and self.method in ("GET", "HEAD"))
        if not allowed or self.max_redirections == 0:
            return None
        return urllib_request.HTTPRedirectHandler.redirect_request(self, req, fp, code, msg, headers, newurl)


def send(params, method):
    handlers = [_Redirects(params["follow_redirects"], method, params["maximum_redirection"])]
    if not params["use_proxy"]:
        handlers.append(urllib_request.ProxyHandler({}))
    opener = urllib_request.build_opener(*handlers)
    body = params["body"]
    if body is not None and not isinstance(body, str):
        body = json.dumps(body) if isinstance(body, (dict, list)) else str(body)
    request = urllib_request.Request(params["url"], data=None if body is None else body.encode("utf-8"),
                                     method=method)
    for name, value in (params["headers"] or {}).items():
        if name.lower() != "user-agent":
            request.add_header(name, str(value))
    request.add_header("User-Agent", params["http_agent"])
    if params["content_type"] is not None:
        request.add_header("Content-Type", params["content_type"])
    timeout = params["url_timeout"] or None
    # win_uri's timeout is HttpWebRequest.Timeout: it bounds the whole wait for the answer's status
    # line and headers (GetResponse), not each read of the socket as urllib's does. An alarm gives
    # the same bound here (this runs as a module process of its own, in its main thread).
    previous = signal.signal(signal.SIGALRM, _headers_timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout or 0)
    try:
        response = opener.open(request, timeout=timeout)
    except urllib_error.HTTPError as exc:
        # win_uri's -IgnoreBadResponse: a 4xx or 5xx answer is an answer.
        response = exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return response, response.read()


def _headers_timed_out(signum, frame):
    raise socket.timeout("no answer within the timeout")


def failure_text(exc):
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.timeout) or isinstance(exc, socket.timeout):
        return TIMED_OUT
    if isinstance(reason, (ConnectionRefusedError, socket.gaierror)) or isinstance(exc, ConnectionRefusedError):
        return NO_CONNECTION
    return CLOSED


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    method = params["url_method"].upper()
    result = dict(changed=False, elapsed=0, url=params["url"])
    if not re.match(r"^[A-Z]+$", method):
        module.fail_json(msg="Parameter 'method' needs to be a single word in uppercase, like GET or POST.", **result)
    if os.environ.get("WIN_URI_STANDIN_LOG"):
        # The tests count the requests that went through the stand-in (one line each).
        with open(os.environ["WIN_URI_STANDIN_LOG"], "a") as log:
            log.write("%s %s\n" % (method, params["url"]))
    start = time.monotonic()
    try:
        # Like win_uri, check mode changes nothing here but still sends the request.
        response, content = send(params, method)
    except (urllib_error.URLError, OSError, ValueError) as exc:
        result["elapsed"] = time.monotonic() - start
        module.fail_json(msg="Unhandled exception occurred when sending web request. Exception: %s"
                         % failure_text(exc), **result)
    result["elapsed"] = time.monotonic() - start
    # Every header as a key, then the response's properties, whose documented types win.
    for name, value in response.headers.items():
        result[snake_header(name)] = value
    status = int(response.getcode())
    result.update(msg=response.reason or "", status_code=status, status_description=response.reason or "")
    declared = response.headers.get("Content-Length")
    result["content_length"] = int(declared) if declared and declared.isdigit() else -1
    if params["return_content"]:
        result["content"] = content.decode("utf-8", "replace")
        if any(candidate in (result.get("content_type") or "") for candidate in JSON_CANDIDATES):
            try:
                parsed = json.loads(result["content"])
            except (ValueError, RecursionError):
                parsed = None
            # win_uri's ConvertFrom-SafeJson drops what it cannot parse (its parser refuses nesting
            # past a limit; the stand-in takes 100 levels) and returns the content alone.
            if parsed is not None and nesting(parsed) <= JSON_DEPTH_LIMIT:
                result["json"] = parsed
    if status not in params["status_code"]:
        module.fail_json(msg="Status code of request '%d' is not in list of valid status codes %s : %s'."
                         % (status, params["status_code"], status), **dict((k, v) for k, v in result.items()
                                                                           if k != "msg"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
