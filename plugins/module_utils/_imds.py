# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# How IMDS is reached: the base URL, the HTTP client (one deadline per operation, the retry policy of
# _retry.py), client_from_options and the watch for a new document. What an event is lives in
# _event.py, the errors and edge checks in _edge.py, every default in _defaults.py. Modules, the
# scheduled_event_wait action plugin, the EDA source and the watcher daemon all use this very file,
# which is why it depends on nothing but the Python standard library: the watcher role copies it
# onto the VM.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import time

try:
    import http.client as http_client
    from urllib.parse import urlencode, urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported, this keeps sanity's compile test quiet
    http_client = None
    urlencode = urlsplit = None

try:
    import ssl
except ImportError:  # pragma: no cover - a Python built without ssl still speaks plain http
    ssl = None

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import (
    DEFAULT_API_VERSION, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_RETRY_TIMEOUT,
    MAX_BODY_BYTES, MAX_INCARNATION, MAX_NESTING, MAX_TIMEOUT, MIN_POLL_INTERVAL, MIN_REQUEST_TIMEOUT,
    RETRY_AFTER_CAP, SCHEDULED_EVENTS_PATH, URL_ENV_VAR, USER_AGENT, VM_NAME_API_VERSION, VM_NAME_PATH)
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._edge import (
    SURROGATE_RE, Deadline, ImdsError, ImdsHttpError, ImdsInputError, ImdsRedirectError, ImdsResponseError,
    ImdsTimeoutError, ImdsTooLargeError, ImdsUnavailableError, check_base_url, check_number, cut_nesting,
    validate_api_version)
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._event import (
    ScheduledEvents, parse_document, validate_event_ids)
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._retry import (
    Failure, RetryPolicy, parse_retry_after, retry_rule_for)


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------

def resolve_base_url(explicit=None, environ=None):
    """An explicit URL wins, then $AZURE_IMDS_URL, then the real link-local address.

    An explicit empty string is refused (check_base_url), not read as "the default": it is almost
    always a variable that came out empty, and a test host must not reach for the real address."""
    environ = os.environ if environ is None else environ
    if explicit is not None:
        return check_base_url(explicit)
    from_environment = environ.get(URL_ENV_VAR)
    if from_environment:
        return check_base_url(from_environment, name="$%s (environment of the managed host)" % URL_ENV_VAR)
    return DEFAULT_BASE_URL


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------

class Request:
    """One HTTP request as the client means it: method, the full url, target (the path and query
    http.client sends), headers and body (text or None)."""

    def __init__(self, method, url, target, headers, body):
        self.method = method
        self.url = url
        self.target = target
        self.headers = headers
        self.body = body


