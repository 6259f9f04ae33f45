"""How each consumer is run against a faulted mock IMDS, and what is observed of it.

The modules run as Ansible runs them on a host: a Python process of their own, arguments in a
file, the result as JSON on stdout. That is also what lets a cell see a crash (a traceback, no
JSON), end a hang (the process is killed) and measure memory (the child's peak RSS). The wait
plugin runs in this process (its ActionModule), with each run of scheduled_event_info as such a
process. The watcher daemon runs as its own program, as systemd runs it.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from unittest import mock as unittest_mock

from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ..plugins.module_utils.test_imds_http import TrapProxy
from ..watcher.helpers import watcher_command
from .board import CLEAN_ERROR, CRASH, HANG, SUCCESS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Where ansible_collections.azure_imds.scheduled_events is found: a link farm for a plain checkout,
# the directory above the copy that ansible-test units runs in.
COLLECTIONS_FARM = collection_path.collections_dir(ROOT)
# The watcher as a program; clean_env() gives it the collections directory as PYTHONPATH.
WATCHER = watcher_command()
MODULES = "ansible_collections.azure_imds.scheduled_events.plugins.modules."
WAIT_FQCN = "azure_imds.scheduled_events.scheduled_event_wait"

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")

# What a message looks like when an internal Python error leaked into it instead of a clear one.
INTERNAL_ERROR = re.compile(
    r"Traceback|object is not|has no attribute|unsupported operand|not subscriptable|object of type|"
    r"invalid literal|CapturedErrorSummary|timestamp out of range|KeyError|TypeError|AttributeError|IndexError|"
    r"NameError|RecursionError|MemoryError|OverflowError|UnboundLocalError|ZeroDivisionError|MODULE FAILURE")


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------

class ProcessResult(object):
    def __init__(self, returncode, stdout, stderr, elapsed, max_rss_kib, killed):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed
        self.max_rss_kib = max_rss_kib
        self.killed = killed

    @property
    def output(self):
        return self.stdout + self.stderr


class Process(object):
    """A child in a session of its own, whose exit is collected with wait4 for its peak RSS."""

    def __init__(self, argv, env, cwd=None):
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        self.started = time.monotonic()
        self.popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self._out,
                                      stderr=self._err, start_new_session=True)
        self.result = None

    def poll(self):
        """The ProcessResult once the child exited, else None."""
        if self.result is None:
            pid, status, usage = os.wait4(self.popen.pid, os.WNOHANG)
            if pid:
                self._finish(status, usage, killed=False)
        return self.result

    def wait(self, timeout):
        """Wait up to timeout; a child still running then is killed (with its process group)."""
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= end:
                return self.kill()
            time.sleep(0.05)
        return self.result

    def signal(self, signum):
        if self.poll() is None:
            os.kill(self.popen.pid, signum)

    def kill(self):
        if self.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _pid, status, usage = os.wait4(self.popen.pid, 0)
            self._finish(status, usage, killed=True)
        return self.result

    def _finish(self, status, usage, killed):
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - self.started
        texts = []
        for handle in (self._out, self._err):
            handle.seek(0)
            texts.append(handle.read().decode("utf-8", "replace"))
            handle.close()
        self.result = ProcessResult(self.popen.returncode, texts[0], texts[1], elapsed, usage.ru_maxrss, killed)

    def text_so_far(self):
        """stdout of a child still running (the file is shared, so read it through a new handle)."""
        return _read_fd(self._out) if self.result is None else self.result.stdout


def _read_fd(handle):
    with open("/proc/self/fd/%d" % handle.fileno(), "rb") as again:
        return again.read().decode("utf-8", "replace")


def clean_env(extra=None):
    """This environment without proxies or AZURE_IMDS_URL, plus extra; the collection importable."""
    env = dict((k, v) for k, v in os.environ.items()
               if k.lower() not in PROXY_VARIABLES and k not in ("AZURE_IMDS_URL", "JOURNAL_STREAM"))
    env["PYTHONPATH"] = COLLECTIONS_FARM
    env.update(extra or {})
    return env


class ModuleRun(object):
    """One run of a module as a process: result (the parsed JSON or None) and the process."""

    def __init__(self, result, process):
        self.result = result
        self.process = process

    @property
    def outcome(self):
        if self.process.killed:
            return HANG
        if self.result is None or "Traceback" in self.process.output:
            return CRASH
        if self.result.get("failed"):
            msg = self.result.get("msg")
            if not isinstance(msg, str) or not msg.strip() or INTERNAL_ERROR.search(msg):
                return CRASH
            return CLEAN_ERROR
        return SUCCESS

    def describe(self):
        if self.result is None:
            return "no JSON result (rc %s): %s" % (self.process.returncode, _tail(self.process.output))
        return "msg: %s" % (self.result.get("msg"),)


def run_module(name, args, env=None, timeout=90.0, command=None):
    """Run plugins/modules/NAME.py (or the module program command, a list) with args as Ansible
    would, killing it after timeout seconds."""
    workdir = tempfile.mkdtemp(prefix="hardening-module-")
    args_path = os.path.join(workdir, "args.json")
    with open(args_path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    command = command or [sys.executable, "-m", MODULES + name]
    process = Process(command + [args_path], clean_env(env), cwd=workdir)
    result = process.wait(timeout)
    parsed = None
    try:
        parsed = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        parsed = None
    shutil.rmtree(workdir, ignore_errors=True)
    return ModuleRun(parsed, result)


def warning_texts(warnings):
    """The texts of a result's warnings: strings, or (ansible-core 2.19 modules) WarningSummary
    dicts whose text is under event.msg."""
    texts = []
    for warning in warnings or []:
        if isinstance(warning, dict):
            event = warning.get("event") if isinstance(warning.get("event"), dict) else warning
            texts.append(str(event.get("msg", warning)))
        else:
            texts.append(str(warning))
    return texts


def _tail(text, size=600):
    text = text.strip()
    return text if len(text) <= size else "..." + text[-size:]


# --------------------------------------------------------------------------------------------
# A refused port, and the proxy variables
# --------------------------------------------------------------------------------------------

class RefusedPort(object):
    """A port bound but never listening: a connection to it is refused, and nobody else gets it."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def url(self):
        return "http://127.0.0.1:%d/vm/web_0" % self.port

    def close(self):
        self.sock.close()


