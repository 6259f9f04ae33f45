# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This plugin_utils is PRIVATE to this collection: its API may change in any release.
#
# Where scheduled_event_info and scheduled_event_approve run. On a Linux host the module runs on
# the host as it always did (one _execute_module). On a Windows host, which runs no Python, the
# module's own code (its argument spec, its read() or approve(), _module_runner and the IMDS client)
# runs on the controller, and the client's one HTTP exchange per request goes to the host as a run
# of ansible.windows.win_uri (_win_uri.py). The action plugins of both modules and the wait's use this.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _module_runner
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils import _win_uri


class _ModuleDone(Exception):
    def __init__(self, result):
        super(_ModuleDone, self).__init__("module finished")
        self.result = result


class ControllerModule:
    """What the modules' code uses of AnsibleModule (params, check_mode, warn, exit_json, fail_json),
    for running that code on the controller."""

    def __init__(self, params, check_mode):
        self.params = params
        self.check_mode = check_mode
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)

    def exit_json(self, **result):
        result.setdefault("changed", False)
        raise _ModuleDone(result)

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        raise _ModuleDone(result)


def run_on_controller(module, execute, args, check_mode, runtime):
    """Run a module's execute(module, client, runtime) here, as AnsibleModule would on the host.

    module is the module's Python file (for argument_spec()); args the task's options as given.
    Returns the module's result."""
    validated = ArgumentSpecValidator(module.argument_spec()).validate(args)
    if validated.error_messages:
        return dict(failed=True, changed=False, msg=validated.error_messages[0])
    controller_module = ControllerModule(validated.validated_parameters, check_mode)
    try:
        _module_runner.run(controller_module, execute, runtime, raw_args=args)
    except _ModuleDone as done:
        result = done.result
    else:  # pragma: no cover - every execute() ends in exit_json or fail_json
        result = dict(failed=True, changed=False, msg="%s ended without a result" % execute.__name__)
    if controller_module.warnings:
        result["warnings"] = controller_module.warnings
    return result


class WinUriPath:
    """The win_uri path of an action plugin (mixed into it before ActionBase): which path a task
    takes, and the Runtime that runs a module's code here with each request done by win_uri."""

    # Class attributes so that tests can replace the clocks on an instance.
    _clock = staticmethod(time.monotonic)
    _sleep = staticmethod(time.sleep)
    _wall_clock = staticmethod(time.time)

    def uses_win_uri(self, choice=None):
        """Whether this task takes the win_uri path: imds_transport, else the host's shell."""
        choice = choice if choice is not None else self._task.args.get("imds_transport")
        if choice is not None and choice not in _win_uri.TRANSPORTS:
            raise AnsibleActionFail("imds_transport must be one of %s, got %r." % (", ".join(_win_uri.TRANSPORTS),
                                                                                   choice))
        return _win_uri.uses_win_uri(choice or "auto", self._connection._shell)

    def controller_runtime(self, task_vars):
        """The module runner's Runtime for code run here: our clocks, the win_uri exchange and the
        task's environment (where $AZURE_IMDS_URL is looked up; the host's own is out of reach)."""
        environ = {}
        self._compute_environment_string(environ)
        exchange = _win_uri.WinUriExchange(lambda module_args: self._run_win_uri(module_args, task_vars))
        return _module_runner.Runtime(clock=self._clock, sleep=self._sleep, wall_clock=self._wall_clock,
                                      exchange=exchange, environ=dict((str(k), str(v)) for k, v in environ.items()))

    def _run_win_uri(self, module_args, task_vars):
        try:
            result = self._execute_module(module_name=_win_uri.WIN_URI, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure:
            raise
        except AnsibleError as exc:
            # Not found (ansible.windows missing), or its transfer failed: the caller names the fix.
            return dict(failed=True, msg=to_text(exc))
        if result.get("unreachable"):
            raise AnsibleConnectionFailure(to_text(result.get("msg") or "the host became unreachable"))
        return result


class ImdsModuleAction(WinUriPath, ActionBase):
    """The action plugin of a module that talks to IMDS: the module on the host, or its code here
    with win_uri on the host. Subclasses set MODULE (the module's Python file) and EXECUTE."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True

    MODULE = None
    EXECUTE = None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ImdsModuleAction, self).run(tmp, task_vars)
        del tmp
        if not self.uses_win_uri():
            wrap_async = self._task.async_val
            result.update(self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        if self._task.async_val:
            raise AnsibleActionFail("async is not supported on the win_uri path (imds_transport=win_uri or a Windows "
                                    "host): leave async out, the task's own timeouts bound it.")
        try:
            result.update(run_on_controller(self.MODULE, type(self).EXECUTE, self._task.args, self._task.check_mode,
                                            self.controller_runtime(task_vars)))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