class Response:
    """One HTTP answer: status, reason, headers as (name, value) pairs, body (bytes or text)."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


def request_headers(body):
    """The headers of every request to IMDS, whoever sends it."""
    headers = {"Metadata": "true", "User-Agent": USER_AGENT}
    if body is not None:
        headers["Content-Type"] = "application/json"
    return headers


def _imds_error_text(body):
    """The ``error`` text of an IMDS error body, or the body itself, shortened."""
    if not body:
        return None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(cut_nesting(text, MAX_NESTING + 1))
        if isinstance(parsed, dict) and parsed.get("error"):
            return SURROGATE_RE.sub(u"\ufffd", str(parsed["error"]))
    except (ValueError, RecursionError):
        pass
    text = " ".join(text.split())
    return text[:300] or None


class _DeadlineSocketMixin:
    """Re-arms the socket's timeout to the time left before every send and receive.

    A plain socket timeout bounds each read alone: a server trickling one byte per second would
    hold a request open for ever. http.client reads the status line, the headers and the body
    through this socket, so with the timeout re-armed before each read one per-request deadline
    bounds them all.
    """

    deadline = None

    def _arm(self):
        if self.deadline is not None:
            left = self.deadline.remaining()
            if left <= 0:
                raise socket.timeout("the request's deadline passed")
            self.settimeout(left)

    def recv_into(self, *args, **kwargs):
        self._arm()
        return super(_DeadlineSocketMixin, self).recv_into(*args, **kwargs)

    def recv(self, *args, **kwargs):
        self._arm()
        return super(_DeadlineSocketMixin, self).recv(*args, **kwargs)

    def sendall(self, *args, **kwargs):
        self._arm()
        return super(_DeadlineSocketMixin, self).sendall(*args, **kwargs)

    def send(self, *args, **kwargs):
        self._arm()
        return super(_DeadlineSocketMixin, self).send(*args, **kwargs)


class _DeadlineSocket(_DeadlineSocketMixin, socket.socket):
    pass


if ssl is not None:
    class _DeadlineSSLSocket(_DeadlineSocketMixin, ssl.SSLSocket):
        pass
else:  # pragma: no cover - a Python built without ssl still speaks plain http
    _DeadlineSSLSocket = None


def _connect_socket(host, port, timeout):
    """socket.create_connection, but with a socket that honours a per-request deadline."""
    last_error = OSError("no address found for %s" % host)
    for family, socktype, proto, _canonname, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = _DeadlineSocket(family, socktype, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
    raise last_error


class _HTTPConnection(http_client.HTTPConnection if http_client else object):
    def connect(self):
        self.sock = _connect_socket(self.host, self.port, self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _HTTPSConnection(http_client.HTTPSConnection if http_client and ssl else object):
    def connect(self):
        # The connection's own context (certificate checks as http.client sets them), made to wrap
        # into a socket that honours the deadline.
        context = getattr(self, "_context", None) or ssl.create_default_context()
        context.sslsocket_class = _DeadlineSSLSocket
        plain = _connect_socket(self.host, self.port, self.timeout)
        self.sock = context.wrap_socket(plain, server_hostname=self.host)


class ImdsClient:
    """Talks to IMDS with one retry policy and one deadline per operation.

    Every operation (get_scheduled_events, approve, get_vm_name) takes an optional Deadline that
    bounds all of it: each attempt (connect, send, every read, the whole body) and each sleep
    between attempts. Within it the client keeps its own limits: no retry starts more than
    ``retry_timeout`` seconds after the operation began, and no single request takes more than
    ``request_timeout`` seconds in total. The first attempt gets the whole ``request_timeout``
    (unless the caller's deadline is sooner), because the first request to Scheduled Events after
    a quiet day can take two minutes while the service switches itself on.
    """

    def __init__(self, base_url=None, api_version=DEFAULT_API_VERSION, request_timeout=DEFAULT_REQUEST_TIMEOUT,
                 retry_timeout=DEFAULT_RETRY_TIMEOUT, connect_timeout=DEFAULT_CONNECT_TIMEOUT,
                 clock=None, sleep=None, rng=None, environ=None, wall_clock=None, connection_factory=None,
                 exchange=None):
        self.base_url = resolve_base_url(base_url, environ)
        self.api_version = validate_api_version(api_version)
        self.request_timeout = check_number(request_timeout, "request_timeout", MIN_REQUEST_TIMEOUT, MAX_TIMEOUT)
        self.retry_timeout = check_number(retry_timeout, "retry_timeout", 0.0, MAX_TIMEOUT)
        self.connect_timeout = check_number(connect_timeout, "connect_timeout", MIN_REQUEST_TIMEOUT, MAX_TIMEOUT)
        self._clock = clock or time.monotonic
        self._sleep = sleep or time.sleep
        self._wall_clock = wall_clock or time.time
        self._policy = RetryPolicy(rng)
        self._connection_factory = connection_factory or self._make_connection
        #: The one HTTP exchange, exchange(request, deadline) -> Response, raising AttemptFailed: by
        #: default http.client from this process; the action plugins give one that runs
        #: ansible.windows.win_uri on a Windows host. Retries, deadlines and parsing stay here.
        self._exchange = exchange or self._send_once
        parts = urlsplit(self.base_url)
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._connection = None
        #: Every failed attempt of the last operation, oldest first (for messages and tests).
        self.last_failures = []
        #: Send once more over a new connection when a kept-alive one turns out closed (usually the
        #: server closed it while idle and never saw the request). A caller that paces every request
        #: itself, such as the watcher daemon, sets this to False and treats it as a failed attempt.
        self.resend_on_stale_connection = True

    # -- public operations ---------------------------------------------------------------------

    def url(self, path, query=None):
        url = self.base_url + path
        if query:
            url += "?" + urlencode(query)
        return url

    def scheduled_events_url(self):
        return self.url(SCHEDULED_EVENTS_PATH, {"api-version": self.api_version})

    def get_scheduled_events(self, deadline=None):
        """GET the Scheduled Events document. Returns ScheduledEvents (see its warnings)."""
        api_version = self.api_version
        return self._request("GET", SCHEDULED_EVENTS_PATH, {"api-version": api_version}, deadline=deadline,
                             parse=lambda body, url: ScheduledEvents(parse_document(body, url), api_version, url))

    def approve(self, event_ids, deadline=None):
        """POST one request that starts every given event. Ids are echoed exactly as given."""
        event_ids = validate_event_ids(event_ids)
        if not event_ids:
            raise ImdsInputError("approve() needs at least one EventId.")
        body = json.dumps({"StartRequests": [{"EventId": e} for e in event_ids]})
        self._request("POST", SCHEDULED_EVENTS_PATH, {"api-version": self.api_version}, body=body, deadline=deadline)

    def get_vm_name(self, deadline=None):
        """This VM's name as Resources spells it (not the hostname: scale sets differ)."""
        return self._request("GET", VM_NAME_PATH, {"api-version": VM_NAME_API_VERSION, "format": "text"},
                             parse=_parse_text, deadline=deadline)

    def close(self):
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None

    # -- transport -----------------------------------------------------------------------------

    def _make_connection(self, timeout):
        cls = _HTTPSConnection if self._scheme == "https" else _HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _send_once(self, request, deadline):
        """One HTTP exchange within deadline. Returns Response or raises a Failure-carrying AttemptFailed."""
        budget = deadline.remaining()
        if budget <= 0:
            raise AttemptFailed(Failure(Failure.READ_TIMEOUT, "no time left for a request"))
        reused = self._connection is not None
        if not reused:
            connect_timeout = min(self.connect_timeout, budget)
            conn = self._connection_factory(connect_timeout)
            try:
                conn.connect()
            except socket.timeout:
                conn.close()
                raise AttemptFailed(Failure(Failure.CONNECT, "connect timed out after %.1fs" % connect_timeout))
            except (OSError, http_client.HTTPException, UnicodeError) as exc:
                conn.close()
                raise AttemptFailed(Failure(Failure.CONNECT, "connection failed: %s" % _describe_exc(exc)))
            self._connection = conn
        conn = self._connection
        try:
            self._arm(conn, deadline)
            conn.request(request.method, request.target, body=request.body, headers=request.headers)
            self._arm(conn, deadline)
            response = conn.getresponse()
            data = self._read_body(response, deadline)
            result = Response(response.status, response.reason, response.getheaders(), data)
            if response.will_close:
                self.close()
            return result
        except AttemptFailed:
            self.close()
            raise
        except socket.timeout:
            self.close()
            raise AttemptFailed(Failure(Failure.READ_TIMEOUT, "no complete answer within %.1fs" % budget))
        except (http_client.HTTPException, OSError, ValueError) as exc:
            # ValueError: http.client's own parsing of a mangled status line or header.
            self.close()
            stale = isinstance(exc, (http_client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
            if reused and stale and self.resend_on_stale_connection:
                # A kept-alive connection the server closed meanwhile: not a failure, reconnect once.
                return self._send_once(request, deadline)
            raise AttemptFailed(Failure(Failure.DROPPED, "connection dropped mid-request: %s"
                                        % _describe_exc(exc)))

    @staticmethod
    def _arm(conn, deadline):
        sock = conn.sock
        if sock is None:
            return
        if isinstance(sock, _DeadlineSocketMixin):
            sock.deadline = deadline
        left = deadline.remaining()
        if left <= 0:
            raise socket.timeout("the request's deadline passed")
        sock.settimeout(left)

    @staticmethod
    def _read_body(response, deadline):
        """The body, read in chunks with the deadline checked before each, and refused past MAX_BODY_BYTES."""
        declared = response.getheader("Content-Length") if hasattr(response, "getheader") else None
        if declared is not None and declared.strip().isdigit() and int(declared) > MAX_BODY_BYTES:
            raise AttemptFailed(too_large("announced %s bytes" % declared.strip()))
        chunks = []
        size = 0
        while True:
            if deadline.expired():
                raise socket.timeout("the request's deadline passed")
            chunk = response.read(min(65536, MAX_BODY_BYTES + 1 - size))
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise AttemptFailed(too_large("sent more than %d bytes" % MAX_BODY_BYTES))
            chunks.append(chunk)

    def _request(self, method, path, query, body=None, parse=None, deadline=None):
        url = self.url(path, query)
        request = Request(method, url, self._prefix + path + "?" + urlencode(query), request_headers(body), body)
        start = self._clock()
        outer = deadline if deadline is not None else Deadline(MAX_TIMEOUT * 2, self._clock)
        retries_until = outer.sooner(self.retry_timeout)
        budget_name = "retry_timeout" if deadline is None or retries_until.end < deadline.end else deadline.name
        first_seen = {}
        attempts = {}
        self.last_failures = []
        attempt_no = 0
        while True:
            attempt_no += 1
            attempt_deadline = (outer if attempt_no == 1 else retries_until).sooner(self.request_timeout)
            try:
                response = self._exchange(request, attempt_deadline)
                failure = self._classify(response, url)
                if failure is None:
                    if parse is None:
                        return response
                    try:
                        return parse(response.body, url=url)
                    except ImdsResponseError as exc:
                        failure = Failure(Failure.BAD_BODY, str(exc), status=200)
            except AttemptFailed as exc:
                failure = exc.failure
            self.last_failures.append(failure)
            rule = retry_rule_for(failure)
            if rule is None:
                raise self._final_error(method, url, failure)
            now = self._clock()
            key = (failure.kind, failure.status)
            first_seen.setdefault(key, now)
            attempts[key] = attempts.get(key, 0) + 1
            if rule.window is not None and now - first_seen[key] >= rule.window:
                raise self._final_error(method, url, failure, gave_up_after=now - first_seen[key])
            delay = self._policy.delay(rule, attempts[key], failure.retry_after)
            if rule.window is not None:
                delay = min(delay, max(0.0, first_seen[key] + rule.window - now))
            left = retries_until.remaining()
            if delay >= left:
                # The next attempt could not start before the deadline: fail now, not after a sleep.
                raise self._timeout_error(method, url, failure, now - start, left, budget_name)
            self._sleep(delay)

    def _classify(self, response, url):
        if response.status == 200:
            return None
        imds_error = _imds_error_text(response.body)
        retry_after = None
        if response.status == 429:
            header = dict((k.lower(), v) for k, v in response.headers).get("retry-after")
            retry_after = parse_retry_after(header, self._wall_clock())
        return Failure(Failure.HTTP, "HTTP %s %s" % (response.status, response.reason), status=response.status,
                       body=response.body, imds_error=imds_error, retry_after=retry_after,
                       headers=response.headers)

    # -- messages ------------------------------------------------------------------------------

    def _final_error(self, method, url, failure, gave_up_after=None):
        if failure.kind == Failure.TOO_LARGE:
            return ImdsTooLargeError(
                "%s %s: the answer is too large (%s; the cap is %d bytes). No Scheduled Events document we "
                "have seen comes near that, so this is most likely not IMDS." % (method, url, failure.detail,
                                                                                 MAX_BODY_BYTES),
                url=url, status=failure.status,
                hint="Check that imds_url points at IMDS (or the mock) and that no proxy answers in its place.")
        if failure.kind == Failure.CONNECT:
            return ImdsUnavailableError(
                "no Instance Metadata Service at %s: is this an Azure VM? (%s%s)"
                % (self.base_url, failure.detail,
                   "" if gave_up_after is None else "; retried for %.1fs" % gave_up_after),
                url=url,
                hint="IMDS answers only from inside an Azure VM. For tests, point imds_url (or $%s) at the "
                     "mock, e.g. http://127.0.0.1:8080." % URL_ENV_VAR)
        status = failure.status
        if status is not None and 300 <= status < 400:
            location = dict((k.lower(), v) for k, v in failure.headers).get("location")
            return ImdsRedirectError(
                "%s %s answered HTTP %s (redirect%s): a proxy or redirect is in the way of IMDS."
                % (method, url, status, " to %s" % location if location else ""),
                url=url, status=status, imds_error=failure.imds_error,
                hint="IMDS must be reached directly: exclude 169.254.169.254 from any proxy (NO_PROXY) and any "
                     "transparent proxy or firewall redirect on this VM.")
        if status == 400:
            hint = _hint_for_400(failure.imds_error)
        elif status == 404:
            hint = "The path is not served here: check imds_url (it must not end in /metadata) and api_version."
        elif status == 405:
            hint = "IMDS accepts only GET and POST on this path."
        elif status == 403:
            hint = "A proxy or firewall refused the request: IMDS must be reached directly, without a proxy."
        else:
            hint = "This status is not retried; check the IMDS error text."
        detail = ": %s" % failure.imds_error if failure.imds_error else ""
        return ImdsHttpError(
            "%s %s failed with HTTP %s%s." % (method, url, status, detail),
            url=url, status=status, imds_error=failure.imds_error, hint=hint)

    def _timeout_error(self, method, url, failure, elapsed, left, budget_name):
        if failure.kind == Failure.CONNECT:
            return self._final_error(method, url, failure, gave_up_after=elapsed)
        hint = "Raise retry_timeout to wait longer."
        if failure.status == 410:
            hint = "Microsoft documents retrying a 410 for up to 70 s; use a retry_timeout of at least 70."
        elif failure.status == 429:
            hint = ("IMDS allows 5 requests per second per VM across all callers; find what else polls it on "
                    "this VM (a watcher daemon polls once a second) or raise retry_timeout.")
        elif failure.kind == Failure.READ_TIMEOUT:
            hint = ("The first request to Scheduled Events can take up to 2 minutes while the service switches "
                    "itself on; raise request_timeout and retry_timeout.")
        elif failure.kind == Failure.BAD_BODY:
            hint = "IMDS kept answering 200 without a readable document; this is transient on Azure, try again."
        attempts = "%d attempt%s" % (len(self.last_failures), "" if len(self.last_failures) == 1 else "s")
        if failure.retry_after is not None and min(failure.retry_after, RETRY_AFTER_CAP) >= left:
            # The deadline, not IMDS, is the limit here: say so rather than "did not succeed within".
            capped = "" if failure.retry_after <= RETRY_AFTER_CAP else " (capped at %gs)" % RETRY_AFTER_CAP
            text = ("%s %s gave up after %s in %.1fs: IMDS asked to retry after %gs%s but only %.1fs of %s were "
                    "left; last failure: %s." % (method, url, attempts, elapsed, round(failure.retry_after, 1), capped,
                                                 left, budget_name, failure.describe()))
        else:
            text = ("%s %s did not succeed within %s (%.1fs elapsed, %s); last failure: %s."
                    % (method, url, budget_name, elapsed, attempts, failure.describe()))
        return ImdsTimeoutError(text, url=url, status=failure.status, imds_error=failure.imds_error, hint=hint)


class AttemptFailed(Exception):
    def __init__(self, failure):
        super(AttemptFailed, self).__init__(failure.detail)
        self.failure = failure


def _describe_exc(exc):
    text = str(exc) or exc.__class__.__name__
    return "%s (%s)" % (text, exc.__class__.__name__) if str(exc) else text


def too_large(detail):
    return Failure(Failure.TOO_LARGE, detail, status=200)


def _parse_text(body, url=None):
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    if not text:
        raise ImdsResponseError("IMDS answered 200 with an empty body", url=url, status=200)
    return text


def _hint_for_400(imds_error):
    text = (imds_error or "").lower()
    if "metadata header" in text:
        return "The request lacked the Metadata: true header; a proxy may have stripped it."
    if "api-version" in text:
        return "Choose an api_version this service knows (2017-03-01 to 2020-07-01 for Scheduled Events)."
    if "directly connect" in text or "x-forwarded-for" in text:
        return "A proxy is in the way: IMDS must be reached directly (exclude 169.254.169.254 in NO_PROXY)."
    return "IMDS rejected the request: check the EventIds and the request body. It is not retried."


def client_from_options(options, **overrides):
    """Build a client from the shared option names (as modules, the plugin and the watcher use).

    An option left out (None) takes its default; any other value, 0 included, goes to the
    constructor, which refuses what is out of range.
    """
    def given(name, default):
        value = options.get(name)
        return default if value is None else value

    kwargs = dict(
        base_url=options.get("imds_url"),
        api_version=given("api_version", DEFAULT_API_VERSION),
        request_timeout=given("request_timeout", DEFAULT_REQUEST_TIMEOUT),
        retry_timeout=given("retry_timeout", DEFAULT_RETRY_TIMEOUT),
    )
    kwargs.update(overrides)
    return ImdsClient(**kwargs)


# --------------------------------------------------------------------------------------------
# Watching for a new document (scheduled_event_info's changed_since / max_wait)
# --------------------------------------------------------------------------------------------

class WatchResult:
    def __init__(self, events, watched, polls):
        self.events = events      # the last ScheduledEvents read
        self.watched = watched    # seconds from the first poll to the return
        self.polls = polls        # GETs of the document, failed ones included


def _worth_another_poll(exc, have_document):
    # Before any document was read, only failures that time may cure are polled through: a
    # refused connection (no IMDS here), a 400 or a redirect would fail the same way for the
    # whole watch. Once a document was read, any failure is a passing one.
    if have_document:
        return True
    if isinstance(exc, ImdsHttpError):
        # Microsoft documents 404 as "The requested element doesn't exist", not as passing; polling
        # through it is our own choice, bounded by max_wait.
        return exc.status == 404
    return isinstance(exc, (ImdsTimeoutError, ImdsResponseError)) and not isinstance(exc, ImdsTooLargeError)


def watch_document(client, changed_since, max_wait, poll_interval, clock=None, sleep=None):
    """Poll until DocumentIncarnation differs from changed_since or max_wait seconds pass.

    One Deadline of max_wait seconds bounds the whole watch: it is passed to every poll (which
    keeps the client's own request_timeout and retry_timeout within it) and bounds every sleep.
    Returns WatchResult with the last document read; raises the last error only when no document
    was read at all.
    """
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    changed_since = check_number(changed_since, "changed_since", 0, MAX_INCARNATION, integer=True, unit=None)
    poll_interval = check_number(poll_interval, "poll_interval", MIN_POLL_INTERVAL, MAX_TIMEOUT)
    start = clock()
    deadline = Deadline(check_number(max_wait, "max_wait", 0.0, MAX_TIMEOUT), clock, name="max_wait")
    events = None
    last_error = None
    polls = 0
    while True:
        polls += 1
        try:
            events = client.get_scheduled_events(deadline=deadline)
            last_error = None
            if events.incarnation != changed_since:
                break
        except ImdsError as exc:
            if not _worth_another_poll(exc, events is not None):
                raise
            last_error = exc
        if deadline.expired():
            break
        sleep(min(poll_interval, deadline.remaining()))
        if deadline.expired():
            break
    if events is None:
        raise last_error
    return WatchResult(events, clock() - start, polls)
