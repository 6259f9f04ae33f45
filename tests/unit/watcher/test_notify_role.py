"""The role's notify variables end to end: deploy_watcher (the watcher role, as a background
process on this machine) with watcher_notify_* set, then a scheduled event in the mock reaches the
stand-in receiver with the token from the file; the role installs _transitions.py beside the daemon.
The role refuses notify together with the watcher's own approval unless told both are wanted."""

import json
import os
import subprocess
import sys

from .conftest import ROOT
from .test_package import shared_files_imported

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import one_case_per_host_playbook

PLAYBOOK_LIMIT = 600.0      # bounds a hang of one playbook run on a busy machine
RECEIVER_WAIT = 90.0


def run_playbook(tmp_path, hosts, playbook, *args, **inventory_vars):
    """ansible-playbook on these inventory hosts (local connection): [exit status, output]."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": hosts, "vars": dict({
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}, **inventory_vars)}}))
    env = dict(os.environ)
    env.pop("AZURE_IMDS_URL", None)
    env.update(ANSIBLE_COLLECTIONS_PATH=collection_path.collections_dir(ROOT), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "remote-tmp"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), playbook]
    proc = subprocess.run(command + list(args), cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=PLAYBOOK_LIMIT, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def deploy(tmp_path, host_vars, extra):
    return run_playbook(tmp_path, {"web_0": host_vars}, "azure_imds.scheduled_events.deploy_watcher",
                        "-e", json.dumps(dict(extra, deploy_watcher_become=False)))


def test_the_role_wires_notify_from_its_variables(tmp_path, fleet_mock, receiver):
    receiver.start()
    base = tmp_path / "watcher"
    token = tmp_path / "eda.token"
    token.write_text("role-token\n")
    host = {
        "watcher_service_manager": "process", "watcher_python": sys.executable,
        "watcher_install_dir": str(base / "lib"), "watcher_config_dir": str(base / "etc"),
        "watcher_state_dir": str(base / "state"), "watcher_command_path": str(base / "azure-imds-watcher"),
        "watcher_process_pid_file": str(base / "watcher.pid"), "watcher_process_log_file": str(base / "watcher.log"),
        "watcher_imds_url": fleet_mock.vm_url("web_0"), "watcher_resource_name": "web_0",
        "watcher_approval_policy": "none",
        "watcher_notify_urls": [receiver.url, {"url": receiver.url + "/second", "max_attempts": "3"}],
        "watcher_notify_token_file": str(token), "watcher_notify_headers": {"X-Team": "web"},
        "watcher_notify_timeout": "5",
    }
    rc, output = deploy(tmp_path, host, {})
    try:
        assert rc == 0, output
        # The role copies the files of plugins/module_utils the package imports (_imds.py and _transitions.py
        # among them) under the name the package imports them by; a running watcher may add __pycache__.
        shared = base / "lib" / "ansible_collections" / "azure_imds" / "scheduled_events" / "plugins" / "module_utils"
        assert sorted(n for n in os.listdir(str(shared)) if n.endswith(".py")) == shared_files_imported()
        with open(str(base / "etc" / "config.json")) as handle:
            config = json.load(handle)
        assert config["notify"] == [
            {"url": receiver.url, "token_file": str(token), "headers": {"X-Team": "web"}},
            {"url": receiver.url + "/second", "token_file": str(token), "headers": {"X-Team": "web"}, "max_attempts": 3.0},
        ]
        assert config["notify_timeout"] == 5.0
        eid = fleet_mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_0"]})["event_id"]
        assert receiver.wait_until(lambda: len(receiver.posts) >= 2, RECEIVER_WAIT), (base / "watcher.log").read_text()
    finally:
        rc, removed = deploy(tmp_path, host, {"watcher_state": "absent"})
    assert rc == 0, removed
    assert sorted(p["path"] for p in receiver.posts) == ["/endpoint", "/endpoint/second"]
    assert all(p["headers"]["Authorization"] == "Bearer role-token" and p["headers"]["X-Team"] == "web"
               for p in receiver.posts)
    assert all(p["body"]["type"] == "scheduled" and p["body"]["scheduled_event"]["event_id"] == eid
               for p in receiver.posts)


def test_a_bad_notify_variable_fails_the_role_naming_it(tmp_path, fleet_mock):
    base = tmp_path / "watcher"
    host = {"watcher_service_manager": "process", "watcher_python": sys.executable,
            "watcher_install_dir": str(base / "lib"), "watcher_config_dir": str(base / "etc"),
            "watcher_state_dir": str(base / "state"), "watcher_imds_url": fleet_mock.vm_url("web_0"),
            "watcher_notify_urls": [{"url": "ftp://127.0.0.1/x"}]}
    rc, output = deploy(tmp_path, host, {})
    assert rc != 0
    assert "watcher_notify_urls[0].url 'ftp://127.0.0.1/x' is not an http:// or https:// URL" in output, output
    assert not os.path.exists(str(base / "lib"))


# -- notify together with the watcher's own approval --------------------------------------------
# A central rulebook fed by the notifications drains and approves; a watcher approving too starts the
# event under it. Each case is one host of one playbook run (its rescue keeps the refusal); accepted
# cases install a stopped watcher, so nothing polls.
LOCAL_APPROVAL_CASES = {
    # case: (the host's variables, what the refusal names; None: accepted)
    "default_approval": ({}, "watcher_approval_policy: after_drain"),
    "immediate": ({"watcher_approval_policy": "immediate"}, "watcher_approval_policy: immediate"),
    "approving_rule": ({"watcher_approval_policy": "none", "watcher_approval_rules": [
        {"event_types": ["Freeze"], "policy": "none"}, {"event_types": ["Reboot"], "policy": "after_drain"}]},
        "watcher_approval_rules with a policy other than none"),
    "user_events_at_once": ({"watcher_approval_policy": "none", "watcher_approve_user_events_at_once": True},
                            "watcher_approve_user_events_at_once: true"),
    "long_freezes_at_once": ({"watcher_approval_policy": "none", "watcher_approve_freeze_max_duration": 30},
                             "watcher_approve_freeze_max_duration: 30"),
    "opt_in": ({"watcher_notify_with_local_approval": True}, None),
    # The default watcher_approve_freeze_max_duration (8) stays: short Freezes start no central job.
    "approval_off": ({"watcher_approval_policy": "none", "watcher_approval_rules": [
        {"event_types": ["Reboot"], "policy": "none"}]}, None),
    "no_notify": ({"watcher_notify_urls": []}, None),
}
LOCAL_APPROVAL_PLAYBOOK = one_case_per_host_playbook("Notify and local approval, one case per host", "watcher")
RECEIVER_URL = "http://127.0.0.1:9/scheduled-events"     # never sent to: no watcher runs
CHECK_TASK = "Check that a notifying watcher leaves approving to the central rulebook, unless both are wanted"


def test_notify_with_the_watchers_own_approval_is_refused_unless_asked_for(tmp_path):
    hosts = {}
    for case, (variables, _names) in LOCAL_APPROVAL_CASES.items():
        base = tmp_path / case
        hosts[case] = {
            "case_id": case, "watcher_state": "stopped", "watcher_service_manager": "process",
            "watcher_python": sys.executable,
            "watcher_install_dir": str(base / "lib"), "watcher_config_dir": str(base / "etc"),
            "watcher_state_dir": str(base / "state"), "watcher_command_path": str(base / "azure-imds-watcher"),
            "watcher_process_pid_file": str(base / "watcher.pid"), "watcher_process_log_file": str(base / "watcher.log"),
            "watcher_imds_url": "http://127.0.0.1:9/vm/web_0", "watcher_resource_name": "web_0",
            "watcher_notify_urls": [RECEIVER_URL],
        }
        hosts[case].update(variables)
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(json.dumps(LOCAL_APPROVAL_PLAYBOOK))
    rc, output = run_playbook(tmp_path, hosts, str(playbook), "--forks", "8",
                              outcomes_file=str(tmp_path / "outcomes.json"))
    assert rc == 0, output[-6000:]
    with open(str(tmp_path / "outcomes.json"), encoding="utf-8") as handle:
        outcomes = json.load(handle)

    for case, (_variables, names) in LOCAL_APPROVAL_CASES.items():
        outcome, base = outcomes[case], tmp_path / case
        if names is None:
            assert not outcome["refused"], (case, outcome)
            with open(str(base / "etc" / "config.json"), encoding="utf-8") as handle:
                config = json.load(handle)
            assert [r["url"] for r in config["notify"]] == ([] if case == "no_notify" else [RECEIVER_URL]), case
            assert config["approval"]["policy"] == hosts[case].get("watcher_approval_policy", "after_drain"), case
            continue
        assert outcome["refused"], "%s was accepted" % case
        assert outcome["task"] == CHECK_TASK, (case, outcome)
        message = outcome["msg"]
        assert message.startswith("watcher role: watcher_notify_urls is set and this watcher also approves "
                                  "events itself (%s)." % names), (case, message)
        # The fix, both ways.
        assert "set watcher_approval_policy: none" in message and "watcher_notify_with_local_approval: true" in message
        assert "Traceback" not in message
        assert not any((base / d).exists() for d in ("lib", "etc", "state")), "%s: the role installed something" % case
    assert "Traceback" not in output
    # docs/docsite/rst/watcher.rst ("Notify", who approves) quotes the refusal word for word, for web_0.
    with open(os.path.join(ROOT, "docs", "docsite", "rst", "watcher.rst"), encoding="utf-8") as handle:
        guide = " ".join(handle.read().split())
    quoted = outcomes["default_approval"]["msg"].replace("on default_approval.", "on web_0.")
    assert " ".join(quoted.split()) in guide, quoted
