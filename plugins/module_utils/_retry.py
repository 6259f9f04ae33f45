# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# How a failed IMDS request is retried: what is retried (the one status table) is kept apart from
# how (RetryPolicy.delay), and Retry-After is read here. Standard library only.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email.utils
import math
import random
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._defaults import (
    CONNECT_RETRY_WINDOW, RETRY_AFTER_CAP)


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
