"""Issue 10, bad input: every numeric or URL option, every bad value, from one table.

Options: those of scheduled_event_info and scheduled_event_approve (each run as Ansible runs a
module), of the scheduled_event_wait action, of the watcher's configuration file (its loader, its
check-config command and `run --once`), the watcher role's variables (one check-mode playbook
run on localhost, every case in a block of its own) and the EDA event sources' (scheduled_events and
event_grid: their main(), as ansible-rulebook calls it). Each case must be refused at once: a clear
error that names the option, no traceback, and no request in the mock IMDS's audit.
"""

import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.bad_input import NUMBER_VALUES
from .board import ACCEPTED, BOARD, EXCEPTION, HANG, REFUSED
from .drivers import (INTERNAL_ERROR, VM, WATCHER, COLLECTIONS_FARM, Process, clean_env, make_wait_action,
                      run_module)

# {port} is the mock's: a URL that slipped through would reach it and show in its audit.
URL_VALUES = [
    ("port_abc", "http://127.0.0.1:abc/vm/web_0"),
    ("port_99999", "http://127.0.0.1:99999/vm/web_0"),
    ("port_0", "http://127.0.0.1:0/vm/web_0"),
    ("unclosed_ipv6", "http://[::1"),
    ("space", "http://127.0.0.1:{port}/vm/web 0"),
    ("control_character", "http://127.0.0.1:{port}/vm/web_0\x01"),
    ("empty", ""),
    ("ftp", "ftp://127.0.0.1:{port}/vm/web_0"),
]

# Issue 22: configuration files nested deeper than any valid one (JSON text, spliced in as the
# value of handler_environment: Python's own json could not even write them).
NESTING_VALUES = [
    ("array_100000_deep", "[" * 100000 + "]" * 100000),
    ("object_100000_deep", '{"a": ' * 100000 + "1" + "}" * 100000),
]


class Option(object):
    """A numeric (kind number or integer) or URL option of one target.

    named: a regular expression the refusal must match (the option's name as the user wrote it);
    zero_ok: zero is a valid value (the zero case is not made); extra: arguments it needs to matter.
    """

    def __init__(self, target, name, kind="number", zero_ok=False, named=None, extra=None):
        self.target = target
        self.name = name
        self.kind = kind
        self.zero_ok = zero_ok
        self.named = named or re.escape(name)
        self.extra = extra or {}

    def values(self):
        if self.kind == "url":
            return URL_VALUES
        if self.kind == "nesting":
            return NESTING_VALUES
        return [(label, value) for label, value in NUMBER_VALUES if not (label == "zero" and self.zero_ok)]


WATCH = {"changed_since": 1, "max_wait": 2}
OPTIONS = [
    Option("info", "request_timeout"),
    Option("info", "retry_timeout", zero_ok=True),
    Option("info", "max_wait", zero_ok=True, extra={"changed_since": 1}),
    Option("info", "poll_interval", extra=WATCH),
    Option("info", "changed_since", kind="integer", zero_ok=True, extra={"max_wait": 2}),
    Option("info", "imds_url", kind="url"),
    Option("approve", "request_timeout"),
    Option("approve", "retry_timeout", zero_ok=True),
    Option("approve", "imds_url", kind="url"),
    Option("wait", "timeout", zero_ok=True),
    Option("wait", "delay", zero_ok=True),
    Option("wait", "sleep"),
    Option("wait", "progress_interval", zero_ok=True),
    Option("wait", "request_timeout"),
    Option("wait", "retry_timeout", zero_ok=True),
    Option("wait", "since_incarnation", kind="integer", zero_ok=True, extra={"state": "changed"}),
    Option("wait", "imds_url", kind="url"),
    Option("watcher config", "poll_interval"),
    Option("watcher config", "request_timeout"),
    Option("watcher config", "first_request_timeout"),
    Option("watcher config", "handler_timeout"),
    Option("watcher config", "kill_grace", zero_ok=True),
    Option("watcher config", "approval.freeze_max_duration", kind="integer", zero_ok=True),
    Option("watcher config", "handlers[0].timeout", named=r"handlers\[0\]\.timeout|10-probe\.timeout"),
    Option("watcher config", "imds_url", kind="url"),
    Option("watcher config", "metrics_port", kind="integer", zero_ok=True),
    Option("watcher config", "notify_timeout"),
    Option("watcher config", "notify_max_attempts", kind="integer"),
    Option("watcher config", "notify_outbox_max", kind="integer"),
    Option("watcher role", "watcher_poll_interval"),
    Option("watcher role", "watcher_request_timeout"),
    Option("watcher role", "watcher_first_request_timeout"),
    Option("watcher role", "watcher_handler_timeout"),
    Option("watcher role", "watcher_kill_grace", zero_ok=True),
    Option("watcher role", "watcher_approve_freeze_max_duration", kind="integer", zero_ok=True),
    Option("watcher role", "watcher_systemd_restart_sec", kind="integer", zero_ok=True),
    Option("watcher role", "watcher_systemd_watchdog_sec", kind="integer", zero_ok=True),
    Option("watcher role", "watcher_metrics_port", kind="integer", zero_ok=True),
    Option("watcher role", "watcher_notify_timeout"),
    Option("watcher role", "watcher_notify_max_attempts", kind="integer"),
    Option("watcher role", "watcher_notify_outbox_max", kind="integer"),
    Option("watcher role", "watcher_handlers[0].timeout", named=r"watcher_handlers.*timeout|timeout.*watcher_handlers"),
    Option("watcher role", "watcher_imds_url", kind="url"),
    Option("eda source", "max_pending_events", kind="integer"),
    Option("event grid source", "port", kind="integer"),
    Option("event grid source", "queue_size", kind="integer"),
    Option("event grid source", "queue_wait", zero_ok=True),
    Option("event grid source", "max_body_size", kind="integer"),
    Option("event grid source", "dedup_hours"),
    Option("event grid source", "dedup_max_ids", kind="integer"),
    Option("watcher config", "handler_environment", kind="nesting",
           named=r"nests arrays and objects more than \d+ deep"),
    Option("watcher role", "watcher_systemd_tasks_max", kind="integer"),
]


