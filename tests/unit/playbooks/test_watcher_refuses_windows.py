# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher role refuses a Windows host before anything is changed, with a message that names what
serves Windows VMs instead: these modules on a schedule (rolling_maintenance from AWX), Event Grid and
the control plane (the event_grid source, central_event_grid.yml, fleet_maintenance).

One playbook run on local-connection hosts, each a case. A Windows host is told by its gathered facts
(injected here as a cacheable fact, as fact gathering would leave it) or by its connection's shell
(ansible_shell_type powershell, as a WinRM or SSH-to-Windows inventory sets it). The Linux host's case
is refused later, by a variable of the systemd unit: the Windows check let it through.
"""

import json
import sys

from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import one_case_per_host_playbook

# What the refusal must name: the modules, the scheduled playbook, Event Grid and the control plane.
ALTERNATIVES = ("scheduled_event_info", "scheduled_event_approve", "scheduled_event_wait", "ansible.windows.win_uri",
                "rolling_maintenance playbook", "AWX", "Event Grid", "azure_imds.scheduled_events.event_grid",
                "central_event_grid.yml", "fleet_maintenance playbook")
REFUSAL = "is a Windows host"


def test_a_windows_host_is_refused_naming_the_alternatives_and_nothing_is_changed(run_playbook, tmp_path):
    def case(name, **hostvars):
        base = tmp_path / name
        hostvars.update(case_id=name, watcher_service_manager="process", watcher_python=sys.executable,
                        watcher_install_dir=str(base / "lib"), watcher_config_dir=str(base / "etc"),
                        watcher_state_dir=str(base / "state"), watcher_command_path=str(base / "azure-imds-watcher"),
                        watcher_process_pid_file=str(base / "watcher.pid"),
                        watcher_process_log_file=str(base / "watcher.log"), watcher_imds_url="http://127.0.0.1:9/vm/x",
                        outcomes_file=str(tmp_path / "outcomes.json"))
        return hostvars

    hosts = {
        # First: it writes the outcomes (run_once), through the controller.
        "linux": case("linux", watcher_systemd_restart_sec="soon"),
        "windows_facts": case("windows_facts"),
        "windows_shell": case("windows_shell", ansible_shell_type="powershell"),
    }
    facts = [{"name": "Leave the facts of a gathered Windows host", "hosts": "windows_facts", "gather_facts": False,
              "tasks": [{"name": "Set the gathered OS family", "ansible.builtin.set_fact": {
                  "os_family": "Windows", "cacheable": True}}]}]
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(json.dumps(facts + one_case_per_host_playbook("The watcher on each case", "watcher")))
    run = run_playbook(str(playbook), hosts)
    assert run.rc == 0, run
    outcomes = json.loads((tmp_path / "outcomes.json").read_text())

    for name, sign in (("windows_facts", "ansible_facts.os_family is Windows"),
                       ("windows_shell", "its shell is powershell")):
        outcome = outcomes[name]
        assert outcome["refused"], outcome
        assert "%s %s (%s)" % (name, REFUSAL, sign) in outcome["msg"], outcome
        unnamed = [text for text in ALTERNATIVES if text not in outcome["msg"]]
        assert not unnamed, (unnamed, outcome["msg"])
        assert "Nothing was changed on %s" % name in outcome["msg"], outcome
        assert not (tmp_path / name).exists(), name
    # A Linux host goes past the check: refused by the next, naming the unit's variable.
    assert outcomes["linux"]["refused"], outcomes["linux"]
    assert REFUSAL not in outcomes["linux"]["msg"], outcomes["linux"]
    assert "watcher_systemd_restart_sec" in outcomes["linux"]["msg"], outcomes["linux"]
    assert "Traceback" not in run.output, run
