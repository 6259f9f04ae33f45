# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kill -9 soak of the watcher daemon (roles/watcher/files/scheduled_events_watcher/), loopback only.

The real daemon runs as a plain subprocess (`run --config`, no systemd: the path where a killed
watcher can leave its handlers behind) against the mock IMDS, with drain, started and recover
handlers (small /bin/sh scripts) that sleep, fail, hang past their limit or ignore SIGTERM as a
seeded plan says, and append one JSON line when they start and one when they end. Meanwhile:

  - --lifecycles events name this VM (Reboot, Redeploy, Freeze, Terminate, Preempt): approved
    after their drain, started by the platform at NotBefore, cancelled, started or ended early by
    the platform, or shown already Started; a few name only the other VM of the availability set;
  - the daemon is killed with SIGKILL --kills times at random moments, many of them while a drain
    handler runs, and a few times stopped with SIGTERM; each time it is started again;
  - its notify action POSTs every transition (scheduled, started, ended, cancelled) to a stand-in
    receiver on 127.0.0.1 (tests/unit/watcher/notify_receiver.py), which counts them. The soak
    reads the state file's outbox at each step of its loop: a notification seen there was
    recorded, and must reach the receiver (at least once: duplicates are counted and printed).

A sampler reads /proc every 0.1 s to see which handler processes are alive (handlers carry a
variable of this run in their environment). At the end every event is ended, the daemon gets a
last SIGTERM, and the handler log, the samples, the mock's audit (approvals, transitions), the
daemon's logs and the state file are checked. Each count printed must be 0.

    tests/harness/loopback-only .venv/bin/python bench/watcher_kill_soak.py              # about 4 min
    tests/harness/loopback-only .venv/bin/python bench/watcher_kill_soak.py --seconds 120
