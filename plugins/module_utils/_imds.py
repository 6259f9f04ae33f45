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
import datetime
import email.utils
import json
import math
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

try:
    import ssl
except ImportError:  # pragma: no cover - a Python built without ssl still speaks plain http
    ssl = None

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

# The one place for defaults and bounds: the doc fragment, the argspecs, the wait plugin and the
# watcher's configuration all take theirs from here (a unit test keeps the documentation equal).
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_RETRY_TIMEOUT = 90.0
# Upper bound of every timeout, wait and interval option (seconds): a day is longer than any
# maintenance event, and a bound keeps absurd values (1e308) from overflowing time arithmetic.
MAX_TIMEOUT = 86400.0
# A request needs some time to be answered at all; below this a timeout is a typo.
MIN_REQUEST_TIMEOUT = 0.1
# IMDS allows 5 requests per second per VM across every caller: one floor for scheduled_event_info's
# poll_interval, scheduled_event_wait's sleep and the watcher's poll_interval.
MIN_POLL_INTERVAL = 0.2
# Retry-After is honoured up to this many seconds (a Preempt gives 30 s of notice), and never past
# the deadline of the operation.
RETRY_AFTER_CAP = 60.0
# Microsoft documents no size for a Scheduled Events document; every one we have seen is far below
# this cap (our observation), and reading an answer whole without a cap would cost memory without
# bound.
MAX_BODY_BYTES = 1024 * 1024
# DocumentIncarnation and the options that carry one (changed_since, since_incarnation).
MAX_INCARNATION = 2 ** 63 - 1
# A document nests four levels deep (the document, Events, an event, Resources). Only an extra field
# can nest deeper; past this bound it is left out with a warning, so that nothing downstream (a
# copy, a module's JSON result, the watcher's state file) recurses without bound.
MAX_NESTING = 32
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


class ImdsTooLargeError(ImdsResponseError):
    """The answer passed MAX_BODY_BYTES: not a Scheduled Events document, and not retried."""


class ImdsInputError(ValueError):
    """The caller passed a value this client cannot use (bad URL, api-version, EventId)."""


# --------------------------------------------------------------------------------------------
# Values at the edge: numbers and deadlines
# --------------------------------------------------------------------------------------------

