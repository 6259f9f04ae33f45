# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The one Azure Instance Metadata Service (IMDS) client of the collection. Modules, the
# scheduled_event_wait action plugin and the watcher daemon all use this very file, which is why
# it depends on nothing but the Python standard library: the watcher role copies it onto the VM
# beside the daemon.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import email.utils
import json
import os
import random
import re
import socket
import time

try:
    import http.client as http_client
    from urllib.parse import urlencode, urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported, this keeps sanity's compile test quiet
    http_client = None
    urlencode = urlsplit = None

DEFAULT_BASE_URL = "http://169.254.169.254"
URL_ENV_VAR = "AZURE_IMDS_URL"

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
VM_NAME_PATH = "/metadata/instance/compute/name"
VM_NAME_API_VERSION = "2021-02-01"

API_VERSIONS = (
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
)
DEFAULT_API_VERSION = "2020-07-01"

KNOWN_EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
EVENT_STATUSES = ("Scheduled", "Started")
EVENT_SOURCES = ("Platform", "User")

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_RETRY_TIMEOUT = 90.0
# Refused connections, unreachable networks and connect timeouts mean "no IMDS here" far more
# often than "IMDS is restarting": give up on them quickly.
CONNECT_RETRY_WINDOW = 5.0

USER_AGENT = "azure_imds.scheduled_events"

_GUID_RE = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")

# Raw IMDS field -> normalised key. Order is the order of the normalised dict.
EVENT_FIELDS = (
    ("EventId", "event_id"),
    ("EventType", "event_type"),
    ("EventStatus", "event_status"),
    ("ResourceType", "resource_type"),
    ("Resources", "resources"),
    ("NotBefore", "not_before"),
    ("Description", "description"),
    ("EventSource", "event_source"),
    ("DurationInSeconds", "duration_in_seconds"),
)
_RAW_FIELDS = frozenset(pair[0] for pair in EVENT_FIELDS)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

class ImdsError(Exception):
    """Base of every error this client raises. ``str()`` is a complete message for a user."""

    def __init__(self, message, url=None, status=None, imds_error=None, hint=None):
        self.url = url
        self.status = status
        self.imds_error = imds_error
        self.hint = hint
        parts = [message]
        if hint:
            parts.append(hint)
        super(ImdsError, self).__init__(" ".join(parts))

    def to_dict(self):
        return {"url": self.url, "status": self.status, "imds_error": self.imds_error, "hint": self.hint}


class ImdsUnavailableError(ImdsError):
    """Nothing answers at the URL: most likely this machine is not an Azure VM."""


class ImdsRedirectError(ImdsError):
    """A 3xx answer: a proxy or a redirect sits between this machine and IMDS."""


class ImdsHttpError(ImdsError):
    """IMDS answered with a status that is not worth retrying (400, 404, 405, ...)."""


class ImdsTimeoutError(ImdsError):
    """The overall deadline (retry_timeout) passed while retryable failures kept coming."""


class ImdsResponseError(ImdsError):
    """IMDS answered 200 with a document this client cannot read."""


class ImdsInputError(ValueError):
    """The caller passed a value this client cannot use (bad URL, api-version, EventId)."""


# --------------------------------------------------------------------------------------------
# Retry policy: what is retried (the table) is kept apart from how (RetryPolicy.delay)
# --------------------------------------------------------------------------------------------

class Failure:
    """One failed attempt, classified for the retry table."""

    CONNECT = "connect"            # refused, no route, connect timeout: nobody there
    READ_TIMEOUT = "read_timeout"  # connected, no answer in time
    DROPPED = "dropped"            # connection reset or closed mid-request
    BAD_BODY = "bad_body"          # 200 whose body is empty or not JSON
    HTTP = "http"                  # an HTTP status other than 200

    def __init__(self, kind, detail, status=None, body=None, imds_error=None, retry_after=None, headers=None):
        self.kind = kind
        self.headers = headers or []
        self.detail = detail
        self.status = status
        self.body = body
        self.imds_error = imds_error
        self.retry_after = retry_after

    def describe(self):
        if self.kind == Failure.HTTP:
            text = "HTTP %s" % self.status
            if self.imds_error:
                text += ": %s" % self.imds_error
            return text
        return self.detail