class Case(object):
    def __init__(self, option, label, value):
        self.option = option
        self.label = label
        self.value = value
        self.id = "%s-%s-%s" % (option.target.replace(" ", "_"), option.name, label)

    def __repr__(self):
        return self.id

    def value_for(self, port):
        return self.value.format(port=port) if self.option.kind == "url" else self.value


CASES = [Case(option, label, value) for option in OPTIONS for label, value in option.values()]


class Verdict(object):
    def __init__(self, outcome, reason=None):
        self.outcome = outcome
        self.reason = reason          # why it is not REFUSED, or None


def refusal(case, message, requests=0, elapsed=0.0):
    """REFUSED when message is a clear refusal naming the option, sent before any IMDS request."""
    if not isinstance(message, str) or not message.strip():
        return Verdict(ACCEPTED, "no error message")
    if INTERNAL_ERROR.search(message):
        return Verdict(EXCEPTION, "an internal error reached the user: %s" % _short(message))
    if not re.search(case.option.named, message):
        return Verdict(ACCEPTED, "the error does not name %s: %s" % (case.option.name, _short(message)))
    if requests:
        return Verdict(ACCEPTED, "%d IMDS request(s) before the refusal" % requests)
    if elapsed > AT_ONCE:
        return Verdict(ACCEPTED, "refused only after %.1fs" % elapsed)
    return Verdict(REFUSED)


def _short(text, size=400):
    text = " ".join(str(text).split())
    return text if len(text) <= size else text[:size] + "..."


# Seconds a refusal may take, a process start on a very busy machine included (CI runs three suites
# at once on two cores); and a case's limit. "At once" is shown by the mock's audit (no request);
# these only bound a hang.
AT_ONCE = 45.0
CASE_LIMIT = 90.0


def _requests(mock):
    return len(mock.control("GET", "audit")["requests"])


# -- the modules ---------------------------------------------------------------------------------

MODULE_NAMES = {"info": "scheduled_event_info", "approve": "scheduled_event_approve"}


def check_module(case):
    with start_mock(rate_limit=True) as mock:
        args = {"imds_url": mock.vm_url(VM), "resource_name": VM, "request_timeout": 3, "retry_timeout": 3}
        args.update(case.option.extra)
        args[case.option.name] = case.value_for(mock.port)
        run = run_module(MODULE_NAMES[case.option.target], args, timeout=CASE_LIMIT)
        requests = _requests(mock)
    if run.process.killed:
        return Verdict(HANG, "still running after %gs" % CASE_LIMIT)
    if run.result is None or "Traceback" in run.process.output:
        return Verdict(EXCEPTION, "rc %s: %s" % (run.process.returncode, _short(run.process.output[-600:])))
    if not run.result.get("failed"):
        return Verdict(ACCEPTED, "the module succeeded (%d IMDS requests)" % requests)
    return refusal(case, run.result.get("msg"), requests, run.process.elapsed)


# -- the wait action -----------------------------------------------------------------------------

