"""No orphan handler, a stop that is a stop, StrictModes permissions and capped output, with real
processes: the gate that keeps a handler from running before its record is on disk, the ending
of a killed watcher's leftovers, SIGTERM in the middle of a phase of several handlers."""

import json
import os
import signal
import subprocess
import time

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import processes as watcher_processes
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.handlers import (
    OUTPUT_LIMIT, PhaseRunner, command_problem, permission_problem)
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.state import (
    StateStore)

from .helpers import ID_A, IGNORING_SIGTERM, NOW, LogSink, config, event, wait_until, write_handler
from .test_e2e_mock import Vm, mock  # noqa: F401  pylint: disable=unused-import
from .test_handlers import runner


def alive(pid):
    stat = watcher_processes.proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def read_state(tmp_path):
    return json.loads((tmp_path / "state" / "state.json").read_text())


# --------------------------------------------------------------------------------------------
# The gate: recorded before it may run
# --------------------------------------------------------------------------------------------

def test_a_handler_never_runs_when_its_record_could_not_be_written(tmp_path):
    marker = tmp_path / "ran"
    script = write_handler(tmp_path / "handlers", "drain", "10-x", "touch %s\n" % marker)
    seen = []

    def record_fails(proc, identity):
        seen.append(identity)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        watcher_processes.spawn_gated([script], watcher_processes.default_popen, record_fails)
    assert seen and seen[0]["pid"] > 0 and seen[0]["pgid"] == seen[0]["pid"] and seen[0]["start_ticks"] > 0
    time.sleep(0.2)
    assert not marker.exists() and not alive(seen[0]["pid"])


def test_a_program_that_cannot_be_executed_is_a_spawn_error_not_an_exit_status(tmp_path):
    path = write_handler(tmp_path / "handlers", "drain", "10-binary", "")
    with open(path, "wb") as handle:
        handle.write(b"\x7fELF not really")
    with pytest.raises(watcher_processes.SpawnError) as info:
        watcher_processes.spawn_gated([path], watcher_processes.default_popen, lambda proc, ident: None)
    assert "Exec format error" in str(info.value)


def test_the_handler_finds_its_own_record_in_the_state_file_when_it_starts(tmp_path):
    state_dir = tmp_path / "state"
    write_handler(tmp_path / "handlers", "drain", "10-look", """
        grep -c "\\"pid\\": $$," %s/state.json > %s/seen
        """ % (state_dir, tmp_path))
    cfg = config(tmp_path)
    os.makedirs(cfg["state_dir"])
    store = StateStore(cfg["state_dir"])
    store.save({}, "web_0")
    run = PhaseRunner(cfg, LogSink(), "web_0", base_env={"PATH": "/usr/bin:/bin"},
                      on_spawned=store.handler_started, on_exited=store.handler_ended)
    ok, summary, results = run.run("drain", event(not_before=None), key=ID_A.lower())
    assert ok, summary
    assert (tmp_path / "seen").read_text().strip() == "1"
    assert read_state(tmp_path)["running_handlers"] == []          # and gone once it ended


# --------------------------------------------------------------------------------------------
# Leftovers of a killed watcher
# --------------------------------------------------------------------------------------------

def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def start_group(*argv, ignore_term=False):
    proc = subprocess.Popen((IGNORING_SIGTERM if ignore_term else []) + list(argv), start_new_session=True)
    if ignore_term:
        # The wrapper ignores SIGTERM, then execs argv: until then (a busy machine) it would die of one.
        assert wait_until(lambda: _cmdline(proc.pid).split(b"\0")[0] == argv[0].encode())
    return proc, dict(watcher_processes.identity(proc.pid), event_key="k", event_id="E", phase="drain",
                      handler="10-x", started_at=NOW)


def test_a_leftover_group_gets_sigterm_then_sigkill_after_kill_grace():
    polite, polite_record = start_group("sleep", "300")
    stubborn, stubborn_record = start_group("sleep", "300", ignore_term=True)
    try:
        assert watcher_processes.end_group(polite_record, kill_grace=5) == "ended by SIGTERM"
        assert polite.wait(10) == -signal.SIGTERM
        assert watcher_processes.end_group(stubborn_record, kill_grace=0.2) == "killed"
        assert stubborn.wait(10) == -signal.SIGKILL
    finally:
        for proc in (polite, stubborn):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_reused_pid_or_a_reboot_is_never_signalled():
    proc, record = start_group("sleep", "300")
    try:
        assert watcher_processes.end_group(dict(record, start_ticks=record["start_ticks"] + 1), 0.1) == "gone"
        assert watcher_processes.end_group(dict(record, boot_id="another-boot"), 0.1) == "gone"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_children_left_in_the_group_of_a_dead_leader_are_ended_too(tmp_path):
    pid_file = tmp_path / "child"
    proc, record = start_group("/bin/sh", "-c", "sleep 300 & echo $! > %s; exit 0" % pid_file)
    proc.wait()
    child = int(pid_file.read_text())
    assert alive(child)
    assert watcher_processes.end_group(record, kill_grace=5) == "ended by SIGTERM"
    assert wait_until(lambda: not alive(child))


