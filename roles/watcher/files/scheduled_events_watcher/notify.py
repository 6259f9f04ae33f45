# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's notify action: each transition of a scheduled event, POSTed to the receivers of
the configuration (an ansible-rulebook webhook source, an EDA controller event stream...).

What counts as a transition is decided by _transitions.TransitionTracker (the rule the EDA event
source uses too). The outbox keeps what is still to be sent; it lives in the watcher's state file,
written together with the tracker's memory, so that:

- a transition is on disk before it is sent (the tracker's memory and the outbox are one
  snapshot: a kill before the write means the next watcher sees the same transitions again);
- it leaves the outbox after a 2xx answer; a kill between the answer and the write sends it
  again: at least once, duplicates possible, never lost;
- the outbox is bounded: when full, the oldest notification is dropped (logged, counted).

One sender thread per receiver, so a dead receiver delays neither another receiver nor the loop
(drains, approvals). A receiver gets its notifications in order: the next waits until the one
before it is delivered or given up (after max_attempts, with a backoff capped at a minute).

Standard library only.
"""

import http.client
import json
import os
import random
import sys
import threading
import time
from urllib.parse import urlsplit

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import TransitionTracker

from .log import Log

NOTIFY_STATE_VERSION = 1
# The backoff between two attempts of one notification: 1 s, doubling, at most a minute (a
# Retry-After too), with jitter so that the VMs of a set do not retry in step.
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
# A receiver's answer is read up to this size, then the connection is closed: nobody needs it.
MAX_ANSWER_BYTES = 65536
# A token file larger than this is not a token.
MAX_TOKEN_BYTES = 16384
FAILURE_REMINDER_SECONDS = 60.0


def safe_url(url):
    """The URL for logs: scheme, host, port and path, never the query (it may carry a key)."""
    parts = urlsplit(url)
    return "%s://%s%s" % (parts.scheme, parts.netloc, parts.path or "/")


def notification_id(observer, transition):
    """The same transition seen again (a resend after a restart) keeps its id: receivers that
    must not act twice key on it."""
    event_id = transition["scheduled_event"].get("event_id") or ""
    return "%s/%s/%s" % (observer or "", event_id.lower(), transition["type"])


def body_of(transition, observer, version, observed_at):
    body = dict(transition)
    body["observer"] = observer
    body["watcher_version"] = version
    body["notification_id"] = notification_id(observer, transition)
    body["observed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(observed_at))
    return body


def _check_entry(entry):
    if not isinstance(entry, dict):
        return "not a JSON object"
    if not isinstance(entry.get("id"), int) or isinstance(entry.get("id"), bool) or entry["id"] < 1:
        return "id %r is not a positive whole number" % (entry.get("id"),)
    if not isinstance(entry.get("body"), dict) or not isinstance(entry["body"].get("type"), str):
        return "body is not a notification"
    pending = entry.get("pending")
    if not isinstance(pending, list) or not all(isinstance(url, str) for url in pending):
        return "pending %r is not a list of URLs" % (pending,)
    return None


def check_section(section):
    """Why the notify section of a state file cannot be used, or None."""
    if not isinstance(section, dict):
        return "not a JSON object"
    if section.get("version") != NOTIFY_STATE_VERSION:
        return "version %r is not %d" % (section.get("version"), NOTIFY_STATE_VERSION)
    next_id = section.get("next_id")
    if not isinstance(next_id, int) or isinstance(next_id, bool) or next_id < 1:
        return "next_id %r is not a positive whole number" % (next_id,)
    outbox = section.get("outbox")
    if not isinstance(outbox, list):
        return "outbox is not a list"
    for index, entry in enumerate(outbox):
        problem = _check_entry(entry)
        if problem:
            return "outbox[%d]: %s" % (index, problem)
        if entry["id"] >= next_id:
            return "outbox[%d]: id %d is not below next_id %d" % (index, entry["id"], next_id)
    if not isinstance(section.get("tracker"), dict):
        return "tracker is not a JSON object"
    return None


class Notifications(object):
    """The tracker and the outbox, behind one lock. No I/O: the watcher's state store calls
    state_snapshot() in each write and state_written() after it; the senders take work here."""

    def __init__(self, config, observer, version, wall_clock=None):
        self.targets = [t["url"] for t in config["notify"]]
        self.limit = config["notify_outbox_max"]
        self.observer = observer
        self.version = version
        self._wall_clock = wall_clock or time.time
        self._lock = threading.Condition()
        self.tracker = TransitionTracker(resource_name=observer, emit_existing=True)
        self.outbox = []
        self.next_id = 1
        # Entries with an id up to this are in the state file: only those may be sent.
        self.durable_id = 0
        self._snapshot_id = 0
        self.dropped = 0
        # on_change(outbox length, dropped now) for the metrics; set by the watcher.
        self.on_change = None

    # -- start ------------------------------------------------------------------------------

    def restore(self, section):
        """Go on from the state file's notify section (None: a first start). Returns
        (notes for the log, problem or None): with a problem, the section is not used and the
        tracker starts afresh, so events present now are notified (again): duplicates, not losses."""
        if section is None:
            return [], None
        problem = check_section(section)
        tracker = None
        if problem is None:
            try:
                tracker = TransitionTracker.restore(section["tracker"], resource_name=self.observer, emit_existing=True)
            except ValueError as exc:
                problem = "tracker: %s" % exc
        if problem is not None:
            return [], problem
        notes = []
        kept, orphaned = [], 0
        for entry in section["outbox"]:
            pending = [url for url in entry["pending"] if url in self.targets]
            orphaned += len(entry["pending"]) - len(pending)
            if pending:
                kept.append({"id": entry["id"], "body": entry["body"], "pending": pending})
        if orphaned:
            notes.append("%d unsent notification%s to receivers no longer in notify discarded"
                         % (orphaned, "" if orphaned == 1 else "s"))
        with self._lock:
            self.tracker = tracker
            self.outbox = kept
            self.next_id = section["next_id"]
            self.durable_id = self.next_id - 1
            self.dropped = 0
        if kept:
            notes.append("%d notification%s from before the restart still to send (a receiver may get one of them "
                         "twice)" % (len(kept), "" if len(kept) == 1 else "s"))
        self._changed(0)
        return notes, None

    # -- the loop's side ----------------------------------------------------------------------

    def observe(self, document, keep=True):
        """The transitions of one document, queued for every receiver (unless keep is False: a
        dry run). Returns log lines. Sending waits until the state holding them is written."""
        now = self._wall_clock()
        lines = []
        dropped_now = 0
        with self._lock:
            transitions = self.tracker.observe(document)
            for transition in transitions:
                body = body_of(transition, self.observer, self.version, now)
                event_id = transition["scheduled_event"].get("event_id")
                if not keep:
                    lines.append(Log("info", "dry_run", "DRY RUN: would notify %d receiver%s: event %s %s"
                                     % (len(self.targets), "" if len(self.targets) == 1 else "s", event_id,
                                        transition["type"]), event_id=event_id, transition=transition["type"]))
                    continue
                self.outbox.append({"id": self.next_id, "body": body, "pending": list(self.targets)})
                self.next_id += 1
                lines.append(Log("info", "notify_queued", "event %s %s: notifying %d receiver%s"
                                 % (event_id, transition["type"], len(self.targets),
                                    "" if len(self.targets) == 1 else "s"),
                                 event_id=event_id, transition=transition["type"]))
            while len(self.outbox) > self.limit:
                self.outbox.pop(0)
                dropped_now += 1
            self.dropped += dropped_now
        if dropped_now:
            lines.append(Log("error", "notify_dropped", "the notify outbox is full (notify_outbox_max %d): the "
                             "%d oldest unsent notification%s dropped (%d since start); is a receiver down?"
                             % (self.limit, dropped_now, " was" if dropped_now == 1 else "s were", self.dropped),
                             dropped=dropped_now))
        if transitions and keep:
            self._changed(dropped_now)
        return lines

    # -- the state store's side -----------------------------------------------------------

    def state_snapshot(self):
        with self._lock:
            tracker = self.tracker.snapshot()
            # documents_seen only tells the first document from the others; its count would make
            # every poll a write of the state file.
            tracker["documents_seen"] = min(tracker["documents_seen"], 1)
            self._snapshot_id = self.next_id - 1
            return {"version": NOTIFY_STATE_VERSION, "tracker": tracker, "next_id": self.next_id,
                    "outbox": [{"id": e["id"], "body": e["body"], "pending": list(e["pending"])}
                               for e in self.outbox]}

    def state_written(self):
        with self._lock:
            if self._snapshot_id > self.durable_id:
                self.durable_id = self._snapshot_id
                self._lock.notify_all()

    # -- the senders' side ------------------------------------------------------------------

    def next_for(self, url, stop_event, timeout=1.0):
        """The oldest written entry still to send to url, or None after timeout or a stop."""
        with self._lock:
            entry = self._first_for(url)
            if entry is None and not stop_event.is_set():
                self._lock.wait(timeout)
                entry = self._first_for(url)
            return entry

    def first_for(self, url):
        with self._lock:
            return self._first_for(url)

    def _first_for(self, url):
        for entry in self.outbox:
            if entry["id"] > self.durable_id:
                return None
            if url in entry["pending"]:
                return entry
        return None

    def done_with(self, entry_id, url):
        """entry_id needs no more sending to url (delivered, or given up)."""
        with self._lock:
            for index, entry in enumerate(self.outbox):
                if entry["id"] == entry_id:
                    if url in entry["pending"]:
                        entry["pending"].remove(url)
                    if not entry["pending"]:
                        del self.outbox[index]
                    break
        self._changed(0)

    def wake(self):
        with self._lock:
            self._lock.notify_all()

    def unsent(self):
        with self._lock:
            return len(self.outbox)

    def _changed(self, dropped):
        if self.on_change is not None:
            self.on_change(self.unsent(), dropped)


# --------------------------------------------------------------------------------------------
# Sending
# --------------------------------------------------------------------------------------------

class SendFailure(Exception):
    """One attempt failed; the message says why (no secret in it). retry_after: the receiver's
    Retry-After in seconds, or None."""

    def __init__(self, message, retry_after=None):
        super(SendFailure, self).__init__(message)
        self.retry_after = retry_after


class _TLSConnection(http.client.HTTPConnection):
    """HTTPS built by hand: the daemon keeps ssl out of http.client's import (IMDS is plain
    HTTP, and the TLS library is a large part of the daemon's memory); ssl is loaded only when a
    receiver is https."""

    default_port = 443

    def __init__(self, host, port=None, timeout=None, context=None):
        super(_TLSConnection, self).__init__(host, port, timeout)
        self._context = context

    def connect(self):
        super(_TLSConnection, self).connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


def tls_context():
    """The system's default TLS context (certificates verified), loading ssl if the daemon kept it out."""
    if "ssl" in sys.modules and sys.modules["ssl"] is None:
        del sys.modules["ssl"]
    import ssl  # pylint: disable=import-outside-toplevel
    return ssl.create_default_context()