def check_wait(case):
    from ansible.errors import AnsibleActionFail

    calls = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **kwargs):
        # Reaching the host at all means the value was not refused at once.
        calls.append(module_args)
        return {"failed": True, "msg": "the host was reached"}

    args = {"imds_url": "http://127.0.0.1:9/vm/web_0", "timeout": 5}
    args.update(case.option.extra)
    args[case.option.name] = case.value_for(9)
    action = make_wait_action(args, execute_module, sleep=lambda seconds: None)
    box = {}

    def target():
        try:
            box["result"] = action.run(task_vars={"inventory_hostname": VM})
        except Exception as exc:  # pylint: disable=broad-except
            box["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=target, name="wait-bad-input")
    thread.daemon = True
    thread.start()
    thread.join(CASE_LIMIT)
    elapsed = time.monotonic() - started
    if thread.is_alive():
        return Verdict(HANG, "the action did not return within %gs" % CASE_LIMIT)
    if "error" in box:
        if not isinstance(box["error"], AnsibleActionFail):
            return Verdict(EXCEPTION, "%s: %s" % (type(box["error"]).__name__, _short(box["error"])))
        message = str(box["error"])
    elif box["result"].get("failed"):
        message = box["result"].get("msg")
    else:
        return Verdict(ACCEPTED, "the wait succeeded")
    return refusal(case, message, len(calls), elapsed)


# -- the watcher's configuration -----------------------------------------------------------------

def watcher_document(case, mock, workdir):
    handlers = os.path.join(workdir, "handlers")
    doc = {"imds_url": mock.vm_url(VM), "resource_name": VM, "state_dir": os.path.join(workdir, "state"),
           "handlers_dir": handlers, "log_format": "json", "request_timeout": 3, "first_request_timeout": 3}
    value = case.value_for(mock.port)
    name = case.option.name
    if name.startswith("approval."):
        doc["approval"] = {name.split(".", 1)[1]: value}
    elif name.startswith("handlers[0]."):
        doc["handlers"] = [{"name": "10-probe", "phase": "drain", "command": ["/bin/true"], "timeout": value}]
    elif case.option.kind != "nesting":         # JSON text: check_watcher_config splices it in
        doc[name] = value
    return doc


def check_watcher_config(case):
    from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config as watcher_config

    workdir = tempfile.mkdtemp(prefix="hardening-config-")
    path = os.path.join(workdir, "config.json")
    with start_mock(rate_limit=True) as mock:
        with open(path, "w") as handle:
            # allow_nan writes JSON's NaN, Infinity and -Infinity literals, which json.loads reads.
            text = json.dumps(watcher_document(case, mock, workdir), allow_nan=True)
            if case.option.kind == "nesting":
                text = '%s, "%s": %s}' % (text[:-1], case.option.name, case.value)
            handle.write(text)
        try:
            watcher_config.load_config(path)
        except watcher_config.ConfigError as exc:
            loader = refusal(case, str(exc))
        except Exception as exc:  # pylint: disable=broad-except
            loader = Verdict(EXCEPTION, "load_config raised %s: %s" % (type(exc).__name__, _short(exc)))
        else:
            loader = Verdict(ACCEPTED, "load_config accepted it")
        verdicts = [("load_config", loader)]
        for command in (["check-config"], ["run", "--once"]):
            process = Process(WATCHER + command + ["--config", path], clean_env(), cwd=workdir)
            result = process.wait(CASE_LIMIT)
            if result.killed:
                verdict = Verdict(HANG, "still running after %gs" % CASE_LIMIT)
            elif "Traceback" in result.output:
                verdict = Verdict(EXCEPTION, _short(result.output[-600:]))
            elif result.returncode != 2:
                verdict = Verdict(ACCEPTED, "exit status %s, not 2 (a configuration error): %s"
                                  % (result.returncode, _short(result.output[-300:])))
            else:
                verdict = refusal(case, result.stderr, _requests(mock), result.elapsed)
            verdicts.append((" ".join(command), verdict))
    shutil.rmtree(workdir, ignore_errors=True)
    for where, verdict in verdicts:
        if verdict.outcome != REFUSED:
            return Verdict(verdict.outcome, "%s: %s" % (where, verdict.reason))
    return Verdict(REFUSED)


# -- the watcher role: one check-mode playbook run for every case ----------------------------------

ROLE_CASES = [case for case in CASES if case.option.target == "watcher role"]
# One check-mode run of the role on 120-odd hosts: about 2 minutes on a quiet machine, more than 15
# under load 30. The limit only bounds a hang.
PLAYBOOK_LIMIT = 2400.0
PLAYBOOK_FORKS = 8


def role_inventory(cases, mock, workdir):
    """One inventory host per case (all of them this machine): the play runs every case at once.

    Every variable is an inventory variable, so that the host's bad value wins over the group's."""
    base = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "watcher_service_manager": "process", "watcher_python": sys.executable,
        "watcher_imds_url": mock.vm_url(VM), "watcher_resource_name": VM,
    }
    hosts = {}
    for number, case in enumerate(cases):
        host = "case%03d" % number
        root = os.path.join(workdir, host)
        variables = {
            "hardening_case": case.id,
            "watcher_install_dir": os.path.join(root, "install"), "watcher_config_dir": os.path.join(root, "etc"),
            "watcher_state_dir": os.path.join(root, "state"),
            "watcher_command_path": os.path.join(root, "bin", "azure-imds-watcher"),
            "watcher_process_pid_file": os.path.join(root, "run", "watcher.pid"),
            "watcher_process_log_file": os.path.join(root, "watcher.log"),
        }
        value = case.value_for(mock.port)
        if case.option.name == "watcher_handlers[0].timeout":
            variables["watcher_handlers"] = [{"name": "10-probe", "phase": "drain", "command": ["/bin/true"],
                                              "timeout": value}]
        else:
            variables[case.option.name] = value
        hosts[host] = variables
    return {"all": {"vars": base, "hosts": hosts}}


