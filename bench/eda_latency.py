# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the Event-Driven Ansible source azure_imds.scheduled_events.scheduled_events, loopback only.

Two figures:
  1. Latency, event to playbook: one ansible-rulebook (Java, drools, ansible-runner) runs a rulebook
     with the source as vm_local.yml configures it (this_host_only, poll_interval 1) and a rule
     that runs a one-task playbook for each scheduled event. --events times (10), the bench adds a
     Reboot for the VM through the mock's control API and measures from just before that call to
     the start of the playbook's first task (a callback plugin records it), then waits for that
     before the next event. Prints the median, min and max. Target: median <= poll interval + 3 s
     (half an interval on average until the next poll, then the engine and ansible-runner start).
     Also printed: the part until the source logs the transition (target: within one interval).
     The rolling_maintenance playbook starts the same way; only its own tasks come after.
  2. CPU of the source while idle at 1 Hz: the source alone (its file run as a program, the same
     asyncio loop and poller as in ansible-rulebook) polls a document that does not change for --idle-seconds
     (30) as another VM of the set; its user + system CPU from /proc, as % of one core, and the requests the mock saw (one a
     second is the target). For context, the whole idle ansible-rulebook process (JVM included)
     over the same time. Target: source under 1 % of a core.
Prints figures and targets; asserts nothing timed. Usage (inside the loopback-only namespace, as
make bench runs it):
  tests/harness/loopback-only .venv/bin/python bench/eda_latency.py [--events 10] [--idle-seconds 30]
