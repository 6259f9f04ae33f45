"""Issue 15, the watcher's operations: metrics, the status file behind `status`, systemd's notify
socket and --version.

The lifecycle test runs the real daemon (`run`, a subprocess) against the mock on loopback and
compares what it published with what the mock's audit and the handler log say happened. Real
time is only waited on, never asserted: every wait polls for what the audit or a file shows,
within a generous bound."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import liveness as watcher_liveness
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import metrics as watcher_metrics
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import MOCK_PATH, start_mock
from .conftest import ROOT
from .helpers import config, watcher_command, watcher_environment
from .test_e2e_mock import FLEET, Vm

# Generous bounds for a busy 2-core machine: waits end as soon as the condition holds.
WAIT_LIMIT = 90.0
GALAXY_VERSION = yaml.safe_load(open(os.path.join(ROOT, "galaxy.yml")))["version"]


def wait_for(condition, what, limit=WAIT_LIMIT):
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("waited %gs for %s" % (limit, what))
        time.sleep(0.05)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def samples(text):
    """{(sample name, ((label, value), ...)): value} through Prometheus's own parser."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def families(text):
    return dict((family.name, family.type) for family in text_string_to_metric_families(text))


def value(parsed, name, **labels):
    return parsed[(watcher_metrics.PREFIX + name, tuple(sorted(labels.items())))]


def total(parsed, name):
    return sum(v for (sample, _labels), v in parsed.items() if sample == watcher_metrics.PREFIX + name)


class Daemon(object):
    """`run` in the background, its output in a file."""

    def __init__(self, vm, env=None):
        argv, base_env = vm.command("run")
        base_env.update(env or {})
        self.output = vm.root / "daemon.out"
        with open(str(self.output), "wb") as out:
            self.proc = subprocess.Popen(argv, env=base_env, stdout=out, stderr=subprocess.STDOUT)

    def text(self):
        return self.output.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(60)
            raise AssertionError("the watcher did not stop within 60 s of SIGTERM:\n" + self.text())


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle


# --------------------------------------------------------------------------------------------
# Metrics through a whole lifecycle, against the mock's audit and the handler log
# --------------------------------------------------------------------------------------------

def consistent_view(vm, textfile):
    """(metrics, audit) taken while no poll or approval happened in between: the textfile read
    before and after the audit agrees on every poll and approval count."""
    def attempt():
        before = samples(textfile.read_text())
        audit = vm.mock.control("GET", "audit?vm=web_0")
        after = samples(textfile.read_text())
        counts = [(total(m, "polls_total"), total(m, "approvals_total")) for m in (before, after)]
        return (after, audit) if counts[0] == counts[1] else None
    return wait_for(attempt, "a textfile that did not change while the audit was read")