class RetryRule:
    def __init__(self, name, base, cap, window=None, exponential=True):
        self.name = name
        self.base = base          # first delay, seconds
        self.cap = cap            # largest delay, seconds
        self.window = window      # seconds from the first failure of this kind; None = until the deadline
        self.exponential = exponential


# The one status table. A failure not listed here is never retried.
RETRY_TABLE = {
    ("http", 410): RetryRule("410 Gone", base=1.0, cap=5.0, window=None, exponential=False),
    ("http", 429): RetryRule("429 Too Many Requests", base=1.0, cap=16.0),
    ("http", 500): RetryRule("500 Internal Server Error", base=0.5, cap=8.0),
    ("http", 502): RetryRule("502 Bad Gateway", base=0.5, cap=8.0),
    ("http", 503): RetryRule("503 Service Unavailable", base=0.5, cap=8.0),
    ("http", 504): RetryRule("504 Gateway Timeout", base=0.5, cap=8.0),
    (Failure.READ_TIMEOUT, None): RetryRule("read timeout", base=0.5, cap=8.0),
    (Failure.DROPPED, None): RetryRule("connection dropped", base=0.25, cap=4.0),
    (Failure.BAD_BODY, None): RetryRule("empty or non-JSON body", base=0.5, cap=4.0),
    (Failure.CONNECT, None): RetryRule("connection failed", base=0.25, cap=1.0, window=CONNECT_RETRY_WINDOW),
}

# IMDS documents that 410 may go on for up to 70 s; the default retry_timeout covers that and a
# shorter one is the caller's explicit choice.
GONE_RETRY_SECONDS = 70.0


def retry_rule_for(failure):
    key = (failure.kind, failure.status) if failure.kind == Failure.HTTP else (failure.kind, None)
    return RETRY_TABLE.get(key)


class RetryPolicy:
    """How to wait between attempts: exponential backoff with jitter and a cap; Retry-After wins."""

    def __init__(self, rng=None):
        self._random = rng or random.random

    def delay(self, rule, attempt, retry_after=None):
        if retry_after is not None:
            return max(0.0, retry_after)
        if rule.exponential:
            raw = min(rule.cap, rule.base * (2 ** max(0, attempt - 1)))
        else:
            raw = rule.base
        # Jitter between half and all of the delay keeps a fleet of VMs from retrying in step.
        return raw * (0.5 + 0.5 * self._random())


