"""Finding, refusing and running handlers: order, filters, input, time limits, no shell."""

import json
import os
import signal
import subprocess
import sys

import pytest
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.handlers import (
    SE_VALUE_MAX_BYTES, PhaseRunner, discover, handler_env_values, permission_problem)

from .helpers import ID_A, IGNORING_SIGTERM, NOW, LogSink, config, event, write_handler


class ImmediateTimer(object):
    """threading.Timer stand-in that fires at start(): a time limit is reached at once, for real
    processes, without the test waiting. Records every interval asked for."""

    intervals = None

    def __init__(self, interval, function, args=()):
        self.interval = interval
        self.function = function
        self.args = args
        self.daemon = False
        ImmediateTimer.intervals.append(interval)

    def start(self):
        self.function(*self.args)

    def cancel(self):
        pass


class NeverTimer(ImmediateTimer):
    def start(self):
        pass


def runner(tmp_path, timer=NeverTimer, popen=None, wall=NOW, **cfg):
    ImmediateTimer.intervals = []
    cfg = config(tmp_path, **cfg)
    os.makedirs(cfg["state_dir"], exist_ok=True)
    log = LogSink()
    return PhaseRunner(cfg, log, "web_0", wall_clock=lambda: wall, popen=popen, timer=timer,
                       base_env={"PATH": "/usr/bin:/bin"}), log


# --------------------------------------------------------------------------------------------
# Discovery and permissions
# --------------------------------------------------------------------------------------------

def test_handlers_run_in_lexical_order_with_configured_commands_among_files(tmp_path):
    handlers = tmp_path / "handlers"
    for name in ("20-stop", "10-lb", "30-z", ".hidden", "backup~"):
        write_handler(handlers, "drain", name, "exit 0\n")
    write_handler(handlers, "recover", "10-lb", "exit 0\n")
    configured = config(tmp_path, handlers=[
        {"name": "15-cmd", "phase": "drain", "command": ["/bin/true"]},
        {"name": "30-z", "phase": "drain", "event_types": ["Freeze"], "timeout": 7},
    ])["handlers"]
    found = discover(str(handlers), "drain", configured)
    assert [h.name for h in found] == ["10-lb", "15-cmd", "20-stop", "30-z"]
    assert found[1].argv == ["/bin/true"]
    assert found[3].event_types == ["Freeze"] and found[3].timeout == 7
    assert all(h.problem is None for h in found)


def test_configured_handler_without_its_file_is_reported(tmp_path):
    configured = config(tmp_path, handlers=[{"name": "10-gone", "phase": "drain"}])["handlers"]
    found = discover(str(tmp_path / "handlers"), "drain", configured)
    assert len(found) == 1 and "does not exist" in found[0].problem


def test_group_or_other_writable_handlers_and_directories_are_refused(tmp_path):
    path = write_handler(tmp_path, "drain", "10-x", "exit 0\n")
    assert permission_problem(path) is None
    os.chmod(path, 0o775)
    assert "writable by group or others (mode 0775)" in permission_problem(path)
    os.chmod(path, 0o757)
    assert "chmod go-w" in permission_problem(path)
    os.chmod(path, 0o644)
    assert "not executable" in permission_problem(path)
    os.chmod(path, 0o755)
    os.chmod(os.path.dirname(path), 0o777)
    assert "the directory %s is writable by group or others" % os.path.dirname(path) in permission_problem(path)


def test_handlers_owned_by_someone_else_are_refused(tmp_path, monkeypatch):
    path = write_handler(tmp_path, "drain", "10-x", "exit 0\n")
    real_stat = os.stat

    class Foreign(object):
        def __init__(self, st):
            self.st_mode, self.st_uid = st.st_mode, 4242

    monkeypatch.setattr(os, "stat", lambda p: Foreign(real_stat(p)) if p == path else real_stat(p))
    assert "owned by uid 4242" in permission_problem(path, euid=1000)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------

