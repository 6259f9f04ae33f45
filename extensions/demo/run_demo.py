#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`: rolling_maintenance against a mock fleet of three VMs, then what happened to each.

1. starts the mock IMDS (roles/mock_imds/files/mock_imds.py) on 127.0.0.1 with the availability
   set web_0, web_1, web_2 of extensions/demo/scenario.json: a platform Freeze of web_0 and a
   user Reboot of web_1, 15 simulated minutes ahead, nothing for web_2; the clock runs 5x;
2. runs `ansible-playbook azure_imds.scheduled_events.rolling_maintenance` against the three hosts
   of extensions/demo/inventory.yml (local connection, each pointed at its VM's URL), with the
   demo's drain, recover and health tasks, which leave marks in a file;
3. prints each host's timeline (drain, approval, Started, completed, recover, health) from the
   marks and the mock's audit log, and checks its order;
4. stops the mock and removes its files, also on Ctrl-C or failure.

Only 127.0.0.1 is ever contacted. Exit status: 0 when the run and the order are right.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import timeline  # beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MOCK = os.path.join(ROOT, "roles", "mock_imds", "files", "mock_imds")
HOSTS = ("web_0", "web_1", "web_2")
# 15 simulated minutes of notice are 3 real minutes: time for web_0's turn before web_1's Reboot
# starts at its NotBefore even on a busy machine (at 10x, 90 s, two test suites beside the demo
# made web_1's drain come after its start).
SPEED = 5
PLAYBOOK = "azure_imds.scheduled_events.rolling_maintenance"


class Interrupted(Exception):
    """A signal asked the demo to stop; the finally blocks clean up."""


def _interrupt(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def say(text):
    print("demo: %s" % text, flush=True)


def start_mock(workdir):
    port_file = os.path.join(workdir, "port")
    log = open(os.path.join(workdir, "mock.log"), "wb")
    # A session of its own: Ctrl-C reaches the demo only, which then stops the mock itself.
    process = subprocess.Popen(
        [sys.executable, MOCK, "--bind", "127.0.0.1", "--port", "0", "--port-file", port_file,
         "--scenario", os.path.join(HERE, "scenario.json"), "--speed", str(SPEED), "--quiet"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 15
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            with open(os.path.join(workdir, "mock.log"), encoding="utf-8", errors="replace") as handle:
                raise RuntimeError("the mock IMDS did not start (exit %s):\n%s" % (process.poll(), handle.read()))
        time.sleep(0.05)
    with open(port_file) as handle:
        return process, "http://127.0.0.1:%d" % int(handle.read())


def stop(process, name):
    """SIGTERM to the process group, then SIGKILL if it lingers. Safe to call twice."""
    if process is None or process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            say("%s did not stop on %s" % (name, sig.name))


def playbook_command(mock_url, marks):
    extra = {
        "demo_mock_url": mock_url,
        "demo_marks_file": marks,
        "rolling_maintenance_drain_tasks": os.path.join(HERE, "drain.yml"),
        "rolling_maintenance_recover_tasks": os.path.join(HERE, "recover.yml"),
        "rolling_maintenance_health_tasks": os.path.join(HERE, "health.yml"),
        "rolling_maintenance_poll_interval": 0.5,
    }
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return [ansible_playbook, "-i", os.path.join(HERE, "inventory.yml"), PLAYBOOK, "-e", json.dumps(extra)]


def playbook_environment(workdir):
    env = dict(os.environ)
    env.pop("AZURE_IMDS_URL", None)  # every host names its VM of the mock explicitly
    env.update(
        ANSIBLE_DISPLAY_SKIPPED_HOSTS="false",
        ANSIBLE_LOCAL_TEMP=os.path.join(workdir, "tmp"),
        ANSIBLE_REMOTE_TEMP=os.path.join(workdir, "remote-tmp"),
        ANSIBLE_RETRY_FILES_ENABLED="false",
    )
    return env


def collection_found():
    """Whether ANSIBLE_COLLECTIONS_PATH finds a collection here (make demo points it at this checkout)."""
    return any(os.path.isfile(os.path.join(entry, "ansible_collections", "azure_imds", "scheduled_events", "galaxy.yml"))
               for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if entry)


def main():
    if not collection_found():
        sys.exit("run_demo.py: ANSIBLE_COLLECTIONS_PATH does not hold azure_imds.scheduled_events: run it with `make demo` "
                 "(tests/harness/loopback-only points it at this checkout)")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    began = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="azure-imds-demo-")
    mock = playbook = None
    rc = 1
    try:
        mock, url = start_mock(workdir)
        say("mock IMDS at %s (availability set avset1: %s; simulated clock x%d, so 15 min of notice is %d s)"
            % (url, ", ".join(HOSTS), SPEED, 900 // SPEED))
        say("scenario: Freeze of web_0 (Platform), Reboot of web_1 (User), nothing for web_2")
        marks = os.path.join(workdir, "marks.jsonl")
        command = playbook_command(url, marks)
        say("running: ansible-playbook -i extensions/demo/inventory.yml %s" % PLAYBOOK)
        playbook = subprocess.Popen(command, cwd=workdir, env=playbook_environment(workdir),
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        playbook_rc = playbook.wait()
        print(flush=True)
        timelines = timeline.build(timeline.fetch(url, "audit"), timeline.fetch(url, "events"),
                                   timeline.read_marks(marks) if os.path.exists(marks) else [], HOSTS)
        say("what happened to each host (UTC, + seconds since its first step):")
        for line in timeline.render(timelines):
            print("  " + line)
        problems = timeline.check(timelines, serial=1)
        for problem in problems:
            say("PROBLEM: %s" % problem)
        if playbook_rc != 0:
            say("ansible-playbook failed (exit %d); see its output above" % playbook_rc)
        elif not problems:
            say("order drain < approval < Started < completed < recover < health held on every host, one host "
                "at a time")
            rc = 0
    except Interrupted as exc:
        say("interrupted (%s); cleaning up" % exc)
        rc = 130
    except (OSError, RuntimeError, ValueError) as exc:
        say("failed: %s" % exc)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # finish the clean-up even on a second Ctrl-C
        stop(playbook, "ansible-playbook")
        stop(mock, "the mock IMDS")
        shutil.rmtree(workdir, ignore_errors=True)
        say("mock stopped, nothing left running (%.1f s in all)" % (time.monotonic() - began))
    return rc


if __name__ == "__main__":
    sys.exit(main())
