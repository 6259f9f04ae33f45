"""The role's notify variables end to end: deploy_watcher (the watcher role, as a background
process on this machine) with watcher_notify_* set, then a scheduled event in the mock reaches the
stand-in receiver with the token from the file; the role installs _transitions.py beside the daemon."""

import json
import os
import subprocess
import sys

from .conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import collection_path  # noqa: E402  pylint: disable=wrong-import-position,import-error

PLAYBOOK_LIMIT = 600.0      # bounds a hang of one playbook run on a busy machine
RECEIVER_WAIT = 90.0


def deploy(tmp_path, host_vars, extra):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"web_0": host_vars}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    env = dict(os.environ)
    env.pop("AZURE_IMDS_URL", None)
    env.update(ANSIBLE_COLLECTIONS_PATH=collection_path.collections_dir(ROOT), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "remote-tmp"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               "azure_imds.scheduled_events.deploy_watcher", "-e", json.dumps(dict(extra, deploy_watcher_become=False))]
    proc = subprocess.run(command, cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=PLAYBOOK_LIMIT, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


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
        assert sorted(n for n in os.listdir(str(base / "lib")) if n.startswith("_") and n.endswith(".py")) == [
            "_imds.py", "_transitions.py"]  # the role copies both; a running watcher may add __pycache__
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