def proxy_environment(trap):
    """Every proxy variable pointing at the trap (and no NO_PROXY): a client must ignore them all."""
    names = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    return dict((name, trap.url) for name in names)


# --------------------------------------------------------------------------------------------
# The cell: a mock with one event for this VM, the faults of a row, and what the consumer sees
# --------------------------------------------------------------------------------------------

VM = "web_0"
FLEET = {"default_vm": VM, "groups": [{"name": "avset1", "kind": "availability_set", "vms": [VM, "web_1"]}]}


class Cell(object):
    """One (fault, consumer) cell: its own mock (no cell sees another's requests or faults)."""

    def __init__(self, row):
        self.row = row
        self.mock = start_mock(fleet=FLEET, rate_limit=False)
        self.workdir = tempfile.mkdtemp(prefix="hardening-cell-")
        view = self.mock.control("POST", "events", {"event_type": "Reboot", "resources": [VM], "notice": 3600})
        self.event_id = view["event_id"]
        self.not_before = view["not_before_rfc1123"]
        self.refused = RefusedPort() if row.target == "refused" else None
        self.trap = TrapProxy() if row.proxy else None
        self.env = proxy_environment(self.trap) if self.trap else {}
        self.url = self.refused.url() if self.refused else self.mock.vm_url(VM)

    def raw_event(self, **fields):
        """This cell's event as IMDS writes it; fields replace or add raw fields."""
        event = {"EventId": self.event_id, "EventStatus": "Scheduled", "EventType": "Reboot",
                 "ResourceType": "VirtualMachine", "Resources": [VM], "NotBefore": self.not_before,
                 "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}
        event.update(fields)
        return event

    def set_faults(self, twin=False):
        """The row's faults; twin: those the row gives the win_uri path's twins."""
        for fault in self.row.fault_specs(self, twin=twin):
            self.mock.control("POST", "faults", fault)

    def clear_faults(self):
        self.mock.control("DELETE", "faults")

    def audit(self):
        return self.mock.control("GET", "audit")

    def approvals_of_the_event(self):
        return [a for a in self.audit()["approvals"]
                if self.event_id.lower() in [str(e).lower() for e in a["event_ids"]]]

    def followed_redirects(self):
        return [r for r in self.audit()["requests"] if r["vm"] is None]

    def close(self):
        self.mock.stop()
        for listener in (self.refused, self.trap):
            if listener is not None:
                listener.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class Observation(object):
    """What a consumer did in a cell, in the same terms for every consumer."""

    def __init__(self, outcome, elapsed, message=None, warnings=(), events=None, approved=None, problems=(),
                 max_rss_kib=None, log=None):
        self.outcome = outcome            # SUCCESS, CLEAN_ERROR, CRASH or HANG as seen from outside
        self.elapsed = elapsed
        self.message = message            # the error message, when there is one
        self.warnings = list(warnings)
        self.events = events              # the events reported (info, wait)
        self.approved = approved          # the EventIds approved (approve)
        self.problems = list(problems)    # what the driver itself found wrong
        self.max_rss_kib = max_rss_kib
        self.log = log or []              # the watcher's log records


# Times given to every consumer: small, so that a deadline is reached within the cell.
REQUEST_TIMEOUT = 3.0
RETRY_TIMEOUT = 6.0
WAIT_TIMEOUT = 15.0
# Real seconds allowed beyond a deadline: a process start and a busy 2-core machine.
MARGIN = 15.0
# A module run still going after this is a hang (the old client held a trickle for 400 s).
HANG_AFTER = 90.0


def module_args(cell):
    return {"imds_url": cell.url, "resource_name": VM, "request_timeout": REQUEST_TIMEOUT,
            "retry_timeout": RETRY_TIMEOUT}


def observe_module(name, cell):
    run = run_module(name, module_args(cell), env=cell.env, timeout=HANG_AFTER)
    result = run.result or {}
    outcome = run.outcome
    problems = []
    bound = REQUEST_TIMEOUT + RETRY_TIMEOUT + MARGIN
    if outcome in (SUCCESS, CLEAN_ERROR) and run.process.elapsed > bound:
        problems.append("took %.1fs, more than request_timeout + retry_timeout + %gs margin (%.1fs)"
                        % (run.process.elapsed, MARGIN, bound))
    message = result.get("msg") if outcome != SUCCESS else None
    if outcome in (CRASH, HANG):
        message = run.describe()
    return Observation(outcome, run.process.elapsed, message=message, warnings=warning_texts(result.get("warnings")),
                       events=result.get("events"), approved=result.get("approved"), problems=problems,
                       max_rss_kib=run.process.max_rss_kib)


# --------------------------------------------------------------------------------------------
# The wait plugin: its ActionModule, each info run a module process
# --------------------------------------------------------------------------------------------

class _Connection(object):
    """The connection the action sees: no timeout option, reset() does nothing (no SSH here)."""

    def __init__(self):
        self.resets = 0
        self._shell = unittest_mock.MagicMock()
        self._shell.tmpdir = None
        # A POSIX shell, as the sh plugin says (a PowerShell one takes the win_uri path).
        self._shell.SHELL_FAMILY = "sh"
        self._shell._IS_WINDOWS = False

    def get_option(self, name):
        raise KeyError(name)

    def set_option(self, name, value):
        raise KeyError(name)

    def reset(self):
        self.resets += 1


def make_action(plugin, args, execute_module, sleep=None):
    """The ActionModule of the collection's action plugin (e.g. scheduled_event_wait) for a task with
    args; execute_module replaces the host."""
    import importlib

    action_mod = importlib.import_module("ansible_collections.azure_imds.scheduled_events.plugins.action." + plugin)
    fqcn = "azure_imds.scheduled_events." + plugin
    task = unittest_mock.MagicMock()
    task.args = dict(args)
    task.check_mode = False
    task.async_val = 0
    task.action = fqcn
    action = action_mod.ActionModule(task, _Connection(), unittest_mock.MagicMock(), loader=None, templar=None,
                                     shared_loader_obj=None)
    action._load_name = fqcn
    action._execute_module = execute_module
    action._remove_tmp_path = lambda *args, **kwargs: None
    if sleep is not None:
        action._sleep = sleep
    return action


def make_wait_action(args, execute_module, sleep=None):
    """The scheduled_event_wait ActionModule for a task with args; execute_module replaces the host."""
    return make_action(WAIT_FQCN.rsplit(".", 1)[-1], args, execute_module, sleep=sleep)


def wait_args(cell):
    return {"imds_url": cell.url, "resource_name": VM, "request_timeout": REQUEST_TIMEOUT,
            "retry_timeout": RETRY_TIMEOUT, "timeout": WAIT_TIMEOUT, "sleep": 0.5, "state": "present"}


def observe_wait(cell):
    runs = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **kwargs):
        run = run_module(module_name.rsplit(".", 1)[-1], dict(module_args), env=cell.env, timeout=HANG_AFTER)
        runs.append(run)
        return ansible_result(run)

    return observe_action(make_wait_action(wait_args(cell), execute_module), runs,
                          ("timeout + request_timeout", WAIT_TIMEOUT + REQUEST_TIMEOUT))