def test_metrics_after_a_lifecycle_match_the_audit_and_the_handler_log(tmp_path, mock):
    metrics_dir = tmp_path / "textfile_collector"
    metrics_dir.mkdir()
    textfile = metrics_dir / "azure_imds_watcher.prom"
    port = free_port()
    vm = Vm(tmp_path, mock, poll_interval=0.25, metrics_textfile=str(textfile), metrics_port=port)
    watcher = Daemon(vm)
    try:
        wait_for(textfile.exists, "the first textfile")
        eid = vm.event(event_type="Reboot", resources=["web_0"])
        wait_for(lambda: "started %s" % eid in vm.lines(), "the started handler")
        mock.control("POST", "events/%s/complete" % eid)
        wait_for(lambda: "recover %s" % eid in vm.lines(), "the recover handler")
        # The textfile is written once per poll: the poll after the recover's end publishes it.
        wait_for(lambda: total(samples(textfile.read_text()), "handler_runs_total") == 3, "three handler runs published")
        parsed, audit = consistent_view(vm, textfile)
        scraped = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            "http://127.0.0.1:%d/metrics" % port, timeout=30)
        assert scraped.headers["Content-Type"] == watcher_metrics.CONTENT_TYPE
        served = scraped.read().decode("utf-8")
    finally:
        assert watcher.stop() == 0, watcher.text()

    gets = [r for r in audit["requests"] if r["method"] == "GET"]
    posts = [r for r in audit["requests"] if r["method"] == "POST"]
    assert total(parsed, "polls_total") == len(gets) > 0
    assert value(parsed, "polls_total", outcome="ok") == len([r for r in gets if r["status"] == 200])
    assert value(parsed, "imds_request_duration_seconds_count") == len(gets)
    assert value(parsed, "approvals_total", outcome="sent") == len(posts) == len(audit["approvals"]) == 1
    assert value(parsed, "approvals_total", outcome="failed") == 0
    assert audit["approvals"][0]["event_ids"] == [eid]

    lines = vm.lines()
    assert lines == ["drain %s Reboot" % eid, "started %s" % eid, "recover %s" % eid]
    for phase in ("drain", "started", "recover"):
        ran = len([line for line in lines if line.startswith(phase + " ")])
        assert value(parsed, "handler_runs_total", phase=phase, outcome="ok") == ran
        assert value(parsed, "handler_duration_seconds_count", phase=phase) == ran
        for outcome in ("failed", "timeout", "killed"):
            assert value(parsed, "handler_runs_total", phase=phase, outcome=outcome) == 0
    assert value(parsed, "handlers_running") == 0
    assert value(parsed, "events_seen_total", event_type="Reboot") == 1
    assert value(parsed, "event_to_drain_start_seconds_count") == 1
    assert value(parsed, "event_to_approval_seconds_count") == 1
    assert value(parsed, "drains_past_not_before_total") == 0
    assert value(parsed, "state_writes_total", outcome="ok") > 0
    assert value(parsed, "state_writes_total", outcome="failed") == 0
    # The event is over: no series for it in the last document.
    assert not [key for key in parsed if key[0] == watcher_metrics.PREFIX + "events"]
    assert value(parsed, "build_info", version=GALAXY_VERSION) == 1
    last_poll = value(parsed, "last_successful_poll_timestamp_seconds")
    assert value(parsed, "start_time_seconds") <= last_poll <= value(parsed, "last_loop_timestamp_seconds") + 1
    assert value(parsed, "document_incarnation") == mock.control("GET", "state")["vms"]["web_0"]["incarnation"]

    # The HTTP endpoint serves the same registry (its values move on with each poll).
    assert families(served) == families(textfile.read_text())
    assert families(served)[watcher_metrics.PREFIX + "polls"] == "counter"
    assert families(served)[watcher_metrics.PREFIX + "imds_request_duration_seconds"] == "histogram"
    # After the stop the textfile holds the final figures: every GET of the audit is in it.
    final = samples(textfile.read_text())
    assert total(final, "polls_total") == len([r for r in mock.control("GET", "audit?vm=web_0")["requests"]
                                               if r["method"] == "GET"])
    assert sorted(os.listdir(str(metrics_dir))) == ["azure_imds_watcher.prom"]      # no temporary file left
    assert oct(os.stat(str(textfile)).st_mode & 0o777) == oct(0o644)


