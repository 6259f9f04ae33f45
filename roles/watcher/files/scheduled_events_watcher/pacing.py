# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""When the watcher sends its next request: at most one per poll interval, later after a failure
by the shared client's retry table, and how a failure streak is logged (once, then once a minute)."""

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _retry

# The longest the loop ever waits between two attempts, whatever the retry table or a
# Retry-After says: a Preempt gives 30 s of notice, and one request every 10 s is far below the
# rate limit of 5 a second.
MAX_BACKOFF = 10.0
# IMDS errors the client does not retry (400, 404, redirects) still must not stop the daemon: it
# keeps polling, backing off to MAX_BACKOFF.
NOT_RETRIED = _retry.RetryRule("an error the client does not retry", base=1.0, cap=MAX_BACKOFF)
# An unexpected error inside one loop iteration (a bug, a full disk): logged, then the same backoff.
INTERNAL = _retry.RetryRule("an internal error", base=1.0, cap=MAX_BACKOFF)
FAILURE_REMINDER_SECONDS = 60.0


class Pacer(object):
    """When the next poll may start. Polls start a whole interval after the previous request
    started (so the period does not stretch by the processing time), later after a failure's
    backoff (never more than MAX_BACKOFF), and never within an interval after an approval. The
    client makes one attempt per call (retry_timeout 0): retries are the loop's, so they are
    paced too."""

    def __init__(self, interval, clock):
        self.interval = interval
        self._clock = clock
        self.next_at = clock()

    def polled(self, started_at, backoff=0.0):
        self.next_at = max(started_at + self.interval, self._clock() + min(backoff, MAX_BACKOFF))

    def approved(self, started_at):
        self.next_at = max(self.next_at, started_at + self.interval)

    def wait(self):
        return max(0.0, self.next_at - self._clock())


class FailureStreak(object):
    """Consecutive failures: counts attempts per kind for the backoff and keeps the log to one
    line when a streak starts, a reminder a minute, and one line when it ends."""

    def __init__(self):
        self.count = 0
        self.attempts = {}
        self.started_at = None
        self.last_logged = None

    def failed(self, key, now):
        first = self.count == 0
        self.count += 1
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if first:
            self.started_at = now
        should_log = first or now - self.last_logged >= FAILURE_REMINDER_SECONDS
        if should_log:
            self.last_logged = now
        return self.attempts[key], should_log

    def succeeded(self, now):
        summary = None
        if self.count:
            summary = (self.count, now - self.started_at)
        self.count = 0
        self.attempts = {}
        return summary


def describe_failure(exc, client):
    """The error for the log. With retry_timeout 0 the client's "did not succeed within
    retry_timeout" wording would mislead: the loop retries, so name the URL and the failure."""
    if isinstance(exc, _edge.ImdsTimeoutError) and client.last_failures:
        text = "%s from %s" % (client.last_failures[-1].describe(), exc.url)
        return text + (" (%s)" % exc.hint if exc.status == 429 else "")
    return str(exc)


def backoff_for(client, policy, streak, now):
    """(delay, log this failure?) after a failed request, by the shared client's retry table,
    never above MAX_BACKOFF."""
    failure = client.last_failures[-1] if client.last_failures else None
    rule = _retry.retry_rule_for(failure) if failure is not None else None
    if rule is None:
        rule = NOT_RETRIED
    key = (failure.kind, failure.status) if failure is not None else ("error", None)
    attempt, should_log = streak.failed(key, now)
    retry_after = failure.retry_after if failure is not None else None
    return min(MAX_BACKOFF, policy.delay(rule, attempt, retry_after)), should_log
