# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time formats: ISO 8601 for the control API, RFC 1123 for NotBefore."""

from __future__ import print_function

import datetime
import email.utils

# Simulated time stays within these bounds (1971 to 9000): every instant the mock may print is
# inside what datetime can format, whatever speed and advances a caller asked for.
SIM_TIME_MIN = 365 * 86400.0
SIM_TIME_MAX = 221845392000.0
MAX_START_TIME = SIM_TIME_MAX - 100 * 365 * 86400.0


def clamp_time(epoch):
    return min(max(epoch, SIM_TIME_MIN), SIM_TIME_MAX)


def iso_utc(epoch):
    """ISO 8601 UTC with milliseconds: 2022-04-11T22:26:58.000Z."""
    if epoch is None:
        return None
    dt = datetime.datetime.fromtimestamp(clamp_time(epoch), datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def rfc1123(epoch):
    """NotBefore as IMDS writes it: Mon, 11 Apr 2022 22:26:58 GMT."""
    return email.utils.formatdate(int(clamp_time(epoch)), usegmt=True)


def parse_iso(text):
    """2022-04-11T22:11:53Z (or with an offset; no offset means UTC) -> epoch seconds."""
    if not isinstance(text, str) or not text:
        raise ValueError("not a string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    if len(value) > 64:
        raise ValueError("too long")
    dt = datetime.datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()
