"""The daemon end to end against the mock IMDS on loopback.

Most tests drive the real program (`run --once`, a subprocess per step) so every step is real:
HTTP, handler processes, the state file, a SIGKILL in the middle of a drain. The pacing test
runs the loop in this process with one fake clock shared by the daemon and the mock, so that 40
seconds of polling through faults take no real time and the mock's audit shows every request."""

import json
import os
import signal
import subprocess

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock
from .helpers import LogSink, config, watcher_command, watcher_environment
from .test_daemon import InlineWatcher

FLEET = {"default_vm": "web_0",
         "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_10"]}]}


@pytest.fixture
def mock():
    # Each `run --once` step is a new process that asks for the VM name and the document: several
    # steps a second would trip the 5 requests/s limit, which the pacing test below covers.
    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle


class Vm(object):
    """One watcher installation in tmp_path: configuration, handlers that append to a log, a FIFO
    through which a hanging drain handler reports its pid."""

    def __init__(self, tmp_path, mock, name="web_0", configured_name=True, **cfg):
        self.mock = mock
        self.root = tmp_path
        self.log = tmp_path / "handlers.log"
        self.fifo = tmp_path / "drain.fifo"
        os.mkfifo(str(self.fifo))
        handlers = tmp_path / "handlers"
        for phase in ("drain", "started", "recover"):
            os.makedirs(str(handlers / phase))
        self._handler("drain", """\
            echo "drain $SE_EVENT_ID $SE_EVENT_TYPE" >> {log}
            case "$SE_EVENT_TYPE" in
              Redeploy) echo "cannot drain this one" >&2; exit 1 ;;
              Terminate) echo $$ > {fifo}; exec sleep 300 ;;
            esac
            """)
        self._handler("started", 'echo "started $SE_EVENT_ID" >> {log}\n')
        self._handler("recover", 'echo "recover $SE_EVENT_ID" >> {log}\n')
        doc = dict(imds_url=mock.vm_url(name), state_dir=str(tmp_path / "state"), handlers_dir=str(handlers))
        if configured_name:
            doc["resource_name"] = name
        doc.update(cfg)
        self.config = tmp_path / "config.json"
        self.config.write_text(json.dumps(doc))

    def _handler(self, phase, body):
        path = self.root / "handlers" / phase / "10-record"
        lines = [line[12:] if line.startswith(" " * 12) else line
                 for line in body.format(log=self.log, fifo=self.fifo).splitlines()]
        path.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
        os.chmod(str(path), 0o755)

    def command(self, *args):
        env = dict(os.environ)
        env.pop("AZURE_IMDS_URL", None)
        env.pop("JOURNAL_STREAM", None)
        return watcher_command(*args) + ["--config", str(self.config)], watcher_environment(env)

    def once(self, expect=0):
        argv, env = self.command("run", "--once")
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
        out = proc.stdout.decode()
        assert proc.returncode == expect, out
        return out

    def lines(self):
        return self.log.read_text().splitlines() if self.log.exists() else []

    def event(self, **spec):
        return self.mock.control("POST", "events", spec)["event_id"]

    def approvals(self, vm="web_0"):
        return self.mock.control("GET", "audit?vm=%s" % vm)["approvals"]

    def status_of(self, event_id):
        return self.mock.control("GET", "events/%s" % event_id)["status"]


def test_one_event_drain_approval_started_recover(tmp_path, mock):
    vm = Vm(tmp_path, mock, configured_name=False)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    assert "this VM is web_0 (from IMDS compute/name)" in out
    assert vm.lines() == ["drain %s Reboot" % eid]
    approvals = vm.approvals()
    assert [a["event_ids"] for a in approvals] == [[eid]] and approvals[0]["started"] == [eid]
    assert "approval sent (policy after_drain" in out
    assert vm.status_of(eid) == "Started"
    out = vm.once()
    assert vm.lines()[1:] == ["started %s" % eid]
    vm.mock.control("POST", "events/%s/complete" % eid)
    out = vm.once()
    assert "left the document (finished or cancelled): recover is due" in out
    assert vm.lines() == ["drain %s Reboot" % eid, "started %s" % eid, "recover %s" % eid]
    vm.once()
    assert len(vm.lines()) == 3 and len(vm.approvals()) == 1


