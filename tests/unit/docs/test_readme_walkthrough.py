# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md as a new user follows it: install, then "Try it without Azure", with its own text.

The conftest's `installed` fixture runs README's Install block (ansible-galaxy collection build and
install) in a copy of the checkout. Here the mock starts with README's command line (port 0 instead
of 8080, read from its first line, so that runs side by side never collide), the minimal play and the
inventory are the README's YAML blocks saved under the names README gives, and README's shell block
runs as a user pastes it. The only thing added is time: when an event starts, the test moves the
mock's clock past the event's duration instead of letting the play wait for it in real time.
"""

import re
import shlex
import subprocess
import threading

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import MockHandle

from .pages import read, readme_block, run_shell

PORT_IN_README = "8080"
PROBE_IN_README = "/tmp/lb-health-probe"
RANGE_PIN = "'ansible-core>=2.19,<2.22'"


class ClockDriver(threading.Thread):
    """Watches the mock's audit log; each event that starts is carried to its end at once."""

    def __init__(self, mock):
        super(ClockDriver, self).__init__(name="clock-driver", daemon=True)
        self.mock = mock
        self.finished = threading.Event()
        self.advanced = []
        self.started = []     # (event view, speed) of each event as it started
        self.error = None

    def run(self):
        since = 0
        try:
            while not self.finished.wait(0.05):
                audit = self.mock.control("GET", "audit?since=%d" % since)
                since = audit["last_seq"]
                for transition in audit["transitions"]:
                    if transition["to"] == "Started":
                        event = self.mock.control("GET", "events/%s" % transition["event_id"])
                        self.started.append((event, self.mock.control("GET", "config")["speed"]))
                        self.mock.control("POST", "time/advance", {"seconds": event["duration"]})
                        self.advanced.append(transition["event_id"])
        except Exception as exc:  # pylint: disable=broad-except
            self.error = exc

    def stop(self):
        self.finished.set()
        self.join(10)
        assert self.error is None, self.error


def save_readme_yaml(directory, name, replace=None):
    """The README YAML block whose first line names the file, saved under that name."""
    block = readme_block("yaml", "# %s\n" % name)
    assert block.startswith("# %s\n" % name), block
    for old, new in (replace or {}).items():
        block = block.replace(old, new)
    (directory / name).write_text(block)


def start_readme_mock(installed):
    """README's mock command line, on a free port; returns the process and the port."""
    argv = shlex.split(readme_block("bash", "roles/mock_imds/files/mock_imds").strip())
    assert argv[:2] == ["python3", "roles/mock_imds/files/mock_imds"], argv
    assert argv[argv.index("--port") + 1] == PORT_IN_README, argv
    argv[argv.index("--port") + 1] = "0"
    log = open(str(installed.clone / "mock.log"), "wb")
    process = subprocess.Popen(argv, cwd=str(installed.clone), env=installed.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=log)
    log.close()
    first = process.stdout.readline().decode()
    found = re.match(r"mock_imds: listening on http://127\.0\.0\.1:(\d+)$", first.strip())
    assert found, "the mock did not start: %r" % first
    return process, int(found.group(1))


def test_readme_pins_the_supported_range_in_its_install_command():
    install = readme_block("bash", "pip install")
    assert "python3 -m pip install %s jmespath" % RANGE_PIN in install, install


def test_readme_minimal_play_and_rolling_maintenance_run_against_the_mock(installed):
    clone = installed.clone
    probe = clone / "lb-health-probe"   # not /tmp on the machine running the tests
    save_readme_yaml(clone, "maintenance.yml", {PROBE_IN_README: str(probe)})
    save_readme_yaml(clone, "inventory.yml")
    process, port = start_readme_mock(installed)
    mock = MockHandle("127.0.0.1", port)
    clock = ClockDriver(mock)
    clock.start()
    try:
        script = readme_block("bash", "ansible-playbook -i inventory.yml maintenance.yml")
        assert PORT_IN_README in script
        run = run_shell(script.replace(PORT_IN_README, str(port)), clone, installed.env)
    finally:
        clock.stop()
        audit = mock.control("GET", "audit")
        process.terminate()
        process.communicate(timeout=30)
    output = run.stdout
    assert run.returncode == 0, output[-8000:]
    # What makes the walkthrough take seconds for a user whose clock nobody drives: each event lasts
    # seconds of real time once approved, and its notice leaves minutes to approve it.
    for event, speed in clock.started:
        assert event["duration"] / speed <= 10, "README's event lasts %s real seconds" % (event["duration"] / speed)
        assert event["notice"] / speed >= 120, "README's event starts by itself after %s s" % (event["notice"] / speed)

    # Two reboots of vm0, each approved by vm0 (the minimal play, then rolling_maintenance), which
    # started it at once; each ended when its 5 seconds were over.
    appeared = [t["event_id"] for t in audit["transitions"] if t["to"] == "Scheduled"]
    assert len(appeared) == 2, audit["transitions"]
    assert [(a["vm"], a["started"]) for a in audit["approvals"]] == [("vm0", [appeared[0]]), ("vm0", [appeared[1]])]
    for event_id in appeared:
        causes = [(t["to"], t["cause"]) for t in audit["transitions"] if t["event_id"] == event_id]
        assert causes == [("Scheduled", "at"), ("Started", "approval"), ("removed", "duration")], causes
    assert clock.advanced == appeared

    recaps = re.findall(r"^vm0 +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0 ", output, re.M)
    assert len(recaps) == 2, output[-8000:]
    assert PROBE_IN_README not in read(str(clone / "maintenance.yml"))
    assert probe.exists(), "the minimal play's recover task did not put the probe file back"
    # rolling_maintenance came from the installed collection, and printed its summary.
    assert str(installed.collection / "roles" / "rolling_maintenance") in output
    assert '"vm0 (VM vm0): Reboot %s Scheduled"' % appeared[1] in output, output[-4000:]
    assert re.search(r'"  drained in [\d.]+s, waited [\d.]+s, recovered in [\d.]+s; [\d.]+s in all"', output)
