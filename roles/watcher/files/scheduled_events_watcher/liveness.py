# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the watcher tells the world it is alive: its version, the status file that `status` reads,
the systemd notify socket (readiness and the watchdog), and the metrics it publishes.

Nothing here may stop the loop: a status file or textfile that cannot be written is logged (once
until it works again) and the loop goes on.
"""

import errno
import json
import math
import os
import re
import socket
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _event, _retry
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._transitions import AUTO_APPROVED

from . import metrics
from .files import replace_file

STATUS_FILE = "status.json"
VERSION_FILE = "VERSION"
UNKNOWN_VERSION = "unknown"
# `status` says degraded once polls have been failing for this long: by then a Preempt's 30 s
# notice is already lost. (Microsoft documents retrying a 410 for at most 70 s; this threshold is
# ours, not a documented normal.)
DEGRADED_AFTER_SECONDS = 60.0
# Margin on top of the longest legitimate silence of the loop (see stale_after) before `status`
# calls a live pid whose status file does not move "down".
STALE_MARGIN_SECONDS = 30.0
EXIT_HEALTHY, EXIT_DEGRADED, EXIT_DOWN = 0, 1, 3

# The directory that holds this package: on a VM the role's install directory, with VERSION in it.
_HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_GALAXY_VERSION_RE = re.compile(r"""^version:\s*["']?([^\s"'#]+)""", re.M)


def collection_version(here=_HERE):
    """The collection's version: the VERSION file the role installs beside the package, else the
    galaxy.yml (a checkout) or MANIFEST.json (an installed collection) above this file."""
    try:
        with open(os.path.join(here, VERSION_FILE)) as handle:
            text = handle.read().strip()
        if text and "\n" not in text:
            return text
    except (OSError, UnicodeDecodeError):
        pass
    directory = here
    while True:
        found = _version_in(directory)
        if found:
            return found
        parent = os.path.dirname(directory)
        if parent == directory:
            return UNKNOWN_VERSION
        directory = parent


def _version_in(directory):
    try:
        with open(os.path.join(directory, "MANIFEST.json")) as handle:
            version = json.load(handle)["collection_info"]["version"]
        if isinstance(version, str) and version:
            return version
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(directory, "galaxy.yml")) as handle:
            match = _GALAXY_VERSION_RE.search(handle.read())
        return match.group(1) if match else None
    except (OSError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------------------------
# systemd's notify socket
# --------------------------------------------------------------------------------------------

def notify_address(environ):
    """The address in $NOTIFY_SOCKET ('@' starts an abstract socket), or None outside systemd."""
    path = environ.get("NOTIFY_SOCKET") or ""
    if path.startswith("@"):
        return "\0" + path[1:]
    return path if path.startswith("/") else None


def watchdog_seconds(environ):
    """The watchdog period systemd asks for ($WATCHDOG_USEC, for this process), or None."""
    pid = environ.get("WATCHDOG_PID")
    if pid and pid != "%d" % os.getpid():
        return None
    try:
        usec = int(environ.get("WATCHDOG_USEC") or 0)
    except ValueError:
        return None
    return usec / 1e6 if usec > 0 else None


class Notifier(object):
    """sd_notify(3) in the standard library: one datagram per message. Without NOTIFY_SOCKET
    (process mode, a shell) nothing is sent."""

    def __init__(self, environ=None):
        self.address = notify_address(os.environ if environ is None else environ)
        self.last_error = None

    def __call__(self, message):
        if self.address is None:
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.connect(self.address)
            sock.sendall(message.encode("utf-8"))
        except OSError as exc:
            self.last_error = exc
            return False
        finally:
            sock.close()
        return True


# --------------------------------------------------------------------------------------------
# The status file and what `status` makes of it
# --------------------------------------------------------------------------------------------

def stale_after(config):
    """Seconds without a status write after which a live pid counts as hung: a poll interval or
    the longest backoff, the slowest request, an approval, and the margin."""
    return (max(config["poll_interval"], 10.0) + max(config["first_request_timeout"], config["request_timeout"])
            + config["request_timeout"] + STALE_MARGIN_SECONDS)


def read_status_file(state_dir):
    """The status the daemon last wrote, or None if there is none (or it cannot be read)."""
    try:
        with open(os.path.join(state_dir, STATUS_FILE)) as handle:
            status = json.load(handle)
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def pid_is_watcher(pid):
    # Never this process: a status command given a stale pid is a watcher by its command line too.
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            return False
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return b"scheduled_events_watcher" in handle.read()
    except OSError:
        return False


def health(status, config, now, pid_alive=pid_is_watcher):
    """(exit status, word, reason) for a status file as read_status_file returns it."""
    if status is None:
        return EXIT_DOWN, "down", "no status file in %s: the watcher is not running (or never ran with this " \
                                  "state_dir)" % config["state_dir"]
    if not pid_alive(status.get("pid")):
        return EXIT_DOWN, "down", "pid %s is not running" % (status.get("pid"),)
    updated = _number(status.get("updated_at"))
    if updated is None or now - updated > stale_after(config):
        return EXIT_DOWN, "down", "the status file was last written %s ago (more than %.0fs): the loop is stuck" % (
            _ago(now, updated), stale_after(config))
    failing_since = _number(status.get("failing_since"))
    if failing_since is not None and now - failing_since >= DEGRADED_AFTER_SECONDS:
        return EXIT_DEGRADED, "degraded", "polls failing for %s (%s in a row)" % (
            _ago(now, failing_since), status.get("failed_polls"))
    return EXIT_HEALTHY, "healthy", "polling"


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ago(now, then):
    if then is None:
        return "never"
    seconds = max(0, int(now - then))
    if seconds < 120:
        return "%ds" % seconds
    if seconds < 7200:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)