def parse_retry_after(value, now_epoch=None):
    """Retry-After is either delta-seconds or an HTTP date. Returns seconds or None."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_tz(value)
    except (TypeError, ValueError):
        parsed = None
    if not parsed:
        return None
    epoch = email.utils.mktime_tz(parsed)
    now_epoch = time.time() if now_epoch is None else now_epoch
    return max(0.0, epoch - now_epoch)


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------

def resolve_base_url(explicit=None, environ=None):
    """An explicit URL wins, then $AZURE_IMDS_URL, then the real link-local address."""
    environ = os.environ if environ is None else environ
    for candidate in (explicit, environ.get(URL_ENV_VAR)):
        if candidate:
            return validate_base_url(candidate)
    return DEFAULT_BASE_URL


def validate_base_url(url):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImdsInputError(
            "imds_url %r is not an http:// URL with a host. Use the form http://169.254.169.254 "
            "(or, for tests, the mock's URL such as http://127.0.0.1:8080/vm/web_0)." % (url,))
    if parts.query or parts.fragment:
        raise ImdsInputError(
            "imds_url %r carries a query or fragment. Give only scheme, host, port and an optional path "
            "prefix; the client adds /metadata/... and api-version itself." % (url,))
    return url.rstrip("/")


def validate_api_version(api_version):
    if api_version not in API_VERSIONS:
        raise ImdsInputError(
            "api_version %r is not a Scheduled Events api-version. Use one of: %s."
            % (api_version, ", ".join(API_VERSIONS)))
    return api_version


# --------------------------------------------------------------------------------------------
# Events: parsing and normalising
# --------------------------------------------------------------------------------------------

def is_event_id(value):
    return isinstance(value, str) and bool(_GUID_RE.match(value))


def validate_event_ids(event_ids):
    """Returns the ids unchanged; raises ImdsInputError naming every malformed one."""
    if isinstance(event_ids, str):
        event_ids = [event_ids]
    bad = [e for e in event_ids if not is_event_id(e)]
    if bad:
        raise ImdsInputError(
            "not an EventId (a GUID such as C7061BAC-AFDC-4513-B24B-AA5F13A16123): %s. "
            "Take the ids from the events returned by scheduled_event_info." % ", ".join(repr(b) for b in bad))
    return list(event_ids)


def same_event_id(a, b):
    """EventIds are GUIDs: compare without regard to case (IMDS sends upper case)."""
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def _epoch_to_iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def not_before_epoch(value):
    """Seconds since the epoch for a NotBefore in RFC 1123 or ISO 8601, or None when empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("NotBefore %r is not a string" % (value,))
    value = value.strip()
    if not value:
        return None
    match = _ISO_RE.match(value)
    if match:
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        epoch = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        zone = match.group(7)
        if zone and zone != "Z":
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        return epoch
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        raise ValueError("NotBefore %r is neither RFC 1123 nor ISO 8601" % (value,))
    return email.utils.mktime_tz(parsed)


def normalize_not_before(value):
    """ISO 8601 UTC (``2022-04-11T22:26:58Z``) or None when IMDS sent an empty string."""
    epoch = not_before_epoch(value)
    return None if epoch is None else _epoch_to_iso(epoch)


def _strip_resource(name, api_version):
    # The 2017-03-01 preview prefixed VM names with an underscore.
    if api_version == "2017-03-01" and isinstance(name, str) and name.startswith("_"):
        return name[1:]
    return name


def normalize_event(raw, api_version=DEFAULT_API_VERSION):
    """One IMDS event as a dict with snake_case keys. Missing fields are None; extras pass through."""
    event = {}
    for raw_key, key in EVENT_FIELDS:
        event[key] = raw.get(raw_key)
    event["resources"] = [_strip_resource(r, api_version) for r in (event["resources"] or [])]
    event["not_before"] = normalize_not_before(event["not_before"])
    for raw_key, value in raw.items():
        if raw_key not in _RAW_FIELDS:
            event[_snake_case(raw_key)] = value
    return event