def format_number(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return "%d" % value
    return "%s" % (value,)


def check_number(value, name, minimum=None, maximum=None, integer=False, allow_none=False, unit="seconds"):
    """A finite number within [minimum, maximum], as float (int with integer=True).

    Refuses bool, strings, NaN, infinities, non-integral values where an integer is wanted and
    values out of range, with an ImdsInputError naming the option, the value and the range.
    """
    if value is None and allow_none:
        return None
    if minimum is not None and maximum is not None:
        wanted = "from %s to %s" % (format_number(minimum), format_number(maximum))
    elif minimum is not None:
        wanted = "of at least %s" % format_number(minimum)
    elif maximum is not None:
        wanted = "of at most %s" % format_number(maximum)
    else:
        wanted = "that is finite"
    kind = "a whole number" if integer else "a number"
    message = "%s must be %s %s%s, got %s." % (name, kind, wanted, " (%s)" % unit if unit else "",
                                               _short_repr(value))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImdsInputError(message)
    if isinstance(value, float) and not math.isfinite(value):
        raise ImdsInputError(message)
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise ImdsInputError(message)
        value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImdsInputError(message)
    return int(value) if integer else float(value)


def _short_repr(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Deadline:
    """A monotonic end time. Every blocking call takes one, so one budget bounds a whole operation."""

    def __init__(self, seconds, clock=None, name="the deadline"):
        self._clock = clock or time.monotonic
        #: What the deadline is called in messages, such as the option it comes from ("max_wait").
        self.name = name
        self.end = self._clock() + check_number(seconds, name, minimum=0)

    @classmethod
    def _at(cls, end, clock, name):
        deadline = cls.__new__(cls)
        deadline._clock = clock
        deadline.name = name
        deadline.end = end
        return deadline

    def remaining(self):
        """Seconds left, never below 0."""
        return max(0.0, self.end - self._clock())

    def expired(self):
        return self.remaining() <= 0

    def sooner(self, seconds):
        """The earlier of this deadline and now + seconds (on the same clock)."""
        seconds = check_number(seconds, "deadline", minimum=0)
        return Deadline._at(min(self.end, self._clock() + seconds), self._clock, self.name)

    def __repr__(self):
        return "Deadline(%.3fs left)" % self.remaining()


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
    TOO_LARGE = "too_large"        # a body past MAX_BODY_BYTES: not a document, and never retried

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
    """How to wait between attempts: exponential backoff with jitter and a cap; Retry-After wins, up
    to RETRY_AFTER_CAP (callers also keep every sleep within their deadline)."""

    def __init__(self, rng=None):
        self._random = rng or random.random

    def delay(self, rule, attempt, retry_after=None):
        if retry_after is not None:
            # Floored at half the rule's first delay: a Retry-After of 0 or in the past repeated
            # on every answer must not become a busy loop against a rate-limited service.
            return min(RETRY_AFTER_CAP, max(rule.base * 0.5, retry_after))
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
        seconds = float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_tz(value)
            epoch = email.utils.mktime_tz(parsed) if parsed else None
        except (TypeError, ValueError, OverflowError):
            epoch = None
        if epoch is None:
            return None
        now_epoch = time.time() if now_epoch is None else now_epoch
        seconds = epoch - now_epoch
    # NaN is no instruction at all; infinity is just "long", which the cap deals with.
    return None if math.isnan(seconds) else max(0.0, seconds)


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


_URL_FORM = ("Use the form http://169.254.169.254 (or, for tests, the mock's URL such as "
             "http://127.0.0.1:8080/vm/web_0).")


def check_base_url(url, name="imds_url"):
    """The base URL without a trailing slash, fully parsed: scheme, host, port 1-65535, nothing odd.

    Raises ImdsInputError naming the option (name), the value and the fix; never anything else.
    """
    if not isinstance(url, str):
        raise ImdsInputError("%s must be a string, got %s. %s" % (name, _short_repr(url), _URL_FORM))
    if not url or any(c.isspace() or ord(c) < 32 or ord(c) >= 127 for c in url):
        raise ImdsInputError("%s %s is empty or holds whitespace, control or non-ASCII characters "
                             "(percent-encode those of a path). %s" % (name, _short_repr(url), _URL_FORM))
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise ImdsInputError("%s %s is not a valid URL (%s). Check the brackets of an IPv6 host and "
                             "give the port as a number from 1 to 65535. %s" % (name, _short_repr(url), exc, _URL_FORM))
    if parts.scheme not in ("http", "https") or not host:
        raise ImdsInputError("%s %s is not an http:// URL with a host. %s" % (name, _short_repr(url), _URL_FORM))
    if (port is not None and not 1 <= port <= 65535) or parts.netloc.endswith(":"):
        raise ImdsInputError("%s %s has a port outside 1-65535. %s" % (name, _short_repr(url), _URL_FORM))
    if parts.username is not None or parts.password is not None:
        raise ImdsInputError("%s %s carries a user name or password; IMDS takes none. %s"
                             % (name, _short_repr(url), _URL_FORM))
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ImdsInputError(
            "%s %s carries a query or fragment. Give only scheme, host, port and an optional path "
            "prefix; the client adds /metadata/... and api-version itself. %s" % (name, _short_repr(url), _URL_FORM))
    return url.rstrip("/")


# The name the watcher's configuration checks call.
validate_base_url = check_base_url


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
    """Seconds since the epoch for a NotBefore in RFC 1123 or ISO 8601, or None when empty.

    Raises ValueError (only) for anything else, impossible dates included.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("NotBefore %s is not a string" % (_short_repr(value),))
    value = value.strip()
    if not value:
        return None
    try:
        match = _ISO_RE.match(value)
        if match:
            fields = [int(g) for g in match.groups()[:6]]
            # datetime refuses a 13th month or a 31st of April, which timegm would silently roll over.
            epoch = calendar.timegm(datetime.datetime(*fields).timetuple())
            zone = match.group(7)
            if zone and zone != "Z":
                sign = 1 if zone[0] == "+" else -1
                digits = zone[1:].replace(":", "")
                epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        else:
            parsed = email.utils.parsedate_tz(value)
            if parsed is None:
                raise ValueError("no such format")
            datetime.datetime(*parsed[:6])
            epoch = email.utils.mktime_tz(parsed)
        _epoch_to_iso(epoch)
    except (ValueError, TypeError, OverflowError, OSError) as exc:
        raise ValueError("NotBefore %s is not a date in RFC 1123 or ISO 8601 (%s)" % (_short_repr(value), exc))
    return epoch


def normalize_not_before(value):
    """ISO 8601 UTC (``2022-04-11T22:26:58Z``) or None when IMDS sent an empty string."""
    epoch = not_before_epoch(value)
    return None if epoch is None else _epoch_to_iso(epoch)


def _strip_resource(name, api_version):
    # The 2017-03-01 preview prefixed VM names with an underscore.
    if api_version == "2017-03-01" and isinstance(name, str) and name.startswith("_"):
        return name[1:]
    return name


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _event_label(raw, position):
    label = "event #%d" % position
    event_id = raw.get("EventId")
    if event_id is not None:
        label += " (EventId %s)" % (event_id if is_event_id(event_id) else _short_repr(event_id, 60))
    return label


class _EventReader:
    """Reads one raw event field by field: what cannot be read becomes None (Resources: []) and a warning."""

    def __init__(self, raw, position, api_version, warnings):
        self.raw = raw
        self.api_version = api_version
        self.warnings = warnings
        self.label = _event_label(raw, position)

    def warn(self, field, problem, read_as="null"):
        self.warnings.append("%s: %s %s; read as %s." % (self.label, field, problem, read_as))

    def string(self, field):
        value = self.raw.get(field)
        if value is None or isinstance(value, str):
            return value
        self.warn(field, "is not a string (got %s)" % _short_repr(value, 60))
        return None

    def event_id(self):
        value = self.string("EventId")
        if value is not None and not is_event_id(value):
            self.warnings.append("%s: EventId is not a GUID; it is reported as sent but cannot be approved."
                                 % self.label)
        return value

    def resources(self):
        value = self.raw.get("Resources")
        if value is None:
            return []
        if isinstance(value, str):
            self.warn("Resources", "is a single string, not a list", "the one-element list [%s]" % _short_repr(value))
            value = [value]
        if not isinstance(value, list):
            self.warn("Resources", "is not a list (got %s)" % _short_repr(value, 60), "an empty list")
            return []
        names = [v for v in value if isinstance(v, str)]
        if len(names) != len(value):
            dropped = [v for v in value if not isinstance(v, str)]
            self.warnings.append("%s: Resources holds entries that are not strings (%s); they were left out."
                                 % (self.label, _short_repr(dropped, 60)))
        return [_strip_resource(name, self.api_version) for name in names]

    def not_before(self):
        try:
            return normalize_not_before(self.raw.get("NotBefore"))
        except ValueError as exc:
            # exc names the field and the value: "NotBefore 'soon' is not a date in ..."
            self.warnings.append("%s: %s; read as null." % (self.label, exc))
            return None

    def duration(self):
        value = self.raw.get("DurationInSeconds")
        if value is None or _is_int(value):
            return value
        self.warn("DurationInSeconds", "is not a whole number (got %s)" % _short_repr(value, 60))
        return None


def normalize_event(raw, api_version=DEFAULT_API_VERSION, position=1, warnings=None):
    """One IMDS event as a dict with snake_case keys. Missing fields are None; extras pass through.

    Never raises for the content of raw: a field that cannot be read is None (Resources: an empty
    list) and a warning is appended to warnings.
    """
    warnings = [] if warnings is None else warnings
    reader = _EventReader(raw, position, api_version, warnings)
    event = {}
    for raw_key, key in EVENT_FIELDS:
        if raw_key == "EventId":
            event[key] = reader.event_id()
        elif raw_key == "Resources":
            event[key] = reader.resources()
        elif raw_key == "NotBefore":
            event[key] = reader.not_before()
        elif raw_key == "DurationInSeconds":
            event[key] = reader.duration()
        else:
            event[key] = reader.string(raw_key)
    for raw_key, value in raw.items():
        if raw_key in _RAW_FIELDS:
            continue
        key = _snake_case(raw_key)
        if key in event or key in ANNOTATIONS:
            warnings.append("%s: the extra field %s would replace %s; it was left out."
                            % (reader.label, _short_repr(raw_key, 60), key))
            continue
        event[key] = value
    return event


# What annotate_events adds to each event; no field of IMDS may take these names.
ANNOTATIONS = ("affects_this_host", "seconds_to_not_before")


def _snake_case(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# -- the document's edge: nesting and text ----------------------------------------------------

# A JSON string (skipped whole) or a bracket: all that nesting depends on.
_JSON_TOKEN_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
# json.loads turns an escaped unpaired surrogate ("\ud800") into a str that no UTF-8 encoder
# accepts (Ansible refuses to deserialize it, an environment cannot hold it); a pair it joins.
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def json_nesting_exceeds(text, limit):
    """True if the JSON text opens more than limit arrays and objects inside each other. Counted
    on the text, brackets inside strings left out, so nothing recurses whatever the depth (the
    watcher's configuration edge asks this before json.loads)."""
    depth = 0
    for match in _JSON_TOKEN_RE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def _cut_nesting(text, limit):
    """text with each array or object that opens deeper than limit levels replaced by null.

    json.loads recurses once per level and fails near the interpreter's recursion limit, so a deep
    extra field would cost the whole document. What is cut lies past MAX_NESTING and is left out
    (with a warning) by ScheduledEvents anyway. A text without more brackets than limit, or whose
    brackets do not balance (then json.loads refuses it), is returned as it is.
    """
    if text.count("[") + text.count("{") <= limit:
        return text
    pieces = []
    depth = 0
    kept_from = 0
    cutting = False
    for match in _JSON_TOKEN_RE.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in ("[", "{"):
            depth += 1
            if depth == limit + 1:
                pieces.append(text[kept_from:match.start()])
                pieces.append("null")
                cutting = True
        else:
            if depth == limit + 1:
                kept_from = match.end()
                cutting = False
            depth -= 1
    if cutting:
        return text
    pieces.append(text[kept_from:])
    return "".join(pieces)


class _TooDeep(Exception):
    pass


def _clean_value(value, depth, replaced):
    """value (at depth, the document being 1) with every unpaired surrogate replaced by U+FFFD.

    Raises _TooDeep when an array or object in it lies deeper than MAX_NESTING; each string
    changed is appended to replaced."""
    if isinstance(value, str):
        clean = _SURROGATE_RE.sub(u"\ufffd", value)
        if clean != value:
            replaced.append(clean)
        return clean
    if isinstance(value, (list, dict)) and depth > MAX_NESTING:
        raise _TooDeep()
    if isinstance(value, list):
        return [_clean_value(item, depth + 1, replaced) for item in value]
    if isinstance(value, dict):
        return dict((_clean_value(key, depth, replaced), _clean_value(item, depth + 1, replaced))
                    for key, item in value.items())
    return value


def _keep_field(target, key, value, label, depth, warnings):
    """target[key] = value cleaned; a value nested too deep is left out. Each with a warning."""
    replaced = []
    name = _clean_value(key, depth, replaced)
    shown = _short_repr(name, 60) if isinstance(name, str) else repr(name)
    try:
        value = _clean_value(value, depth, replaced)
    except _TooDeep:
        warnings.append("%s: the field %s nests deeper than %d levels; it was left out."
                        % (label, shown, MAX_NESTING))
        return
    if replaced:
        warnings.append("%s: %s holds unpaired surrogates (\\ud800-\\udfff, not text); each became U+FFFD."
                        % (label, shown))
    target[name] = value


def parse_document(body, url=None):
    """Parse a scheduled events body. Raises ImdsResponseError when it is not a document at all."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body or not body.strip():
        raise ImdsResponseError("IMDS answered 200 with an empty body", url=url, status=200)
    try:
        document = json.loads(_cut_nesting(body, MAX_NESTING + 1))
    except (ValueError, RecursionError) as exc:
        raise ImdsResponseError("IMDS answered 200 with a body that is not JSON (%s)" % _short_repr(str(exc)),
                                url=url, status=200)
    if not isinstance(document, dict) or not isinstance(document.get("Events"), list):
        raise ImdsResponseError(
            "IMDS answered 200 with JSON that is not a Scheduled Events document (no Events list)",
            url=url, status=200)
    return document


class ScheduledEvents:
    """A parsed Scheduled Events document: the raw dict, its normalised events and what could not be read.

    Reading never raises: an event that cannot be fully read is kept with what could be read, and
    ``warnings`` holds one line per field that could not (naming the event and the field).
    """

    def __init__(self, document, api_version=DEFAULT_API_VERSION, url=None):
        self.api_version = api_version
        self.url = url
        self.warnings = []
        self.events = []
        # The document as every consumer sees it: text fields cleaned and deep fields left out once,
        # here, so that the modules, the wait, the watcher and the EDA source all get the same.
        self.document = {}
        for key, value in document.items():
            if key == "Events" and isinstance(value, list):
                self.document[key] = [self._read_event(raw, position) for position, raw in enumerate(value, 1)]
            else:
                _keep_field(self.document, key, value, "the document", 2, self.warnings)
        self.incarnation = self._incarnation(self.document.get("DocumentIncarnation"))

    def _read_event(self, raw, position):
        """Normalises one entry of Events into self.events; returns it as the document keeps it."""
        if isinstance(raw, dict):
            label = _event_label(raw, position)
            clean = {}
            for key, value in raw.items():
                _keep_field(clean, key, value, label, 4, self.warnings)
            self.events.append(normalize_event(clean, self.api_version, position, self.warnings))
            return clean
        self.warnings.append("event #%d is not a JSON object (got %s); it was left out."
                             % (position, _short_repr(raw, 60)))
        try:
            return _clean_value(raw, 3, [])
        except _TooDeep:
            return None

    def _incarnation(self, value):
        if _is_int(value) and 0 <= value <= MAX_INCARNATION:
            return value
        self.warnings.append("DocumentIncarnation %s; read as 0." % (
            "is missing" if value is None else "is not a whole number from 0 to %d (got %s)"
            % (MAX_INCARNATION, _short_repr(value, 60))))
        return 0

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
        parsed = json.loads(_cut_nesting(text, MAX_NESTING + 1))
        if isinstance(parsed, dict) and parsed.get("error"):
            return _SURROGATE_RE.sub(u"\ufffd", str(parsed["error"]))
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
                 clock=None, sleep=None, rng=None, environ=None, wall_clock=None, connection_factory=None):
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

    def _send_once(self, method, path_and_query, body, deadline):
        """One HTTP exchange within deadline. Returns _Response or raises a Failure-carrying _AttemptFailed."""
        budget = deadline.remaining()
        if budget <= 0:
            raise _AttemptFailed(Failure(Failure.READ_TIMEOUT, "no time left for a request"))
        reused = self._connection is not None
        if not reused:
            connect_timeout = min(self.connect_timeout, budget)
            conn = self._connection_factory(connect_timeout)
            try:
                conn.connect()
            except socket.timeout:
                conn.close()
                raise _AttemptFailed(Failure(Failure.CONNECT, "connect timed out after %.1fs" % connect_timeout))
            except (OSError, http_client.HTTPException, UnicodeError) as exc:
                conn.close()
                raise _AttemptFailed(Failure(Failure.CONNECT, "connection failed: %s" % _describe_exc(exc)))
            self._connection = conn
        conn = self._connection
        headers = {"Metadata": "true", "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            self._arm(conn, deadline)
            conn.request(method, path_and_query, body=body, headers=headers)
            self._arm(conn, deadline)
            response = conn.getresponse()
            data = self._read_body(response, deadline)
            result = _Response(response.status, response.reason, response.getheaders(), data)
            if response.will_close:
                self.close()
            return result
        except _AttemptFailed:
            self.close()
            raise
        except socket.timeout:
            self.close()
            raise _AttemptFailed(Failure(Failure.READ_TIMEOUT, "no complete answer within %.1fs" % budget))
        except (http_client.HTTPException, OSError, ValueError) as exc:
            # ValueError: http.client's own parsing of a mangled status line or header.
            self.close()
            stale = isinstance(exc, (http_client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
            if reused and stale and self.resend_on_stale_connection:
                # A kept-alive connection the server closed meanwhile: not a failure, reconnect once.
                return self._send_once(method, path_and_query, body, deadline)
            raise _AttemptFailed(Failure(Failure.DROPPED, "connection dropped mid-request: %s"
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
            raise _AttemptFailed(_too_large("announced %s bytes" % declared.strip()))
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
                raise _AttemptFailed(_too_large("sent more than %d bytes" % MAX_BODY_BYTES))
            chunks.append(chunk)

    def _request(self, method, path, query, body=None, parse=None, deadline=None):
        url = self.url(path, query)
        path_and_query = self._prefix + path + "?" + urlencode(query)
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
                response = self._send_once(method, path_and_query, body, attempt_deadline)
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


class _AttemptFailed(Exception):
    def __init__(self, failure):
        super(_AttemptFailed, self).__init__(failure.detail)
        self.failure = failure


def _describe_exc(exc):
    text = str(exc) or exc.__class__.__name__
    return "%s (%s)" % (text, exc.__class__.__name__) if str(exc) else text


def _too_large(detail):
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
