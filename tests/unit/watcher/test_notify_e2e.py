"""The notify action of the real daemon against the mock IMDS and a stand-in receiver, both on
127.0.0.1: a whole lifecycle in order with its body, a receiver that is down across a restart,
and a kill -9 while a notification is in flight (at least once: sent again, never lost)."""

import json
import signal
import subprocess

from .helpers import ID_A
from ansible_collections.azure_imds.scheduled_events.devtools.notify_receiver import free_port, self_signed_certificate
from .test_e2e_mock import Vm
from .test_operations import GALAXY_VERSION

# Real seconds that only bound a hang on a busy machine: each wait ends on what the receiver shows.
RECEIVER_WAIT = 90.0
STOP_WAIT = 60.0


def kinds(bodies):
    return [(b["scheduled_event"]["event_id"], b["type"]) for b in bodies]


def outbox(vm):
    with open(str(vm.root / "state" / "state.json")) as handle:
        return json.load(handle)["notify"]["outbox"]


class Daemon(object):
    """`run` in the background, as the service runs it."""

    def __init__(self, vm):
        argv, env = vm.command("run")
        self.log = vm.root / "daemon.log"
        with open(str(self.log), "ab") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the watcher did not stop within %gs of %s" % (STOP_WAIT, sig))

    def output(self):
        return self.log.read_text()


def test_a_lifecycle_reaches_the_receiver_in_order_with_its_body(tmp_path, fleet_mock, receiver):
    receiver.start()
    vm = Vm(tmp_path, fleet_mock, notify=[{"url": receiver.url, "headers": {"X-Team": "web"}}])
    other = vm.event(event_type="Freeze", resources=["web_1"], duration_in_seconds=5)
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    daemon = Daemon(vm)
    try:
        # Scheduled -> drained -> approved (the mock starts it) -> started.
        assert receiver.wait_for(lambda b: (eid, "started") in kinds(b), RECEIVER_WAIT), daemon.output()
        fleet_mock.control("POST", "events/%s/complete" % eid)
        assert receiver.wait_for(lambda b: (eid, "ended") in kinds(b), RECEIVER_WAIT), daemon.output()
    finally:
        daemon.stop()
    mine = [b for b in receiver.bodies() if b["scheduled_event"]["event_id"] == eid]
    assert [b["type"] for b in mine] == ["scheduled", "started", "ended"]
    assert [b["type"] for b in receiver.bodies() if b["scheduled_event"]["event_id"] == other] == ["scheduled"]
    first = mine[0]
    assert sorted(first) == ["affects_this_host", "auto_approved", "document_incarnation", "notification_id",
                             "observed_at", "observer", "resource_name", "scheduled_event", "seen_scheduled",
                             "started_before_seen", "type", "watcher_version"]
    assert first["auto_approved"] is False and first["started_before_seen"] is False
    assert first["observer"] == first["resource_name"] == "web_0"
    assert first["affects_this_host"] is True and first["seen_scheduled"] is True
    assert first["watcher_version"] == GALAXY_VERSION
    assert first["notification_id"] == "web_0/%s/scheduled" % eid.lower()
    assert first["scheduled_event"]["event_type"] == "Reboot"
    assert first["scheduled_event"]["event_status"] == "Scheduled"
    assert first["scheduled_event"]["resources"] == ["web_0"]
    assert mine[1]["scheduled_event"]["event_status"] == "Started"
    assert all(isinstance(b["document_incarnation"], int) for b in mine)
    assert mine[0]["document_incarnation"] < mine[1]["document_incarnation"] <= mine[2]["document_incarnation"]
    other_body = [b for b in receiver.bodies() if b["scheduled_event"]["event_id"] == other][0]
    assert other_body["affects_this_host"] is False
    assert all(p["headers"]["X-Team"] == "web" for p in receiver.posts)
    assert "Traceback" not in daemon.output()


def test_a_receiver_down_across_a_restart_gets_everything_once_it_is_up(tmp_path, fleet_mock, receiver):
    port = free_port()
    url = "http://127.0.0.1:%d/endpoint" % port
    vm = Vm(tmp_path, fleet_mock, notify=[{"url": url}])
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    # Nobody listens: the attempt failed, the notification stays in the state file.
    assert "notify %s: event %s scheduled: attempt 1 of 20 failed" % (url, eid) in out
    assert [(e["body"]["type"], e["pending"]) for e in outbox(vm)] == [("scheduled", [url])]
    out = vm.once()                 # a restart; the mock started the event on approval
    assert [e["body"]["type"] for e in outbox(vm)] == ["scheduled", "started"]
    assert "1 notification from before the restart still to send" in out
    argv, env = vm.command("status")
    status = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    assert "notify:    %s, 2 unsent" % url in status.stdout.decode()
    receiver.start(port)
    vm.once()
    assert kinds(receiver.bodies()) == [(eid, "scheduled"), (eid, "started")]
    assert outbox(vm) == []
    vm.once()
    assert kinds(receiver.bodies()) == [(eid, "scheduled"), (eid, "started")]      # nothing twice


def test_a_kill_while_a_notification_is_in_flight_sends_it_again(tmp_path, fleet_mock, receiver):
    receiver.start()
    receiver.release.clear()          # the receiver takes the POST but holds its answer
    vm = Vm(tmp_path, fleet_mock, notify=[{"url": receiver.url}], approval={"policy": "none"})
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    daemon = Daemon(vm)
    try:
        assert receiver.wait_until(lambda: receiver.arrivals >= 1, RECEIVER_WAIT), daemon.output()
    finally:
        daemon.stop(signal.SIGKILL)
    # The held POST is answered now, to nobody: the receiver has it, the watcher never knew.
    receiver.release.set()
    assert receiver.wait_for(lambda b: len(b) == 1, RECEIVER_WAIT)
    assert [e["body"]["type"] for e in outbox(vm)] == ["scheduled"]
    out = vm.once()
    assert "1 notification from before the restart still to send" in out
    bodies = receiver.bodies()
    assert kinds(bodies) == [(eid, "scheduled"), (eid, "scheduled")]
    # A duplicate, and receivers can tell: the same notification_id.
    assert bodies[0]["notification_id"] == bodies[1]["notification_id"] == "web_0/%s/scheduled" % eid.lower()
    assert outbox(vm) == []


def test_without_receivers_no_notify_state_is_kept(tmp_path, fleet_mock):
    vm = Vm(tmp_path, fleet_mock)
    vm.event(event_id=ID_A, event_type="Reboot", resources=["web_0"])
    vm.once()
    with open(str(vm.root / "state" / "state.json")) as handle:
        assert "notify" not in json.load(handle)


def test_the_daemon_loads_tls_for_an_https_receiver(tmp_path, fleet_mock, receiver):
    """The daemon keeps ssl out of its imports (IMDS is plain HTTP) and loads it for an https
    receiver: an untrusted certificate is a logged, retried failure, not an internal error."""
    receiver.start(tls=self_signed_certificate(str(tmp_path)))
    vm = Vm(tmp_path, fleet_mock, notify=[{"url": receiver.url}])
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    assert "notify %s: event %s scheduled: attempt 1 of 20 failed" % (receiver.url, eid) in out
    assert "certificate verify failed" in out.lower() or "CERTIFICATE_VERIFY_FAILED" in out
    assert "internal error" not in out and "Traceback" not in out
    assert [e["body"]["type"] for e in outbox(vm)] == ["scheduled"]