def test_every_metric_of_the_contract_is_published_with_its_labels(tmp_path, mock):
    textfile = tmp_path / "w.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    vm.once()
    found = families(textfile.read_text())
    expected = {"build_info": "gauge", "start_time_seconds": "gauge", "last_loop_timestamp_seconds": "gauge",
                "polls": "counter", "imds_request_duration_seconds": "histogram",
                "last_successful_poll_timestamp_seconds": "gauge", "document_incarnation": "gauge",
                "events": "gauge", "events_seen": "counter", "events_auto_approved": "counter", "handler_runs": "counter",
                "handler_duration_seconds": "histogram", "handlers_running": "gauge", "approvals": "counter",
                "event_to_drain_start_seconds": "histogram", "event_to_approval_seconds": "histogram",
                "drains_past_not_before": "counter", "state_writes": "counter", "notifications": "counter",
                "notify_attempt_failures": "counter", "notify_outbox": "gauge"}
    assert found == dict((watcher_metrics.PREFIX + name, kind) for name, kind in expected.items())
    parsed = samples(textfile.read_text())
    outcomes = set(dict(labels)["outcome"] for (name, labels) in parsed if name.endswith("polls_total"))
    assert outcomes == set(watcher_metrics.POLL_OUTCOMES)
    runs = set(labels for (name, labels) in parsed if name.endswith("handler_runs_total"))
    assert runs == set((("outcome", o), ("phase", p)) for p in watcher_metrics.PHASES
                       for o in watcher_metrics.HANDLER_OUTCOMES)


def test_failed_polls_are_counted_by_outcome(tmp_path, mock):
    textfile = tmp_path / "w.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    # Each `run --once` is a new process whose textfile holds its one poll.
    for fault, outcome in (({"kind": "status", "status": 429, "retry_after": 1, "count": 1}, "throttled"),
                           ({"kind": "status", "status": 500, "count": 1}, "http_error"),
                           ({"kind": "malformed_json", "count": 1}, "bad_document"),
                           ({"kind": "drop", "count": 1}, "connection_error"),
                           (None, "ok")):
        if fault is not None:
            mock.control("POST", "faults", fault)
        vm.once(expect=0 if fault is None else 1)
        parsed = samples(textfile.read_text())
        assert value(parsed, "polls_total", outcome=outcome) == 1, fault
        assert total(parsed, "polls_total") == 1
        assert value(parsed, "imds_request_duration_seconds_count") == 1


def test_a_textfile_directory_that_does_not_exist_is_a_warning_not_a_crash(tmp_path, mock):
    port_holder = socket.socket()
    port_holder.bind(("127.0.0.1", 0))
    port_holder.listen(1)
    taken = port_holder.getsockname()[1]
    try:
        vm = Vm(tmp_path, mock, metrics_textfile=str(tmp_path / "no" / "such" / "dir" / "w.prom"),
                metrics_port=taken)
        eid = vm.event(event_type="Reboot", resources=["web_0"])
        out = vm.once()
    finally:
        port_holder.close()
    assert "cannot write the metrics textfile %s" % (tmp_path / "no" / "such" / "dir" / "w.prom") in out
    assert "its directory does not exist" in out
    assert "cannot serve metrics on 127.0.0.1:%d" % taken in out
    assert out.count("cannot write the metrics textfile") == 1      # once, not at every poll
    assert "Traceback" not in out
    assert vm.lines() == ["drain %s Reboot" % eid] and len(vm.approvals()) == 1   # the watcher did its job


def test_node_exporters_directory_missing_is_no_warning_when_the_textfile_depends_on_it(tmp_path, mock):
    """Issue 21: the role's default textfile (node_exporter's directory) on a host without
    node_exporter: no warning, no file; an info line says why, once."""
    textfile = tmp_path / "textfile_collector" / "azure_imds_watcher.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile), metrics_textfile_if_directory_exists=True)
    (tmp_path / "state").mkdir(mode=0o700)         # as the role makes it: the status file has its directory
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    assert "WARNING" not in out and "cannot write" not in out, out
    assert "no metrics textfile: its directory %s does not exist" % textfile.parent in out, out
    assert not textfile.parent.exists()
    assert vm.lines() == ["drain %s Reboot" % eid]