def read_token(path):
    """The bearer token in path (surrounding whitespace removed). Raises SendFailure."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise SendFailure("cannot read token_file %s (%s); the notification waits in the outbox"
                          % (path, exc.strerror or exc))
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        token = None
    if not token or len(data) > MAX_TOKEN_BYTES or any(ord(c) < 33 or ord(c) > 126 for c in token):
        raise SendFailure("token_file %s does not hold one token (printable ASCII, no spaces, at most %d bytes)"
                          % (path, MAX_TOKEN_BYTES))
    return token


def _retry_after(value):
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < float("inf") else None


def post(target, body, version, clock=time.monotonic, tls=None):
    """POST body (a dict) as JSON to the target. One deadline, target["timeout"], covers the
    connection, the request and the answer. Returns the status (2xx); raises SendFailure."""
    deadline = clock() + target["timeout"]
    parts = urlsplit(target["url"])
    path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    headers = {"Content-Type": "application/json", "User-Agent": "azure-imds-watcher/%s" % version}
    headers.update(target["headers"])
    if target["token_file"]:
        headers["Authorization"] = "Bearer " + read_token(target["token_file"])
    data = json.dumps(body, sort_keys=True, default=str).encode("utf-8")

    def left():
        remaining = deadline - clock()
        if remaining <= 0:
            raise SendFailure("no answer within %gs (timeout)" % target["timeout"])
        return remaining

    if parts.scheme == "https":
        connection = _TLSConnection(parts.hostname, parts.port, timeout=left(), context=tls or tls_context())
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=left())
    where = safe_url(target["url"])
    try:
        connection.connect()
        # The connection lets go of its socket once an answer says it closes; the answer still reads from it.
        sock = connection.sock
        sock.settimeout(left())
        connection.request("POST", path, body=data, headers=headers)
        sock.settimeout(left())
        answer = connection.getresponse()
        received = 0
        while received <= MAX_ANSWER_BYTES:
            sock.settimeout(left())
            chunk = answer.read(8192)
            if not chunk:
                break
            received += len(chunk)
    except (OSError, http.client.HTTPException) as exc:
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if "timed out" in text:
            raise SendFailure("%s: no answer within %gs (timeout)" % (where, target["timeout"]))
        raise SendFailure("%s: %s" % (where, text))
    finally:
        connection.close()
    if 200 <= answer.status < 300:
        return answer.status
    hint = ""
    if 300 <= answer.status < 400:
        hint = " (redirects are not followed: give the URL it points to)"
    elif answer.status in (401, 403):
        hint = " (check the token in token_file)"
    raise SendFailure("%s answered %d %s%s" % (where, answer.status, answer.reason, hint),
                      retry_after=_retry_after(answer.getheader("Retry-After")))


class Sender(object):
    """Sends the notifications of one receiver in order, in a thread of its own."""

    def __init__(self, notifications, target, version, log, persist, telemetry, clock=time.monotonic,
                 wait=None, rng=random.random):
        self.notifications = notifications
        self.target = target
        self.version = version
        self.log = log
        self.persist = persist
        self.telemetry = telemetry
        self._clock = clock
        self._rng = rng
        self.stop_event = threading.Event()
        # wait(seconds) -> True when stopping; tests replace it so no test waits for a backoff.
        self._wait = wait or self.stop_event.wait
        self.where = safe_url(target["url"])
        self.failing_since = None
        self.failures = 0
        self.last_reminder = None
        self.thread = None
        self._tls = None

    def start(self):
        self.thread = threading.Thread(target=self.run, name="notify-%s" % self.where)
        self.thread.daemon = True
        self.thread.start()

    def stop(self):
        self.stop_event.set()
        self.notifications.wake()

    def delay(self, attempt, retry_after=None):
        if retry_after is not None:
            return min(BACKOFF_CAP, retry_after)
        return min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)) * (0.5 + self._rng() / 2)

    def run(self):
        while not self.stop_event.is_set():
            entry = self.notifications.next_for(self.target["url"], self.stop_event)
            if entry is not None:
                self.deliver(entry, until_failure=False)

    def deliver(self, entry, until_failure):
        """Attempts for one entry: until it is delivered or given up, or (until_failure) its
        first failure. Returns True when it is done with."""
        attempt = 0
        while not self.stop_event.is_set():
            attempt += 1
            try:
                if self._tls is None and self.target["url"].startswith("https:"):
                    self._tls = tls_context()
                post(self.target, entry["body"], self.version, clock=self._clock, tls=self._tls)
            except SendFailure as exc:
                self.telemetry.notify_attempt_failed()
                last = attempt >= self.target["max_attempts"]
                self._failed(entry, exc, attempt, last)
                if last:
                    self.telemetry.notify_given_up()
                    self._done(entry)
                    return True
                if until_failure or self._wait(self.delay(attempt, exc.retry_after)):
                    return False
                continue
            except Exception as exc:  # pylint: disable=broad-except
                # A bug here must not end the thread: the receiver would never hear again.
                self.log("error", "notify_failed", "internal error sending to %s: %s: %s; trying again"
                         % (self.where, type(exc).__name__, exc))
                if until_failure or self._wait(BACKOFF_CAP):
                    return False
                continue
            self.telemetry.notify_sent()
            self._recovered()
            self._done(entry)
            return True
        return False

    def _done(self, entry):
        self.notifications.done_with(entry["id"], self.target["url"])
        try:
            self.persist()
        except Exception as exc:  # pylint: disable=broad-except
            # Still on disk as unsent: a restart sends it again (a duplicate, not a loss).
            self.log("error", "notify_state", "cannot write the state after a notification to %s: %s"
                     % (self.where, exc))

    def _failed(self, entry, exc, attempt, last):
        body = entry["body"]
        what = "event %s %s" % (body.get("scheduled_event", {}).get("event_id"), body.get("type"))
        now = self._clock()
        if last:
            self.log("error", "notify_given_up", "notify %s: %s: gave up after %d attempt%s: %s. The receiver does "
                     "not get this notification" % (self.where, what, attempt, "" if attempt == 1 else "s", exc),
                     url=self.where, attempts=attempt)
        elif self.failing_since is None or now - self.last_reminder >= FAILURE_REMINDER_SECONDS:
            self.log("warning", "notify_failed", "notify %s: %s: attempt %d of %d failed: %s; retrying with a backoff"
                     % (self.where, what, attempt, self.target["max_attempts"], exc), url=self.where, attempt=attempt)
            self.last_reminder = now
        if self.failing_since is None:
            self.failing_since = now
        self.failures += 1

    def _recovered(self):
        if self.failing_since is not None:
            self.log("info", "notify_recovered", "notify %s: delivered again after %d failed attempt%s over %.1fs"
                     % (self.where, self.failures, "" if self.failures == 1 else "s",
                        self._clock() - self.failing_since), url=self.where)
        self.failing_since = None
        self.failures = 0

    def send_pending_once(self):
        """For `run --once`: what is pending, in order, each with one attempt; stops at the first
        failure (the rest keeps its order for the next run)."""
        while True:
            entry = self.notifications.first_for(self.target["url"])
            if entry is None or not self.deliver(entry, until_failure=True):
                return


def senders_for(config, notifications, version, log, persist, telemetry, **kwargs):
    return [Sender(notifications, target, version, log, persist, telemetry, **kwargs) for target in config["notify"]]


def https_wanted(config):
    return any(target["url"].startswith("https:") for target in config["notify"])


def token_files_readable(config):
    """Token files that cannot be read now: lines for a start-up warning (sending reads them
    again each time, so a file put in place later works)."""
    lines = []
    for target in config["notify"]:
        path = target["token_file"]
        if path and not os.access(path, os.R_OK):
            lines.append("notify %s: token_file %s cannot be read now; notifications wait in the outbox until it "
                         "can" % (safe_url(target["url"]), path))
    return lines
