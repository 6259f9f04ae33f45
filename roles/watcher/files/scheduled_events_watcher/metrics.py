# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's Prometheus metrics: a small registry, the text format 0.0.4, a textfile for
node_exporter's textfile collector and an optional /metrics server on 127.0.0.1.

Standard library only: the daemon runs on VMs that have nothing but Python 3. The names and
labels are a contract with the dashboards and alerts (docs/docsite/rst/watcher.rst, "Metrics").
"""

import collections
import math
import selectors
import socket
import threading
import time

from .files import replace_file

PREFIX = "azure_imds_watcher_"
POLL_OUTCOMES = ("ok", "http_error", "throttled", "timeout", "connection_error", "bad_document")
PHASES = ("drain", "started", "recover")
HANDLER_OUTCOMES = ("ok", "failed", "timeout", "killed")
# The handler results of watcher_handlers, as the metric's outcomes: a handler refused or not
# started failed to do its job; one cut short by a second stop signal was killed.
HANDLER_OUTCOME_OF = {"ok": "ok", "failed": "failed", "refused": "failed", "not_started": "failed",
                      "timed_out": "timeout", "cut_short": "killed", "killed": "killed"}
# IMDS answers in milliseconds; the first call after a quiet day may take two minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
HANDLER_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# Notice periods: a Preempt gives 30 s, a Reboot 15 minutes, a user event up to 2 hours.
NOTICE_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0)


def _format_value(value):
    if value == math.inf:
        return "+Inf"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return "%d" % value
    return repr(float(value))


def _escape_label(value):
    return ("%s" % value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names, values, extra=()):
    pairs = list(zip(names, values)) + list(extra)
    if not pairs:
        return ""
    return "{%s}" % ",".join('%s="%s"' % (name, _escape_label(value)) for name, value in pairs)


class _Metric(object):
    kind = None

    def __init__(self, name, help_text, labels=(), preset=()):
        self.name = PREFIX + name
        self.help = help_text
        self.label_names = tuple(labels)
        self.values = {}
        for label_values in preset:
            self._child(tuple(label_values))

    def _child(self, label_values):
        if len(label_values) != len(self.label_names):
            raise ValueError("%s takes the labels %s" % (self.name, ", ".join(self.label_names)))
        if label_values not in self.values:
            self.values[label_values] = self._empty()
        return label_values

    @staticmethod
    def _empty():
        return 0.0

    def header(self):
        return ["# HELP %s %s" % (self.name, self.help.replace("\\", "\\\\").replace("\n", "\\n")),
                "# TYPE %s %s" % (self.name, self.kind)]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name, help_text, labels=(), preset=()):
        if not name.endswith("_total"):
            raise ValueError("a counter's name ends in _total: %s" % name)
        super(Counter, self).__init__(name, help_text, labels, preset)

    def inc(self, *label_values, amount=1.0):
        key = self._child(tuple(label_values))
        self.values[key] += amount

    def lines(self):
        return ["%s%s %s" % (self.name, _labels(self.label_names, key), _format_value(value))
                for key, value in sorted(self.values.items())]


class Gauge(_Metric):
    """A gauge has no sample until it is first set: a time that never happened is not 0."""
    kind = "gauge"

    def set(self, value, *label_values):
        self.values[self._child(tuple(label_values))] = float(value)

    def add(self, amount, *label_values):
        key = self._child(tuple(label_values))
        self.values[key] += amount

    def replace_all(self, values):
        """values: {label values: value}; series not named disappear (the events of the last document)."""
        self.values = dict((tuple(k), float(v)) for k, v in values.items())

    lines = Counter.lines


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name, help_text, buckets, labels=(), preset=()):
        self.buckets = tuple(sorted(buckets)) + (math.inf,)
        super(Histogram, self).__init__(name, help_text, labels, preset)

    def _empty(self):
        return {"buckets": [0] * len(self.buckets), "sum": 0.0, "count": 0}

    def observe(self, value, *label_values):
        child = self.values[self._child(tuple(label_values))]
        value = max(0.0, float(value))
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                child["buckets"][index] += 1
        child["sum"] += value
        child["count"] += 1

    def lines(self):
        out = []
        for key, child in sorted(self.values.items()):
            for bound, count in zip(self.buckets, child["buckets"]):
                out.append("%s_bucket%s %d" % (self.name, _labels(self.label_names, key, [("le", _format_value(bound))]),
                                               count))
            out.append("%s_sum%s %s" % (self.name, _labels(self.label_names, key), _format_value(child["sum"])))
            out.append("%s_count%s %d" % (self.name, _labels(self.label_names, key), child["count"]))
        return out


class WatcherMetrics(object):
    """Every metric of the watcher, and the moments that change them. Thread-safe: the loop and
    the thread that runs handlers both report; render() is what the textfile and /metrics serve."""

    def __init__(self, version, start_time):
        self._lock = threading.Lock()
        every_run = [(phase, outcome) for phase in PHASES for outcome in HANDLER_OUTCOMES]
        self.build_info = Gauge("build_info", "Version of the watcher (the collection's galaxy.yml version).",
                                ["version"])
        self.start_time = Gauge("start_time_seconds", "Unix time the daemon started.")
        self.last_loop = Gauge("last_loop_timestamp_seconds", "Unix time of the last main-loop iteration; stale "
                               "means hung or dead.")
        self.polls = Counter("polls_total", "IMDS polls by outcome.", ["outcome"], [(o,) for o in POLL_OUTCOMES])
        self.poll_duration = Histogram("imds_request_duration_seconds", "Latency of each IMDS poll.", LATENCY_BUCKETS,
                                       preset=[()])
        self.last_success = Gauge("last_successful_poll_timestamp_seconds", "Unix time of the last successful poll.")
        self.incarnation = Gauge("document_incarnation", "DocumentIncarnation last read.")
        self.events = Gauge("events", "Events in the last document that name this VM.", ["event_type", "event_status"])
        self.events_seen = Counter("events_seen_total", "Distinct events first seen (any VM).", ["event_type"])
        self.auto_approved = Counter("events_auto_approved_total", "Events of this VM first seen Started with "
                                     "EventSource User: approved automatically by the Scheduled Events Policy, no "
                                     "drain was possible.", ["event_type"], [("Reboot",), ("Redeploy",)])
        self.handler_runs = Counter("handler_runs_total", "Handler runs by phase and outcome.", ["phase", "outcome"],
                                    every_run)
        self.handler_duration = Histogram("handler_duration_seconds", "Handler run time.", HANDLER_BUCKETS, ["phase"],
                                          [(p,) for p in PHASES])
        self.handlers_running = Gauge("handlers_running", "Handlers running now.")
        self.approvals = Counter("approvals_total", "Approvals POSTed to IMDS, by outcome.", ["outcome"],
                                 [("sent",), ("failed",)])
        self.to_drain = Histogram("event_to_drain_start_seconds", "Seconds from an event first seen to its drain "
                                  "start.", NOTICE_BUCKETS, preset=[()])
        self.to_approval = Histogram("event_to_approval_seconds", "Seconds from an event first seen to its approval "
                                     "sent.", NOTICE_BUCKETS, preset=[()])
        self.late_drains = Counter("drains_past_not_before_total", "Drains that ended after the event's NotBefore.",
                                   preset=[()])
        self.state_writes = Counter("state_writes_total", "State-file writes by outcome.", ["outcome"],
                                    [("ok",), ("failed",)])
        self.notifications = Counter("notifications_total", "Notifications of event transitions: sent (a receiver "
                                     "answered 2xx), failed (given up after max_attempts), dropped (pushed out of a "
                                     "full outbox).", ["outcome"], [("sent",), ("failed",), ("dropped",)])
        self.notify_attempt_failures = Counter("notify_attempt_failures_total", "Failed attempts to POST a "
                                               "notification (each retry counts).", preset=[()])
        self.notify_outbox = Gauge("notify_outbox", "Notifications not yet sent to every receiver.")
        self.all = [self.build_info, self.start_time, self.last_loop, self.polls, self.poll_duration,
                    self.last_success, self.incarnation, self.events, self.events_seen, self.auto_approved, self.handler_runs,
                    self.handler_duration, self.handlers_running, self.approvals, self.to_drain, self.to_approval,
                    self.late_drains, self.state_writes, self.notifications, self.notify_attempt_failures,
                    self.notify_outbox]
        self.build_info.set(1, version)
        self.start_time.set(start_time)
        self.handlers_running.set(0)
        self.notify_outbox.set(0)
        # EventId key -> wall-clock time this daemon first saw it (for the two notice histograms).
        self._first_seen = {}

    def loop(self, now):
        with self._lock:
            self.last_loop.set(now)

    def polled(self, outcome, duration, now):
        with self._lock:
            self.polls.inc(outcome)
            self.poll_duration.observe(duration)
            if outcome == "ok":
                self.last_success.set(now)

    def document(self, incarnation, events, mine, now):
        """events: the document's normalised events; mine(event) says whether one names this VM."""
        counts = {}
        with self._lock:
            if incarnation is not None:
                self.incarnation.set(incarnation)
            for event in events:
                key = ("%s" % event.get("event_id")).lower()
                if key not in self._first_seen:
                    self._first_seen[key] = now
                    self.events_seen.inc("%s" % event.get("event_type"))
                if mine(event):
                    series = ("%s" % event.get("event_type"), "%s" % event.get("event_status"))
                    counts[series] = counts.get(series, 0) + 1
            self.events.replace_all(counts)

    def event_auto_approved(self, event_type):
        with self._lock:
            self.auto_approved.inc("%s" % event_type)

    def drain_started(self, key, now):
        with self._lock:
            if key in self._first_seen:
                self.to_drain.observe(now - self._first_seen[key])

    def drain_finished(self, not_before_at, now):
        if not_before_at is not None and now > not_before_at:
            with self._lock:
                self.late_drains.inc()

    def approval(self, sent, keys, now):
        with self._lock:
            self.approvals.inc("sent" if sent else "failed")
            for key in keys if sent else ():
                if key in self._first_seen:
                    self.to_approval.observe(now - self._first_seen[key])

    def handler_started(self):
        with self._lock:
            self.handlers_running.add(1)

    def handler_ended(self):
        with self._lock:
            self.handlers_running.add(-1)

    def handler_result(self, phase, outcome, duration=None):
        with self._lock:
            self.handler_runs.inc(phase, HANDLER_OUTCOME_OF.get(outcome, "failed"))
            if duration is not None:
                self.handler_duration.observe(duration, phase)

    def state_written(self, outcome):
        with self._lock:
            self.state_writes.inc(outcome)

    def notification(self, outcome, amount=1):
        with self._lock:
            self.notifications.inc(outcome, amount=amount)

    def notify_attempt_failed(self):
        with self._lock:
            self.notify_attempt_failures.inc()

    def outbox(self, length):
        with self._lock:
            self.notify_outbox.set(length)

    def render(self):
        with self._lock:
            lines = []
            for metric in self.all:
                lines.extend(metric.header())
                lines.extend(metric.lines())
        return "\n".join(lines) + "\n"


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def write_textfile(metrics, path):
    """The metrics into path for node_exporter's textfile collector, atomically (it reads *.prom
    only, so the temporary file beside it is never collected). Readable by node_exporter's user."""
    replace_file(path, metrics.render().encode("utf-8"), 0o644)