def _snake_case(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def parse_document(body, url=None):
    """Parse a scheduled events body. Raises ImdsResponseError when it is not a document."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body or not body.strip():
        raise ImdsResponseError("IMDS answered 200 with an empty body", url=url, status=200)
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise ImdsResponseError("IMDS answered 200 with a body that is not JSON (%s)" % exc, url=url, status=200)
    if not isinstance(document, dict) or not isinstance(document.get("Events"), list):
        raise ImdsResponseError(
            "IMDS answered 200 with JSON that is not a Scheduled Events document (no Events list)",
            url=url, status=200)
    if not all(isinstance(e, dict) for e in document["Events"]):
        raise ImdsResponseError("IMDS answered 200 with an Events list holding non-objects", url=url, status=200)
    return document


class ScheduledEvents:
    """A parsed Scheduled Events document: the raw dict and its normalised events."""

    def __init__(self, document, api_version=DEFAULT_API_VERSION, url=None):
        self.document = document
        self.api_version = api_version
        try:
            self.incarnation = int(document.get("DocumentIncarnation") or 0)
        except (TypeError, ValueError):
            self.incarnation = 0
        try:
            self.events = [normalize_event(e, api_version) for e in document["Events"]]
        except ValueError as exc:
            raise ImdsResponseError(
                "IMDS sent an event this client cannot read: %s" % exc, url=url, status=200,
                hint="Please report it with the raw document, which curl -H Metadata:true URL shows.")

    def find(self, event_id):
        for event in self.events:
            if same_event_id(event["event_id"], event_id):
                return event
        return None


# --------------------------------------------------------------------------------------------
# Selecting events
# --------------------------------------------------------------------------------------------

def affects(event, resource_name):
    """Exact match of a VM name in Resources: web_1 never matches web_10."""
    return resource_name is not None and resource_name in (event.get("resources") or [])


def is_leader(event, resource_name):
    """The first name in Resources is the documented choice of one approver per group."""
    resources = event.get("resources") or []
    return bool(resources) and resources[0] == resource_name


def select_events(events, event_ids=None, event_types=None, event_statuses=None, event_sources=None,
                  resource_name=None, this_host_only=False):
    """The events that pass every given filter. A filter left as None does not filter."""
    wanted_ids = None if event_ids is None else set(e.lower() for e in event_ids)
    selected = []
    for event in events:
        if wanted_ids is not None and (event.get("event_id") or "").lower() not in wanted_ids:
            continue
        if event_types is not None and event.get("event_type") not in event_types:
            continue
        if event_statuses is not None and event.get("event_status") not in event_statuses:
            continue
        if event_sources is not None and event.get("event_source") not in event_sources:
            continue
        if this_host_only and not affects(event, resource_name):
            continue
        selected.append(event)
    return selected


def annotate_events(events, resource_name, now_epoch=None):
    """Copies of the events with affects_this_host and seconds_to_not_before, sorted by NotBefore.

    Started events (no NotBefore) sort first: they are happening now.
    """
    now_epoch = time.time() if now_epoch is None else now_epoch
    annotated = []
    for event in events:
        copy = dict(event)
        copy["affects_this_host"] = affects(event, resource_name)
        epoch = not_before_epoch(event.get("not_before"))
        copy["seconds_to_not_before"] = None if epoch is None else round(float(epoch - now_epoch), 3)
        annotated.append(copy)
    annotated.sort(key=lambda e: (e["not_before"] is not None, e["not_before"] or "", e.get("event_id") or ""))
    return annotated


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------

class _Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


def _imds_error_text(body):
    """The ``error`` text of an IMDS error body, or the body itself, shortened."""
    if not body:
        return None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict) and parsed.get("error"):
            return str(parsed["error"])
    except ValueError:
        pass
    text = " ".join(text.split())
    return text[:300] or None


class ImdsClient:
    """Talks to IMDS with one retry policy and one overall deadline per operation.

    Every operation gets a deadline of ``retry_timeout`` seconds: no retry starts after it and
    every sleep and every retried request's timeout is clamped to the time left. The first attempt
    always gets the full ``request_timeout``, because the first request to Scheduled Events after
    a quiet day can take two minutes while the service switches itself on.
    """

    def __init__(self, base_url=None, api_version=DEFAULT_API_VERSION, request_timeout=DEFAULT_REQUEST_TIMEOUT,
                 retry_timeout=DEFAULT_RETRY_TIMEOUT, connect_timeout=DEFAULT_CONNECT_TIMEOUT,
                 clock=None, sleep=None, rng=None, environ=None, wall_clock=None, connection_factory=None):
        self.base_url = resolve_base_url(base_url, environ)
        self.api_version = validate_api_version(api_version)
        if request_timeout is None or request_timeout <= 0:
            raise ImdsInputError("request_timeout must be a positive number of seconds, got %r." % (request_timeout,))
        if retry_timeout is None or retry_timeout < 0:
            raise ImdsInputError("retry_timeout must be zero or a positive number of seconds, got %r."
                                 % (retry_timeout,))
        self.request_timeout = float(request_timeout)
        self.retry_timeout = float(retry_timeout)
        self.connect_timeout = float(connect_timeout)
        self._clock = clock or time.monotonic
        self._sleep = sleep or time.sleep
        self._wall_clock = wall_clock or time.time
        self._policy = RetryPolicy(rng)
        self._connection_factory = connection_factory or self._make_connection
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

    def get_scheduled_events(self):
        """GET the Scheduled Events document. Returns ScheduledEvents."""
        document = self._request("GET", SCHEDULED_EVENTS_PATH, {"api-version": self.api_version},
                                 parse=parse_document)
        return ScheduledEvents(document, self.api_version, url=self.scheduled_events_url())

    def approve(self, event_ids):
        """POST one request that starts every given event. Ids are echoed exactly as given."""
        event_ids = validate_event_ids(event_ids)
        if not event_ids:
            raise ImdsInputError("approve() needs at least one EventId.")
        body = json.dumps({"StartRequests": [{"EventId": e} for e in event_ids]})
        self._request("POST", SCHEDULED_EVENTS_PATH, {"api-version": self.api_version}, body=body)

    def get_vm_name(self):
        """This VM's name as Resources spells it (not the hostname: scale sets differ)."""
        name = self._request("GET", VM_NAME_PATH, {"api-version": VM_NAME_API_VERSION, "format": "text"},
                             parse=_parse_text)
        return name

    def close(self):
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None

    # -- transport -----------------------------------------------------------------------------

    def _make_connection(self, timeout):
        cls = http_client.HTTPSConnection if self._scheme == "https" else http_client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _send_once(self, method, path_and_query, body, read_timeout):
        """One HTTP exchange. Returns _Response or raises a Failure-carrying _AttemptFailed."""
        connect_timeout = min(self.connect_timeout, read_timeout)
        reused = self._connection is not None
        if not reused:
            conn = self._connection_factory(connect_timeout)
            try:
                conn.connect()
            except socket.timeout:
                conn.close()
                raise _AttemptFailed(Failure(Failure.CONNECT, "connect timed out after %.1fs" % connect_timeout))
            except (OSError, http_client.HTTPException) as exc:
                conn.close()
                raise _AttemptFailed(Failure(Failure.CONNECT, "connection failed: %s" % _describe_exc(exc)))
            self._connection = conn
        conn = self._connection
        headers = {"Metadata": "true", "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            if conn.sock is not None:
                conn.sock.settimeout(read_timeout)
            conn.request(method, path_and_query, body=body, headers=headers)
            if conn.sock is not None:
                conn.sock.settimeout(read_timeout)
            response = conn.getresponse()
            data = response.read()
            result = _Response(response.status, response.reason, response.getheaders(), data)
            if response.will_close:
                self.close()
            return result
        except socket.timeout:
            self.close()
            raise _AttemptFailed(Failure(Failure.READ_TIMEOUT, "no answer within %.1fs" % read_timeout))
        except (http_client.HTTPException, OSError) as exc:
            self.close()
            stale = isinstance(exc, (http_client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
            if reused and stale and self.resend_on_stale_connection:
                # A kept-alive connection the server closed meanwhile: not a failure, reconnect once.
                return self._send_once(method, path_and_query, body, read_timeout)
            raise _AttemptFailed(Failure(Failure.DROPPED, "connection dropped mid-request: %s"
                                         % _describe_exc(exc)))

    def _request(self, method, path, query, body=None, parse=None):
        url = self.url(path, query)
        path_and_query = self._prefix + path + "?" + urlencode(query)
        start = self._clock()
        deadline = start + self.retry_timeout
        first_seen = {}
        attempts = {}
        self.last_failures = []
        attempt_no = 0
        while True:
            attempt_no += 1
            now = self._clock()
            if attempt_no == 1:
                read_timeout = self.request_timeout
            else:
                read_timeout = min(self.request_timeout, max(deadline - now, 0.001))
            try:
                response = self._send_once(method, path_and_query, body, read_timeout)
                failure = self._classify(response, url)
                if failure is None:
                    if parse is None:
                        return response
                    try:
                        return parse(response.body, url=url)
                    except ImdsResponseError as exc:
                        failure = Failure(Failure.BAD_BODY, str(exc), status=200)
            except _AttemptFailed as exc:
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
            if now + delay >= deadline:
                # The next attempt could not start before the deadline: fail now, not after a sleep.
                raise self._timeout_error(method, url, failure, now - start)
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
            hint = ("The path is not served here: check imds_url (it must not end in /metadata) and api_version. "
                    "Early in boot IMDS can answer 404 for a moment; run again.")
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

    def _timeout_error(self, method, url, failure, elapsed):
        if failure.kind == Failure.CONNECT:
            return self._final_error(method, url, failure, gave_up_after=elapsed)
        hint = "Raise retry_timeout to wait longer."
        if failure.status == 410:
            hint = "IMDS answers 410 for up to 70 s while it recovers; use a retry_timeout of at least 70."
        elif failure.status == 429:
            hint = ("IMDS allows 5 requests per second per VM across all callers; find what else polls it on "
                    "this VM (a watcher daemon polls once a second) or raise retry_timeout.")
        elif failure.kind == Failure.READ_TIMEOUT:
            hint = ("The first request to Scheduled Events can take up to 2 minutes while the service switches "
                    "itself on; raise request_timeout and retry_timeout.")
        elif failure.kind == Failure.BAD_BODY:
            hint = "IMDS kept answering 200 without a readable document; this is transient on Azure, try again."
        return ImdsTimeoutError(
            "%s %s did not succeed within retry_timeout (%.1fs elapsed, %d attempts); last failure: %s."
            % (method, url, elapsed, len(self.last_failures), failure.describe()),
            url=url, status=failure.status, imds_error=failure.imds_error, hint=hint)


class _AttemptFailed(Exception):
    def __init__(self, failure):
        super(_AttemptFailed, self).__init__(failure.detail)
        self.failure = failure


def _describe_exc(exc):
    text = str(exc) or exc.__class__.__name__
    return "%s (%s)" % (text, exc.__class__.__name__) if str(exc) else text


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
    """Build a client from the shared option names (as modules, the plugin and the watcher use)."""
    kwargs = dict(
        base_url=options.get("imds_url"),
        api_version=options.get("api_version") or DEFAULT_API_VERSION,
        request_timeout=options.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT,
        retry_timeout=(DEFAULT_RETRY_TIMEOUT if options.get("retry_timeout") is None
                       else options.get("retry_timeout")),
    )
    kwargs.update(overrides)
    return ImdsClient(**kwargs)


# --------------------------------------------------------------------------------------------
# Watching for a new document (scheduled_event_info's changed_since / max_wait)
# --------------------------------------------------------------------------------------------

# A poll made when the deadline is (almost) reached still needs a moment to be answered; IMDS
# answers in milliseconds, so this bounds how far a watch can overrun its max_wait.
WATCH_MIN_READ_TIMEOUT = 1.0


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
        return exc.status == 404  # early in boot
    return isinstance(exc, (ImdsTimeoutError, ImdsResponseError))


def watch_document(client, changed_since, max_wait, poll_interval, clock=None, sleep=None):
    """Poll until DocumentIncarnation differs from changed_since or max_wait seconds pass.

    One monotonic deadline bounds the whole watch: each poll's retry_timeout and request_timeout
    are clamped to the time left, and each sleep to the time left. Returns WatchResult with the
    last document read; raises the last error only when no document was read at all.
    """
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    if poll_interval <= 0:
        raise ImdsInputError("poll_interval must be a positive number of seconds, got %r." % (poll_interval,))
    start = clock()
    deadline = start + max(0.0, max_wait)
    saved = (client.retry_timeout, client.request_timeout)
    events = None
    last_error = None
    polls = 0
    try:
        while True:
            left = deadline - clock()
            client.retry_timeout = min(saved[0], max(0.0, left))
            client.request_timeout = min(saved[1], max(WATCH_MIN_READ_TIMEOUT, left))
            polls += 1
            try:
                events = client.get_scheduled_events()
                last_error = None
                if events.incarnation != changed_since:
                    break
            except ImdsError as exc:
                if not _worth_another_poll(exc, events is not None):
                    raise
                last_error = exc
            left = deadline - clock()
            if left <= 0:
                break
            sleep(min(poll_interval, left))
    finally:
        client.retry_timeout, client.request_timeout = saved
    if events is None:
        raise last_error
    return WatchResult(events, clock() - start, polls)