def test_a_watcher_killed_during_a_drain_has_its_handler_ended_by_the_next_start(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock, kill_grace=1)
    eid = vm.event(event_type="Terminate", resources=["web_0"])      # its drain handler hangs
    argv, env = vm.command("run", "--once")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with open(str(vm.fifo)) as fifo:
            handler_pid = int(fifo.read().strip())
        state = read_state(tmp_path)
        assert [h["pid"] for h in state["running_handlers"]] == [handler_pid]
        assert state["running_handlers"][0]["phase"] == "drain" and state["running_handlers"][0]["event_id"] == eid
    finally:
        proc.send_signal(signal.SIGKILL)            # no systemd here: nothing else ends the handler
        proc.wait()
    assert alive(handler_pid)
    out = vm.once()
    assert not alive(handler_pid)
    assert "handler drain/10-record (pid %d, process group %d) was still running from a watcher that was killed: " \
           "ended by SIGTERM; its drain counts as interrupted" % (handler_pid, handler_pid) in out
    # The leftover was ended before the first poll, and the drain is not approved nor run again.
    assert out.index("was still running") < out.index("this VM is web_0")
    state = read_state(tmp_path)
    assert state["running_handlers"] == [] and state["records"][eid.lower()]["drain"] == "interrupted"
    assert vm.approvals() == [] and vm.lines() == ["drain %s Terminate" % eid]


# --------------------------------------------------------------------------------------------
# A stop is a stop
# --------------------------------------------------------------------------------------------

def stop_vm(tmp_path, mock, second):  # noqa: F811
    vm = Vm(tmp_path, mock)
    marker = tmp_path / "second-ran"
    (tmp_path / "handlers" / "drain" / "10-record").write_text(
        "#!/bin/sh\necho \"drain $SE_EVENT_ID\" >> %s\necho $$ > %s\n%s\n" % (vm.log, vm.fifo, second))
    (tmp_path / "handlers" / "drain" / "20-next").write_text("#!/bin/sh\ntouch %s\n" % marker)
    os.chmod(str(tmp_path / "handlers" / "drain" / "20-next"), 0o755)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    argv, env = vm.command("run")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with open(str(vm.fifo)) as fifo:
        handler_pid = int(fifo.read().strip())
    return vm, eid, proc, handler_pid, marker


def signal_and_wait_until_seen(proc):
    """SIGTERM, then read the watcher's output until it has taken the signal (two signals sent
    before the first is handled would be one). Returns the lines read."""
    proc.send_signal(signal.SIGTERM)
    seen = []
    for line in iter(proc.stdout.readline, b""):
        seen.append(line.decode())
        if "received SIGTERM" in seen[-1]:
            break
    return seen


def test_sigterm_lets_the_running_handler_finish_and_starts_no_other(tmp_path, mock):  # noqa: F811
    go = tmp_path / "go"
    # The first handler goes on until the test has seen the watcher take the signal.
    vm, eid, proc, handler_pid, marker = stop_vm(tmp_path, mock, "while [ ! -e %s ]; do sleep 0.05; done" % go)
    seen = signal_and_wait_until_seen(proc)
    go.write_text("")
    out = "".join(seen) + proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, out
    assert "drain/10-record finished: exit 0" in out and "1 not started: the watcher is stopping" in out
    assert not marker.exists()
    state = read_state(tmp_path)
    record = state["records"][eid.lower()]
    assert record["drain"] == "interrupted" and record["approval"] == "withheld"
    assert state["running_handlers"] == []
    assert vm.approvals() == []


def test_a_second_sigterm_cuts_the_running_handler_short(tmp_path, mock):  # noqa: F811
    vm, eid, proc, handler_pid, marker = stop_vm(tmp_path, mock, "exec sleep 300")
    seen = signal_and_wait_until_seen(proc)
    proc.send_signal(signal.SIGTERM)
    out = "".join(seen) + proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, out
    assert "CUT SHORT by a second stop signal" in out
    assert not alive(handler_pid) and not marker.exists()
    state = read_state(tmp_path)
    assert state["records"][eid.lower()]["drain"] == "interrupted" and state["running_handlers"] == []
    assert vm.approvals() == []