def ansible_result(run):
    """What Ansible gives an action plugin for a module run: its JSON, or what it makes of none."""
    if run.result is None:
        return {"failed": True, "msg": "MODULE FAILURE", "module_stdout": run.process.stdout,
                "module_stderr": run.process.stderr, "rc": run.process.returncode}
    return run.result


def observe_action(action, runs, bound):
    """Run an action plugin in a thread of this process; runs collects the module runs it made
    (ModuleRun); bound is (what, seconds): a deadline the action must keep, plus MARGIN."""
    box = {}

    def target():
        started = time.monotonic()
        try:
            box["result"] = action.run(task_vars={"inventory_hostname": VM})
        except Exception as exc:  # pylint: disable=broad-except
            box["error"] = exc
        box["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=target, name="action-cell")
    thread.daemon = True
    thread.start()
    thread.join(WAIT_TIMEOUT + HANG_AFTER + 60)
    max_rss = max([r.process.max_rss_kib for r in runs] or [0])
    if thread.is_alive():
        return Observation(HANG, None, message="the action did not return", max_rss_kib=max_rss)
    elapsed = box["elapsed"]
    crashed = [r for r in runs if r.outcome in (CRASH, HANG)]
    if "error" in box:
        from ansible.errors import AnsibleActionFail
        if not isinstance(box["error"], AnsibleActionFail):
            return Observation(CRASH, elapsed, message="%s: %s" % (type(box["error"]).__name__, box["error"]),
                               max_rss_kib=max_rss)
        box["result"] = {"failed": True, "msg": str(box["error"])}
    result = box["result"]
    problems = []
    if crashed:
        outcome = CRASH if crashed[0].outcome == CRASH else HANG
        message = "a module run: %s" % crashed[0].describe()
    elif result.get("failed"):
        message = result.get("msg")
        outcome = CLEAN_ERROR
        if not isinstance(message, str) or not message.strip() or INTERNAL_ERROR.search(message):
            outcome = CRASH
    else:
        outcome, message = SUCCESS, None
    if outcome in (SUCCESS, CLEAN_ERROR) and elapsed > bound[1] + MARGIN:
        problems.append("took %.1fs, more than %s + %gs margin (%.1fs)" % (elapsed, bound[0], MARGIN, bound[1] + MARGIN))
    return Observation(outcome, elapsed, message=message, warnings=warning_texts(result.get("warnings")),
                       events=result.get("events"), approved=result.get("approved"), problems=problems,
                       max_rss_kib=max_rss)


# --------------------------------------------------------------------------------------------
# The watcher daemon
# --------------------------------------------------------------------------------------------

WATCHER_POLL_INTERVAL = 0.5


# A drain handler that succeeds only when its standard input is the event as valid JSON and
# SE_EVENT_ID and SE_PHASE say the same.
DRAIN_CHECK = """#!%s
import json, os, sys
event = json.load(sys.stdin)
sys.exit(0 if (event["event_id"], event["phase"]) == (os.environ["SE_EVENT_ID"], os.environ["SE_PHASE"]) else 1)
""" % sys.executable


def watcher_config(cell):
    handlers = os.path.join(cell.workdir, "handlers")
    for phase in ("drain", "started", "recover"):
        os.makedirs(os.path.join(handlers, phase), mode=0o755, exist_ok=True)
    os.chmod(cell.workdir, 0o755)
    os.chmod(handlers, 0o755)
    if getattr(cell.row, "drain_handler", False):
        check = os.path.join(handlers, "drain", "10-check")
        with open(check, "w") as handle:
            handle.write(DRAIN_CHECK)
        os.chmod(check, 0o755)
    config = {"imds_url": cell.url, "resource_name": VM, "state_dir": os.path.join(cell.workdir, "state"),
              "handlers_dir": handlers, "poll_interval": WATCHER_POLL_INTERVAL,
              "request_timeout": REQUEST_TIMEOUT, "first_request_timeout": REQUEST_TIMEOUT, "log_format": "json"}
    path = os.path.join(cell.workdir, "config.json")
    with open(path, "w") as handle:
        json.dump(config, handle)
    return path


def _log_records(text):
    records, stray = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            stray.append(line)
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            stray.append(line)
    return records, stray


def _poll_until(condition, seconds, process):
    """True once condition() holds; False after seconds or if the process ended."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        if process.poll() is not None:
            return bool(condition())
        time.sleep(0.2)
    return bool(condition())


def observe_watcher(cell):
    """Run the daemon against the faulted mock; see it log the problem, go on, and recover.

    success: what the row's fault did not stop, the watcher did (it drained and approved the
    event); clean error: it logged the fault, kept polling, and approved once the fault was gone.
    """
    row = cell.row
    config = watcher_config(cell)
    process = Process(WATCHER + ["run", "--config", config], clean_env(cell.env), cwd=cell.workdir)
    started = time.monotonic()
    problems = []
    hung = False

    def approved():
        return bool(cell.approvals_of_the_event())

    if row.target == "refused":
        # Nothing to recover to: it must keep running and say why it cannot poll.
        time.sleep(REQUEST_TIMEOUT + 2)
        recovered = None
    elif row.transient or row.proxy or row.watcher_acts_during_fault:
        recovered = _poll_until(approved, row.watcher_limit(), process)
    else:
        def faulted():
            return len([r for r in cell.audit()["requests"] if r["fault"]]) >= 2

        if not _poll_until(faulted, 2 * REQUEST_TIMEOUT + 20, process):
            problems.append("fewer than 2 polls within %gs of the fault (the loop is blocked?)"
                            % (2 * REQUEST_TIMEOUT + 20))
            hung = process.poll() is None
        cell.clear_faults()
        recovered = _poll_until(approved, row.watcher_limit(), process)
    exited_early = process.poll()
    process.signal(signal.SIGTERM)
    result = process.wait(20)
    elapsed = time.monotonic() - started
    records, stray = _log_records(result.stdout)
    outcome = None
    if exited_early is not None:
        outcome = CRASH
        problems.append("the watcher exited on its own (status %s) before it was stopped: %s"
                        % (exited_early.returncode, _tail(result.output)))
    elif result.killed:
        outcome = HANG
        problems.append("the watcher did not stop within 20 s of SIGTERM")
    elif "Traceback" in result.output:
        outcome = CRASH
        problems.append("a traceback in its output: %s" % _tail(result.output))
    elif result.returncode != 0:
        problems.append("exit status %s after SIGTERM, not 0" % result.returncode)
    if stray:
        problems.append("log lines that are not JSON records: %s" % _tail("\n".join(stray)))
    if recovered is False:
        requests = cell.audit()["requests"]
        problems.append("no approval of event %s within %gs%s" % (
            cell.event_id, row.watcher_limit(), "" if row.transient else " after the fault was removed"))
        if outcome is None and (hung or not requests):
            outcome = HANG
    if outcome is None:
        outcome = SUCCESS if row.expect == SUCCESS else CLEAN_ERROR
    problem_lines = [r for r in records if r.get("level") in ("warning", "error")]
    message = " | ".join(str(r.get("message")) for r in problem_lines[:5]) or None
    return Observation(outcome, elapsed, message=message, warnings=[str(r.get("message")) for r in problem_lines],
                       approved=[cell.event_id] if recovered else [], problems=problems,
                       max_rss_kib=result.max_rss_kib, log=records)
