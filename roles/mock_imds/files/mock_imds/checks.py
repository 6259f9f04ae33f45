# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock's error type and the checks every value passes at the edge."""

from __future__ import print_function



class MockError(Exception):
    """A request to the mock (control API, Python API, CLI) that it cannot carry out.

    status is the HTTP status the control API answers with (400 or 404)."""

    def __init__(self, message, status=400):
        super(MockError, self).__init__(message)
        self.status = status


def _number(value, name, minimum=None, maximum=None, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MockError("%s must be a number, got %r" % (name, value))
    if integer and value != int(value):
        raise MockError("%s must be a whole number, got %r" % (name, value))
    if minimum is not None and value < minimum:
        raise MockError("%s must be >= %s, got %r" % (name, minimum, value))
    if maximum is not None and value > maximum:
        raise MockError("%s must be <= %s, got %r" % (name, maximum, value))
    return int(value) if integer else float(value)


def _choice(value, name, choices):
    if value not in choices:
        raise MockError("%s must be one of %s, got %r" % (name, ", ".join(map(str, choices)), value))
    return value


def _check_keys(doc, allowed, where):
    if not isinstance(doc, dict):
        raise MockError("%s must be a JSON object, got %s" % (where, type(doc).__name__))
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise MockError("%s: unknown key %s (known keys: %s)" % (where, ", ".join(map(repr, unknown)),
                                                                 ", ".join(sorted(allowed))))
