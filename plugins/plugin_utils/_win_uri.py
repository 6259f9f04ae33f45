# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This plugin_utils is PRIVATE to this collection: its API may change in any release.
#
# The one HTTP exchange with IMDS done by ansible.windows.win_uri on a Windows host, for the
# client of module_utils/_imds.py running on the controller (ImdsClient(exchange=WinUriExchange(...))).
# Only the request goes to the host; retries, deadlines, the document and every decision stay in
# the client and the modules' code, the same as on Linux hosts. What win_uri takes and returns is
# read from its DOCUMENTATION and RETURN (ansible.windows 3.x); the header keys it returns come from
# its code (see docs/docsite/rst/windows.rst).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _retry
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._imds import AttemptFailed, Response, too_large

WIN_URI = "ansible.windows.win_uri"
TRANSPORTS = _defaults.IMDS_TRANSPORTS
# win_uri fails on a status outside status_code; the client wants every answer to judge it itself.
EVERY_STATUS = list(range(100, 600))
# win_uri's own message when the request itself failed (ansible.windows win_uri.ps1).
_SEND_FAILED = "Unhandled exception occurred when sending web request"
# The header keys read from win_uri's result: it returns each response header as a key, the name
# without '-' in snake_case.
_HEADER_KEYS = (("retry_after", "Retry-After"), ("location", "Location"), ("content_type", "Content-Type"))


class WinUriUnavailable(_edge.ImdsError):
    """win_uri could not be run at all (not installed, a bad argument): not an IMDS failure, never retried."""

    def __init__(self, message, url):
        super(WinUriUnavailable, self).__init__(
            message, url=url,
            hint="The Windows path needs the ansible.windows collection on the controller (it ships in the ansible "
                 "package); set imds_transport=module for a host that runs Python.")


def host_is_windows(shell):
    """Whether the connection's shell is PowerShell, as ansible-core's own action plugins tell."""
    return bool(getattr(shell, "_IS_WINDOWS", False)) or getattr(shell, "SHELL_FAMILY", None) == "powershell"


def uses_win_uri(choice, shell):
    """The path for imds_transport=choice on a host with this shell."""
    if choice == "auto":
        return host_is_windows(shell)
    return choice == "win_uri"


def win_uri_args(request, deadline):
    """win_uri's options for one request, within deadline (None when no time is left)."""
    left = deadline.remaining()
    if left <= 0:
        return None
    headers = dict((name, value) for name, value in request.headers.items()
                   if name.lower() not in ("user-agent", "content-type"))
    args = dict(
        url=request.url,
        method=request.method,
        headers=headers,
        http_agent=request.headers.get("User-Agent", _defaults.USER_AGENT),
        return_content=True,
        status_code=EVERY_STATUS,
        # win_uri's timeout is whole seconds and 0 means none: at least 1, never past the deadline by a second.
        timeout=max(1, int(math.ceil(left))),
        use_proxy=False,
        follow_redirects="none",
    )
    if request.body is not None:
        args.update(body=request.body, content_type=request.headers.get("Content-Type", "application/json"))
    return args


def response_from(result, request, budget=None):
    """win_uri's result as the client's Response; a failed request as AttemptFailed of its kind."""
    if result.get("failed"):
        msg = str(result.get("msg") or "")
        if not msg.startswith(_SEND_FAILED):
            raise WinUriUnavailable("%s failed on the host for %s %s: %s" % (WIN_URI, request.method, request.url, msg),
                                    request.url)
        text = msg.lower()
        if "timed out" in text:
            kind = _retry.Failure.READ_TIMEOUT
        elif "unable to connect" in text or "actively refused" in text:
            kind = _retry.Failure.CONNECT
        else:
            kind = _retry.Failure.DROPPED
        detail = "%s on the host: %s" % (WIN_URI, msg)
        if kind == _retry.Failure.READ_TIMEOUT and budget is not None:
            # As the module path says it; win_uri's own timeout is whole seconds, rounded up.
            detail = "no complete answer within %.1fs (%s)" % (budget, detail)
        raise AttemptFailed(_retry.Failure(kind, detail))
    status = result.get("status_code")
    if isinstance(status, bool) or not isinstance(status, int):
        raise WinUriUnavailable("%s returned no status_code for %s %s (got %r)."
                                % (WIN_URI, request.method, request.url, status), request.url)
    content = result.get("content")
    body = b"" if content is None else str(content).encode("utf-8", "surrogatepass")
    if len(body) > _defaults.MAX_BODY_BYTES:
        raise AttemptFailed(too_large("sent %d bytes" % len(body)))
    headers = [(name, str(result[key])) for key, name in _HEADER_KEYS if result.get(key) is not None]
    return Response(status, str(result.get("status_description") or ""), headers, body)


class WinUriExchange:
    """exchange(request, deadline) for ImdsClient: each request one run of win_uri on the host.

    execute(module_args) runs win_uri and returns its result; a lost connection raises (the
    caller treats the host as unreachable, as for the Python module)."""

    def __init__(self, execute):
        self._execute = execute
        #: win_uri runs made (each one HTTP request), for the task's result and the tests.
        self.requests = 0

    def __call__(self, request, deadline):
        budget = deadline.remaining()
        args = win_uri_args(request, deadline)
        if args is None:
            raise AttemptFailed(_retry.Failure(_retry.Failure.READ_TIMEOUT, "no time left for a request"))
        self.requests += 1
        return response_from(self._execute(args), request, budget)
