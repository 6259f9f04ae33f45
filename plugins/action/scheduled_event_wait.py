# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Controller side of azure_imds.scheduled_events.scheduled_event_wait; its documentation is
# plugins/modules/scheduled_event_wait.py. On a Linux host the waiting itself happens on the host,
# inside runs of scheduled_event_info that watch IMDS for up to a chunk of time each: one module run
# per poll would cost a Python start on the host every second. On a Windows host the same chunk runs
# scheduled_event_info's code here, each poll one run of ansible.windows.win_uri on the host
# (plugin_utils/_host_module.py); the Waiter sees the same results either way.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import threading
import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _options
from ansible_collections.azure_imds.scheduled_events.plugins.modules import scheduled_event_info
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils import _host_module, _wait_state

display = Display()

INFO_MODULE = "azure_imds.scheduled_events.scheduled_event_info"

# The default covers a Reboot from its announcement to its end (15 minutes of notice, then about
# 10 minutes Started).
DEFAULT_TIMEOUT = 1800.0
# Microsoft recommends polling once a second.
DEFAULT_SLEEP = _defaults.DEFAULT_POLL_INTERVAL
# A line a minute keeps a job log (AWX shows nothing else until the task ends) alive without flooding it.
DEFAULT_PROGRESS_INTERVAL = 60.0
# Below a second, lines would come faster than the host is polled.
MIN_PROGRESS_INTERVAL = 1.0


def argument_spec():
    """Options of plugins/modules/scheduled_event_wait.py DOCUMENTATION (a unit test keeps them equal)."""
    spec = _options.imds_argument_spec()
    spec.update(_options.filter_argument_spec())
    spec.update(
        this_host_only=dict(type="bool", default=False),
        state=dict(type="str", choices=list(_wait_state.STATES)),
        condition=dict(type="str"),
        since_incarnation=dict(type="raw"),
        seen_event_ids=dict(type="list", elements="str", default=[]),
        timeout=dict(type="float", default=DEFAULT_TIMEOUT),
        delay=dict(type="float", default=0.0),
        sleep=dict(type="float", default=DEFAULT_SLEEP),
        progress_interval=dict(type="float", default=DEFAULT_PROGRESS_INTERVAL),
        msg=dict(type="str"),
    )
    return spec


# What the info module gets verbatim; the timeouts are clamped per run by the Waiter.
PASSED_OPTIONS = ("imds_url", "api_version", "resource_name", "this_host_only") + _options.FILTER_NAMES


def check_options(args, raw):
    """Every value the task gives, checked once here; returns the filter warnings."""
    _options.check_numbers(args, raw)
    args["progress_interval"] = check_progress_interval(raw.get("progress_interval", args["progress_interval"]),
                                                        args["progress_interval"])
    warnings = _options.check_filters(args)
    if args["imds_url"] is not None:
        _edge.check_base_url(args["imds_url"])
    return warnings


def progress_range_text():
    """How the documentation states the range of progress_interval (a unit test compares)."""
    return "V(0) turns the lines off; otherwise a number of seconds from %s to %s." % (
        _edge.format_number(MIN_PROGRESS_INTERVAL), _edge.format_number(_defaults.MAX_TIMEOUT))


def check_progress_interval(given, converted):
    """progress_interval as a float: 0, or seconds within range. given is the value before Ansible's
    conversion, which reads true as 1.0 and a full-width digit as a digit."""
    message = "progress_interval must be 0 (no progress lines) or a number of seconds from %s to %s, got %s." % (
        _edge.format_number(MIN_PROGRESS_INTERVAL), _edge.format_number(_defaults.MAX_TIMEOUT), _short(given))
    if isinstance(given, bool) or (isinstance(given, str) and not given.isascii()):
        raise _edge.ImdsInputError(message)
    try:
        value = _edge.check_number(converted, "progress_interval", 0.0, _defaults.MAX_TIMEOUT)
    except _edge.ImdsInputError:
        raise _edge.ImdsInputError(message)
    if 0 < value < MIN_PROGRESS_INTERVAL:
        raise _edge.ImdsInputError(message)
    return value


