"""The win_uri path (Windows hosts) in the fault matrix: the action plugins of scheduled_event_info,
_approve and _wait with imds_transport win_uri, each request one run of the test stand-in of
ansible.windows.win_uri (tests/support/win_uri_standin) against the faulted mock.

The action plugin runs in this process (its ActionModule, as for the wait on the Linux path), so
the controller's side of the path (the module's code, the client's retries, deadline and schema)
meets each fault. Each win_uri run is a process of its own, its arguments in a file and its result
as JSON on stdout, as Ansible runs a module on a host: the stand-in's AnsibleModule checks and
converts the options the path passes, a crash or a hang of win_uri is seen as Ansible would see it,
and the stand-in's process can time itself out (SIGALRM) as win_uri's own timeout does.

Each attempt is a module run, which costs seconds (a process here on a busy 2-core machine, a
WinRM or SSH round trip on a Windows host) where the Linux path's attempts cost milliseconds
within one module run. The twins get retry_timeout and the wait's timeout enough for the retries
a row's transient fault needs (WIN_URI_RETRY_TIMEOUT); their outcomes are judged as the Linux path's.
"""

import os
import sys

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path
from .drivers import (HANG_AFTER, REQUEST_TIMEOUT, ansible_result, make_action, module_args, observe_action,
                      run_module, wait_args)

WIN_URI = "ansible.windows.win_uri"
WIN_URI_RETRY_TIMEOUT = 20.0
WIN_URI_WAIT_TIMEOUT = 25.0
STANDIN = os.path.join(collection_path.ROOT, "tests", "support", "win_uri_standin", "ansible_collections", "ansible",
                       "windows", "plugins", "modules", "win_uri.py")


def observe_win_uri(plugin, cell):
    """plugin (scheduled_event_info, _approve or _wait) on the win_uri path against the cell's mock."""
    runs = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **kwargs):
        if module_name != WIN_URI:
            raise AssertionError("the win_uri path ran %s on the host, not %s" % (module_name, WIN_URI))
        run = run_module(None, dict(module_args), env=cell.env, timeout=HANG_AFTER, command=[sys.executable, STANDIN])
        runs.append(run)
        return ansible_result(run)

    if plugin == "scheduled_event_wait":
        args = dict(wait_args(cell), timeout=WIN_URI_WAIT_TIMEOUT)
        bound = ("timeout + request_timeout", WIN_URI_WAIT_TIMEOUT + REQUEST_TIMEOUT)
    else:
        args, bound = module_args(cell), ("request_timeout + retry_timeout", REQUEST_TIMEOUT + WIN_URI_RETRY_TIMEOUT)
    args.update(imds_transport="win_uri", retry_timeout=WIN_URI_RETRY_TIMEOUT)
    return observe_action(make_action(plugin, args, execute_module), runs, bound)
