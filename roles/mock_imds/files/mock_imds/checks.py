# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock's error type and the checks every value passes at the edge.

Every number is finite and bounded, every string bounded, every container typed, before any
state changes: a refused request leaves no trace."""

from __future__ import print_function

import json
import math

# Ten years of simulated seconds: far beyond any notice (predicted hardware failure: 7 days) and
# small enough that no sum of them leaves the range datetime can print.
MAX_SECONDS = 10 * 365 * 86400
MAX_STRING = 1024
MAX_TEXT = 65536
MAX_LIST = 1000


class MockError(Exception):
    """A request to the mock (control API, Python API, CLI) that it cannot carry out.

    status is the HTTP status the control API answers with (400 or 404)."""

    def __init__(self, message, status=400):
        super(MockError, self).__init__(message)
        self.status = status


def _number(value, name, minimum=None, maximum=MAX_SECONDS, integer=False):
    """A finite number within [minimum, maximum]; bool, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MockError("%s must be a number, got %r" % (name, value))
    if isinstance(value, float) and not math.isfinite(value):
        raise MockError("%s must be a finite number, got %r" % (name, value))
    # Compared before any conversion: an int with 400 digits must not reach float().
    if minimum is not None and value < minimum:
        raise MockError("%s must be >= %s, got %r" % (name, minimum, value))
    if maximum is not None and value > maximum:
        raise MockError("%s must be <= %s, got %r" % (name, maximum, value))
    if integer and value != int(value):
        raise MockError("%s must be a whole number, got %r" % (name, value))
    return int(value) if integer else float(value)


def _string(value, name, maximum=MAX_STRING, empty=False):
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise MockError("%s must be a %sstring, got %r" % (name, "" if empty else "non-empty ", value))
    if len(value) > maximum:
        raise MockError("%s must be at most %d characters, got %d" % (name, maximum, len(value)))
    return value


def _string_list(value, name, maximum_items=MAX_LIST, maximum=MAX_STRING):
    if not isinstance(value, list) or len(value) > maximum_items:
        raise MockError("%s must be a list of at most %d strings, got %r" % (name, maximum_items, value))
    return [_string(item, "%s[%d]" % (name, index), maximum) for index, item in enumerate(value)]


def _choice(value, name, choices):
    if isinstance(value, (dict, list)) or value not in choices:
        raise MockError("%s must be one of %s, got %r" % (name, ", ".join(map(str, choices)), value))
    return value


def _check_keys(doc, allowed, where):
    if not isinstance(doc, dict):
        raise MockError("%s must be a JSON object, got %s" % (where, type(doc).__name__))
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise MockError("%s: unknown key %s (known keys: %s)" % (where, ", ".join(map(repr, unknown)),
                                                                 ", ".join(sorted(allowed))))


def _refuse_constant(name):
    raise ValueError("%s is not JSON (use a finite number)" % name)


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s is out of range (use a finite number)" % text)
    return value


def parse_json(data, where):
    """Bytes -> JSON value, strictly: no NaN or Infinity, no number that overflows to infinity."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise MockError("%s is not JSON (%s)" % (where, exc))


def read_json_file(path, where, fix):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise MockError("%s %s is not readable JSON (%s); %s" % (where, path, exc, fix))
    try:
        return parse_json(data, "%s %s" % (where, path))
    except MockError as exc:
        raise MockError("%s; %s" % (str(exc).replace("is not JSON", "is not readable JSON"), fix))
