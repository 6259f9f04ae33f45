# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The edge of the collection's IMDS side: the errors every part raises, and the checks a value gets
# once where it enters (a number, a deadline, a URL, an api-version, JSON nesting, text that is not
# text). Nothing past the edge checks again. Standard library only: the watcher carries it onto the VM.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re
import time

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported, this keeps sanity's compile test quiet
    urlsplit = None

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import (
    API_VERSIONS, MAX_NESTING, NUMBER_TEXT_CHARACTERS)


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
# Values at the edge: numbers, text and deadlines
# --------------------------------------------------------------------------------------------

def is_int(value):
    """An int that is not a bool (JSON's true is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number_text(text):
    """True for text made only of NUMBER_TEXT_CHARACTERS, as a templated "{{ value }}" gives (the
    empty text included: the caller decides what nothing means)."""
    return all(c in NUMBER_TEXT_CHARACTERS for c in text)


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
                                               short_repr(value))
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


def short_repr(value, limit=80):
    """repr(value), shortened for a message."""
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
# Options that name where and how IMDS is reached
# --------------------------------------------------------------------------------------------

_URL_FORM = ("Use the form http://169.254.169.254 (or, for tests, the mock's URL such as "
             "http://127.0.0.1:8080/vm/web_0).")


def check_base_url(url, name="imds_url"):
    """The base URL without a trailing slash, fully parsed: scheme, host, port 1-65535, nothing odd.

    Raises ImdsInputError naming the option (name), the value and the fix; never anything else.
    """
    if not isinstance(url, str):
        raise ImdsInputError("%s must be a string, got %s. %s" % (name, short_repr(url), _URL_FORM))
    if not url or any(c.isspace() or ord(c) < 32 or ord(c) >= 127 for c in url):
        raise ImdsInputError("%s %s is empty or holds whitespace, control or non-ASCII characters "
                             "(percent-encode those of a path). %s" % (name, short_repr(url), _URL_FORM))
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise ImdsInputError("%s %s is not a valid URL (%s). Check the brackets of an IPv6 host and "
                             "give the port as a number from 1 to 65535. %s" % (name, short_repr(url), exc, _URL_FORM))
    if parts.scheme not in ("http", "https") or not host:
        raise ImdsInputError("%s %s is not an http:// URL with a host. %s" % (name, short_repr(url), _URL_FORM))
    if (port is not None and not 1 <= port <= 65535) or parts.netloc.endswith(":"):
        raise ImdsInputError("%s %s has a port outside 1-65535. %s" % (name, short_repr(url), _URL_FORM))
    if parts.username is not None or parts.password is not None:
        raise ImdsInputError("%s %s carries a user name or password; IMDS takes none. %s"
                             % (name, short_repr(url), _URL_FORM))
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ImdsInputError(
            "%s %s carries a query or fragment. Give only scheme, host, port and an optional path "
            "prefix; the client adds /metadata/... and api-version itself. %s" % (name, short_repr(url), _URL_FORM))
    return url.rstrip("/")


def validate_api_version(api_version):
    if api_version not in API_VERSIONS:
        raise ImdsInputError(
            "api_version %r is not a Scheduled Events api-version. Use one of: %s."
            % (api_version, ", ".join(API_VERSIONS)))
    return api_version


# --------------------------------------------------------------------------------------------
# JSON at the edge: nesting and text
# --------------------------------------------------------------------------------------------

# A JSON string (skipped whole) or a bracket: all that nesting depends on.
_JSON_TOKEN_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
# json.loads turns an escaped unpaired surrogate ("\ud800") into a str that no UTF-8 encoder
# accepts (Ansible refuses to deserialize it, an environment cannot hold it); a pair it joins.
SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


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


def cut_nesting(text, limit):
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


class TooDeep(Exception):
    pass


def clean_value(value, depth, replaced):
    """value (at depth, the document being 1) with every unpaired surrogate replaced by U+FFFD.

    Raises TooDeep when an array or object in it lies deeper than MAX_NESTING; each string
    changed is appended to replaced."""
    if isinstance(value, str):
        clean = SURROGATE_RE.sub(u"\ufffd", value)
        if clean != value:
            replaced.append(clean)
        return clean
    if isinstance(value, (list, dict)) and depth > MAX_NESTING:
        raise TooDeep()
    if isinstance(value, list):
        return [clean_value(item, depth + 1, replaced) for item in value]
    if isinstance(value, dict):
        return dict((clean_value(key, depth, replaced), clean_value(item, depth + 1, replaced))
                    for key, item in value.items())
    return value
