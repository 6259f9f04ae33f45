# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The options of the collection's Event-Driven Ansible event sources, read as ansible-rulebook
# passes them (a templated "{{ value }}" arrives as text): each checked once at start, refused with
# a SourceConfigError that names the option, the value and the fix. No I/O.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge


class SourceConfigError(ValueError):
    """An option of the source cannot be used; the message names it, the value and the fix."""


def _has_control_characters(text):
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def flag(args, name, default):
    value = args.get(name, default)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        # A templated rulebook value ("{{ var }}") arrives as text.
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise SourceConfigError("%s must be true or false, got %r." % (name, value))
    return value


def number(args, name, default, minimum, maximum, integer=False, unit="seconds"):
    value = args.get(name, default)
    text = value.strip() if isinstance(value, str) else None
    if text and _edge.is_number_text(text):
        # Only plain ASCII number text is read as a number (float() would also take "nan", "inf"
        # and digits of other scripts).
        try:
            value = float(text)
        except ValueError:
            pass
    try:
        return _edge.check_number(value, name, minimum, maximum, integer=integer, unit=unit)
    except _edge.ImdsInputError as exc:
        raise SourceConfigError(str(exc))


def text(args, name, default=None, what="a string"):
    """A string without control characters, or None when the option is left out."""
    value = args.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or _has_control_characters(value):
        shown = value if not isinstance(value, str) else "<%d characters>" % len(value)
        raise SourceConfigError("%s must be %s without control characters, got %s."
                                % (name, what, _edge.short_repr(shown)))
    return value


def secrets(args, name, example, max_length=1024):
    """The list of secrets an option gives (a string, or a list for rotation), or None. The values
    are never shown in a message."""
    value = args.get(name)
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise SourceConfigError("%s must be a string or a non-empty list of strings (%s), got a %s." % (
            name, example, type(value).__name__))
    for position, secret in enumerate(values, 1):
        if not secret.strip() or len(secret) > max_length or _has_control_characters(secret):
            raise SourceConfigError("%s: entry %d is empty, longer than %d characters or holds control characters; "
                                    "give %s." % (name, position, max_length, example))
    return values