"""

import argparse
import calendar
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
try:
    from ansible_collections.azure_imds.scheduled_events.devtools.engine_tools import Timeout, find_tool, poll_until, stop_group
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("eda_latency.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the import path)" % missing)

SOURCE = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source", "scheduled_events.py")
POLL_INTERVAL = 1.0
VM = "web_1"
IDLE_VM = "web_0"
TIMEOUT = 300.0

CALLBACK = '''
import json, os, time
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: eda_bench_times
type: aggregate
short_description: start time of each task, for bench/eda_latency.py
description: Appends one JSON line per task start to the file named by EDA_BENCH_TIMES.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "eda_bench_times"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        with open(os.environ["EDA_BENCH_TIMES"], "a") as handle:
            handle.write(json.dumps({"task": task.get_name(), "start": time.time()}) + "\\n")
'''

PLAYBOOK = [{"name": "EDA bench", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "first task", "ansible.builtin.debug": {"msg": "{{ ansible_eda.event.scheduled_event.event_id }}"}}]}]

RULEBOOK = [{"name": "EDA bench", "hosts": "all", "sources": [{
    "name": "Scheduled events of this VM",
    "azure_imds.scheduled_events.scheduled_events": {"this_host_only": True, "poll_interval": POLL_INTERVAL}}],
    "rules": [{"name": "Run the playbook", "condition": 'event.type == "scheduled"',
               "action": {"run_playbook": {"name": "PLAYBOOK"}}}]}]


def tool(name):
    path = find_tool(name)
    if path is None:
        sys.exit("eda_latency: %s is not installed beside %s (pip install ansible-rulebook==1.3.2)" % (name, sys.executable))
    return path


def cpu_seconds(pid):
    """User + system CPU seconds of one process (/proc/PID/stat fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def wait_for(what, check, timeout=None):
    timeout = TIMEOUT if timeout is None else timeout
    try:
        return poll_until(check, timeout, 0.05)
    except Timeout:
        raise SystemExit("eda_latency: waited %.0f s for %s" % (timeout, what))


def task_starts(path):
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def emitted_at(log, text):
    """When the source logged a line holding text (ansible-rulebook logs local time)."""
    for line in log.splitlines():
        if text in line:
            stamp, millis = line[:23].split(",")
            return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000.0
    return None


def audit_time(stamp):
    """The epoch of one of the mock's audit times (2026-11-27T08:56:32.943Z, UTC)."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + int(stamp[20:23]) / 1000.0


def stop(process):
    stop_group(process, 60)


def environment(workdir, mock):
    env = dict(os.environ)
    env.update({
        "PATH": os.path.dirname(tool("ansible-galaxy")) + os.pathsep + env.get("PATH", ""),
        "ANSIBLE_CALLBACK_PLUGINS": os.path.join(workdir, "callback_plugins"),
        "ANSIBLE_CALLBACKS_ENABLED": "eda_bench_times",
        "ANSIBLE_LOCAL_TEMP": os.path.join(workdir, "ansible-tmp"),
        "EDA_BENCH_TIMES": os.path.join(workdir, "times.jsonl"),
        "AZURE_IMDS_URL": mock.vm_url(VM),
        "TMPDIR": workdir,
    })
    return env


def write_files(workdir, source):
    """The callback plugin, the one-task playbook, a rulebook of the source (a dict: its name and
    options) whose rule runs that playbook for each scheduled event, an inventory of VM."""
    os.makedirs(os.path.join(workdir, "callback_plugins"))
    with open(os.path.join(workdir, "callback_plugins", "eda_bench_times.py"), "w") as handle:
        handle.write(CALLBACK)
    playbook = os.path.join(workdir, "playbook", "first_task.yml")
    os.makedirs(os.path.dirname(playbook))
    with open(playbook, "w") as handle:
        json.dump(PLAYBOOK, handle)
    rulebook = json.loads(json.dumps(RULEBOOK).replace('"PLAYBOOK"', json.dumps(playbook)))
    rulebook[0]["sources"] = [source]
    with open(os.path.join(workdir, "rulebook.yml"), "w") as handle:
        json.dump(rulebook, handle)
    with open(os.path.join(workdir, "inventory.yml"), "w") as handle:
        json.dump({"all": {"hosts": {VM: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}},
                  handle)


class Engine(object):
    """ansible-rulebook -v on the rulebook of write_files, in the background; log() is its output so
    far (and ends the bench if it died)."""

    def __init__(self, workdir, env):
        self.log_path = os.path.join(workdir, "rulebook.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([tool("ansible-rulebook"), "-r", "rulebook.yml", "-i", "inventory.yml", "-v"],
                                            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.process.pid

    def log(self):
        if self.process.poll() is not None:
            with open(self.log_path, "rb") as handle:
                raise SystemExit("eda_latency: ansible-rulebook ended (exit %s):\n%s"
                                 % (self.process.returncode, handle.read().decode("utf-8", "replace")[-3000:]))
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")

    def stop(self):
        stop(self.process)


def timed_events(mock, engine, env, events, seen_line):
    """Add events Reboots of VM one after the other, each once the playbook of the one before ran.
    For each: (before, changed, seen, first task, EventId), epochs: just before the control call that adds it,
    its transition in the mock's audit, the source's log line (seen_line % EventId), the start of the
    playbook's first task."""
    figures = []
    done = len([t for t in task_starts(env["EDA_BENCH_TIMES"]) if t["task"] == "first task"])
    for number in range(done, done + events):
        before = time.time()
        event_id = mock.control("POST", "events", {"event_type": "Reboot", "resources": [VM], "notice": 900})["event_id"]

        def started(number=number):
            engine.log()    # ends the bench if ansible-rulebook died
            return [t for t in task_starts(env["EDA_BENCH_TIMES"]) if t["task"] == "first task"][number:number + 1]

        first_task = wait_for("the playbook of event %d" % (number + 1), started)[0]["start"]
        seen = wait_for("the source's line for event %d" % (number + 1), lambda line=seen_line % event_id: emitted_at(engine.log(), line))
        [changed] = [audit_time(t["time"]) for t in mock.control("GET", "audit")["transitions"]
                     if t["event_id"] == event_id and t["to"] == "Scheduled"]
        figures.append((before, changed, seen, first_task, event_id))
    return figures


def latency(mock, workdir, events):
    write_files(workdir, RULEBOOK[0]["sources"][0])
    env = environment(workdir, mock)
    engine = Engine(workdir, env)
    try:
        # Until the rule engine's session is up, the engine's start holds the event loop that
        # the source runs in: measured from then on, the figures are the steady state.
        wait_for("the source and the rule engine to start", lambda: "scheduled_events: watching" in engine.log()
                 and "Waiting for events, ruleset" in engine.log())
        figures = [(seen - before, first_task - before) for before, _changed, seen, first_task, _event_id
                   in timed_events(mock, engine, env, events, "scheduled_events: scheduled %s (Reboot)")]
        idle_from = cpu_seconds(engine.pid), time.monotonic()
        return figures, engine, idle_from
    except BaseException:
        engine.stop()
        raise


def idle_cpu(mock, workdir, seconds):
    """CPU % of one core of the source run alone at 1 Hz on a document that does not change (as
    web_0, beside the engine still polling as web_1), and the requests it made."""
    os.makedirs(workdir)
    env = environment(workdir, mock)
    env["AZURE_IMDS_URL"] = mock.vm_url(IDLE_VM)
    source = subprocess.Popen([sys.executable, SOURCE], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for("the source's first poll", lambda: mock.control("GET", "/_mock/audit?vm=%s" % IDLE_VM)["requests"])
        seq = mock.control("GET", "audit")["last_seq"]
        start_cpu, start = cpu_seconds(source.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(source.pid) - start_cpu, time.monotonic() - start
        polls = len([r for r in mock.control("GET", "/_mock/audit?since=%d&vm=%s" % (seq, IDLE_VM))["requests"]
                     if r["path"].startswith("/metadata/scheduledevents")])
        return 100.0 * used / elapsed, polls, elapsed
    finally:
        stop(source)


def command_line(name, doc, idle=False):
    """The options (--events, and --idle-seconds if idle); refuses to run outside the loopback-only namespace."""
    parser = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    parser.add_argument("--events", type=int, default=10)
    if idle:
        parser.add_argument("--idle-seconds", type=float, default=30.0)
    options = parser.parse_args()
    if not os.environ.get("AZURE_IMDS_TEST_ISOLATION"):
        sys.exit("%s: run it inside the loopback-only namespace: tests/harness/loopback-only %s %s"
                 % (name, sys.executable, " ".join(sys.argv)))
    return options


def main():
    options = command_line("eda_latency", __doc__, idle=True)
    workdir = tempfile.mkdtemp(prefix="eda_latency_")
    mock = spawn_mock(["--fleet", "avset:web_0,web_1,web_2", "--default-vm", VM, "--quiet"])
    try:
        figures, engine, (engine_cpu, engine_from) = latency(mock, workdir, options.events)
        try:
            source_cpu, polls, elapsed = idle_cpu(mock, os.path.join(workdir, "idle"), options.idle_seconds)
            engine_idle = 100.0 * (cpu_seconds(engine.pid) - engine_cpu) / (time.monotonic() - engine_from)
        finally:
            engine.stop()
    finally:
        mock.stop()
        if os.environ.get("EDA_BENCH_KEEP") is None:
            shutil.rmtree(workdir, ignore_errors=True)
    seen = [f[0] for f in figures]
    ran = [f[1] for f in figures]
    print("event in the mock -> playbook's first task, %d events, poll interval %g s:" % (len(figures), POLL_INTERVAL))
    print("  median %.2f s, min %.2f s, max %.2f s  (target: median <= %g s)"
          % (statistics.median(ran), min(ran), max(ran), POLL_INTERVAL + 3))
    print("  of which event in the mock -> the source's transition: median %.2f s, max %.2f s  (target: <= %g s)"
          % (statistics.median(seen), max(seen), POLL_INTERVAL))
    print("  each (source, first task): %s" % ", ".join("%.2f/%.2f" % f for f in figures))
    print("source idle at 1 Hz, alone: %.2f %% of a core over %.0f s, %d polls (%.2f/s)  (target: < 1 %%, 1/s)"
          % (source_cpu, elapsed, polls, polls / elapsed))
    print("ansible-rulebook idle (JVM and drools included), for context: %.1f %% of a core" % engine_idle)


if __name__ == "__main__":
    main()
