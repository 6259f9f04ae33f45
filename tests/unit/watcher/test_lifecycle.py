"""Issue 22, the watcher's life: one watcher per state directory (a lock), SIGHUP that is logged and
survived, a state directory that cannot be written at start (backed off, said once), a handler's
background child that does not outlive its handler, and no status-file warning at a first start.

The daemon runs as a real process against the mock IMDS on loopback where signals and locks
between processes are the point; the backoff runs in this process with its sleep recorded."""

import errno
import json
import os
import queue
import signal
import socket
import subprocess
import threading

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _retry
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import daemon
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import processes as watcher_processes
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import state as watcher_state
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.state import (
    LOCK_FILE, StateLocked, StateStore)

from .helpers import ID_A, event, wait_until, write_handler
from .test_daemon import build, doc, scheduled
from .test_e2e_mock import Vm, mock  # noqa: F401  pylint: disable=unused-import
from .test_handlers import runner


# A child left in the handler's process group that ignores SIGTERM; the handler exits 0 once the
# child has set that up (so the test does not depend on who runs first).
IGNORING_CHILD = """\
(trap '' TERM; touch %(dir)s/ignoring; exec sleep 300) &
echo $! > %(dir)s/child
while [ ! -e %(dir)s/ignoring ]; do sleep 0.01; done
"""


def alive(pid):
    stat = watcher_processes.proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


class Daemon(object):
    """`run` of a Vm as a process, its output read line by line by a thread (never blocking the test)."""

    def __init__(self, vm, *args):
        argv, env = vm.command("run", *args)
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines = []
        self._queue = queue.Queue()
        reader = threading.Thread(target=self._read, name="daemon-output")
        reader.daemon = True
        reader.start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.append(line.decode("utf-8", "replace"))

    def output(self):
        return "".join(self.lines)

    def wait_for(self, text):
        assert wait_until(lambda: text in self.output()), \
            "never saw %r (exit %s):\n%s" % (text, self.proc.poll(), self.output())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


# --------------------------------------------------------------------------------------------
# Item 1: one watcher per state directory
# --------------------------------------------------------------------------------------------

def test_a_second_watcher_or_run_once_refuses_naming_the_pid_and_leaves_the_live_drain_alone(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock, kill_grace=1)
    eid = vm.event(event_type="Terminate", resources=["web_0"])     # its drain handler hangs
    first = Daemon(vm)
    try:
        with open(str(vm.fifo)) as fifo:
            handler_pid = int(fifo.read().strip())
        stray = tmp_path / "state" / "state.json.tmp-99999"       # as if the live watcher were writing it
        stray.write_text("{}")
        for args in (("run", "--once"), ("run",)):
            argv, env = vm.command(*args)
            second = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                                    check=False)
            out = second.stdout.decode()
            assert second.returncode == cli.EXIT_LOCKED, out
            assert "another watcher (pid %d) holds the state directory %s" % (first.proc.pid, tmp_path / "state") \
                in out, out
            assert "Traceback" not in out and "this VM is" not in out
            # It ended nothing, swept nothing, wrote nothing of its own into the directory.
            assert alive(handler_pid) and stray.exists()
            assert json.loads((tmp_path / "state" / "status.json").read_text())["pid"] == first.proc.pid
        # The lock is the watcher's alone: the handler it runs does not hold it.
        lock = str(tmp_path / "state" / LOCK_FILE)
        fds = os.listdir("/proc/%d/fd" % handler_pid)
        assert lock not in [os.path.realpath("/proc/%d/fd/%s" % (handler_pid, fd)) for fd in fds]
        assert vm.lines() == ["drain %s Terminate" % eid] and vm.approvals() == []
    finally:
        os.kill(handler_pid, signal.SIGKILL)
        assert first.stop() == 0, first.output()
    # Once the first has stopped, the next start takes the directory (and sweeps the stray file).
    out = vm.once()
    assert "holds the state directory" not in out and not stray.exists()


def test_the_lock_names_its_holder_and_only_its_holder_sweeps_temporary_files(tmp_path):
    directory = str(tmp_path)
    holder = StateStore(directory)
    holder.lock()
    stray = tmp_path / "state.json.tmp-4242"
    stray.write_text("half a write")
    other = StateStore(directory)
    with pytest.raises(StateLocked) as info:
        other.lock()
    assert info.value.holder == os.getpid() and "pid %d" % os.getpid() in str(info.value)
    other.load()
    assert stray.exists()                        # not the lock's holder: the file may be a live write
    holder.unlock()
    other.lock()
    other.load()
    assert not stray.exists()
    other.unlock()


# --------------------------------------------------------------------------------------------
# Item 7: SIGHUP
# --------------------------------------------------------------------------------------------