def test_the_textfile_appears_once_node_exporters_directory_does(tmp_path):
    logged = []
    textfile = tmp_path / "textfile_collector" / "w.prom"
    telemetry = watcher_liveness.Telemetry(
        config(tmp_path, metrics_textfile=str(textfile), metrics_textfile_if_directory_exists=True),
        lambda level, action, message, **fields: logged.append((level, message)), "1.0.0", environ={},
        notifier=lambda message: None, write_status=False)
    telemetry.publish()
    telemetry.publish()
    assert [level for level, _message in logged] == ["info"]            # once, not at every poll
    textfile.parent.mkdir()
    telemetry.publish()
    assert textfile.exists() and watcher_metrics.PREFIX + "polls_total" in textfile.read_text()
    assert [level for level, _message in logged] == ["info", "info"]
    assert logged[-1][1] == "the metrics textfile's directory %s exists now: writing %s" % (textfile.parent, textfile)


# --------------------------------------------------------------------------------------------
# The status file and `status`
# --------------------------------------------------------------------------------------------

def run_status(vm, *extra):
    argv, env = vm.command("status", *extra)
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)


def test_status_of_a_running_watcher_then_of_a_stopped_one(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    watcher = Daemon(vm)
    status_file = tmp_path / "state" / watcher_liveness.STATUS_FILE
    try:
        wait_for(lambda: status_file.exists() and json.loads(status_file.read_text())["last_successful_poll"],
                 "a successful poll in the status file")
        proc = run_status(vm)
        out = proc.stdout.decode()
        assert proc.returncode == 0, out + proc.stderr.decode()
        assert "this VM:   web_0" in out                      # what status printed before stays
        assert "daemon:    healthy (polling)" in out
        assert "pid %d, version %s, up " % (watcher.proc.pid, GALAXY_VERSION) in out
        assert "last successful poll: 20" in out and "last error" not in out
        proc = run_status(vm, "--json")
        report = json.loads(proc.stdout.decode())
        assert proc.returncode == 0
        assert report["daemon"]["health"] == "healthy" and report["daemon"]["exit_status"] == 0
        assert report["daemon"]["status_file"]["pid"] == watcher.proc.pid
        assert report["daemon"]["status_file"]["version"] == GALAXY_VERSION
        assert report["resource_name"] == "web_0"
    finally:
        assert watcher.stop() == 0, watcher.text()
    proc = run_status(vm)
    assert proc.returncode == 3
    assert "daemon:    down (pid %d is not running)" % watcher.proc.pid in proc.stdout.decode()


def test_status_file_records_the_last_error_and_since_when_polls_fail(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    mock.control("POST", "faults", {"kind": "status", "status": 500, "count": 1})
    vm.once(expect=1)
    status = json.loads((tmp_path / "state" / watcher_liveness.STATUS_FILE).read_text())
    assert status["last_successful_poll"] is None and status["failed_polls"] == 1
    assert status["failing_since"] == status["last_error"]["time"]
    assert "HTTP 500" in status["last_error"]["text"]
    assert status["pid"] > 0 and status["version"] == GALAXY_VERSION
    assert sorted(status) == ["failed_polls", "failing_since", "last_error", "last_successful_poll", "pid",
                              "started_at", "updated_at", "version"]


def health_of(status, now, alive=True, **cfg):
    return watcher_liveness.health(status, config(**cfg), now, pid_alive=lambda pid: alive)[:2]


def test_health_healthy_degraded_down():
    now = 1800000000.0
    fresh = {"pid": 42, "updated_at": now - 2, "failing_since": None, "failed_polls": 0}
    assert health_of(fresh, now) == (0, "healthy")
    assert health_of(dict(fresh, failing_since=now - 59, failed_polls=59), now) == (0, "healthy")
    assert health_of(dict(fresh, failing_since=now - 60, failed_polls=12), now) == (1, "degraded")
    assert health_of(fresh, now, alive=False) == (3, "down")
    assert health_of(None, now) == (3, "down")
    # Stale: the default configuration allows a poll, a two-minute first request, an approval and the margin.
    limit = watcher_liveness.stale_after(config())
    assert limit == 10 + 120 + 10 + 30
    assert health_of(dict(fresh, updated_at=now - limit + 1), now) == (0, "healthy")
    assert health_of(dict(fresh, updated_at=now - limit - 1), now) == (3, "down")
    assert health_of(dict(fresh, updated_at="yesterday"), now) == (3, "down")


def test_a_dry_run_writes_no_status_file(tmp_path, mock):
    vm = Vm(tmp_path, mock)
    argv, env = vm.command("run", "--once", "--dry-run")
    subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=True)
    assert not (tmp_path / "state").exists()


# --------------------------------------------------------------------------------------------
# systemd's notify socket
# --------------------------------------------------------------------------------------------

class NotifySocket(object):
    """What systemd listens on: a bound AF_UNIX datagram socket (a path, or abstract with '@')."""

    def __init__(self, tmp_path, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "azure-imds-watcher-test-%d-%d" % (os.getpid(), id(self))
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            path = str(tmp_path / "notify")
            self.sock.bind(path)
            self.env = path
        self.sock.settimeout(0.05)
        self.messages = []

    def receive(self):
        try:
            while True:
                self.messages.append(self.sock.recv(4096).decode())
        except socket.timeout:
            pass
        return self.messages

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_ready_after_the_first_poll_then_watchdog_from_the_loop(tmp_path, mock, abstract):
    notify = NotifySocket(tmp_path, abstract)
    vm = Vm(tmp_path, mock)
    watcher = Daemon(vm, env={"NOTIFY_SOCKET": notify.env, "WATCHDOG_USEC": "30000000"})
    try:
        messages = wait_for(lambda: [m for m in notify.receive() if m == "WATCHDOG=1"][2:] and list(notify.messages),
                            "three WATCHDOG=1 datagrams")
    finally:
        assert watcher.stop() == 0, watcher.text()
        notify.receive()
        notify.close()
    # "polling": sent once the first poll has succeeded, and nothing before it.
    assert messages[0] == "READY=1\nSTATUS=polling"
    assert set(messages[1:]) == {"WATCHDOG=1"}
    assert notify.messages[-1] == "STOPPING=1"
    assert "systemd watchdog every 30s" in watcher.text()


def test_ready_even_when_imds_does_not_answer(tmp_path, mock):
    notify = NotifySocket(tmp_path)
    vm = Vm(tmp_path, mock, imds_url="http://127.0.0.1:9/vm/web_0")
    watcher = Daemon(vm, env={"NOTIFY_SOCKET": notify.env})
    try:
        wait_for(notify.receive, "a datagram")
    finally:
        assert watcher.stop() == 0, watcher.text()
        notify.close()
    assert notify.messages[0] == "READY=1\nSTATUS=IMDS not answering"


def test_the_watchdog_is_petted_by_the_loop_only():
    sent = []
    telemetry = watcher_liveness.Telemetry(config(), lambda *a, **k: None, "1.0.0", environ={},
                                           notifier=sent.append, write_status=False)
    telemetry.loop()
    assert sent == []                  # not before READY: systemd would take it as a sign of life
    telemetry.polled("connection_error", 0.01, "refused")
    telemetry.publish()
    assert sent == ["READY=1\nSTATUS=IMDS not answering"]
    telemetry.polled("ok", 0.01)
    telemetry.publish()
    assert sent == ["READY=1\nSTATUS=IMDS not answering"]        # polls and writes do not pet it
    telemetry.loop()
    assert sent[-1] == "WATCHDOG=1"


def test_without_notify_socket_nothing_is_sent(tmp_path):
    assert watcher_liveness.Notifier(environ={}).address is None
    assert watcher_liveness.Notifier(environ={})("READY=1") is False
    assert watcher_liveness.notify_address({"NOTIFY_SOCKET": "@abc"}) == "\0abc"
    assert watcher_liveness.notify_address({"NOTIFY_SOCKET": "vsock:2:1234"}) is None
    assert watcher_liveness.watchdog_seconds({"WATCHDOG_USEC": "5000000"}) == 5.0
    assert watcher_liveness.watchdog_seconds({"WATCHDOG_USEC": "5000000", "WATCHDOG_PID": "1"}) is None
    # A socket that went away (systemd restarted) is not the daemon's problem.
    gone = watcher_liveness.Notifier(environ={"NOTIFY_SOCKET": str(tmp_path / "gone")})
    assert gone("WATCHDOG=1") is False and gone.last_error is not None


# --------------------------------------------------------------------------------------------
# --version, from galaxy.yml (a checkout), MANIFEST.json (an installed collection) or the
# VERSION file the role installs
# --------------------------------------------------------------------------------------------

def version_of(argv, cwd=None, env=None):
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout
    return proc.stdout.decode().strip()


def copy_watcher(directory):
    """The layout the role installs (roles/watcher/tasks/present.yml): the package, and the
    collection's module_utils under an ansible_collections tree beside it. Answers (argv, env)."""
    shutil.copytree(os.path.join(ROOT, "roles", "watcher", "files", "scheduled_events_watcher"),
                    str(directory / "scheduled_events_watcher"), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "plugins", "module_utils"),
                    str(directory / "ansible_collections" / "azure_imds" / "scheduled_events" / "plugins" / "module_utils"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return [sys.executable, "-m", "scheduled_events_watcher"], dict(os.environ, PYTHONPATH=str(directory))


def test_watcher_version(tmp_path):
    assert version_of(watcher_command("--version"), env=watcher_environment()) == "azure-imds-watcher %s" % GALAXY_VERSION
    copied, env = copy_watcher(tmp_path / "usr" / "lib" / "azure-imds-watcher")
    assert version_of(copied + ["--version"], cwd="/", env=env) == "azure-imds-watcher unknown"
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "7.1.2"}}))
    assert version_of(copied + ["--version"], cwd="/", env=env) == "azure-imds-watcher 7.1.2"
    (tmp_path / "usr" / "lib" / "azure-imds-watcher" / "VERSION").write_text("9.8.7\n")
    assert version_of(copied + ["--version"], cwd="/", env=env) == "azure-imds-watcher 9.8.7"