def test_a_stop_does_not_wait_for_a_slow_imds(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    mock.control("POST", "faults", {"kind": "slow", "delay": 100})
    argv, env = vm.command("run")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert wait_until((tmp_path / "state" / "state.json").exists, 30)
    time.sleep(0.5)                               # the first GET is now waiting for the slow answer
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0 and "received SIGTERM" in out
    assert time.monotonic() - began < 30          # not the 100 s the answer would take


# --------------------------------------------------------------------------------------------
# StrictModes
# --------------------------------------------------------------------------------------------

def test_a_group_or_world_writable_directory_anywhere_above_the_handler_refuses_it(tmp_path):
    script = write_handler(tmp_path / "etc" / "handlers", "drain", "10-x", "exit 0\n")
    assert permission_problem(script) is None
    os.chmod(str(tmp_path / "etc"), 0o777)
    problem = permission_problem(script)
    assert "the directory %s is writable by group or others (mode 0777)" % (tmp_path / "etc") in problem
    assert "chmod go-w %s" % (tmp_path / "etc") in problem
    os.chmod(str(tmp_path / "etc"), 0o1777)             # sticky, like /tmp: nobody can replace what is inside
    assert permission_problem(script) is None


def test_every_existing_file_of_a_command_is_checked_not_only_the_program(tmp_path):
    script = tmp_path / "drain.sh"
    script.write_text("exit 0\n")
    os.chmod(str(script), 0o644)
    assert command_problem(["/bin/sh", str(script)]) is None
    os.chmod(str(script), 0o666)
    problem = command_problem(["/bin/sh", str(script), "--flag", "app.service"])
    assert problem.startswith("argument %s: " % script) and "writable by group or others (mode 0666)" in problem


def test_a_symbolic_link_into_a_writable_directory_is_refused(tmp_path):
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    target = write_handler(unsafe, "drain", "real", "exit 0\n")
    os.chmod(str(unsafe), 0o777)
    link_dir = tmp_path / "handlers" / "drain"
    link_dir.mkdir(parents=True)
    os.symlink(target, str(link_dir / "10-link"))
    assert "the directory %s is writable" % unsafe in permission_problem(str(link_dir / "10-link"))


def test_a_refused_command_is_not_run_and_the_log_names_the_path_and_the_fix(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "open.sh"
    script.write_text("touch %s\n" % marker)
    os.chmod(str(script), 0o777)
    run, log = runner(tmp_path, handlers=[{"name": "10-open", "phase": "drain", "command": ["/bin/sh", str(script)]}])
    ok, summary = run.run("drain", event())[:2]
    assert not ok and summary == "1 handler: 10-open refused" and not marker.exists()
    refused = log.messages("handler_refused")[0]
    assert str(script) in refused and "chmod go-w" in refused


# --------------------------------------------------------------------------------------------
# Output: capped in memory, nothing in state_dir
# --------------------------------------------------------------------------------------------

def test_output_is_capped_with_a_note_of_what_was_dropped_and_nothing_grows_on_disk(tmp_path):
    write_handler(tmp_path / "handlers", "started", "10-flood", "head -c 3000000 /dev/zero | tr '\\000' a\n")
    run, log = runner(tmp_path)
    before = os.listdir(run.config["state_dir"])
    ok = run.run("started", event(status="Started"))[0]
    assert ok
    note = log.messages("handler_output")[-1]
    assert "%d of 3000000 bytes kept, truncated %d bytes" % (OUTPUT_LIMIT, 3000000 - OUTPUT_LIMIT) in note
    assert os.listdir(run.config["state_dir"]) == before


def test_a_background_child_holding_the_output_does_not_hold_up_the_phase(tmp_path):
    write_handler(tmp_path / "handlers", "recover", "10-bg", "sleep 300 &\necho $! > %s/child\necho started it\n"
                  % tmp_path)
    run, log = runner(tmp_path)
    began = time.monotonic()
    try:
        ok = run.run("recover", event(status="Started"))[0]
        assert ok and time.monotonic() - began < 20
        assert "event %s: recover/10-bg: started it" % ID_A in log.messages("handler_output")
    finally:
        try:                        # ended with the handler's group since issue 22; never left behind
            os.kill(int((tmp_path / "child").read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_stop_without_systemd_ends_the_handler_of_a_watcher_it_had_to_kill(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    vm.event(event_type="Terminate", resources=["web_0"])            # its drain handler hangs
    pid_file, log_file = str(tmp_path / "watcher.pid"), str(tmp_path / "watcher.log")
    argv, env = vm.command("start", "--pid-file", pid_file, "--log-file", log_file)
    started = subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=False)
    assert started.returncode == 0 and b"started:" in started.stdout
    with open(str(vm.fifo)) as fifo:
        handler_pid = int(fifo.read().strip())
    argv, env = vm.command("stop", "--pid-file", pid_file, "--timeout", "1")
    stopped = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    out = stopped.stdout.decode()
    assert stopped.returncode == 0, out
    assert "did not stop within 1s and was killed" in out
    assert "handler drain/10-record (pid %d) it left running: ended by SIGTERM" % handler_pid in out
    assert not alive(handler_pid)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_stop_timeout_must_be_a_number_of_seconds(tmp_path, capsys, value):
    from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli  # pylint: disable=C0415
    main = cli.main
    with pytest.raises(SystemExit) as info:
        main(["stop", "--pid-file", str(tmp_path / "pid"), "--timeout", value])
    assert info.value.code == 2 and "--timeout" in capsys.readouterr().err
