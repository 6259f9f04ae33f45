"""The win_uri path (Windows hosts) end to end: the modules' integration targets, as they are, with
imds_transport forced to win_uri, against the mock IMDS.

No Windows host runs here: each request goes through the test stand-in of ansible.windows.win_uri
(tests/support/win_uri_standin, held to the real win_uri's documentation by
test_win_uri_standin.py), which is on the collections path of these runs only. Everything else is
the collection's own code on the controller. Each target's task files are the Linux path's tests:
faults, 410 bursts, 429 with Retry-After, the first slow call, idempotent approval and check mode,
the leader rule, the wait's states and the host going away and coming back in the middle of a wait.
"""

import os
import subprocess
import sys

import yaml

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import COLLECTIONS_FARM

STANDIN = os.path.join(collection_path.ROOT, "tests", "support", "win_uri_standin")
TARGETS = os.path.join(collection_path.ROOT, "tests", "integration", "targets")

# The task files of each target run on the win_uri path: all of them but the info target's
# watch.yml, which runs the watch with async: the win_uri path refuses async (its work runs in the
# controller's task), and the wait's target exercises the same watch without it.
TASK_FILES = {
    "scheduled_event_info": ["read", "errors", "api_versions"],
    "scheduled_event_approve": ["approve", "leader", "errors"],
    "scheduled_event_wait": ["main"],
}


def _playbook():
    """One play per target, in one run: the targets share the mock of this network namespace
    (setup_mock_imds), so they must not run side by side."""
    return [{
        "name": "%s on the win_uri path" % target,
        "hosts": "localhost",
        "gather_facts": False,
        "module_defaults": {"group/azure_imds.scheduled_events.scheduled_events": {"imds_transport": "win_uri"}},
        "tasks": [{"name": "Run %s.yml of %s" % (name, target),
                   "ansible.builtin.include_role": {"name": target, "tasks_from": name}} for name in tasks_from],
    } for target, tasks_from in sorted(TASK_FILES.items())]


def test_the_targets_pass_on_the_win_uri_path(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(_playbook(), sort_keys=False))
    log = tmp_path / "win_uri.log"
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STANDIN, COLLECTIONS_FARM]),
               ANSIBLE_ROLES_PATH=TARGETS, ANSIBLE_PIPELINING="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOME=str(tmp_path / "ansible-home"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_RETRY_FILES_ENABLED="0",
               WIN_URI_STANDIN_LOG=str(log),
               # The wait's examples.yml runs ansible-doc.
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    # Under ansible-test units, PYTHONPATH points at its restricted import hooks, which hide
    # ansible.cli from the ansible-playbook started here.
    env.pop("PYTHONPATH", None)
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable,
               # The wait target's block sets its own module_defaults for the group: it is told this way.
               "-e", "wait_imds_transport=win_uri", str(playbook)]
    run = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900,
                         universal_newlines=True, check=False)
    assert run.returncode == 0, run.stdout[-6000:]
    recap = [line for line in run.stdout.splitlines() if line.startswith("localhost") and "ok=" in line]
    assert recap and " failed=0 " in recap[-1] and " unreachable=0 " in recap[-1], run.stdout[-6000:]
    # The modules' requests went through the stand-in: GETs of the document and the approvals' POSTs.
    requests = log.read_text().splitlines()
    assert any("/metadata/scheduledevents?" in line for line in requests if line.startswith("GET ")), requests[:5]
    assert any(line.startswith("POST ") for line in requests), requests[:5]