def role_playbook(results_path):
    """Each host keeps its outcome as a fact (no module runs on the host for it); one task on the
    controller then writes every outcome to results_path, {case id: outcome}."""
    def record(result):
        return {"name": "Keep the outcome", "ansible.builtin.set_fact": {"hardening_outcome": "{{ %s }}" % result}}

    refused = ("{'refused': true, 'msg': ansible_failed_result.msg | default('') | string, "
               "'task': ansible_failed_task.name | default('') | string}")
    outcomes = ("{{ groups['all'] | map('extract', hostvars) | selectattr('hardening_outcome', 'defined')"
                " | items2dict(key_name='hardening_case', value_name='hardening_outcome') | to_json }}")
    return [{"name": "Bad values of the watcher role's variables, one case per host", "hosts": "all",
             "gather_facts": False, "tasks": [{
                 "name": "Run the role with the host's bad value",
                 "block": [{"name": "Run the role", "ansible.builtin.include_role": {
                     "name": "azure_imds.scheduled_events.watcher"}}, record("{'refused': false}")],
                 "rescue": [record(refused)],
             }]},
            {"name": "Write every host's outcome at once", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Write the outcomes", "check_mode": False, "ansible.builtin.copy": {
                 "content": outcomes, "dest": results_path, "mode": "0600"}}]}]


def run_role_cases():
    """Run every role case in one check-mode playbook run; {case id: Verdict}."""
    workdir = tempfile.mkdtemp(prefix="hardening-role-")
    results_path = os.path.join(workdir, "outcomes.json")
    with start_mock(rate_limit=True) as mock:
        paths = {}
        for name, content in (("inventory.yml", role_inventory(ROLE_CASES, mock, workdir)),
                              ("playbook.yml", role_playbook(results_path))):
            paths[name] = os.path.join(workdir, name)
            with open(paths[name], "w") as handle:
                yaml.safe_dump(content, handle, sort_keys=False)
        env = clean_env({"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS_FARM, "ANSIBLE_HOME": os.path.join(workdir, "home"),
                         "ANSIBLE_LOCAL_TEMP": os.path.join(workdir, "tmp"), "ANSIBLE_NOCOLOR": "1",
                         "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
                         "ANSIBLE_HOST_KEY_CHECKING": "0", "ANSIBLE_PIPELINING": "1"})
        env.pop("PYTHONPATH")
        command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", paths["inventory.yml"],
                   "--check", "--forks", str(PLAYBOOK_FORKS), paths["playbook.yml"]]
        result = Process(command, env, cwd=workdir).wait(PLAYBOOK_LIMIT)
        requests = _requests(mock)
    outcomes = {}
    if os.path.exists(results_path):
        with open(results_path) as handle:
            outcomes = json.load(handle)
    shutil.rmtree(workdir, ignore_errors=True)
    verdicts = {}
    for case in ROLE_CASES:
        outcome = outcomes.get(case.id)
        if outcome is None:
            state = "did not end within %gs" % PLAYBOOK_LIMIT if result.killed else "ended (rc %s)" % result.returncode
            verdicts[case.id] = Verdict(HANG if result.killed else EXCEPTION,
                                        "no outcome recorded; the playbook run %s" % state)
            continue
        if not outcome["refused"]:
            verdicts[case.id] = Verdict(ACCEPTED, "the role ran to its end in check mode")
        else:
            verdict = refusal(case, outcome["msg"], requests)
            if verdict.reason:
                verdict.reason += " (task %r)" % outcome["task"]
            verdicts[case.id] = verdict
    return verdicts