def test_mock_version(tmp_path):
    package = os.path.dirname(MOCK_PATH) if os.path.basename(MOCK_PATH) != "mock_imds" else MOCK_PATH
    assert version_of([sys.executable, "-m", "mock_imds", "--version"], cwd=os.path.dirname(package)) \
        == "mock_imds %s" % GALAXY_VERSION
    copy = tmp_path / "opt" / "mock"
    shutil.copytree(package, str(copy / "mock_imds"))
    assert version_of([sys.executable, "-m", "mock_imds", "--version"], cwd=str(copy)) == "mock_imds unknown"
    assert version_of([sys.executable, str(copy / "mock_imds"), "--version"]) == "mock_imds unknown"
    (tmp_path / "galaxy.yml").write_text("namespace: x\nname: y\nversion: '3.4.5'  # released\n")
    assert version_of([sys.executable, "-m", "mock_imds", "--version"], cwd=str(copy)) == "mock_imds 3.4.5"


def test_a_textfile_directory_read_only_to_the_watcher_names_the_restart(tmp_path, mock):
    """Under the unit's ProtectSystem=strict a textfile directory made after the watcher started is
    read-only to it (a read-only mount here): the warning says so and names the restart."""
    read_only = tmp_path / "ro"
    read_only.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(read_only)], check=True)
    try:
        (read_only / "textfile_collector").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
        vm = Vm(tmp_path, mock, metrics_textfile=str(read_only / "textfile_collector" / "w.prom"))
        eid = vm.event(event_type="Reboot", resources=["web_0"])
        out = vm.once()
    finally:
        subprocess.run(["umount", str(read_only)], check=True)
    assert "cannot write the metrics textfile" in out and "Read-only file system" in out
    assert "restart the watcher: systemctl restart azure-imds-watcher" in out
    assert "Traceback" not in out
    assert vm.lines() == ["drain %s Reboot" % eid] and len(vm.approvals()) == 1
