# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""azure-imds-watcher: acts on Azure Scheduled Events on the VM it runs on, with no controller.

Polls Scheduled Events once a second through the collection's shared IMDS client
(plugins/module_utils/_imds.py, which the role installs under an ansible_collections tree beside
this package), runs the operator's drain handlers for an event that names this VM, approves it by
policy, runs started handlers when it starts and recover handlers when it ends.

    python3 -m scheduled_events_watcher run [--config FILE] [--once] [--dry-run]
    python3 -m scheduled_events_watcher status [--config FILE] [--json]
    python3 -m scheduled_events_watcher start|stop --pid-file FILE ...   (without systemd)

with the install directory on PYTHONPATH (the azure-imds-watcher command the role installs sets it).
Where each part lives: __main__ (the command line), daemon (the loop), decisions (what it decides,
no I/O), records (the state file's records), handlers and processes (running handlers), state and
files (what it writes), liveness, metrics and status (what it tells), notify (the notify action),
config (the configuration file), pacing (when the next request goes), log (its log lines), pidfile
(start and stop without systemd).

The reference is docs/docsite/rst/watcher.rst. Standard library only, Python 3.8 or later (the
README's "Python 3.8 or later on the VM").
"""

PROGRAM = "azure-imds-watcher"
# 0: done, or stopped by a signal. 1: a failure (run --once whose poll failed, status without
# IMDS, an internal error of a command). 2: a configuration or usage error: restarting cannot fix
# it, so the unit does not (RestartPreventExitStatus=2).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# 4: `run` refused to start because another watcher holds the state directory's lock. Not a crash:
# under systemd the unit tries again after RestartSec (the holder may be a `run --once`).
EXIT_LOCKED = 4
