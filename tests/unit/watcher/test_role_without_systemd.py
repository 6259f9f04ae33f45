"""Issue 21, the watcher role on a host without systemd, and removal from whatever an earlier run left.

The role runs through deploy_watcher against this machine (local connection), every path it writes
under a root of its own in tmp_path. Two internal names are pointed into that root by extra vars,
templated for each host: the unit file (so that no test writes /etc/systemd/system) and the directory
whose presence says systemd is the init system (/run/systemd/system, what systemctl itself looks at),
so that the test is the same on a machine booted with systemd and on this container."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path

GUIDE = os.path.join(ROOT, "docs", "docsite", "rst", "troubleshooting.rst")
RUN_LIMIT = 600.0           # bounds a hang of one playbook run on a busy machine
TOKEN = "user-token\n"
# Per host (its variable watcher_test_root): where the unit goes, and the directory that stands for
# systemd's /run/systemd/system.
TEST_PATHS = {
    "_watcher_unit_file": "{{ watcher_test_root }}/systemd/{{ watcher_service_name }}.service",
    "_watcher_systemd_booted_path": "{{ watcher_test_root }}/run/systemd/system",
}


def host_vars(root):
    """Every path of one installation under root; the service manager is left to its default."""
    return {
        "watcher_test_root": str(root), "watcher_python": sys.executable,
        "watcher_install_dir": str(root / "lib"), "watcher_config_dir": str(root / "etc"),
        "watcher_state_dir": str(root / "state"), "watcher_command_path": str(root / "bin" / "azure-imds-watcher"),
        "watcher_process_pid_file": str(root / "run" / "watcher.pid"),
        "watcher_process_log_file": str(root / "log" / "watcher.log"),
        # Never asked: watcher_state stopped and absent make no request.
        "watcher_imds_url": "http://127.0.0.1:9/vm/web_0", "watcher_resource_name": "web_0",
        "watcher_metrics_textfile": str(root / "textfile_collector" / "azure_imds_watcher.prom"),
    }


# The directories run_role makes for the role to write into (systemd: /etc/systemd/system's stand-in),
# which the role leaves as they are.
SCAFFOLD = ["bin", "log", "run", "systemd", "textfile_collector"]
# A per_host value that leaves the variable to the role's default.
ROLE_DEFAULT = object()


def without_defaults(variables):
    return dict((name, value) for name, value in variables.items() if value is not ROLE_DEFAULT)


def run_role(tmp_path, hosts, extra=None, check=False, per_host=None):
    """One ansible-playbook run of deploy_watcher over hosts ({name: root}), per_host ({name: {variable:
    value}}) over each one's host_vars: (rc, output)."""
    for root in hosts.values():
        for sub in SCAFFOLD:
            (root / sub).mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "inventory.json"
    inventory_hosts = dict((name, without_defaults(dict(host_vars(root), **(per_host or {}).get(name, {}))))
                           for name, root in hosts.items())
    inventory.write_text(json.dumps({"all": {"hosts": inventory_hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collection_path.collections_dir(ROOT), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp_path / "remote-tmp"))
    env.pop("AZURE_IMDS_URL", None)
    variables = dict(TEST_PATHS, deploy_watcher_become=False, **(extra or {}))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               "azure_imds.scheduled_events.deploy_watcher", "-e", json.dumps(variables)]
    if check:
        command.append("--check")
    proc = subprocess.run(command, cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=RUN_LIMIT, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def recap(output, host):
    """{'ok': n, 'changed': n, 'failed': n, ...} of host in the play recap."""
    line = [text for text in output.splitlines() if text.startswith(host + " ") and "ok=" in text][-1]
    return dict((key, int(value)) for key, value in (field.split("=") for field in line.split(":", 1)[1].split()))


def tree(root):
    """Every path under root, relative, sorted."""
    found = []
    for top, dirs, files in os.walk(str(root)):
        found.extend(os.path.relpath(os.path.join(top, name), str(root)) for name in dirs + files)
    return sorted(found)


# --------------------------------------------------------------------------------------------
# Installing with the systemd service manager on a host without systemd
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["started", "stopped"])
def test_systemd_asked_for_on_a_host_without_it_is_refused_before_anything_changes(tmp_path, state):
    root = tmp_path / "web_0"
    rc, output = run_role(tmp_path, {"web_0": root}, {"watcher_state": state})
    assert rc != 0, output
    assert "watcher_service_manager: process" in output, output
    assert "is not running systemd" in output, output
    assert "Traceback" not in output and "System has not been booted with systemd" not in output, output
    assert recap(output, "web_0")["changed"] == 0, output
    assert tree(root) == SCAFFOLD
    # The troubleshooting guide quotes the message word for word, with the real path.
    message = json.loads(output.split("fatal: [web_0]: FAILED! => ", 1)[1].splitlines()[0])["msg"]
    with open(GUIDE, encoding="utf-8") as handle:
        assert message.replace(TEST_PATHS["_watcher_systemd_booted_path"].replace(
            "{{ watcher_test_root }}", str(root)), "/run/systemd/system") in handle.read()


def test_the_systemd_check_refuses_in_check_mode_too_and_passes_where_systemd_runs(tmp_path):
    without, with_systemd = tmp_path / "without", tmp_path / "with_systemd"
    (with_systemd / "run" / "systemd" / "system").mkdir(parents=True)
    rc, output = run_role(tmp_path, {"without": without, "with_systemd": with_systemd}, check=True)
    assert rc != 0, output
    assert recap(output, "without")["failed"] == 1 and recap(output, "with_systemd")["failed"] == 0, output
    # Check mode of a fresh install: the unit would be written, and nothing is.
    assert recap(output, "with_systemd")["changed"] > 0, output
    assert tree(without) == SCAFFOLD
    assert tree(with_systemd) == sorted(SCAFFOLD + ["run/systemd", "run/systemd/system"])


# --------------------------------------------------------------------------------------------
# Removal from any half-installed state
# --------------------------------------------------------------------------------------------

def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_removal_works_from_every_half_installed_state_and_keeps_the_users_own_files(tmp_path):
    states = ("unit_without_systemd", "files_without_unit", "stale_pid_file", "partial_program", "nothing",
              "users_files")
    roots = dict((name, tmp_path / name) for name in states)
    installed = dict((name, root) for name, root in roots.items() if name != "nothing")
    rc, output = run_role(tmp_path, installed, {"watcher_service_manager": "process", "watcher_state": "stopped"})
    assert rc == 0, output
    # What the old role left after "System has not been booted with systemd": files and the unit.
    unit = roots["unit_without_systemd"] / "systemd" / "azure-imds-watcher.service"
    unit.write_text("[Unit]\nDescription=left by a run that failed\n")
    (roots["stale_pid_file"] / "run" / "watcher.pid").write_text("%d\n" % dead_pid())
    # A first install whose copy stopped part-way: the program's __main__ without the modules it imports (nor
    # the __pycache__ a run of the program may have left beside them).
    for name in os.listdir(str(roots["partial_program"] / "lib")):
        path = str(roots["partial_program"] / "lib" / name)
        if name == "scheduled_events_watcher":
            for module in os.listdir(path):
                if os.path.isdir(os.path.join(path, module)):
                    shutil.rmtree(os.path.join(path, module))
                elif module != "__main__.py":
                    os.remove(os.path.join(path, module))
        elif os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    # The user's own files in the configuration directory, beside the role's.
    users = roots["users_files"] / "etc"
    (users / "eda.token").write_text(TOKEN)
    (users / "keys").mkdir()
    (users / "keys" / "ca.pem").write_text("user's CA\n")
    for root in roots.values():
        (root / "textfile_collector").mkdir(parents=True, exist_ok=True)
        (root / "textfile_collector" / "azure_imds_watcher.prom").write_text("# the daemon's last metrics\n")
        (root / "textfile_collector" / "node.prom").write_text("# another exporter's\n")

    # The service manager as the user had it: the default.
    rc, output = run_role(tmp_path, roots, {"watcher_state": "absent"})
    assert rc == 0, output
    assert "Traceback" not in output, output
    left = dict((name, tree(root)) for name, root in roots.items())
    for name in states:
        expected = SCAFFOLD + ["textfile_collector/node.prom"]
        if name == "users_files":
            expected = sorted(expected + ["etc", "etc/eda.token", "etc/keys", "etc/keys/ca.pem"])
        assert left[name] == expected, (name, left[name])
    assert (users / "eda.token").read_text() == TOKEN
    said = [line for line in output.splitlines() if "watcher role: kept" in line]
    assert len(said) == 1 and "users_files" in said[0], output
    assert all(str(path) in said[0] for path in (users / "eda.token", users / "keys", users / "keys" / "ca.pem"))
    assert "config.json" not in said[0], said

    rc, again = run_role(tmp_path, roots, {"watcher_state": "absent"})
    assert rc == 0, again
    assert all(recap(again, name)["changed"] == 0 for name in states), again
    assert (users / "eda.token").read_text() == TOKEN


# --------------------------------------------------------------------------------------------
# The metrics textfile's default
# --------------------------------------------------------------------------------------------

def test_the_default_textfile_is_node_exporters_only_when_its_directory_exists(tmp_path):
    roots = dict((name, tmp_path / name) for name in ("default", "explicit", "empty"))
    explicit = str(roots["explicit"] / "m" / "w.prom")
    rc, output = run_role(tmp_path, roots, {"watcher_service_manager": "process", "watcher_state": "stopped"},
                          per_host={"default": {"watcher_metrics_textfile": ROLE_DEFAULT},
                                    "explicit": {"watcher_metrics_textfile": explicit},
                                    "empty": {"watcher_metrics_textfile": ""}})
    assert rc == 0, output
    configs = {}
    for name, root in roots.items():
        with open(str(root / "etc" / "config.json")) as handle:
            configs[name] = json.load(handle)
    assert configs["default"]["metrics_textfile"] == "/var/lib/node_exporter/textfile_collector/azure_imds_watcher.prom"
    assert configs["default"]["metrics_textfile_if_directory_exists"] is True
    assert configs["explicit"]["metrics_textfile"] == explicit
    assert configs["explicit"]["metrics_textfile_if_directory_exists"] is False
    assert configs["empty"]["metrics_textfile"] is None