def test_handler_gets_the_event_on_stdin_and_in_the_environment(tmp_path):
    out = tmp_path / "seen"
    write_handler(tmp_path / "handlers", "drain", "10-dump", """
        cat > %s.json
        env | grep '^SE_' | sort > %s.env
        echo "draining $SE_EVENT_ID"
        """ % (out, out))
    run, log = runner(tmp_path)
    ok, summary, results = run.run("drain", event(description="maintenance"))
    assert ok and summary == "1 handler: 10-dump ok"
    stdin = json.loads((tmp_path / "seen.json").read_text())
    assert stdin["event_id"] == ID_A and stdin["phase"] == "drain" and stdin["resource_name"] == "web_0"
    env = dict(line.split("=", 1) for line in (tmp_path / "seen.env").read_text().splitlines())
    assert env["SE_EVENT_ID"] == ID_A and env["SE_EVENT_TYPE"] == "Reboot" and env["SE_RESOURCES"] == "web_0"
    assert env["SE_DESCRIPTION"] == "maintenance" and env["SE_NOT_BEFORE"] == "2023-11-14T22:28:20Z"
    assert set(env) >= {"SE_EVENT_STATUS", "SE_EVENT_SOURCE", "SE_DURATION"}
    assert "event %s: drain/10-dump: draining %s" % (ID_A, ID_A) in log.messages("handler_output")
    finished = [line for line in log.lines if line[1] == "handler_finished"][0]
    assert finished[3]["exit_code"] == 0 and "exit 0 in" in finished[2]


def test_event_data_never_reaches_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    hostile = "$(touch %s); `touch %s`; touch %s" % (marker, marker, marker)
    write_handler(tmp_path / "handlers", "drain", "10-echo", 'printf "%s" "$SE_DESCRIPTION" > /dev/null\n')
    calls = []

    def spy(argv, **kwargs):
        calls.append((argv, kwargs))
        return subprocess.Popen(argv, **kwargs)

    run = runner(tmp_path, popen=spy)[0]
    assert run.run("drain", event(description=hostile))[0]
    assert not marker.exists()
    argv, kwargs = calls[0]
    assert isinstance(argv, list) and kwargs["shell"] is False
    # The gate (a Python interpreter that execs the handler once its record is written) comes
    # first; the handler's own argument list ends it, unchanged, and no argument holds event data.
    assert argv[0] == sys.executable and argv[-1] == str(tmp_path / "handlers" / "drain" / "10-echo")
    assert not any(hostile in argument for argument in argv)
    assert kwargs["env"]["SE_DESCRIPTION"] == hostile


def test_configured_command_runs_with_its_arguments(tmp_path):
    run, log = runner(tmp_path, handlers=[{"name": "10-env", "phase": "recover",
                                           "command": ["/usr/bin/env"]}],
                      handler_environment={"KUBECONFIG": "/etc/kubernetes/admin.conf"})
    assert run.run("recover", event(status="Started"))[0]
    output = log.messages("handler_output")
    assert "event %s: recover/10-env: SE_PHASE=recover" % ID_A in output
    assert "event %s: recover/10-env: KUBECONFIG=/etc/kubernetes/admin.conf" % ID_A in output


def test_event_type_filters_pick_the_handlers(tmp_path):
    write_handler(tmp_path / "handlers", "drain", "10-all", "exit 0\n")
    write_handler(tmp_path / "handlers", "drain", "20-k8s", "exit 0\n")
    run, log = runner(tmp_path, handlers=[{"name": "20-k8s", "phase": "drain", "event_types": ["Reboot"]}])
    assert run.run("drain", event(event_type="Freeze"))[1] == "1 handler: 10-all ok"
    assert run.run("drain", event(event_type="Reboot"))[1] == "2 handlers: 10-all ok, 20-k8s ok"


def test_no_applicable_handler_is_a_success_that_says_so(tmp_path):
    run, log = runner(tmp_path)
    ok, summary, results = run.run("drain", event())
    assert ok and results == [] and "no drain handler applies to Reboot" in log.messages("phase_empty")[0]


def test_failing_handler_fails_the_phase_and_later_handlers_still_run(tmp_path):
    done = tmp_path / "second-ran"
    write_handler(tmp_path / "handlers", "drain", "10-fail", "echo cannot drain >&2\nexit 3\n")
    write_handler(tmp_path / "handlers", "drain", "20-next", "touch %s\n" % done)
    run, log = runner(tmp_path)
    ok, summary = run.run("drain", event())[:2]
    assert not ok and summary == "2 handlers: 10-fail exit 3, 20-next ok"
    assert done.exists()
    assert "event %s: drain/10-fail: cannot drain" % ID_A in log.messages("handler_output")
    errors = [line for line in log.lines if line[0] == "error"]
    assert "FAILED: exit 3" in errors[0][2]