def _short(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _ModuleRun:
    """A module run in a daemon thread: a hung one must not keep the worker process alive."""

    def __init__(self, call):
        self.result = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(call,), name="scheduled_event_wait")
        self.thread.daemon = True
        self.thread.start()

    def _run(self, call):
        try:
            self.result = call()
        except BaseException as exc:  # pylint: disable=broad-exception-caught
            # Raised again in the task's own thread, where Ansible reports it.
            self.error = exc


class ActionModule(_host_module.WinUriPath, ActionBase):

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    # Class attributes so that tests can replace the clock, the sleep and the chunk on an instance.
    chunk_seconds = _wait_state.CHUNK_SECONDS
    _clock = staticmethod(time.monotonic)
    _sleep = staticmethod(time.sleep)
    answer_grace = _wait_state.ANSWER_GRACE
    _original_connection_timeout = None
    _in_flight = None
    _progress = None
    # The Runtime of scheduled_event_info's code run here on the win_uri path; None on the module path.
    _controller_runtime = None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        dummy, args = self.validate_argument_spec(argument_spec=argument_spec())
        try:
            warnings = check_options(args, self._task.args)
            condition = None
            if args["condition"] is not None:
                condition = _wait_state.Condition(args["condition"])
            goal = _wait_state.Goal(state=args["state"], condition=condition,
                                    since_incarnation=args["since_incarnation"])
        except (_edge.ImdsInputError, _wait_state.WaitInputError) as exc:
            raise AnsibleActionFail(to_text(exc))
        if self.uses_win_uri(args["imds_transport"]):
            self._controller_runtime = self.controller_runtime(task_vars)

        waiter = _wait_state.Waiter(
            goal,
            run_module=lambda module_args, time_left: self._run_info_module(module_args, time_left, task_vars),
            module_args=dict((name, args[name]) for name in PASSED_OPTIONS),
            timeout=args["timeout"], delay=args["delay"], sleep=args["sleep"],
            request_timeout=args["request_timeout"], retry_timeout=args["retry_timeout"],
            chunk=self.chunk_seconds, reset_connection=self._reset_connection,
            clock=self._clock, sleep_fn=self._sleep,
            log=lambda message: display.vvv("scheduled_event_wait: %s" % message, host=self._play_context.remote_addr),
            seen_event_ids=args["seen_event_ids"], watch_first_read=True,
            progress_interval=args["progress_interval"], progress=lambda line: display.display(
                "scheduled_event_wait %s: %s" % (task_vars.get("inventory_hostname", self._play_context.remote_addr), line)),
        )
        self._progress = waiter.progress
        self._original_connection_timeout = self._connection_timeout()
        try:
            outcome = waiter.run()
        except _wait_state.WaitInputError as exc:
            raise AnsibleActionFail(to_text(exc))
        finally:
            self._set_connection_timeout(self._original_connection_timeout)
            if self._in_flight is None:
                # A run still in flight may be using the directory; the host is gone anyway.
                self._cleanup_tmp_path()

        warnings = list(result.get("warnings") or []) + warnings
        warnings += [w for w in outcome.warnings if w not in warnings]
        if warnings:
            result["warnings"] = warnings
        result.update(self._report(outcome))
        if outcome.fatal:
            result.update(failed=True, msg="Could not read the Scheduled Events of this host: %s" % outcome.fatal)
        elif not outcome.reached:
            result.update(failed=True, msg=args["msg"] or _wait_state.timeout_message(goal, outcome, args["timeout"]))
        return result

    @staticmethod
    def _report(outcome):
        report = dict(changed=False, elapsed=round(outcome.elapsed, 3), polls=outcome.polls, events=[],
                      auto_approved=list(outcome.auto_approved), started_before_seen=list(outcome.started_before_seen))
        if outcome.snapshot is not None:
            report.update(events=outcome.snapshot.events, document_incarnation=outcome.snapshot.incarnation,
                          document=outcome.snapshot.document)
        if outcome.facts:
            # Keeps the interpreter discovered on the first run for the host's later tasks.
            report["ansible_facts"] = outcome.facts
        return report

    # -- the managed host ----------------------------------------------------------------------

    def _run_info_module(self, module_args, time_left, task_vars):
        """One run of the info module, given up on (not abandoned) when its answer is overdue.

        The run happens in a thread so that a session that hangs, as SSH does to a VM reset under
        it, cannot hold the wait past its deadline: once the answer is overdue, the run counts as
        unreachable and the Waiter resets the connection, which ends such a session. Only one run
        is ever in flight: a later call first collects the overdue one, whose answer may still be
        a document.
        """
        if self._in_flight is None:
            self._clamp_connection_timeout(time_left)
            self._in_flight = _ModuleRun(lambda: self._execute_info_module(module_args, task_vars))
            patience = _wait_state.run_patience(module_args, time_left, self.answer_grace)
        else:
            patience = max(0.0, min(time_left, self.answer_grace))
        run = self._in_flight
        if not self._await_answer(run.thread, patience):
            return dict(unreachable=True, msg="no answer from the host %.1fs after the run was due to end; resetting "
                                              "the connection" % self.answer_grace)
        self._in_flight = None
        if run.error is not None:
            raise run.error
        return run.result

    def _execute_info_module(self, module_args, task_vars):
        try:
            if self._controller_runtime is not None:
                return _host_module.run_on_controller(scheduled_event_info, scheduled_event_info.read, module_args,
                                                      self._task.check_mode, self._controller_runtime)
            return self._execute_module(module_name=INFO_MODULE, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            return dict(unreachable=True, msg=to_text(exc))
        except AnsibleError as exc:
            # A failed file transfer or interpreter discovery: the Waiter decides whether to retry.
            return dict(failed=True, msg=to_text(exc))

    def _await_answer(self, thread, patience):
        """Join the run for up to patience seconds, in pieces that end where a progress line is due:
        a watch on the host lasts up to two minutes, and the lines must not wait for it."""
        left = patience
        while True:
            due = self._progress.due_in() if self._progress is not None else None
            if due is None or due >= left:
                return self._join(thread, max(0.0, left))
            if self._join(thread, due):
                return True
            left -= due
            self._progress.tick()

    @staticmethod
    def _join(thread, seconds):
        thread.join(seconds)
        return not thread.is_alive()

    def _reset_connection(self):
        # The host may have rebooted or been redeployed: a persistent connection (ssh ControlMaster)
        # points at the old session and has to be dropped, as ansible.builtin.reboot does.
        try:
            self._connection.reset()
        except (AnsibleError, AttributeError, OSError) as exc:
            display.vvv("scheduled_event_wait: connection reset failed (%s); the next run reconnects" % to_text(exc))

    def _connection_timeout(self):
        try:
            return self._connection.get_option("timeout")
        except (AnsibleError, KeyError, AttributeError):
            return None

    def _clamp_connection_timeout(self, time_left):
        # One deadline for everything: connecting to a host that went away must not outlast it.
        original = self._original_connection_timeout
        if isinstance(original, (int, float)) and not isinstance(original, bool):
            self._set_connection_timeout(int(min(original, max(1, math.ceil(time_left)))))

    def _set_connection_timeout(self, seconds):
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds == self._connection_timeout():
            return
        try:
            self._connection.set_option("timeout", seconds)
        except (AnsibleError, KeyError, AttributeError):
            pass

    def _cleanup_tmp_path(self):
        try:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        except AnsibleError as exc:
            # Only when the host went away at the very end; failing a wait that succeeded over a
            # leftover directory would be worse than the directory.
            display.vvv("scheduled_event_wait: could not remove the remote tmp dir: %s" % to_text(exc))
