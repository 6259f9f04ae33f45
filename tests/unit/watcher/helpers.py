"""Shared bits of the watcher tests: events, configurations and handler scripts."""

import copy
import os
import stat
import sys
import textwrap
import time

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config as watcher_config

ID_A = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
ID_B = "5D2A4F2B-9C44-4C1A-B1E6-0E1C2E3F4A5B"
ID_C = "0A1B2C3D-4E5F-4061-8273-94A5B6C7D8E9"
# Runs argv with SIGTERM ignored from its first instruction (SIG_IGN survives exec; the pid stays).
# Used instead of Popen's preexec_fn, which may deadlock the child of a process that runs threads
# (the hardening tables run theirs in the same pytest worker).
IGNORING_SIGTERM = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                    "os.execvp(sys.argv[1], sys.argv[1:])"]
# The watcher as a program: the one way every test (and the hardening tables) starts it.
WATCHER_PACKAGE = "ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher"


def watcher_command(*args):
    """argv that runs the watcher of this checkout (`python -m`); run it with watcher_environment()."""
    return [sys.executable, "-m", WATCHER_PACKAGE] + list(args)


def watcher_environment(environ=None):
    """environ (default: this process's) with PYTHONPATH the collections directory, where Python finds
    WATCHER_PACKAGE and the module_utils it imports, as a VM's PYTHONPATH is the install directory."""
    environ = dict(os.environ if environ is None else environ)
    environ["PYTHONPATH"] = collection_path.collections_dir()
    return environ


NOW = 1700000000.0            # a wall-clock epoch for the tests
NOT_BEFORE = "2023-11-14T22:28:20Z"   # NOW + 900 s


def event(event_id=ID_A, event_type="Reboot", status="Scheduled", resources=("web_0",), not_before=NOT_BEFORE,
          source="Platform", duration=-1, description=""):
    """A normalised event, as _event.ScheduledEvents.events holds it."""
    return {
        "event_id": event_id, "event_type": event_type, "event_status": status, "resource_type": "VirtualMachine",
        "resources": list(resources), "not_before": not_before if status == "Scheduled" else None,
        "description": description, "event_source": source, "duration_in_seconds": duration,
    }


def raw_event(event_id=ID_A, event_type="Reboot", status="Scheduled", resources=("web_0",),
              not_before="Tue, 14 Nov 2023 22:28:20 GMT", source="Platform", duration=-1, description=""):
    """The same event as IMDS sends it."""
    return {
        "EventId": event_id, "EventType": event_type, "EventStatus": status, "ResourceType": "VirtualMachine",
        "Resources": list(resources), "NotBefore": not_before if status == "Scheduled" else "",
        "Description": description, "EventSource": source, "DurationInSeconds": duration,
    }


def document(*events, incarnation=1):
    return {"DocumentIncarnation": incarnation, "Events": list(events)}


def config(tmp_path=None, **overrides):
    doc = {}
    if tmp_path is not None:
        doc["state_dir"] = str(tmp_path / "state")
        doc["handlers_dir"] = str(tmp_path / "handlers")
    approval = overrides.pop("approval", None)
    doc.update(overrides)
    if approval is not None:
        doc["approval"] = approval
    return watcher_config.check_config(doc)


def approval(**overrides):
    result = copy.deepcopy(watcher_config.DEFAULTS["approval"])
    result.update(overrides)
    return watcher_config.check_approval(result)


def write_handler(handlers_dir, phase, name, body, mode=0o755):
    """An executable /bin/sh script HANDLERS_DIR/<phase>/<name>."""
    directory = os.path.join(str(handlers_dir), phase)
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + textwrap.dedent(body).lstrip("\n"))
    os.chmod(path, mode)
    return path


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class LogSink(object):
    """Collects log lines as (level, action, message, fields)."""

    def __init__(self):
        self.lines = []

    def __call__(self, level, action, message, **fields):
        self.lines.append((level, action, message, fields))

    def apply(self, actions):
        for a in actions:
            self(a.level, a.action, a.message, **a.fields)

    def actions(self):
        return [line[1] for line in self.lines]

    def messages(self, action=None):
        return [line[2] for line in self.lines if action is None or line[1] == action]


def wait_until(predicate, seconds=30.0):
    """Real time, with a generous bound: the machine is shared."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