def test_event_for_another_vm_in_the_group_is_logged_not_acted_on(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Reboot", resources=["web_10", "web_1"])
    out = vm.once()
    assert "does not name this VM (web_0); logged, not acted on" in out and eid in out
    mock.control("POST", "events/%s/start" % eid)
    vm.once()
    mock.control("POST", "events/%s/complete" % eid)
    vm.once()
    assert vm.lines() == [] and vm.approvals() == []


def test_failing_drain_means_no_approval(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Redeploy", resources=["web_0", "web_1"])
    out = vm.once()
    assert vm.lines() == ["drain %s Redeploy" % eid]
    assert "event %s: drain/10-record: cannot drain this one" % eid in out
    assert "not approving because the drain failed" in out
    vm.once()
    assert vm.approvals() == [] and vm.status_of(eid) == "Scheduled"
    assert vm.lines() == ["drain %s Redeploy" % eid]          # and never a second drain


def test_kill_during_a_drain_leaves_one_drain_and_one_recover(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Terminate", resources=["web_0"])
    argv, env = vm.command("run", "--once")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with open(str(vm.fifo)) as fifo:          # returns once the hanging handler has started
            handler_pid = int(fifo.read().strip())
        state = json.loads((tmp_path / "state" / "state.json").read_text())
        assert state["records"][eid.lower()]["drain"] == "running"
    finally:
        # What `systemctl kill -s KILL` does to the service's control group.
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    os.kill(handler_pid, signal.SIGKILL)
    out = vm.once()
    assert "the drain was cut short by a restart of the watcher; it is not run again" in out
    assert vm.approvals() == [] and vm.status_of(eid) == "Scheduled"
    mock.control("POST", "events/%s/start" % eid)            # the platform starts it at NotBefore
    vm.once()
    mock.control("POST", "events/%s/complete" % eid)
    vm.once()
    vm.once()
    assert vm.lines() == ["drain %s Terminate" % eid, "started %s" % eid, "recover %s" % eid]


def test_cancelled_event_gets_its_recover(tmp_path, mock):
    mock.control("POST", "config", {"approval_mode": "not_before"})   # approvals alone start nothing
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    vm.once()
    assert [a["event_ids"] for a in vm.approvals()] == [[eid]]
    assert vm.status_of(eid) == "Scheduled"
    mock.control("POST", "events/%s/cancel" % eid)
    vm.once()
    assert vm.lines() == ["drain %s Reboot" % eid, "recover %s" % eid]


def test_event_that_appears_started_runs_started_then_recover(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Reboot", resources=["web_0"], status="Started")
    vm.once()
    mock.control("POST", "events/%s/complete" % eid)
    vm.once()
    assert vm.lines() == ["started %s" % eid, "recover %s" % eid]
    assert vm.approvals() == []


def test_dry_run_runs_nothing_and_approves_nothing(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    argv, env = vm.command("run", "--once", "--dry-run")
    out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False).stdout.decode()
    assert "DRY RUN: would run the drain handlers of event %s: drain/10-record" % eid in out
    assert "DRY RUN: would approve event %s" % eid in out
    assert vm.lines() == [] and vm.approvals() == []
    assert not (tmp_path / "state" / "state.json").exists()


def test_status_prints_what_imds_shows_and_what_the_watcher_remembers(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    mine = vm.event(event_type="Reboot", resources=["web_0"], event_id="AAAAAAAA-0000-4000-8000-000000000001")
    other = vm.event(event_type="Freeze", resources=["web_1"], duration_in_seconds=5)
    vm.once()
    argv, env = vm.command("status")
    out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False).stdout.decode()
    assert "this VM:   web_0" in out and "document:  incarnation" in out
    assert "%s  Reboot Started" % mine in out
    assert "watcher: drain succeeded, approval sent" in out
    assert "%s  Freeze Scheduled" % other in out and "does not name this VM" in out
    argv, env = vm.command("status", "--json")
    report = json.loads(subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=False).stdout.decode())
    by_id = dict((e["event_id"], e) for e in report["events"])
    assert by_id[mine]["affects_this_host"] is True and by_id[mine]["watcher"]["drain"] == "succeeded"
    assert by_id[other]["affects_this_host"] is False and by_id[other]["watcher"]["drain"] is None


def test_status_without_imds_fails_with_a_message(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    argv, env = vm.command("status", "--imds-url", "http://127.0.0.1:9")
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
    # No daemon has run with this state directory: down (3) outranks IMDS not answering (1).
    assert proc.returncode == 3
    err = proc.stderr.decode()
    assert "is this an Azure VM" in err and "Traceback" not in err
    assert "daemon:    down (no status file in" in proc.stdout.decode()


# --------------------------------------------------------------------------------------------
# Pacing, verified by the mock's audit
# --------------------------------------------------------------------------------------------

EPOCH = 1800000000.0


def test_never_more_than_one_request_per_second_through_every_fault(tmp_path):
    clock = FakeClock(start=500.0)
    with start_mock(fleet=FLEET, clock=clock, wallclock=lambda: EPOCH + clock.now) as handle:
        faults = [
            {"kind": "status", "status": 429, "retry_after": 3, "count": 2},
            {"kind": "status", "status": 500, "count": 3},
            {"kind": "status", "status": 410, "count": 3},
            {"kind": "drop", "count": 1},
            {"kind": "empty_body", "count": 1},
            {"kind": "malformed_json", "count": 1},
        ]
        cfg = config(tmp_path, imds_url=handle.vm_url("web_0"), resource_name="web_0",
                     approval={"user_events_at_once": True})
        client = cli.make_client(cfg, clock=clock, sleep=clock.sleep, wall_clock=lambda: EPOCH + clock.now)
        log = LogSink()
        script = {505.0: faults[:3], 520.0: faults[3:]}
        user_event = {"event_type": "Reboot", "resources": ["web_0"], "event_source": "User"}

        def idle(seconds):
            # Faults and events arrive on the simulated clock, between polls.
            clock.sleep(seconds)
            for at in sorted(script):
                if clock.now >= at:
                    for fault in script.pop(at):
                        handle.control("POST", "faults", fault)
            if clock.now >= 512 and not handle.control("GET", "events"):
                handle.control("POST", "events", user_event)
            if clock.now >= 540:
                watcher.stopping = True

        watcher = InlineWatcher(cfg, client, log, cli.StateStore(cfg["state_dir"]), clock=clock,
                                wall_clock=lambda: EPOCH + clock.now, idle=idle)
        watcher.outcomes = {}
        watcher.resolve_name()
        watcher.load_state()
        watcher.run_forever()
        audit = handle.control("GET", "audit?vm=web_0")
    requests = audit["requests"]
    faults_seen = set(r["fault"] for r in requests if r["fault"])
    assert faults_seen == {"status", "drop", "empty_body", "malformed_json"}
    assert [r["status"] for r in requests].count(429) == 2
    assert len(audit["approvals"]) == 1
    # sim_time runs on the shared fake clock (speed 1); the request's "time" is the real arrival.
    times = [daemon_time(r["sim_time"]) for r in requests]
    posts = [i for i, r in enumerate(requests) if r["method"] == "POST"]
    assert len(posts) == 1
    for i in range(1, len(requests)):
        gap = times[i] - times[i - 1]
        if i in posts:
            continue          # an approval is never delayed ...
        assert gap >= 0.999, (requests[i - 1], requests[i])   # ... and everything else keeps a second apart
    # Over the 40 simulated seconds: at most one request a second, plus the approval.
    assert len(requests) <= (times[-1] - times[0]) + 1 + len(posts)
    # Retry-After: 3 was honoured: the request after each 429 came 3 s later.
    for i, r in enumerate(requests[:-1]):
        if r["status"] == 429:
            assert times[i + 1] - times[i] >= 2.999
    assert "imds_recovered" in log.actions()


def daemon_time(iso):
    """The audit's ISO time (milliseconds) back to seconds since the epoch."""
    import calendar
    import time as _time
    base, millis = iso.rstrip("Z").split(".")
    return calendar.timegm(_time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(millis) / 1000.0