# The /metrics port: one thread, whatever the number of connections (a thread per connection let
# 500 idle ones make 502 threads). It keeps at most MAX_CONNECTIONS open, closing the one quiet
# longest to take a new one, and closes a connection that has sent no whole request within
# CONNECTION_TIMEOUT seconds or a request head longer than REQUEST_HEAD_LIMIT bytes: idle or slow
# clients cost a file descriptor each for a while, never a thread, and never keep a scrape waiting.
MAX_CONNECTIONS = 32
CONNECTION_TIMEOUT = 10.0
REQUEST_HEAD_LIMIT = 8192


class _Connection(object):
    __slots__ = ("sock", "received", "answer", "last_active")

    def __init__(self, sock, now):
        self.sock = sock
        self.received = b""
        self.answer = None
        self.last_active = now


def _answer(metrics, head):
    """The whole HTTP answer (the connection closes after it) to a request head."""
    words = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
    if len(words) != 3 or not words[2].startswith(b"HTTP/"):
        return _response(400, b"bad request line\n")
    method, target = words[0], words[1].split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD"):
        return _response(405, b"only GET is served\n", ("Allow: GET, HEAD",))
    if target != b"/metrics":
        return _response(404, b"only /metrics is served\n")
    body = metrics.render().encode("utf-8")
    return _response(200, body, content_type=CONTENT_TYPE, head_only=method == b"HEAD")


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large"}


