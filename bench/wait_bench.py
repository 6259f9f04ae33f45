# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of azure_imds.scheduled_events.scheduled_event_wait against a hand-written loop and a sleeping task, loopback only.

In one run, on --hosts local hosts (ansible_connection: local), each pointed at its own VM of one
mock IMDS (zonal VMs, so each sees only its own event; rate limit on), one playbook after the other:
  1. plugin:      scheduled_event_wait, state: absent, sleep: 1, on the module path (Linux hosts);
  2. win_uri:     the same task with imds_transport: win_uri (Windows hosts), each request one run of
                  the test stand-in of ansible.windows.win_uri (tests/support/win_uri_standin);
  3. loop:        ansible.builtin.uri on /metadata/scheduledevents with until / retries / delay: 1;
  4. sleep floor: ansible.builtin.wait_for with timeout only (Ansible's documented "sleep for N
                  seconds"), as long as the plugin's task lasted: what a task that only waits costs.
Each VM has a Scheduled Reboot; --seconds after ansible-playbook starts, the bench cancels every
event through the control API, which ends the waits. Figures printed for each variant:
  - CPU seconds (user + sys) of ansible-playbook and all its children (getrusage(RUSAGE_CHILDREN)
    deltas around the subprocess) and that CPU per host-minute of waiting; the ratio
    (plugin - floor) / (loop - floor), the wait's CPU above Ansible's own floor (target <= 0.05);
  - per host, the time from its event's cancellation to the end of its task (callback timestamps),
    mean and max (target for the plugin: <= sleep + 1 s);
  - HTTP requests per host (the mock's audit), module runs on the host per host (counted by the
    host's Python interpreter, a wrapper that logs each start), the wait's chunks (the plugin's runs
    of scheduled_event_info: one plain read, then watches) and HTTP requests per chunk.
Prints figures and the targets; asserts nothing timed. Usage:
  python bench/wait_bench.py [--seconds 60] [--hosts 10] [--forks 10] [--variants plugin,win_uri,loop,floor]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

try:
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import spawn_mock
except ModuleNotFoundError as missing:
    sys.exit("wait_bench.py: %s: run it with `make bench` (tests/harness/loopback-only puts this checkout on the import path)" % missing)


SLEEP = 1
HERE = os.path.dirname(os.path.abspath(__file__))
# The test-only stand-in of ansible.windows.win_uri (a Python module), first on the collections path
# of the win_uri variant only, as tests/unit/plugins/action/test_windows_path_targets.py puts it.
STANDIN = os.path.join(os.path.dirname(HERE), "tests", "support", "win_uri_standin")

# Records when each host's task started and ended, as the controller saw it (not when a later task
# ran: with the linear strategy a following task starts only once every host is done).
CALLBACK = '''
from ansible.plugins.callback import CallbackBase
import json, os, time

DOCUMENTATION = """
name: wait_bench_times
type: aggregate
short_description: task start and end per host, for bench/wait_bench.py
description: Appends one JSON line per host start and result to the file named by WAIT_BENCH_TIMES.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "wait_bench_times"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, record):
        with open(os.environ["WAIT_BENCH_TIMES"], "a") as handle:
            handle.write(json.dumps(record) + "\\n")

    def v2_runner_on_start(self, host, task):
        if task.name == "wait":
            self._write({"host": host.get_name(), "start": time.time()})

    def _record(self, result, status):
        if result._task.name == "wait":
            self._write({"host": result._host.get_name(), "end": time.time(), "status": status,
                         "msg": result._result.get("msg")})

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
'''

# The hosts' Python: logs each start (one line per module run on a host, naming the module's file)
# and runs the real interpreter: one exec of /bin/sh more per module run, in every variant alike.
INTERPRETER = """#!/bin/sh
echo "$1" >> '%(log)s'
exec '%(python)s' "$@"
"""

WAIT_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: wait
      azure_imds.scheduled_events.scheduled_event_wait:
        imds_url: "{{ imds_url }}"
        imds_transport: %(transport)s
        state: absent
        sleep: %(sleep)s
        timeout: %(timeout)s
"""

LOOP_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: wait
      ansible.builtin.uri:
        url: "{{ imds_url }}/metadata/scheduledevents?api-version=2020-07-01"
        headers:
          Metadata: "true"
        use_proxy: false
        return_content: true
      register: scheduled
      until: scheduled.json.Events | length == 0
      retries: %(retries)s
      delay: %(sleep)s
"""

# Ansible's own idiom for "sleep N seconds" (in ansible.builtin.wait_for's EXAMPLES): one module run
# per host that only sleeps, while its worker and the strategy wait for it, as every task that
# lasts that long does. Not ansible.builtin.pause: it runs once for all hosts, on the controller,
# so it would leave each host's worker, connection and module run out of the floor.
FLOOR_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: wait
      ansible.builtin.wait_for:
        timeout: "{{ floor_seconds }}"
"""

# name: (playbook, title); run in this order (the floor lasts as long as the plugin's task did).
VARIANTS = dict(plugin=("plugin.yml", "plugin (module)"), win_uri=("win_uri.yml", "plugin (win_uri)"),
                loop=("loop.yml", "uri + until loop"), floor=("floor.yml", "sleep floor"))
ORDER = ("plugin", "win_uri", "loop", "floor")


def vm_name(index):
    return "bench_%d" % index


def write_workdir(workdir, hosts, mock, seconds):
    os.makedirs(os.path.join(workdir, "callbacks"))
    with open(os.path.join(workdir, "callbacks", "wait_bench_times.py"), "w") as handle:
        handle.write(CALLBACK)
    interpreter = os.path.join(workdir, "python")
    with open(interpreter, "w") as handle:
        handle.write(INTERPRETER % {"log": os.path.join(workdir, "runs.log"), "python": sys.executable})
    os.chmod(interpreter, 0o755)
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": interpreter},
                         "hosts": dict(("h%d" % i, {"imds_url": mock.vm_url(vm_name(i))}) for i in range(hosts))}}
    with open(os.path.join(workdir, "inventory.json"), "w") as handle:
        json.dump(inventory, handle)
    timeout = seconds * 3 + 30
    for transport, playbook in (("module", "plugin.yml"), ("win_uri", "win_uri.yml")):
        with open(os.path.join(workdir, playbook), "w") as handle:
            handle.write(WAIT_PLAYBOOK % {"sleep": SLEEP, "timeout": timeout, "transport": transport})
    with open(os.path.join(workdir, "loop.yml"), "w") as handle:
        handle.write(LOOP_PLAYBOOK % {"sleep": SLEEP, "retries": timeout // SLEEP})
    with open(os.path.join(workdir, "floor.yml"), "w") as handle:
        handle.write(FLOOR_PLAYBOOK)


def prepare_events(mock, hosts):
    """A fresh Scheduled Reboot for every VM (long notice: nothing changes unless the bench says so)."""
    mock.control("POST", "reset")
    ids = {}
    for i in range(hosts):
        created = mock.control("POST", "events", {"event_type": "Reboot", "resources": [vm_name(i)], "notice": 3600})
        ids[vm_name(i)] = created["event_id"]
    return ids


def cancel_later(mock, ids, at, cancelled):
    """At monotonic time `at`, cancel every event; record the wall time of each cancellation."""
    time.sleep(max(0.0, at - time.monotonic()))
    for vm, event_id in sorted(ids.items()):
        mock.control("POST", "events/%s/cancel" % event_id)
        cancelled[vm] = time.time()


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return handle.read().splitlines()


def module_runs(lines):
    """{module: runs on the hosts}, from the interpreter's log (AnsiballZ_<module>.py per run)."""
    counts = {}
    for line in lines:
        name = os.path.basename(line.strip())
        if name.startswith("AnsiballZ_") and name.endswith(".py"):
            name = name[len("AnsiballZ_"):-len(".py")]
        counts[name] = counts.get(name, 0) + 1
    return counts


def playbook_env(name, workdir, times_file, forks):
    env = dict(os.environ)
    env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(workdir, "callbacks"),
               ANSIBLE_CALLBACKS_ENABLED="wait_bench_times", WAIT_BENCH_TIMES=times_file,
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS=str(forks),
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False")
    env.pop("AZURE_IMDS_URL", None)
    if name == "win_uri":
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([STANDIN] + [p for p in [env.get("ANSIBLE_COLLECTIONS_PATH")] if p])
    return env


def run_variant(name, workdir, mock, hosts, seconds, forks, extra_vars=None):
    playbook, title = VARIANTS[name]
    ids = prepare_events(mock, hosts)
    audit_since = mock.control("GET", "audit")["last_seq"]
    times_file = os.path.join(workdir, name + ".times")
    runs_log = os.path.join(workdir, "runs.log")
    if os.path.exists(runs_log):
        os.unlink(runs_log)
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
               os.path.join(workdir, "inventory.json"), os.path.join(workdir, playbook)]
    for key, value in sorted((extra_vars or {}).items()):
        command += ["-e", "%s=%s" % (key, value)]
    cancelled = {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    canceller = threading.Thread(target=cancel_later, args=(mock, ids, started + seconds, cancelled))
    canceller.start()
    proc = subprocess.run(command, env=playbook_env(name, workdir, times_file, forks), cwd=workdir,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    canceller.join()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    records = {}
    for line in read_lines(times_file):
        record = json.loads(line)
        records.setdefault(record.pop("host"), {}).update(record)
    latencies, durations, problems = [], [], []
    for i in range(hosts):
        record = records.get("h%d" % i, {})
        if record.get("status") != "ok":
            problems.append("h%d: %s" % (i, record.get("msg") or "no result"))
            continue
        latencies.append(record["end"] - cancelled[vm_name(i)])
        durations.append(record["end"] - record["start"])
    if proc.returncode != 0:
        problems.append("ansible-playbook exited %d:\n%s" % (proc.returncode, proc.stdout.decode()[-3000:]))
    requests = [r for r in mock.control("GET", "audit?since=%d" % audit_since)["requests"] if r["vm"]]
    return {"name": name, "title": title, "cpu": cpu, "wall": wall, "latencies": latencies, "durations": durations,
            "problems": problems, "requests": len(requests), "rate_limited": sum(1 for r in requests if r["status"] == 429),
            "runs": module_runs(read_lines(runs_log))}


def mean(values):
    return sum(values) / len(values) if values else 0.0


def per_host(result, hosts):
    """Figures per host: host-minutes of waiting, HTTP requests, module runs on the host."""
    return (mean(result["durations"]) / 60.0, result["requests"] / float(hosts),
            sum(result["runs"].values()) / float(hosts))


def print_figures(args, results):
    hosts = args.hosts
    print("wait_bench: %d local hosts, one mock VM each (rate limit on), change injected %.0f s after start, "
          "sleep/delay %d s, forks %d" % (hosts, args.seconds, SLEEP, args.forks))
    print("%-17s %7s %7s %9s %9s %9s %9s %11s %9s" % (
        "variant", "cpu_s", "wall_s", "task_s", "lat_mean", "lat_max", "req/host", "runs/host", "cpu/h-min"))
    for result in results.values():
        minutes, requests, runs = per_host(result, hosts)
        lat = result["latencies"] if result["name"] != "floor" else []
        print("%-17s %7.2f %7.1f %9.1f %9s %9s %9.1f %11.1f %9.3f" % (
            result["title"], result["cpu"], result["wall"], minutes * 60,
            "%.2f" % mean(lat) if lat else "-", "%.2f" % max(lat) if lat else "-",
            requests, runs, result["cpu"] / (minutes * hosts) if minutes else float("nan")))
    plugin, win, loop, floor = (results.get(name) for name in ORDER)
    if plugin is not None:
        minutes, requests, runs = per_host(plugin, hosts)
        chunks = plugin["runs"].get("scheduled_event_info", 0) / float(hosts)
        print("module path: %.1f chunks per host (runs of scheduled_event_info on the host), %.1f HTTP requests "
              "per chunk, one host module run per chunk" % (chunks, requests / chunks if chunks else float("nan")))
    if win is not None:
        minutes, requests, runs = per_host(win, hosts)
        win_runs = win["runs"].get("win_uri", 0) / float(hosts)
        line = "win_uri path: %.1f win_uri runs per host for %.1f HTTP requests (%.2f request per host module run)" % (
            win_runs, requests, requests / win_runs if win_runs else float("nan"))
        if plugin is not None and plugin["runs"].get("scheduled_event_info"):
            line += "; per chunk of the module path: %.1f host module runs" % (
                win["runs"].get("win_uri", 0) / float(plugin["runs"]["scheduled_event_info"]))
        print(line)
    if floor is not None:
        for other in (plugin, win, loop):
            if other is not None:
                minutes = per_host(other, hosts)[0]
                print("%s: CPU above the floor %.2f s, %.3f s per host-minute of waiting" % (
                    other["title"], other["cpu"] - floor["cpu"],
                    (other["cpu"] - floor["cpu"]) / (minutes * hosts) if minutes else float("nan")))
    if plugin is not None and loop is not None:
        ratio = plugin["cpu"] / loop["cpu"] if loop["cpu"] else float("inf")
        print("cpu ratio plugin / loop: %.3f (target <= 0.2: %s)" % (ratio, "met" if ratio <= 0.2 else "MISSED"))
        if floor is not None and loop["cpu"] > floor["cpu"]:
            above = (plugin["cpu"] - floor["cpu"]) / (loop["cpu"] - floor["cpu"])
            print("cpu above the floor, plugin / loop: %.3f (target <= 0.05: %s)" % (
                above, "met" if above <= 0.05 else "MISSED"))
        if win is not None and floor is not None and loop["cpu"] > floor["cpu"]:
            print("cpu above the floor, win_uri path / loop: %.3f (each request one module run on the host, "
                  "as in the loop)" % ((win["cpu"] - floor["cpu"]) / (loop["cpu"] - floor["cpu"])))
    if plugin is not None and plugin["latencies"]:
        worst = max(plugin["latencies"])
        print("plugin: change to task end, max over hosts: %.2f s (target <= sleep + 1 = %d s: %s)"
              % (worst, SLEEP + 1, "met" if worst <= SLEEP + 1 else "MISSED"))
    print("429 answers seen by the mock: %d" % sum(r["rate_limited"] for r in results.values()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="wait before the change is injected (default 60)")
    parser.add_argument("--hosts", type=int, default=10, help="local hosts, one mock VM each (default 10)")
    parser.add_argument("--forks", type=int, default=10, help="ansible forks (default 10)")
    parser.add_argument("--variants", default=",".join(ORDER),
                        help="comma-separated, of %s (default all; the floor lasts as long as the plugin's task, "
                             "or --seconds without it)" % ", ".join(ORDER))
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in VARIANTS]
    if unknown or not chosen:
        parser.error("--variants: unknown %s; choose from %s" % (", ".join(unknown) or "(none given)", ", ".join(ORDER)))

    fleet = ["--fleet", "zonal:%s" % ",".join(vm_name(i) for i in range(args.hosts))]
    workdir = tempfile.mkdtemp(prefix="wait_bench_")
    mock = spawn_mock(fleet + ["--quiet"])
    results = {}
    try:
        write_workdir(workdir, args.hosts, mock, int(args.seconds))
        for name in ORDER:
            if name not in chosen:
                continue
            extra = None
            if name == "floor":
                # As long as the plugin's task lasted on a host (wait_for's timeout is whole seconds).
                lasted = mean(results["plugin"]["durations"]) if "plugin" in results else args.seconds
                # wait_for's module itself takes a fraction of a second more, hence the seconds cut off.
                extra = {"floor_seconds": max(1, int(lasted))}
            results[name] = run_variant(name, workdir, mock, args.hosts, args.seconds, args.forks, extra)
    finally:
        mock.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print_figures(args, results)
    failed = False
    for result in results.values():
        for problem in result["problems"]:
            failed = True
            print("PROBLEM in %s: %s" % (result["title"], problem))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