def test_refused_handler_is_not_run_logged_as_error_and_fails_the_phase(tmp_path):
    marker = tmp_path / "ran"
    write_handler(tmp_path / "handlers", "drain", "10-open", "touch %s\n" % marker, mode=0o777)
    run, log = runner(tmp_path)
    ok, summary = run.run("drain", event())[:2]
    assert not ok and summary == "1 handler: 10-open refused"
    assert not marker.exists()
    refused = [line for line in log.lines if line[1] == "handler_refused"][0]
    assert refused[0] == "error" and "REFUSED" in refused[2] and "chmod go-w" in refused[2]


def test_timeout_stops_the_handler_and_fails_the_phase(tmp_path):
    write_handler(tmp_path / "handlers", "drain", "10-hang", "exec sleep 30\n")
    run, log = runner(tmp_path, timer=ImmediateTimer, handler_timeout=42, kill_grace=3)
    ok, summary, results = run.run("drain", event(not_before=None))
    assert not ok and summary == "1 handler: 10-hang timed out"
    assert results[0].exit_code == -signal.SIGTERM
    assert ImmediateTimer.intervals == [42, 3]
    assert "TIMED OUT" in log.messages("handler_finished")[0]


def test_a_handler_that_ignores_sigterm_is_killed(tmp_path):
    write_handler(tmp_path / "handlers", "drain", "10-stubborn", "exec sleep 30\n")

    def ignoring_term(argv, **kwargs):
        return subprocess.Popen(IGNORING_SIGTERM + list(argv), **kwargs)

    run = runner(tmp_path, timer=ImmediateTimer, popen=ignoring_term)[0]
    ok, summary, results = run.run("drain", event(not_before=None))
    assert not ok and summary == "1 handler: 10-stubborn timed out" and results[0].exit_code == -signal.SIGKILL


def test_drain_time_limit_never_runs_past_not_before(tmp_path):
    write_handler(tmp_path / "handlers", "drain", "10-x", "exit 0\n")
    write_handler(tmp_path / "handlers", "recover", "10-x", "exit 0\n")
    run, log = runner(tmp_path, timer=NeverTimer, wall=NOW, handler_timeout=300, kill_grace=5)
    run.run("drain", event(not_before="2023-11-14T22:14:20Z"))          # NOW + 60
    assert ImmediateTimer.intervals == [55]
    assert "time limit 55s by NotBefore" in log.messages("handler_started")[0]
    run.run("recover", event(not_before="2023-11-14T22:14:20Z"))
    assert ImmediateTimer.intervals[-1] == 300


def test_drain_handler_is_not_started_when_not_before_is_too_close(tmp_path):
    marker = tmp_path / "ran"
    write_handler(tmp_path / "handlers", "drain", "10-x", "touch %s\n" % marker)
    run, log = runner(tmp_path, wall=NOW, kill_grace=5)
    ok, summary = run.run("drain", event(not_before="2023-11-14T22:13:23Z"))[:2]   # NOW + 3
    assert not ok and summary == "1 handler: 10-x not started" and not marker.exists()
    assert "must end by NotBefore" in log.messages("handler_not_started")[0]


def test_handler_that_cannot_be_executed_fails_cleanly(tmp_path):
    path = write_handler(tmp_path / "handlers", "drain", "10-binary", "")
    with open(path, "wb") as handle:
        handle.write(b"\x7fELF not really")
    run, log = runner(tmp_path)
    ok, summary = run.run("drain", event())[:2]
    assert not ok and summary == "1 handler: 10-binary not started"
    assert "FAILED to start" in log.messages("handler_finished")[0]


def test_long_output_is_cut(tmp_path):
    write_handler(tmp_path / "handlers", "started", "10-chatty", "seq 1 500\n")
    run, log = runner(tmp_path)
    run.run("started", event(status="Started"))
    output = log.messages("handler_output")
    assert output[0] == "event %s: started/10-chatty: 1" % ID_A and len(output) == 41 and "output cut" in output[-1]