# -- the EDA event source: main() as ansible-rulebook calls it -------------------------------------

def check_eda_source(case):
    import asyncio

    from ..eda.test_event_source import SOURCE

    async def attempt(mock):
        args = {"imds_url": mock.vm_url(VM), "resource_name": VM, case.option.name: case.value_for(mock.port)}
        task = asyncio.ensure_future(SOURCE["main"](asyncio.Queue(), args))
        done = (await asyncio.wait([task], timeout=AT_ONCE))[0]
        if not done:
            task.cancel()
            await asyncio.wait([task])
            return Verdict(ACCEPTED, "the source was still polling after %gs" % AT_ONCE)
        error = task.exception()
        if error is None:
            return Verdict(ACCEPTED, "main() returned")
        if not isinstance(error, SOURCE["SourceConfigError"]):
            return Verdict(EXCEPTION, "%s: %s" % (type(error).__name__, _short(error)))
        return refusal(case, str(error), _requests(mock))

    with start_mock(rate_limit=True) as mock:
        return asyncio.run(attempt(mock))


def check_event_grid_source(case):
    """The event_grid source's main(): a bad option refused before it listens (nothing to audit)."""
    import asyncio
    import socket

    from ..eda.test_event_grid_source import SOURCE

    async def attempt():
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free_port = probe.getsockname()[1]
        args = {"host": "127.0.0.1", "port": free_port, "secret": "a-secret-of-32-characters-000000",
                case.option.name: case.value}
        task = asyncio.ensure_future(SOURCE["main"](asyncio.Queue(), args))
        done = (await asyncio.wait([task], timeout=AT_ONCE))[0]
        if not done:
            task.cancel()
            await asyncio.wait([task])
            return Verdict(ACCEPTED, "the source was still listening after %gs" % AT_ONCE)
        error = task.exception()
        if not isinstance(error, SOURCE["SourceConfigError"]):
            return Verdict(EXCEPTION if error else ACCEPTED, "%s: %s" % (type(error).__name__, _short(error)))
        return refusal(case, str(error))

    return asyncio.run(attempt())


# -- the table's driver ----------------------------------------------------------------------------

CHECKS = {"info": check_module, "approve": check_module, "watcher config": check_watcher_config,
          "eda source": check_eda_source, "event grid source": check_event_grid_source}
ROLE_KEY = "watcher-role-playbook"


def prefetch(params):
    case = params["case"]
    if case.option.target == "watcher role":
        return 1000.0, "input", ROLE_KEY, run_role_cases
    if case.option.target in CHECKS:
        return 0.0, "input", case.id, lambda: CHECKS[case.option.target](case)
    return None


def cells():
    """Every cell a runner can be asked for (board.py), by key."""
    return dict((started[2], started[3]) for started in (prefetch({"case": case}) for case in CASES) if started)


def verdict_of(case):
    target = case.option.target
    if target == "watcher role":
        return BOARD.result(ROLE_KEY, run_role_cases, PLAYBOOK_LIMIT + 60)[case.id]
    if target == "wait":
        return check_wait(case)
    # Each case's own processes are bounded by CASE_LIMIT; this bounds its wait in the queue, which
    # under pytest-xdist on two cores can sit behind the role's whole playbook run.
    return BOARD.result(case.id, lambda: CHECKS[target](case), PLAYBOOK_LIMIT + 10 * CASE_LIMIT)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_value_is_refused_at_once(case):
    verdict = verdict_of(case)
    BOARD.count("bad input", case.id, verdict.outcome, (case.option.target, case.option.name), failure=verdict.reason)
    assert verdict.outcome == REFUSED, "%s = %r: %s: %s" % (case.option.name, case.value, verdict.outcome,
                                                            verdict.reason)


def test_every_kind_of_bad_value_is_in_the_table():
    labels = set(label for label, _value in NUMBER_VALUES)
    assert {"nan", "+inf", "-inf", "negative", "zero", "huge", "string", "bool", "list"} <= labels
    assert any(isinstance(v, float) and math.isnan(v) for _l, v in NUMBER_VALUES)
    assert set(option.target for option in OPTIONS) == {"info", "approve", "wait", "watcher config", "watcher role",
                                                        "eda source", "event grid source"}