def _when(now, then):
    if then is None:
        return "never"
    return "%s (%s ago)" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(then)), _ago(now, then))


def describe_daemon(report, now):
    """The daemon lines of `status` (report: status_report's "daemon" entry)."""
    status = report["status_file"] or {}
    lines = ["daemon:    %s (%s)" % (report["health"], report["reason"])]
    if status:
        uptime = _ago(now, _number(status.get("started_at")))
        lines.append("  pid %s, version %s, up %s" % (status.get("pid"), status.get("version"), uptime))
        lines.append("  last successful poll: %s" % _when(now, _number(status.get("last_successful_poll"))))
        error = status.get("last_error") or {}
        if error:
            lines.append("  last error: %s: %s" % (_when(now, _number(error.get("time"))), error.get("text")))
    return lines


# --------------------------------------------------------------------------------------------
# What the loop reports: metrics, status file, notify socket
# --------------------------------------------------------------------------------------------

def poll_outcome(exc, failure):
    """The polls_total outcome of a failed request (failure: the client's last Failure or None)."""
    kind = failure.kind if failure is not None else None
    if kind == _retry.Failure.HTTP:
        return "throttled" if failure.status == 429 else "http_error"
    by_kind = {_retry.Failure.CONNECT: "connection_error", _retry.Failure.DROPPED: "connection_error",
               _retry.Failure.READ_TIMEOUT: "timeout", _retry.Failure.BAD_BODY: "bad_document",
               _retry.Failure.TOO_LARGE: "bad_document"}
    if kind in by_kind:
        return by_kind[kind]
    # No failure recorded: the client gave up before a request (its deadline), or the document
    # itself could not be read.
    if isinstance(exc, _edge.ImdsResponseError):
        return "bad_document"
    if isinstance(exc, _edge.ImdsTimeoutError):
        return "timeout"
    if isinstance(exc, _edge.ImdsUnavailableError):
        return "connection_error"
    return "http_error"