# --------------------------------------------------------------------------------------------
# Event text that an environment cannot hold (issue 22, item 3)
# --------------------------------------------------------------------------------------------

MANY_RESOURCES = ["web_0"] + ["vm_%05d" % number for number in range(59999)]
HOSTILE_TEXT = [
    ("nul_in_description", {"description": "Host\x00update"}),
    ("nul_in_event_type", {"event_type": "Re\x00boot"}),
    ("lone_surrogate_in_description", {"description": "Host \ud800 update"}),
    ("description_200_kb", {"description": "x" * 200 * 1024}),
    ("description_900_kb_of_two_byte_characters", {"description": u"\u00e9" * 450 * 1024}),
    ("resources_60000_names", {"resources": MANY_RESOURCES}),
]


SAVE_SE_VARIABLES = ('import json, os, sys; '
                     'json.dump(dict((k, v) for k, v in os.environ.items() if k.startswith("SE_")), '
                     'open(sys.argv[1], "w"))')


def _dump_handler(tmp_path):
    """A drain handler that saves its standard input and its SE_* variables (as JSON) and exits 0."""
    out = tmp_path / "seen"
    write_handler(tmp_path / "handlers", "drain", "10-dump", """
        cat > %s.json
        exec %s -c '%s' %s.env.json
        """ % (out, sys.executable, SAVE_SE_VARIABLES, out))
    return out


@pytest.mark.parametrize("fields", [fields for _label, fields in HOSTILE_TEXT],
                         ids=[label for label, _fields in HOSTILE_TEXT])
def test_event_text_an_environment_cannot_hold_still_starts_the_handler(tmp_path, fields):
    out = _dump_handler(tmp_path)
    run, log = runner(tmp_path)
    hostile = event(**fields)
    ok, summary = run.run("drain", hostile)[:2]
    assert ok and summary == "1 handler: 10-dump ok", log.lines
    # Standard input keeps the whole event, as valid JSON.
    stdin = json.loads((tmp_path / "seen.json").read_text())
    assert dict((key, stdin[key]) for key in hostile) == hostile
    env = json.loads((tmp_path / "seen.env.json").read_text())
    truncated = env["SE_TRUNCATED"].split()
    for name, value in env.items():
        assert "\x00" not in value and len(value.encode("utf-8")) <= SE_VALUE_MAX_BYTES, name
    description = (hostile["description"] or "").replace("\x00", u"\ufffd").replace("\ud800", u"\ufffd")
    assert description.startswith(env["SE_DESCRIPTION"])
    assert (env["SE_DESCRIPTION"] != description) == ("SE_DESCRIPTION" in truncated)
    assert env["SE_EVENT_TYPE"] == hostile["event_type"].replace("\x00", u"\ufffd")
    # Resources are cut after a whole name, never inside one.
    names = env["SE_RESOURCES"].split(" ")
    assert names == hostile["resources"][:len(names)]
    assert (len(names) < len(hostile["resources"])) == ("SE_RESOURCES" in truncated)


def test_se_values_are_cleaned_and_cut_as_documented():
    values = handler_env_values({"SE_DESCRIPTION": u"a\x00b\ud800c" + u"\u00e9" * SE_VALUE_MAX_BYTES,
                                 "SE_RESOURCES": " ".join(["web_0", "x" * SE_VALUE_MAX_BYTES]),
                                 "SE_EVENT_ID": ID_A})
    assert values["SE_EVENT_ID"] == ID_A
    assert values["SE_DESCRIPTION"].startswith(u"a\ufffdb\ufffdc\u00e9")
    # Cut on a character boundary: U+00E9 is two bytes, so one byte of the limit stays unused.
    assert len(values["SE_DESCRIPTION"].encode("utf-8")) == SE_VALUE_MAX_BYTES - 1
    assert values["SE_RESOURCES"] == "web_0"
    assert values["SE_TRUNCATED"] == "SE_DESCRIPTION SE_RESOURCES"
    assert handler_env_values({"SE_EVENT_ID": ID_A})["SE_TRUNCATED"] == ""