def test_sighup_is_logged_and_the_watcher_goes_on_polling_and_acting(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    watcher = Daemon(vm)
    try:
        watcher.wait_for("this VM is web_0")
        watcher.proc.send_signal(signal.SIGHUP)
        watcher.wait_for("received SIGHUP: ignored, the watcher goes on; it does not reload its configuration")
        assert watcher.proc.poll() is None
        eid = vm.event(event_type="Reboot", resources=["web_0"])
        assert wait_until(lambda: [a["event_ids"] for a in vm.approvals()] == [[eid]]), watcher.output()
        assert vm.lines() == ["drain %s Reboot" % eid]
    finally:
        code = watcher.stop()
    assert code == 0, watcher.output()
    assert "azure-imds-watcher stopped" in watcher.output()


# --------------------------------------------------------------------------------------------
# Item 12: a state directory that cannot be written at start; leftovers of a handler; first start
# --------------------------------------------------------------------------------------------

def failing_writes(monkeypatch, count, code=errno.EROFS):
    """The first `count` writes of the state file fail as on a read-only (or full) file system."""
    real = watcher_state.replace_file
    failed = []

    def replace_file(path, data, mode, durable=False):
        if len(failed) < count:
            failed.append(path)
            raise OSError(code, os.strerror(code), path + ".tmp")
        return real(path, data, mode, durable)

    monkeypatch.setattr(watcher_state, "replace_file", replace_file)
    return failed


def test_a_state_directory_that_cannot_be_written_at_start_is_backed_off_and_said_once(tmp_path, monkeypatch):
    watcher, transport, _clock, log = build(tmp_path, [doc(scheduled())] * 3, stop_after=1010.0)
    failed = failing_writes(monkeypatch, 4)
    slept = []
    watcher._sleep = slept.append
    assert watcher.end_leftovers() is True
    assert len(failed) == 4 and slept == [1.0, 2.0, 4.0, 8.0]          # the loop's backoff, capped at 10 s
    assert len(log.messages("state_unusable")) == 1
    assert "Read-only file system" in log.messages("state_unusable")[0]
    assert log.messages("state_recovered") == ["the state in %s can be used again after 4 failed attempts"
                                               % watcher.config["state_dir"]]
    assert os.path.exists(os.path.join(watcher.config["state_dir"], "state.json"))
    assert transport.requests == []                       # nothing was asked of IMDS meanwhile


def test_run_once_on_a_read_only_state_at_start_backs_off_tells_systemd_it_is_alive_and_then_acts(
        tmp_path, monkeypatch, capsys, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(0)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    # Short waits instead of 1, 2 s...: the backoff itself is the test above.
    monkeypatch.setattr(daemon, "INTERNAL", _retry.RetryRule("an internal error", base=0.01, cap=0.01))
    failed = failing_writes(monkeypatch, 3)
    try:
        code = cli.main(["run", "--once", "--config", str(vm.config)])
        out = capsys.readouterr().out
        messages = []
        while True:
            try:
                messages.append(notify.recv(4096).decode())
            except BlockingIOError:
                break
    finally:
        notify.close()
    assert code == cli.EXIT_OK, out
    assert len(failed) == 3 and out.count("cannot use the state in") == 1
    assert "can be used again after 3 failed attempts" in out
    assert messages[0] == "READY=1\nSTATUS=state directory unusable"
    assert [a["event_ids"] for a in vm.approvals()] == [[eid]] and vm.lines() == ["drain %s Reboot" % eid]


def test_a_first_start_creates_the_state_directory_before_it_writes_the_status_file(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    assert not (tmp_path / "state").exists()
    out = vm.once()
    assert "cannot write the status file" not in out and "publish_failed" not in out
    assert json.loads((tmp_path / "state" / "status.json").read_text())["last_successful_poll"] is not None


def test_a_background_child_that_ignores_sigterm_is_ended_when_its_handler_exits(tmp_path):
    # A handler that succeeds and leaves a child behind in its process group, one that ignores SIGTERM.
    write_handler(tmp_path / "handlers", "recover", "10-bg", IGNORING_CHILD % {"dir": tmp_path} + "echo started it\n")
    run, log = runner(tmp_path, kill_grace=0.2)
    child = None
    try:
        ok, summary = run.run("recover", event(status="Started"))[:2]
        child = int((tmp_path / "child").read_text())
        assert ok and summary == "1 handler: 10-bg ok", summary
        assert not alive(child)
        ended = log.messages("handler_group_ended")
        assert len(ended) == 1 and "event %s: handler recover/10-bg exited but left processes in its process " \
            "group" % ID_A in ended[0] and ended[0].endswith(": killed (a handler must not leave processes behind)")
        # The group was ended before the handler counted as ended (its record stays until then).
        assert log.actions().index("handler_group_ended") < log.actions().index("handler_finished")
    finally:
        if child is not None and alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_handler_that_leaves_nothing_behind_logs_nothing_more(tmp_path):
    write_handler(tmp_path / "handlers", "recover", "10-plain", "echo done\n")
    run, log = runner(tmp_path)
    assert run.run("recover", event(status="Started"))[0]
    assert "handler_group_ended" not in log.actions()


def test_a_drain_handler_group_is_ended_before_the_approval(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock, kill_grace=0.5)
    write_handler(tmp_path / "handlers", "drain", "10-record", 'echo "drain $SE_EVENT_ID" >> %s\n' % vm.log
                  + IGNORING_CHILD % {"dir": tmp_path})
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    child = int((tmp_path / "child").read_text())
    try:
        assert not alive(child), out
        assert out.index("left processes in its process group") < out.index("approval sent")
        assert [a["event_ids"] for a in vm.approvals()] == [[eid]]
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