class Telemetry(object):
    """The loop's reports, in one place. metrics is a WatcherMetrics when the configuration asks
    for a textfile or a port, else None (and the loop pays nothing for it)."""

    def __init__(self, config, log, version, wall_clock=None, environ=None, notifier=None, write_status=True):
        self.config = config
        self.write_status = write_status
        self.log = log
        self.version = version
        self._wall_clock = wall_clock or time.time
        environ = os.environ if environ is None else environ
        self.notify = notifier or Notifier(environ)
        self.watchdog = watchdog_seconds(environ)
        self.ready = False
        self._waiting = False
        self.started_at = self._wall_clock()
        wanted = config["metrics_textfile"] or config["metrics_port"]
        self.metrics = metrics.WatcherMetrics(version, self.started_at) if wanted else None
        self.server = None
        self.status = {"pid": os.getpid(), "version": version, "started_at": self.started_at,
                       "last_successful_poll": None, "last_error": None, "failing_since": None, "failed_polls": 0,
                       "updated_at": self.started_at}
        self._broken = {}          # what cannot be written now -> logged already

    def start(self):
        """The metrics server (a port in use is logged, the daemon goes on) and a first status."""
        port = self.config["metrics_port"]
        if port and self.metrics is not None:
            try:
                self.server = metrics.serve(self.metrics, port)
                self.log("info", "metrics", "serving metrics on http://127.0.0.1:%d/metrics" % port, port=port)
            except OSError as exc:
                self.log("error", "metrics", "cannot serve metrics on 127.0.0.1:%d (%s); choose a free port in "
                         "metrics_port (watcher_metrics_port), or 0 to turn it off. The watcher goes on without it"
                         % (port, exc.strerror or exc), port=port)
        if self.watchdog is not None:
            # Between two pets the loop may wait for a poll and an approval, then write the state.
            slowest = 2 * self.config["request_timeout"] + 1
            if self.watchdog < slowest:
                self.log("warning", "watchdog", "the systemd watchdog (%gs) is shorter than two requests "
                         "(request_timeout %gs) and a second: a slow IMDS answer would restart the watcher; set "
                         "watcher_systemd_watchdog_sec to %d or more" % (self.watchdog, self.config["request_timeout"],
                                                                         math.ceil(slowest)))
        self.publish()

    def _record(self, name, *args):
        if self.metrics is not None:
            getattr(self.metrics, name)(*args)

    def loop(self):
        """One main-loop iteration: the only place the watchdog is petted."""
        if self.ready:
            self.notify("WATCHDOG=1")
        self._record("loop", self._wall_clock())

    def polled(self, outcome, duration, error_text=None):
        now = self._wall_clock()
        self._record("polled", outcome, duration, now)
        if outcome == "ok":
            self.status.update(last_successful_poll=now, failing_since=None, failed_polls=0)
        else:
            self.status["last_error"] = {"time": now, "text": error_text}
            self.status["failed_polls"] += 1
            if self.status["failing_since"] is None:
                self.status["failing_since"] = now
        if not self.ready or self._waiting:
            # After the first attempt, success or not: a VM without IMDS still starts (and says so).
            self.ready = True
            self._waiting = False
            self.notify("READY=1\nSTATUS=%s" % ("polling" if outcome == "ok" else "IMDS not answering"))

    def waiting(self, reason):
        """Started but not polling yet (the state directory cannot be used): ready for systemd all
        the same, so that its start timeout does not restart the watcher every few seconds, and
        the watchdog is petted while the watcher backs off."""
        if not self.ready:
            self.ready = True
            self._waiting = True
            self.notify("READY=1\nSTATUS=%s" % reason)

    def document(self, document, resource_name):
        self._record("document", document.incarnation, document.events,
                     lambda event: _event.affects(event, resource_name), self._wall_clock())

    def planned(self, actions):
        """What the planner decided about a document: its automatic approvals are counted."""
        for action in actions:
            if action.action == AUTO_APPROVED:
                self._record("event_auto_approved", action.fields.get("event_type"))

    def drain_started(self, key):
        self._record("drain_started", key, self._wall_clock())

    def drain_finished(self, not_before_at):
        self._record("drain_finished", not_before_at, self._wall_clock())

    def approval(self, sent, keys):
        self._record("approval", sent, keys, self._wall_clock())

    def handler_started(self):
        self._record("handler_started")

    def handler_ended(self):
        self._record("handler_ended")

    def handler_results(self, phase, results):
        for result in results:
            ran = result.outcome not in ("refused", "not_started")
            self._record("handler_result", phase, result.outcome, result.duration if ran else None)

    def handler_killed(self, phase):
        self._record("handler_result", phase, "killed", None)

    def state_written(self, outcome):
        self._record("state_written", outcome)

    def notify_sent(self):
        self._record("notification", "sent")

    def notify_given_up(self):
        self._record("notification", "failed")

    def notify_attempt_failed(self):
        self._record("notify_attempt_failed")

    def notify_outbox(self, length, dropped):
        """The outbox's length after a change; dropped: notifications it just pushed out."""
        if dropped:
            self._record("notification", "dropped", dropped)
        self._record("outbox", length)

    def stopping(self):
        self.notify("STOPPING=1")
        self.publish()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def publish(self):
        """The status file and the textfile, once per poll. A failure is logged, never raised."""
        self.status["updated_at"] = self._wall_clock()
        text = json.dumps(self.status, sort_keys=True, default=str) + "\n"
        if self.write_status:
            self._attempt("status file", os.path.join(self.config["state_dir"], STATUS_FILE),
                          lambda path: replace_file(path, text.encode("utf-8"), 0o644))
        textfile = self.config["metrics_textfile"]
        if self.metrics is not None and textfile:
            if self.config["metrics_textfile_if_directory_exists"] and not os.path.isdir(os.path.dirname(textfile)):
                self._textfile_directory_missing(textfile)
            else:
                if self._broken.pop("metrics textfile directory", None):
                    self.log("info", "metrics", "the metrics textfile's directory %s exists now: writing %s"
                             % (os.path.dirname(textfile), textfile))
                self._attempt("metrics textfile", textfile, lambda path: metrics.write_textfile(self.metrics, path))

    def _textfile_directory_missing(self, path):
        """No textfile while node_exporter's directory is not there: said once, at info, as no fault.
        It is looked for again at every poll (node_exporter may be installed later)."""
        if not self._broken.get("metrics textfile directory"):
            self._broken["metrics textfile directory"] = True
            self.log("info", "metrics", "no metrics textfile: its directory %s does not exist (no node_exporter "
                     "textfile collector here); the watcher writes %s once it does" % (os.path.dirname(path), path))

    def _attempt(self, what, path, write):
        try:
            write(path)
        except Exception as exc:  # pylint: disable=broad-except
            if not self._broken.get(what):
                self._broken[what] = True
                hint = ""
                if getattr(exc, "errno", None) == errno.EROFS:
                    hint = (" (the directory is read-only to the watcher: under its systemd unit's ProtectSystem=strict, a "
                            "directory made after the watcher started stays read-only until it restarts; restart the "
                            "watcher: systemctl restart azure-imds-watcher, or the unit watcher_service_name names)")
                elif not os.path.isdir(os.path.dirname(path)):
                    hint = " (its directory does not exist: create it%s)" % (
                        ", or install node_exporter's textfile collector" if what == "metrics textfile" else "")
                self.log("warning", "publish_failed", "cannot write the %s %s: %s%s; the watcher goes on and "
                         "tries again at every poll" % (what, path, getattr(exc, "strerror", None) or exc, hint))
            return
        if self._broken.pop(what, None):
            self.log("info", "publish_recovered", "the %s %s is written again" % (what, path))
