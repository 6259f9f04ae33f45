# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of azure_imds.scheduled_events.scheduled_event_wait against a hand-written loop, loopback only.

In one run, on --hosts local hosts (ansible_connection: local), each pointed at its own VM of one
mock IMDS (zonal VMs, so each sees only its own event; rate limit on):
  1. the plugin:   scheduled_event_wait with state: absent and sleep: 1;
  2. the baseline: ansible.builtin.uri on /metadata/scheduledevents with until / retries / delay: 1.
Each VM has a Scheduled Reboot; --seconds after ansible-playbook starts, the bench cancels every
event through the control API, which ends both waits. Figures printed for each variant:
  - CPU seconds (user + sys) of ansible-playbook and all its children (getrusage(RUSAGE_CHILDREN)
    deltas around the subprocess), and the ratio plugin / loop (target <= 0.2);
  - per host, the time from its event's cancellation to the end of its task (callback timestamps),
    mean and max (target for the plugin: <= sleep + 1 s).
Prints figures and the targets; asserts nothing timed. Usage:
  python bench/wait_bench.py [--seconds 60] [--hosts 10] [--forks 10]
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

# Records when each host's task ended, as the controller saw it (not when a later task ran: with
# the linear strategy a following task starts only once every host is done).
CALLBACK = '''
from ansible.plugins.callback import CallbackBase
import json, os, time

DOCUMENTATION = """
name: wait_bench_times
type: aggregate
short_description: task end time per host, for bench/wait_bench.py
description: Appends one JSON line per host result to the file named by WAIT_BENCH_TIMES.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "wait_bench_times"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result, status):
        if result._task.name != "wait":
            return
        with open(os.environ["WAIT_BENCH_TIMES"], "a") as handle:
            handle.write(json.dumps({"host": result._host.get_name(), "end": time.time(), "status": status,
                                     "msg": result._result.get("msg")}) + "\\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
'''

PLUGIN_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: wait
      azure_imds.scheduled_events.scheduled_event_wait:
        imds_url: "{{ imds_url }}"
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


def vm_name(index):
    return "bench_%d" % index


def write_workdir(workdir, hosts, mock, seconds):
    os.makedirs(os.path.join(workdir, "callbacks"))
    with open(os.path.join(workdir, "callbacks", "wait_bench_times.py"), "w") as handle:
        handle.write(CALLBACK)
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "hosts": dict(("h%d" % i, {"imds_url": mock.vm_url(vm_name(i))}) for i in range(hosts))}}
    with open(os.path.join(workdir, "inventory.json"), "w") as handle:
        json.dump(inventory, handle)
    timeout = seconds * 3 + 30
    with open(os.path.join(workdir, "plugin.yml"), "w") as handle:
        handle.write(PLUGIN_PLAYBOOK % {"sleep": SLEEP, "timeout": timeout})
    with open(os.path.join(workdir, "loop.yml"), "w") as handle:
        handle.write(LOOP_PLAYBOOK % {"sleep": SLEEP, "retries": timeout // SLEEP})


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


def run_variant(name, playbook, workdir, mock, hosts, seconds, forks):
    ids = prepare_events(mock, hosts)
    times_file = os.path.join(workdir, name + ".times")
    env = dict(os.environ)
    env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(workdir, "callbacks"),
               ANSIBLE_CALLBACKS_ENABLED="wait_bench_times", WAIT_BENCH_TIMES=times_file,
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS=str(forks),
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False")
    env.pop("AZURE_IMDS_URL", None)
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
               os.path.join(workdir, "inventory.json"), os.path.join(workdir, playbook)]
    cancelled = {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    canceller = threading.Thread(target=cancel_later, args=(mock, ids, started + seconds, cancelled))
    canceller.start()
    proc = subprocess.run(command, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    canceller.join()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ends = {}
    if os.path.exists(times_file):
        with open(times_file) as handle:
            for line in handle:
                record = json.loads(line)
                ends[record["host"]] = record
    latencies = []
    problems = []
    for i in range(hosts):
        record = ends.get("h%d" % i)
        if record is None or record["status"] != "ok":
            problems.append("h%d: %s" % (i, record and record.get("msg") or "no result"))
            continue
        latencies.append(record["end"] - cancelled[vm_name(i)])
    if proc.returncode != 0:
        problems.append("ansible-playbook exited %d:\n%s" % (proc.returncode, proc.stdout.decode()[-3000:]))
    return {"name": name, "cpu": cpu, "wall": wall, "latencies": latencies, "problems": problems}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="wait before the change is injected (default 60)")
    parser.add_argument("--hosts", type=int, default=10, help="local hosts, one mock VM each (default 10)")
    parser.add_argument("--forks", type=int, default=10, help="ansible forks (default 10)")
    args = parser.parse_args(argv)

    fleet = ["--fleet", "zonal:%s" % ",".join(vm_name(i) for i in range(args.hosts))]
    workdir = tempfile.mkdtemp(prefix="wait_bench_")
    mock = spawn_mock(fleet + ["--quiet"])
    try:
        write_workdir(workdir, args.hosts, mock, int(args.seconds))
        results = [run_variant("plugin", "plugin.yml", workdir, mock, args.hosts, args.seconds, args.forks),
                   run_variant("uri + until loop", "loop.yml", workdir, mock, args.hosts, args.seconds, args.forks)]
        rate_limited = sum(1 for r in mock.control("GET", "audit")["requests"] if r["status"] == 429)
    finally:
        mock.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print("wait_bench: %d local hosts, one mock VM each (rate limit on), change injected %.0f s after start, "
          "sleep/delay %d s, forks %d" % (args.hosts, args.seconds, SLEEP, args.forks))
    print("%-18s %9s %8s %14s %14s" % ("variant", "cpu_s", "wall_s", "latency_mean_s", "latency_max_s"))
    for result in results:
        lat = result["latencies"]
        print("%-18s %9.2f %8.1f %14s %14s" % (
            result["name"], result["cpu"], result["wall"],
            "%.2f" % (sum(lat) / len(lat)) if lat else "-", "%.2f" % max(lat) if lat else "-"))
    plugin, loop = results
    ratio = plugin["cpu"] / loop["cpu"] if loop["cpu"] else float("inf")
    print("cpu ratio plugin / loop: %.3f (target <= 0.2: %s)" % (ratio, "met" if ratio <= 0.2 else "MISSED"))
    if plugin["latencies"]:
        worst = max(plugin["latencies"])
        print("plugin: change to task end, max over hosts: %.2f s (target <= sleep + 1 = %d s: %s)"
              % (worst, SLEEP + 1, "met" if worst <= SLEEP + 1 else "MISSED"))
    print("429 answers seen by the mock during both runs: %d" % rate_limited)
    failed = False
    for result in results:
        for problem in result["problems"]:
            failed = True
            print("PROBLEM in %s: %s" % (result["name"], problem))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