"""

import argparse
import calendar
import heapq
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The daemon's package by the collection's name: tests/harness/loopback-only (make bench) puts this
# checkout on PYTHONPATH, which the daemon inherits. --daemon DIR runs another copy instead.
DAEMON_PACKAGE = "ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher"

try:
    from ansible_collections.azure_imds.scheduled_events.devtools.notify_receiver import Receiver
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
        MockControlError, spawn_mock)
except ModuleNotFoundError as missing:
    sys.exit("watcher_kill_soak.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the import path)" % missing)


def daemon_command(directory):
    """The daemon's command line: this tree's package, or the one installed in directory."""
    return [sys.executable, "-m", "scheduled_events_watcher" if directory else DAEMON_PACKAGE]


VM = "vm0"
OTHER_VM = "vm1"
EVENT_TYPES = ("Reboot", "Redeploy", "Freeze", "Terminate", "Preempt")
HANDLER_TIMEOUT = 5.0
KILL_GRACE = 2.0
REQUEST_TIMEOUT = 3.0
# (phase, name, timeout or None for handler_timeout, event types or None for all). Two drain
# handlers, so that a kill can land between them.
HANDLERS = (
    ("drain", "10-lb", None, None),
    ("drain", "20-app", 4.0, ["Reboot", "Redeploy", "Terminate", "Preempt"]),
    ("started", "10-note", 3.0, None),
    ("recover", "10-lb", 4.0, None),
)
LONGEST_LIMIT = max([HANDLER_TIMEOUT] + [h[2] for h in HANDLERS if h[2] is not None])
SAMPLE_PERIOD = 0.1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Wall time of the kernel's boot clock zero: a process's start time in /proc is counted from it.
BOOT_EPOCH = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
# Slack for what this bench cannot see exactly: the sampling period, timer latency and process
# start on a busy 2-core machine. It only ever widens a bound, so a count it hides is below 1 s.
TIMING_MARGIN = 1.0
# A restarted daemon needs this long to start the interpreter, read its state and signal the
# leftovers of its predecessor; kill_grace later the leftovers must be gone.
STARTUP_MARGIN = 2.0
# The mock's audit times are cut to the millisecond, so an approval may read up to 1 ms early.
AUDIT_RESOLUTION = 0.001
# What a SIGTERM stop may take: the running handler's whole limit, its grace, an approval in
# flight, and the margin the daemon's stop timeout allows for writing its state (watcher_config).
STOP_BOUND = LONGEST_LIMIT + KILL_GRACE + REQUEST_TIMEOUT + 15.0
# What the drain-out leaves for the last stop, which usually waits for one handler.
LAST_STOP_ALLOWANCE = LONGEST_LIMIT + KILL_GRACE + REQUEST_TIMEOUT
MAX_ACTIVE_EVENTS = 4
# Seconds between two second watchers (`run --once` or `run` on the same state directory, issue 22)
# started while the daemon holds the directory: each must refuse (exit status 4) and do nothing.
RIVAL_EVERY = (4.0, 12.0)
RIVAL_REFUSED = 4

NOTIFY_TIMEOUT = 5.0
# What the drain-out waits, at most, for the last notifications after the last recover ran.
NOTIFY_SETTLE = 20.0

HANDLER_SCRIPT = r"""#!/bin/sh
# Soak handler {phase}/{name}: sleeps, exits and treats SIGTERM as the soak's plan for this event says.
name={name}
sleep_s=0; code=0; hold=0
plan="$SOAK_PLANS/$SE_EVENT_ID.$SE_PHASE.$name"
[ -r "$plan" ] && read -r sleep_s code hold < "$plan"
[ "$hold" = 1 ] && trap '' TERM
# The kernel's start time of this process (clock ticks since boot): the moment the watcher forked it.
read -r procstat < /proc/$$/stat
set -- ${{procstat##*") "}}
printf '{{"kind":"start","phase":"%s","handler":"%s","event_id":"%s","pid":%d,"ppid":%d,"gen":"%s","not_before":"%s","ticks":%s,"time":%s}}\n' \
  "$SE_PHASE" "$name" "$SE_EVENT_ID" "$$" "$PPID" "${{SOAK_GEN:-}}" "$SE_NOT_BEFORE" "${{20}}" "$(date +%s.%N)" >> "$SOAK_LOG"
sleep "$sleep_s"
printf '{{"kind":"end","phase":"%s","handler":"%s","event_id":"%s","pid":%d,"exit":%d,"time":%s}}\n' \
  "$SE_PHASE" "$name" "$SE_EVENT_ID" "$$" "$code" "$(date +%s.%N)" >> "$SOAK_LOG"
exit "$code"
"""


def iso_epoch(text):
    """Epoch seconds of the mock's ISO times (with milliseconds) and the handlers' ISO NotBefore."""
    base = text.rstrip("Z")
    fraction = 0.0
    if "." in base:
        base, millis = base.split(".")
        fraction = float("0." + millis)
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + fraction


def handler_applies(handler, event_type):
    return handler[3] is None or event_type in handler[3]


def handler_limit(phase, name):
    for handler in HANDLERS:
        if handler[0] == phase and handler[1] == name:
            return handler[2] or HANDLER_TIMEOUT
    return HANDLER_TIMEOUT


# --------------------------------------------------------------------------------------------
# Which handler processes are alive
# --------------------------------------------------------------------------------------------

class ProcessSampler(threading.Thread):
    """Scans /proc every SAMPLE_PERIOD for processes carrying SOAK_RUN=<token> (the handlers and
    their children) and keeps, per session (a handler and its children share the handler's
    session), when it was first and last seen alive. Zombies are dead and not counted."""

    def __init__(self, token):
        super(ProcessSampler, self).__init__(name="sampler")
        self.daemon = True
        self.marker = ("SOAK_RUN=%s" % token).encode()
        self.sessions = {}          # (sid, event_id, phase) -> {"first", "last", "pids"}
        self.lock = threading.Lock()
        self._stop_event = threading.Event()
        self._not_ours = set()      # (pid, start ticks)

    def stop(self):
        self._stop_event.set()
        self.join(5)

    def run(self):
        while not self._stop_event.is_set():
            self.scan()
            self._stop_event.wait(SAMPLE_PERIOD)

    def scan(self):
        """[(pid, sid, event_id, phase)] of the live processes of this run; records them."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            # Taken before the read: the process was alive at this moment or later, never earlier.
            seen_at = time.time()
            try:
                with open("/proc/%d/stat" % pid, "rb") as handle:
                    head, tail = handle.read().rsplit(b")", 1)
                fields = tail.split()
                comm = head.split(b"(", 1)[1].decode("utf-8", "replace")
            except (OSError, IndexError, ValueError):
                continue
            key = (pid, fields[19])
            if key in self._not_ours or fields[0] in (b"Z", b"X"):
                continue
            try:
                with open("/proc/%d/environ" % pid, "rb") as handle:
                    environ = handle.read()
            except FileNotFoundError:
                continue
            except OSError:
                self._not_ours.add(key)
                continue
            if self.marker not in environ.split(b"\0"):
                # An exec may still give it our variables: only a process past its exec is settled.
                if environ:
                    self._not_ours.add(key)
                continue
            values = dict(item.split(b"=", 1) for item in environ.split(b"\0") if b"=" in item)
            found.append((pid, int(fields[3]), values.get(b"SE_EVENT_ID", b"").decode(),
                          values.get(b"SE_PHASE", b"").decode(), seen_at, comm))
        with self.lock:
            for pid, sid, event_id, phase, seen_at, comm in found:
                entry = self.sessions.setdefault((sid, event_id, phase), {"first": seen_at, "last": seen_at,
                                                                          "pids": set(), "comms": set()})
                entry["last"] = max(entry["last"], seen_at)
                entry["pids"].add(pid)
                entry["comms"].add(comm)
        return [item[:4] for item in found]


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------

class Soak(object):

    def __init__(self, args, workdir, mock):
        self.args = args
        self.rng = random.Random(args.seed)
        self.workdir = workdir
        self.mock = mock
        self.token = "%016x" % self.rng.getrandbits(64)
        self.plans = os.path.join(workdir, "plans")
        self.handler_log = os.path.join(workdir, "handlers.jsonl")
        self.logs = os.path.join(workdir, "logs")
        self.state_dir = os.path.join(workdir, "state")
        self.config = os.path.join(workdir, "config.json")
        self.sampler = ProcessSampler(self.token)
        self.events = {}            # EventId -> what the soak asked for
        self.actions = []           # heap of (time, seq, kind, event_id)
        self.gens = []              # one dict per daemon started: gen, pid, start, end, how
        self.daemon = None
        self.handler_lines = []
        self._log_offset = 0
        self._action_seq = 0
        self.kills = 0
        self.kills_during_drain = 0
        self.drain_out_note = ""
        self.leftovers = set()
        self.stops = 0
        self.unasked_exits = []
        self.stop_overruns = []
        self.final_leftovers = []
        self.rivals = 0
        self.rival_failures = []
        self.next_rival = time.time() + self.rng.uniform(*RIVAL_EVERY)
        self.t0 = time.time()
        self.main_start = self.t0
        self.receiver = Receiver()
        # notification_id -> first time the soak saw it in the state file's outbox (recorded).
        self.recorded = {}

    # -- setup ------------------------------------------------------------------------------

    def write_setup(self):
        for path in (self.plans, self.logs):
            os.makedirs(path)
        handlers_dir = os.path.join(self.workdir, "handlers")
        for phase, name, _timeout, _types in HANDLERS:
            directory = os.path.join(handlers_dir, phase)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            path = os.path.join(directory, name)
            with open(path, "w") as handle:
                handle.write(HANDLER_SCRIPT.format(phase=phase, name=name))
            os.chmod(path, 0o755)
        configured = []
        for phase, name, timeout, types in HANDLERS:
            entry = {"name": name, "phase": phase}
            if timeout is not None:
                entry["timeout"] = timeout
            if types is not None:
                entry["event_types"] = types
            configured.append(entry)
        with open(self.config, "w") as handle:
            json.dump({
                "imds_url": self.mock.vm_url(VM), "resource_name": VM, "poll_interval": 1.0,
                "request_timeout": REQUEST_TIMEOUT, "first_request_timeout": 5.0,
                "state_dir": self.state_dir, "handlers_dir": handlers_dir,
                "handler_timeout": HANDLER_TIMEOUT, "kill_grace": KILL_GRACE, "handlers": configured,
                "handler_environment": {"SOAK_RUN": self.token, "SOAK_LOG": self.handler_log,
                                        "SOAK_PLANS": self.plans},
                # Every event of this VM gets after_drain, so every approval must follow a whole drain.
                "approval": {"freeze_max_duration": None},
                "log_format": "json",
                # The receiver is always up here: no notification may be given up.
                "notify": [{"url": self.receiver.url, "timeout": NOTIFY_TIMEOUT, "max_attempts": 1000}],
            }, handle)
        os.chmod(self.config, 0o600)

    # -- the daemon -------------------------------------------------------------------------

    def start_daemon(self):
        gen = len(self.gens)
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        env["SOAK_GEN"] = str(gen)
        if self.args.daemon:
            env["PYTHONPATH"] = os.path.abspath(self.args.daemon)
        with open(os.path.join(self.logs, "daemon-%03d.log" % gen), "wb") as log:
            # Its own session: a Ctrl-C at the terminal reaches the soak, which then ends everything.
            self.daemon = subprocess.Popen(daemon_command(self.args.daemon) + ["run", "--config", self.config],
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=env, start_new_session=True)
        self.gens.append({"gen": gen, "pid": self.daemon.pid, "start": time.time(), "up": None, "end": None,
                          "how": None})

    def _daemon_gone(self, how):
        self.gens[-1]["end"] = time.time()
        self.gens[-1]["how"] = how
        self.daemon = None

    def kill_daemon(self):
        self.read_handler_log()
        gen = len(self.gens) - 1
        if self.drain_running(gen):
            self.kills_during_drain += 1
        os.kill(self.daemon.pid, signal.SIGKILL)
        self.daemon.wait()
        self.kills += 1
        self._daemon_gone("kill")
        # Sessions of handlers the killed daemon leaves running.
        self.leftovers = set(item[1] for item in self.sampler.scan())

    def stop_daemon(self):
        """SIGTERM, then wait for the exit up to STOP_BOUND; past it, SIGKILL and count an overrun."""
        self.stops += 1
        sent = time.time()
        self.gens[-1]["term"] = sent
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(STOP_BOUND)
            how = "stop"
        except subprocess.TimeoutExpired:
            self.stop_overruns.append("daemon generation %d did not exit within %.0fs of SIGTERM"
                                      % (len(self.gens) - 1, STOP_BOUND))
            os.kill(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait()
            how = "stop overran"
        self._daemon_gone(how)
        self.leftovers = set()

    def _holds_lock(self):
        """True once the running daemon holds the state directory (its pid is in the lock file)."""
        try:
            with open(os.path.join(self.state_dir, "watcher.lock")) as handle:
                return handle.read().strip() == str(self.daemon.pid)
        except (OSError, ValueError):
            return False

    def run_rival(self):
        """A second watcher on the daemon's state directory. It must refuse at once, naming the
        daemon's pid; a handler it ran or an approval it sent would also show in the other counts
        (its handlers carry the daemon's generation)."""
        self.next_rival = time.time() + self.rng.uniform(*RIVAL_EVERY)
        command = ["run", "--once"] if self.rng.random() < 0.5 else ["run"]
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        env["SOAK_GEN"] = str(len(self.gens) - 1)
        if self.args.daemon:
            env["PYTHONPATH"] = os.path.abspath(self.args.daemon)
        pid = self.daemon.pid
        self.rivals += 1
        try:
            done = subprocess.run(daemon_command(self.args.daemon) + command + ["--config", self.config],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=env, timeout=60, check=False)
        except subprocess.TimeoutExpired:
            self.rival_failures.append("`%s` beside daemon pid %d still ran after 60s" % (" ".join(command), pid))
            return
        out = done.stdout.decode("utf-8", "replace")
        if done.returncode != RIVAL_REFUSED or "another watcher (pid %d)" % pid not in out:
            self.rival_failures.append("`%s` beside daemon pid %d: exit %s: %s"
                                       % (" ".join(command), pid, done.returncode, " ".join(out.split())[-300:]))

    def check_unasked_exit(self):
        if self.daemon is not None and self.daemon.poll() is not None:
            self.unasked_exits.append("daemon generation %d exited by itself with status %s"
                                      % (len(self.gens) - 1, self.daemon.returncode))
            self._daemon_gone("exited")

    # -- the handler log --------------------------------------------------------------------

    def read_handler_log(self):
        try:
            with open(self.handler_log, "rb") as handle:
                handle.seek(self._log_offset)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data[:data.rfind(b"\n") + 1]
        self._log_offset += len(complete)
        for line in complete.splitlines():
            self.handler_lines.append(json.loads(line.decode()))

    def drain_running(self, gen):
        """Is a drain handler of daemon generation gen running (started, not ended)?"""
        open_pids = set()
        for line in self.handler_lines:
            if line["kind"] == "start" and line["phase"] == "drain" and line["gen"] == str(gen):
                open_pids.add(line["pid"])
            elif line["kind"] == "end":
                open_pids.discard(line["pid"])
        return bool(open_pids)

    def drain_started(self, gen):
        return any(line["kind"] == "start" and line["phase"] == "drain" and line["gen"] == str(gen)
                   for line in self.handler_lines)

    # -- events -----------------------------------------------------------------------------

    def _event_id(self):
        value = "%032X" % self.rng.getrandbits(128)
        return "-".join((value[:8], value[8:12], value[12:16], value[16:20], value[20:]))

    def _plan(self, event_id, phase, name, sleep_range, fail, hang=0.0, hold=0.0):
        sleep_s = self.rng.uniform(*sleep_range)
        if self.rng.random() < hang:
            sleep_s = 15.0          # past every limit: a timeout, TERM then KILL
        code = 1 if self.rng.random() < fail else 0
        with open(os.path.join(self.plans, "%s.%s.%s" % (event_id, phase, name)), "w") as handle:
            handle.write("%.3f %d %d\n" % (sleep_s, code, 1 if self.rng.random() < hold else 0))

    def _schedule(self, delay, kind, event_id):
        self._action_seq += 1
        heapq.heappush(self.actions, (time.time() + delay, self._action_seq, kind, event_id))

    def create_event(self, mine=True):
        rng = self.rng
        event_id = self._event_id()
        event_type = rng.choice(EVENT_TYPES)
        spec = {"event_id": event_id, "event_type": event_type, "duration": round(rng.uniform(2, 8), 1)}
        if not mine:
            spec.update(resources=[OTHER_VM], notice=round(rng.uniform(5, 15), 1))
            fate = "other VM"
        else:
            spec["resources"] = [VM] if rng.random() < 0.5 else [VM, OTHER_VM]
            # Plans are on disk before the event can be seen.
            self._plan(event_id, "drain", "10-lb", (0, 2), fail=0.12, hang=0.08, hold=0.15)
            self._plan(event_id, "drain", "20-app", (0, 1), fail=0.08, hang=0.05, hold=0.15)
            self._plan(event_id, "started", "10-note", (0, 1), fail=0.1, hold=0.1)
            self._plan(event_id, "recover", "10-lb", (0, 1.5), fail=0.05, hold=0.1)
            roll = rng.random()
            spec["notice"] = round(rng.uniform(8, 25), 1)
            if roll < 0.55:
                fate = "normal"
            elif roll < 0.70:
                fate = "cancelled"
                spec["cancel_at"] = round(rng.uniform(1, spec["notice"] - 1), 1)
            elif roll < 0.82:
                fate = "short notice"
                spec["notice"] = round(rng.uniform(2, 6), 1)
            elif roll < 0.88:
                fate = "appears Started"
                spec["status"] = "Started"
            elif roll < 0.94:
                fate = "started early"
                self._schedule(rng.uniform(1, spec["notice"] - 1), "start", event_id)
            else:
                fate = "vanishes early"
                self._schedule(rng.uniform(1, spec["notice"] - 1), "complete", event_id)
        if event_type == "Freeze":
            spec["duration_in_seconds"] = rng.choice([-1, 5, 30])
        self.mock.control("POST", "events", spec)
        self.events[event_id] = {"mine": mine, "type": event_type, "fate": fate, "created": time.time(),
                                 "spec": spec}

    def run_due_actions(self):
        while self.actions and self.actions[0][0] <= time.time():
            _at, _seq, kind, event_id = heapq.heappop(self.actions)
            try:
                self.mock.control("POST", "events/%s/%s" % (event_id, kind))
            except MockControlError:
                pass                # already started, cancelled or gone: the platform got there first

    def active_mine(self):
        views = self.mock.control("GET", "events")
        if isinstance(views, dict):
            views = views.get("events", [])
        return [v for v in views if v["event_id"] in self.events and self.events[v["event_id"]]["mine"]
                and v["status"] in ("pending", "Scheduled", "Started")]

    # -- the schedule -----------------------------------------------------------------------

    def main_phase(self, main_end):
        """Events and kills until main_end, paced to reach --lifecycles and --kills."""
        args = self.args
        rng = self.rng
        mine_created = 0
        next_event = time.time() + 1.0
        self.start_daemon()
        plan, down_until = self._plan_kill(main_end), None
        next_progress = time.time() + 30
        active_checked = 0.0
        active = 0
        self.main_start = time.time()
        while time.time() < main_end:
            now = time.time()
            self.run_due_actions()
            if now - active_checked >= 1.0:
                active = len(self.active_mine())
                active_checked = now
            creation_end = main_end - 8.0
            if mine_created < args.lifecycles and now >= next_event and active < MAX_ACTIVE_EVENTS \
                    and now < creation_end:
                self.create_event()
                mine_created += 1
                active += 1
                if rng.random() < 0.2:
                    self.create_event(mine=False)
                left = args.lifecycles - mine_created
                spacing = (creation_end - 10.0 - now) / max(1, left) if left else 0
                # Ahead of the even pace on average: the cap on active events may hold some back.
                next_event = now + rng.uniform(0.3, 1.2) * spacing
            self.check_unasked_exit()
            self.sample_outbox()
            if self.daemon is None and down_until is None:
                down_until = now + self._plan_downtime()
            if self.daemon is None:
                if now >= down_until:
                    self.start_daemon()
                    plan, down_until = self._plan_kill(main_end), None
            elif self._kill_due(plan, now):
                if not self._behind(main_end) and rng.random() < 0.07 and self.stops < max(3, args.kills // 12):
                    self.stop_daemon()
                else:
                    self.kill_daemon()
            elif now >= self.next_rival and self._holds_lock():
                self.run_rival()
            if now >= next_progress:
                next_progress = now + 30
                self.read_handler_log()
                print("  %4.0fs: %d events of this VM created, %d kills (%d during a drain), %d SIGTERM stops, "
                      "%d handler runs" % (now - self.t0, mine_created, self.kills, self.kills_during_drain,
                                           self.stops, sum(1 for h in self.handler_lines if h["kind"] == "start")),
                      flush=True)
            time.sleep(0.05)
        return mine_created

    def _up(self):
        """When the running daemon was seen to be up (its first log line), or None."""
        gen = self.gens[-1]
        if gen["up"] is None and os.path.getsize(os.path.join(self.logs, "daemon-%03d.log" % gen["gen"])) > 0:
            gen["up"] = time.time()
        return gen["up"]

    def _plan_kill(self, main_end):
        """When to end the daemon just started, paced so that the kills asked for fit before
        main_end: ["startup", at] kills it while it starts; ["up", seconds] that long after its
        first log line; ["drain", give_up] while a drain handler runs, ["calm", give_up] shortly
        after a drain ended, or give_up seconds after its first log line if none starts. With
        "wait" appended, not before the handlers the previous daemon left are gone or must be gone."""
        rng = self.rng
        left = self.args.kills - self.kills
        now = time.time()
        if left <= 0:
            return ["startup", main_end + 3600]
        ups = [g["up"] - g["start"] for g in self.gens[-20:] if g["up"] is not None]
        startup = sum(ups) / len(ups) if ups else 1.0
        # Spread what is left over the kills left, a little ahead of the even pace; the mean
        # downtime is about 0.4 s.
        budget = (main_end - 5.0 - now) / (1.1 * left) - 0.4 - startup
        if self._behind(main_end):
            # Slow restarts (a busy machine) or long waits put the run behind: catch up with kills
            # while the daemon starts, the cheapest there are.
            return ["startup", now + rng.uniform(0.05, 0.6) * startup]
        if self.leftovers and rng.random() < 0.6:
            # Otherwise the new daemon may always be killed before it could end the leftovers,
            # and the check of their end would have nothing to go by.
            plan = self._plan_after_up(rng, max(0.3, budget))
            return plan + ["wait"]
        if rng.random() < (0.15 if budget >= 0.3 else 0.7):
            return ["startup", now + rng.uniform(0.05, 1.2) * startup]
        return self._plan_after_up(rng, max(0.3, budget))

    def _behind(self, main_end):
        """More than one kill behind the even pace that ends the kills 10 s before main_end."""
        span = max(1.0, main_end - 10.0 - self.main_start)
        due = self.args.kills * min(1.0, (time.time() - self.main_start) / span)
        return self.kills < due - 1

    @staticmethod
    def _plan_after_up(rng, budget):
        roll = rng.random()
        if roll < 0.12:
            # Let a drain run to its end (and its approval go out), then kill.
            return ["calm", 10.0]
        if roll < 0.40:
            return ["drain", min(2.5 * budget, 6.0)]
        if roll < 0.88:
            return ["up", rng.uniform(0.1, 1.2) * budget]
        return ["up", rng.uniform(1.5, 2.5) * budget]

    def _kill_due(self, plan, now):
        kind, value = plan[:2]
        if kind == "startup":
            return now >= value
        up = self._up()
        if up is None:
            return now - self.gens[-1]["start"] > 10.0     # never came up: kill it anyway
        if plan[-1] == "wait":
            gen = self.gens[-1]
            must_be_gone = max(gen["start"] + KILL_GRACE + STARTUP_MARGIN, up + KILL_GRACE) + TIMING_MARGIN + 0.2
            alive = set(item[1] for item in self.sampler.scan())
            if now < must_be_gone and alive & self.leftovers:
                return False
            plan.pop()
        if kind == "drain":
            # Kill during a drain: wait for this daemon to start one, then kill shortly after.
            self.read_handler_log()
            if self.drain_started(len(self.gens) - 1):
                plan[:] = ["up", now - up + self.rng.uniform(0.05, 1.0)]
                return False
        if kind == "calm":
            self.read_handler_log()
            gen = len(self.gens) - 1
            if self.drain_started(gen) and not self.drain_running(gen):
                plan[:] = ["up", now - up + self.rng.uniform(0.2, 1.5)]
                return False
        return now >= up + value

    def _plan_downtime(self):
        return self.rng.uniform(1.5, 4.0) if self.rng.random() < 0.05 else self.rng.uniform(0.0, 0.5)

    def drain_out(self, deadline):
        """No more kills: end every event, wait until every owed recover has run, then SIGTERM."""
        if self.daemon is None:
            self.start_daemon()
        for view in self.active_mine() + [v for v in self.mock.control("GET", "events")
                                          if not self.events.get(v["event_id"], {"mine": True})["mine"]
                                          and v["status"] in ("pending", "Scheduled", "Started")]:
            kind = "cancel" if view["status"] in ("pending", "Scheduled") else "complete"
            try:
                self.mock.control("POST", "events/%s/%s" % (view["event_id"], kind))
                self.events[view["event_id"]]["swept"] = True
            except MockControlError:
                pass
        quiet_from = self.gens[-1]["start"] + KILL_GRACE + STARTUP_MARGIN + TIMING_MARGIN
        started = time.time()
        while time.time() < deadline:
            self.check_unasked_exit()
            if self.daemon is None:
                self.start_daemon()
                quiet_from = self.gens[-1]["start"] + KILL_GRACE + STARTUP_MARGIN + TIMING_MARGIN
            self.read_handler_log()
            outbox = self.sample_outbox()
            if time.time() >= quiet_from and not self.owed_recovers_pending() and not self.sampler.scan() \
                    and (outbox == [] or time.time() > deadline - NOTIFY_SETTLE):
                self.drain_out_note = "every owed recover ran %.1fs after the last event was ended%s" % (
                    time.time() - started, "" if outbox == [] else "; %d notifications still unsent" % len(outbox or ()))
                break
            time.sleep(0.25)
        else:
            self.drain_out_note = ("its deadline came first: recovers still owed were not waited for (a lost recover "
                                   "below may be one that was queued; see the last daemon log)")
        self.stop_daemon()
        time.sleep(2 * SAMPLE_PERIOD)
        self.final_leftovers = self.sampler.scan()

    def sample_outbox(self):
        """The outbox in the state file now (None if it cannot be read); notes what it records."""
        try:
            with open(os.path.join(self.state_dir, "state.json")) as handle:
                outbox = json.load(handle).get("notify", {}).get("outbox")
        except (OSError, ValueError, AttributeError):
            return None
        now = time.time()
        for entry in outbox or ():
            self.recorded.setdefault(entry["body"]["notification_id"], now)
        return outbox

    def owed_recovers_pending(self):
        started = {}
        recovered = set()
        for line in self.handler_lines:
            if line["kind"] != "start":
                continue
            if line["phase"] == "recover":
                recovered.add(line["event_id"])
            else:
                started[line["event_id"]] = line["time"]
        return any(eid not in recovered for eid in started)


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------

def build_instances(soak):
    """One entry per handler run: phase, handler, event, gen, start, end (known alive until),
    ended (an end line was written), exit."""
    runs = {}
    for line in soak.handler_lines:
        key = (line["pid"], line["event_id"], line["phase"], line["handler"])
        if line["kind"] == "start":
            runs[key] = {"phase": line["phase"], "handler": line["handler"], "event_id": line["event_id"],
                         "pid": line["pid"], "gen": int(line["gen"]) if line["gen"] else None,
                         "not_before": line["not_before"], "start": float(line["time"]), "end": None,
                         # Cut to a clock tick, so never later than the real fork.
                         "forked": BOOT_EPOCH + line["ticks"] / float(CLOCK_TICKS),
                         "exit": None, "seen_last": None}
        elif key in runs:
            runs[key]["end"] = float(line["time"])
            runs[key]["exit"] = line["exit"]
    with soak.sampler.lock:
        sessions = dict(soak.sampler.sessions)
    matched = set()
    for run in runs.values():
        session = (run["pid"], run["event_id"], run["phase"])
        if session in sessions:
            run["seen_last"] = sessions[session]["last"]
            matched.add(session)
        if run["gen"] is None:
            run["gen"] = gen_at(soak.gens, run["start"])
    instances = list(runs.values())
    # Processes seen alive whose handler never wrote its start line (killed before it could). A
    # session only ever seen as the watcher's Python start gate never ran a handler: its gate was
    # never opened, so it cannot overlap anything, but it must still not outlive its watcher.
    for session, seen in sessions.items():
        if session not in matched:
            gate_only = all(comm.startswith("python") for comm in seen["comms"])
            instances.append({"phase": session[2], "handler": "(gate)" if gate_only else "?",
                              "event_id": session[1], "pid": session[0], "gen": gen_at(soak.gens, seen["first"]),
                              "not_before": "", "start": seen["first"], "forked": seen["first"], "end": None,
                              "exit": None, "seen_last": seen["last"]})
    for run in instances:
        run["alive_until"] = max(x for x in (run["start"], run["end"], run["seen_last"]) if x is not None)
    instances.sort(key=lambda r: r["start"])
    return instances


def gen_at(gens, moment):
    """The daemon generation alive at moment (or the last one started before it)."""
    found = None
    for gen in gens:
        if gen["start"] <= moment:
            found = gen["gen"]
    return found


def restart_bound(gens, gen):
    """When leftovers of daemon generation gen must be gone: kill_grace after the first later
    daemon was up (its first log line), and at least STARTUP_MARGIN + kill_grace after it was
    started, provided it was still running then. None if no later daemon was."""
    for later in gens[gen + 1:]:
        if later["up"] is None:
            continue
        bound = max(later["start"] + KILL_GRACE + STARTUP_MARGIN, later["up"] + KILL_GRACE)
        if later["end"] is None or later["end"] >= bound:
            return bound
    return None


def own_bound(run):
    """A handler's limit ends here, plus its grace: its timeout, for a drain cut to NotBefore."""
    limit = handler_limit(run["phase"], run["handler"])
    if run["phase"] == "drain" and run["not_before"]:
        limit = min(limit, iso_epoch(run["not_before"]) - KILL_GRACE - run["start"])
    return run["start"] + max(0.0, limit) + KILL_GRACE + TIMING_MARGIN


def daemon_log_actions(soak):
    """(event ids per action of interest, tracebacks) from the daemons' JSON logs. Also sets each
    generation's "up" to the time of its first log line."""
    actions = {"drain_interrupted": set(), "started_interrupted": set()}
    tracebacks = []
    for gen in soak.gens:
        path = os.path.join(soak.logs, "daemon-%03d.log" % gen["gen"])
        with open(path, "rb") as handle:
            for raw in handle.read().decode("utf-8", "replace").splitlines():
                if raw.startswith("Traceback"):
                    tracebacks.append("daemon generation %d: %s" % (gen["gen"], path))
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(line, dict):
                    continue
                if isinstance(line.get("time"), str) and (gen["up"] is None or gen.get("up_logged") is None):
                    gen["up"] = gen["up_logged"] = iso_epoch(line["time"])
                if line.get("action") in actions and line.get("event_id"):
                    actions[line["action"]].add(line["event_id"].upper())
    return actions, tracebacks


def check(soak):
    """{count name: [examples]}: every list must be empty."""
    found = {name: [] for name in COUNTS}
    instances = build_instances(soak)
    audit = soak.mock.control("GET", "audit?vm=%s" % VM)
    ended_at, approvals = {}, {}
    for item in audit["transitions"]:
        if item["to"] in ("removed", "cancelled"):
            ended_at.setdefault(item["event_id"].upper(), iso_epoch(item["time"]))
    for item in audit["approvals"]:
        for event_id in item["event_ids"]:
            approvals.setdefault(event_id.upper(), []).append(iso_epoch(item["time"]))
    logged, tracebacks = daemon_log_actions(soak)
    by_event = {}
    for run in instances:
        by_event.setdefault(run["event_id"].upper(), []).append(run)

    for event_id, event in soak.events.items():
        runs = by_event.get(event_id, [])
        if not event["mine"]:
            for run in runs:
                found["actions on another VM's event"].append("handler %s/%s ran for %s, an event of %s only"
                                                              % (run["phase"], run["handler"], event_id, OTHER_VM))
            for moment in approvals.get(event_id, []):
                found["actions on another VM's event"].append("%s approved at %.3f, an event of %s only"
                                                              % (event_id, moment, OTHER_VM))
            continue
        drains = [r for r in runs if r["phase"] == "drain"]
        names = [r["handler"] for r in drains]
        drain_gens = set(r["gen"] for r in drains)
        if len(names) != len(set(names)) or len(drain_gens) > 1:
            found["drains run twice for one event"].append(
                "%s: drain handlers %s by daemon generations %s" % (event_id, names, sorted(drain_gens)))
        started = [r for r in runs if r["phase"] == "started"]
        started_names = [r["handler"] for r in started]
        if len(started_names) != len(set(started_names)) or len(set(r["gen"] for r in started)) > 1:
            found["started phases run twice"].append(
                "%s: started handlers %s by daemon generations %s"
                % (event_id, started_names, sorted(set(r["gen"] for r in started))))
        recovers = [r for r in runs if r["phase"] == "recover"]
        end = ended_at.get(event_id)
        owed = drains or started or event_id in logged["drain_interrupted"] or event_id in logged["started_interrupted"]
        if owed and end is not None and not any(r["start"] > end for r in recovers):
            found["lost recovers"].append("%s (%s, %s) ended at %.3f; drain/started ran, no recover after it"
                                          % (event_id, event["type"], event["fate"], end))
        for run in recovers:
            if end is None or run["start"] < end:
                found["recovers before the event ended"].append(
                    "%s: recover started at %.3f, event ended at %s" % (event_id, run["start"], end))
        applicable = set(h[1] for h in HANDLERS if h[0] == "drain" and handler_applies(h, event["type"]))
        completed_ok = set(r["handler"] for r in drains if r["end"] is not None and r["exit"] == 0)
        drain_whole = (completed_ok == applicable and all(r["end"] is not None and r["exit"] == 0 for r in drains)
                       and event_id not in logged["drain_interrupted"] and len(drain_gens) <= 1)
        for moment in approvals.get(event_id, []):
            if not drain_whole:
                found["approvals after a failed or interrupted drain"].append(
                    "%s approved at %.3f; drain: %s%s" % (event_id, moment, describe_runs(drains),
                                                          ", drain_interrupted logged"
                                                          if event_id in logged["drain_interrupted"] else ""))
            last = max([r["alive_until"] for r in drains] or [None], key=lambda x: x or 0)
            if not drains or moment + AUDIT_RESOLUTION < last:
                found["approvals before a drain finished"].append(
                    "%s approved at %.3f; drain handlers alive until %s" % (event_id, moment, last))
    for key in list(found):
        found[key] = dedupe(found[key])

    for run in instances:
        gen = soak.gens[run["gen"]] if run["gen"] is not None else None
        bound = own_bound(run)
        label = "%s/%s of %s (pid %d, daemon generation %s, started %.3f, alive until %.3f)" % (
            run["phase"], run["handler"], run["event_id"], run["pid"], run["gen"], run["start"], run["alive_until"])
        orphan = gen is not None and gen["end"] is not None and run["alive_until"] > gen["end"]
        if orphan:
            after_restart = restart_bound(soak.gens, gen["gen"])
            if after_restart is not None and run["alive_until"] > after_restart + TIMING_MARGIN:
                found["handlers alive after a restart beyond their limit"].append(
                    "%s: left by generation %d (%s at %.3f), alive %.1fs after the restart's bound"
                    % (label, gen["gen"], gen["how"], gen["end"], run["alive_until"] - after_restart))
                continue
            if after_restart is not None:
                bound = max(bound, after_restart + TIMING_MARGIN)
        if run["alive_until"] > bound:
            found["handlers alive after a restart beyond their limit"].append(
                "%s: over its time limit + kill_grace by %.1fs" % (label, run["alive_until"] - bound))
        term = gen.get("term") if gen else None
        if term is not None and run["forked"] > term:
            found["handlers started after SIGTERM"].append("%s: SIGTERM at %.3f" % (label, term))
    ran = [run for run in instances if run["handler"] != "(gate)"]
    for index, first in enumerate(ran):
        for second in ran[index + 1:]:
            if second["start"] >= first["alive_until"]:
                continue
            found["overlapping handlers"].append(
                "%s/%s of %s (gen %s, %.3f-%.3f) and %s/%s of %s (gen %s, from %.3f)"
                % (first["phase"], first["handler"], first["event_id"], first["gen"], first["start"],
                   first["alive_until"], second["phase"], second["handler"], second["event_id"], second["gen"],
                   second["start"]))
    found["SIGTERM stops that overran"] = list(soak.stop_overruns)
    found["daemon exits nobody asked for"] = list(soak.unasked_exits) + tracebacks
    found["handlers alive after the final stop"] = ["pid %d (session %d) of %s, phase %s" % item
                                                    for item in soak.final_leftovers]
    found["state left running after the final stop"] = state_leftovers(soak.state_dir)
    found["notifications lost"] = notifications_lost(soak, by_event, ended_at)
    found["second watchers that did not refuse"] = list(soak.rival_failures)
    return found, instances, ended_at, approvals


# What a notification implies the same watcher memory recorded before it (the tracker and the
# outbox are written together, so those are on disk too): they must have arrived as well.
IMPLIED = {"started": lambda body: ["scheduled"] if body["seen_scheduled"] else [],
           "ended": lambda body: ["started"] + (["scheduled"] if body["seen_scheduled"] else []),
           "cancelled": lambda body: ["scheduled"]}


def notifications_lost(soak, runs_by_event, ended_at):
    """Notifications the watcher recorded that never reached the receiver: seen in the state
    file's outbox; implied by one that arrived; the first one of an event a handler ran for (its
    state write, notify section included, came before the handler started); the end of an event
    the receiver heard of and the mock ended."""
    received = {}
    for body in soak.receiver.bodies():
        received.setdefault(body["scheduled_event"]["event_id"].upper(), {})[body["type"]] = body
    got = set(body["notification_id"] for body in soak.receiver.bodies())
    lost = ["%s: in the outbox at %.3f, never received" % (nid, moment)
            for nid, moment in sorted(soak.recorded.items(), key=lambda item: item[1]) if nid not in got]
    for event_id, kinds in sorted(received.items()):
        for kind, body in sorted(kinds.items()):
            for needed in IMPLIED.get(kind, lambda _b: [])(body):
                if needed not in kinds:
                    lost.append("%s: %s received, %s (recorded before it) never" % (event_id, kind, needed))
        if event_id in ended_at and not set(kinds) & {"ended", "cancelled"}:
            lost.append("%s: ended at %.3f, received %s but no end" % (event_id, ended_at[event_id], sorted(kinds)))
    for event_id, runs in sorted(runs_by_event.items()):
        if runs and event_id not in received:
            lost.append("%s: handlers ran for it (%s), no notification received" % (event_id, describe_runs(runs)))
    return dedupe(lost)


def notify_figures(soak):
    bodies = soak.receiver.bodies()
    counts, kinds = {}, {}
    for body in bodies:
        counts[body["notification_id"]] = counts.get(body["notification_id"], 0) + 1
        kinds[body["type"]] = kinds.get(body["type"], 0) + 1
    duplicated = dict((nid, n) for nid, n in counts.items() if n > 1)
    heard = set(body["scheduled_event"]["event_id"].upper() for body in bodies)
    return {"received": len(bodies), "distinct": len(counts), "kinds": kinds,
            "duplicates": sum(n - 1 for n in duplicated.values()), "duplicated": len(duplicated),
            "recorded_seen": len(soak.recorded), "events_heard": len(heard),
            "events_unheard": sorted("%s (%s, %s)" % (eid, soak.events[eid]["type"], soak.events[eid]["fate"])
                                     for eid in soak.events if eid not in heard)}


def describe_runs(runs):
    if not runs:
        return "no drain handler ran"
    return ", ".join("%s %s" % (r["handler"], "exit %s" % r["exit"] if r["end"] is not None else "cut short")
                     for r in runs)


def dedupe(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def state_leftovers(state_dir):
    """Phases still `running` and handlers still recorded as running in the state file."""
    try:
        with open(os.path.join(state_dir, "state.json")) as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return ["no state file in %s" % state_dir]
    out = []
    for key, record in sorted((document.get("records") or {}).items()):
        for phase in ("drain", "started", "recover"):
            if isinstance(record, dict) and record.get(phase) == "running":
                out.append("record %s: %s still running" % (key, phase))
    for entry in document.get("running_handlers") or []:
        out.append("running_handlers still lists %s" % (entry,))
    return out


COUNTS = (
    "drains run twice for one event",
    "lost recovers",
    "approvals after a failed or interrupted drain",
    "approvals before a drain finished",
    "handlers alive after a restart beyond their limit",
    "overlapping handlers",
    "started phases run twice",
    "recovers before the event ended",
    "actions on another VM's event",
    "handlers started after SIGTERM",
    "SIGTERM stops that overran",
    "daemon exits nobody asked for",
    "handlers alive after the final stop",
    "state left running after the final stop",
    "notifications lost",
    "second watchers that did not refuse",
)
REQUIRED = COUNTS[:6] + ("notifications lost", "second watchers that did not refuse")


def lifecycle_summary(soak, ended_at, approvals):
    mine = [eid for eid, e in soak.events.items() if e["mine"]]
    done = [eid for eid in mine if eid in ended_at]
    fates = {}
    for eid in done:
        event = soak.events[eid]
        fate = "ended by the final sweep" if event.get("swept") else event["fate"]
        fates[fate] = fates.get(fate, 0) + 1
    approved = sum(1 for eid in done if eid in approvals)
    return len(mine), len(done), approved, fates


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

def end_everything(soak, mock):
    """Whatever happened: the daemon, every handler process of this run, the mock."""
    if soak is not None:
        soak.sampler.stop()
        if soak.daemon is not None and soak.daemon.poll() is None:
            os.kill(soak.daemon.pid, signal.SIGKILL)
            soak.daemon.wait()
        for _attempt in range(50):
            left = soak.sampler.scan()
            if not left:
                break
            for pid, _sid, _eid, _phase in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
    if soak is not None:
        soak.receiver.stop()
    if mock is not None:
        mock.stop()


def interrupted(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0,
                        help="wall time of the whole run, the final drain-out included (default 240)")
    parser.add_argument("--lifecycles", type=int, default=None,
                        help="events naming this VM (default 34 for 240 s, in proportion to --seconds)")
    parser.add_argument("--kills", type=int, default=None,
                        help="kill -9 of the daemon (default 102 for 240 s, in proportion to --seconds)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    parser.add_argument("--daemon", default=None, metavar="DIR",
                        help="run the daemon from DIR, laid out as the watcher role installs it (the package "
                        "scheduled_events_watcher/ and ansible_collections/.../plugins/module_utils/), e.g. an "
                        "older release's; default: this tree's")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (kept anyway on violations)")
    args = parser.parse_args(argv)
    if not os.environ.get("AZURE_IMDS_TEST_ISOLATION"):
        print("watcher_kill_soak: error: run it inside the loopback-only namespace: "
              "tests/harness/loopback-only %s %s" % (sys.executable, " ".join(sys.argv)), file=sys.stderr)
        return 2
    if args.lifecycles is None:
        args.lifecycles = int(round(34 * args.seconds / 240.0))
    if args.kills is None:
        args.kills = int(round(102 * args.seconds / 240.0))
    if not 60 <= args.seconds <= 3600 or args.lifecycles < 1 or args.kills < 1:
        print("watcher_kill_soak: error: --seconds must be 60-3600, --lifecycles and --kills at least 1",
              file=sys.stderr)
        return 2
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1000000
    print("watcher kill -9 soak: seed %d (--seed %d repeats the plan; timing differs), %gs, "
          "%d lifecycles and %d kills asked" % (args.seed, args.seed, args.seconds, args.lifecycles, args.kills),
          flush=True)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupted)
    workdir = tempfile.mkdtemp(prefix="watcher_kill_soak_")
    soak = mock = None
    violations = None
    try:
        mock = spawn_mock(["--quiet", "--fleet", "avset:%s,%s" % (VM, OTHER_VM), "--default-vm", VM])
        soak = Soak(args, workdir, mock)
        soak.receiver.start()
        soak.write_setup()
        soak.sampler.start()
        # The drain-out: the recovers queued behind kills all run at the end, one at a time.
        tail = max(30.0, args.seconds * 0.22)
        main_end = soak.t0 + args.seconds - tail
        soak.main_phase(main_end)
        soak.drain_out(soak.t0 + args.seconds - LAST_STOP_ALLOWANCE)
        soak.sampler.stop()
        soak.read_handler_log()
        found, instances, ended_at, approvals = check(soak)
        violations = report(soak, found, instances, ended_at, approvals)
    except KeyboardInterrupt:
        print("watcher_kill_soak: interrupted; everything it started is ended", file=sys.stderr)
        violations = 0              # nothing was checked: nothing to keep for
        return 130
    finally:
        end_everything(soak, mock)
        if violations == 0 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print("work directory kept: %s" % workdir)
    return 1 if violations else 0


def report(soak, found, instances, ended_at, approvals):
    created, done, approved, fates = lifecycle_summary(soak, ended_at, approvals)
    phases = {}
    for run in instances:
        phases[run["phase"]] = phases.get(run["phase"], 0) + 1
    print()
    print("seed:                %d" % soak.args.seed)
    print("wall time:           %.1fs" % (time.time() - soak.t0))
    print("lifecycles:          %d of this VM's events ended (%d created, %d approved; %s); %d of %s only"
          % (done, created, approved, ", ".join("%s %d" % item for item in sorted(fates.items())),
             sum(1 for e in soak.events.values() if not e["mine"]), OTHER_VM))
    print("kills (SIGKILL):     %d" % soak.kills)
    print("kills during drain:  %d" % soak.kills_during_drain)
    print("SIGTERM stops:       %d (the final one included)" % soak.stops)
    print("restarts:            %d" % (len(soak.gens) - 1))
    print("second watchers:     %d (run or run --once on the same state directory, each must refuse)" % soak.rivals)
    print("handler runs:        %d (%s)" % (len(instances), ", ".join("%s %d" % i for i in sorted(phases.items()))))
    print("drain-out:           %s" % soak.drain_out_note)
    notify = notify_figures(soak)
    print("notifications:       %d received (%s), %d distinct; %d seen recorded in the outbox"
          % (notify["received"], ", ".join("%s %d" % item for item in sorted(notify["kinds"].items())),
             notify["distinct"], notify["recorded_seen"]))
    print("  duplicates:        %d (%d notifications arrived more than once: at least once, after kills)"
          % (notify["duplicates"], notify["duplicated"]))
    print("  events:            %d of %d named by a notification%s"
          % (notify["events_heard"], len(soak.events), "; never seen by a running watcher (no handler ran either): %s"
             % ", ".join(notify["events_unheard"]) if notify["events_unheard"] else ""))
    print()
    print("count (each must be 0)")
    violations = 0
    for name in COUNTS:
        items = found[name]
        violations += len(items)
        print("  %-52s %4d%s" % (name, len(items), "" if name in REQUIRED else "   (also checked)"))
    for name in COUNTS:
        for item in found[name][:5]:
            print("    %s: %s" % (name, item))
        if len(found[name]) > 5:
            print("    %s: ... %d more" % (name, len(found[name]) - 5))
    short = []
    if done < soak.args.lifecycles:
        short.append("%d lifecycles of %d" % (done, soak.args.lifecycles))
    if soak.kills < soak.args.kills:
        short.append("%d kills of %d" % (soak.kills, soak.args.kills))
    if short:
        print("workload short of what was asked: %s" % ", ".join(short))
    if done < 30 or soak.kills < 100:
        print("(issue 10 asks at least 30 lifecycles and 100 kills: run with the default --seconds)")
    print("soak: all counts 0" if not violations else "soak: %d violations" % violations)
    if short and not violations:
        return -1
    return violations


if __name__ == "__main__":
    sys.exit(main())