def _response(status, body, extra=(), content_type="text/plain; charset=utf-8", head_only=False):
    lines = ["HTTP/1.1 %d %s" % (status, _REASONS[status]), "Content-Type: " + content_type,
             "Content-Length: %d" % len(body), "Connection: close"] + list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (b"" if head_only else body)


class MetricsServer(object):
    """/metrics on 127.0.0.1:port, served by one thread through a selector: it reads requests and
    writes answers without ever blocking on a client. server_address holds the port (0 has the
    kernel choose one); shutdown() then server_close() as socketserver's."""

    def __init__(self, metrics, port, clock=time.monotonic):
        self._metrics = metrics
        self._clock = clock
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(("127.0.0.1", port))
            # A burst of connections waits in the kernel for the next accept, not in SYN retries.
            self._listener.listen(512)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.server_address = self._listener.getsockname()
        self._wake_read, self._wake_write = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        self._connections = collections.OrderedDict()      # socket -> _Connection, quiet longest first
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="metrics-http")
        self._thread.daemon = True

    def start(self):
        self._thread.start()
        return self

    def shutdown(self):
        self._stopping = True
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass
        self._thread.join(CONNECTION_TIMEOUT)

    def server_close(self):
        for connection in list(self._connections.values()):
            self._close(connection)
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()
        self._selector.close()

    def _serve(self):
        while not self._stopping:
            now = self._clock()
            wait = CONNECTION_TIMEOUT
            if self._connections:
                oldest = next(iter(self._connections.values()))
                wait = max(0.0, oldest.last_active + CONNECTION_TIMEOUT - now)
            for key, mask in self._selector.select(wait):
                if key.data == "accept":
                    self._accept()
                elif key.data != "wake":
                    self._serve_one(key.data, mask)
            deadline = self._clock() - CONNECTION_TIMEOUT
            for connection in [c for c in self._connections.values() if c.last_active <= deadline]:
                self._close(connection)

    def _accept(self):
        while True:
            try:
                sock, _address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:          # out of file descriptors, a connection reset before accept
                return
            if len(self._connections) >= MAX_CONNECTIONS:
                self._close(next(iter(self._connections.values())))
            sock.setblocking(False)
            connection = _Connection(sock, self._clock())
            self._connections[sock] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _serve_one(self, connection, mask):
        try:
            if connection.answer is None and mask & selectors.EVENT_READ:
                data = connection.sock.recv(4096)
                if not data:
                    self._close(connection)
                    return
                connection.received += data
                self._touch(connection)
                end = connection.received.find(b"\r\n\r\n")
                if end < 0:
                    end = connection.received.find(b"\n\n")
                if end < 0 and len(connection.received) <= REQUEST_HEAD_LIMIT:
                    return
                if end < 0 or end > REQUEST_HEAD_LIMIT:
                    connection.answer = _response(431, b"request head too long\n")
                else:
                    connection.answer = _answer(self._metrics, connection.received[:end])
                self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
            elif connection.answer is not None and mask & selectors.EVENT_WRITE:
                sent = connection.sock.send(connection.answer)
                connection.answer = connection.answer[sent:]
                self._touch(connection)
                if not connection.answer:
                    self._close(connection)
        except (BlockingIOError, InterruptedError):
            pass
        except Exception:  # pylint: disable=broad-except
            # A client that went away, or anything else: that connection ends, the port goes on.
            self._close(connection)

    def _touch(self, connection):
        connection.last_active = self._clock()
        self._connections.move_to_end(connection.sock)

    def _close(self, connection):
        if self._connections.pop(connection.sock, None) is None:
            return
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        connection.sock.close()


def serve(metrics, port):
    """Serve /metrics on 127.0.0.1:port from a daemon thread. Returns the server (its
    server_address holds the port, which 0 would have the kernel choose). Raises OSError."""
    return MetricsServer(metrics, port).start()
