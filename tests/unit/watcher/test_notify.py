"""The notify action in this process: its configuration, the outbox (written before sent, bounded),
the sender (order, retries with backoff, giving up, the bearer token) against a stand-in receiver
on 127.0.0.1. The daemon end to end is in test_notify_e2e.py."""

import json
import os
import subprocess

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import daemon
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config as watcher_config
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import metrics as watcher_metrics
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import notify as watcher_notify
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.state import (
    StateStore)

from .helpers import ID_A, ID_B, ID_C, LogSink, event, watcher_command, watcher_environment
from ansible_collections.azure_imds.scheduled_events.devtools.notify_receiver import free_port, self_signed_certificate
RECEIVER_WAIT = 60.0         # only bounds a hang


def notify_config(tmp_path, targets, **extra):
    doc = {"state_dir": str(tmp_path / "state"), "handlers_dir": str(tmp_path / "handlers"),
           "resource_name": "web_0", "notify": targets}
    doc.update(extra)
    return watcher_config.check_config(doc)


def doc(*events, incarnation=1):
    return {"document_incarnation": incarnation, "events": list(events)}


class Metrics(object):
    """The Telemetry calls a sender makes, on a real registry."""

    def __init__(self):
        self.registry = watcher_metrics.WatcherMetrics("test", 0.0)

    def notify_sent(self):
        self.registry.notification("sent")

    def notify_given_up(self):
        self.registry.notification("failed")

    def notify_attempt_failed(self):
        self.registry.notify_attempt_failed()

    def notify_outbox(self, length, dropped):
        if dropped:
            self.registry.notification("dropped", dropped)
        self.registry.outbox(length)

    def value(self, line_start):
        for line in self.registry.render().splitlines():
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        raise AssertionError("no sample %s in:\n%s" % (line_start, self.registry.render()))


def wired(tmp_path, targets, wait=None, **extra):
    """Notifications with their state store and one sender per target (threads not started)."""
    cfg = notify_config(tmp_path, targets, **extra)
    store = StateStore(cfg["state_dir"])
    store.ensure_directory()
    notifications = watcher_notify.Notifications(cfg, "web_0", "9.9.9", wall_clock=lambda: 1700000000.0)
    metrics = Metrics()
    notifications.on_change = metrics.notify_outbox
    store.notify = notifications
    log = LogSink()
    senders = watcher_notify.senders_for(cfg, notifications, "9.9.9", log, store.write_now, metrics,
                                         wait=wait, rng=lambda: 1.0)
    return cfg, store, notifications, senders, log, metrics


# --------------------------------------------------------------------------------------------
# Configuration: checked once, errors name the key
# --------------------------------------------------------------------------------------------

BAD_TARGETS = [
    ([{"url": "ftp://127.0.0.1/x"}], r"notify\[0\]\.url 'ftp://127.0.0.1/x' is not an http:// or https:// URL"),
    ([{"url": "http://user:secret@127.0.0.1/x"}], r"notify\[0\]\.url .* user name or password.*token_file"),
    ([{"url": "http://127.0.0.1:99999/x"}], r"notify\[0\]\.url .*port"),
    ([{"url": "http://[::1/x"}], r"notify\[0\]\.url .*not a valid URL"),
    ([{"url": "http://127.0.0.1/a b"}], r"notify\[0\]\.url .*whitespace"),
    ([{"token_file": "/etc/token"}], r"notify\[0\] needs a url"),
    ([{"url": "http://127.0.0.1/x", "timeout": float("nan")}], r"notify\[0\]\.timeout must be a number from 0\.5 to 120"),
    ([{"url": "http://127.0.0.1/x", "timeout": 0}], r"notify\[0\]\.timeout must be a number from 0\.5 to 120"),
    ([{"url": "http://127.0.0.1/x", "max_attempts": 0}], r"notify\[0\]\.max_attempts must be a whole number from 1 to 1000"),
    ([{"url": "http://127.0.0.1/x", "max_attempts": 2.5}], r"notify\[0\]\.max_attempts must be a whole number"),
    ([{"url": "http://127.0.0.1/x", "max_attempts": True}], r"notify\[0\]\.max_attempts must be a whole number"),
    ([{"url": "http://127.0.0.1/x", "token_file": "token"}], r"notify\[0\]\.token_file must be an absolute path"),
    ([{"url": "http://127.0.0.1/x", "headers": {"Content-Type": "text/plain"}}],
     r"notify\[0\]\.headers\.Content-Type is written by the watcher itself"),
    ([{"url": "http://127.0.0.1/x", "headers": {"X-Team": 5}}], r"notify\[0\]\.headers\.X-Team must be a string"),
    ([{"url": "http://127.0.0.1/x", "headers": {"X-Team": "a\nb"}}],
     r"notify\[0\]\.headers\.X-Team must be a string without control characters"),
    ([{"url": "http://127.0.0.1/x", "headers": {"Bad Name": "a"}}], r"'Bad Name' is not an HTTP header name"),
    ([{"url": "http://127.0.0.1/x", "token_file": "/t", "headers": {"authorization": "Basic x"}}],
     r"authorization and token_file both set the Authorization header"),
    ([{"url": "http://127.0.0.1/x"}, {"url": "http://127.0.0.1/x"}], r"notify\[1\]\.url .* listed twice"),
    ([{"url": "http://127.0.0.1/x", "tokenfile": "/t"}], r"notify\[0\]: unknown key 'tokenfile'"),
    ("http://127.0.0.1/x", r"notify must be a list of targets"),
]


@pytest.mark.parametrize("targets, message", BAD_TARGETS)
def test_a_bad_target_is_refused_naming_the_key(tmp_path, targets, message):
    with pytest.raises(watcher_config.ConfigError, match=message):
        notify_config(tmp_path, targets)


@pytest.mark.parametrize("key, value, message", [
    ("notify_timeout", 500, r"notify_timeout must be a number from 0\.5 to 120"),
    ("notify_max_attempts", -1, r"notify_max_attempts must be a whole number from 1 to 1000"),
    ("notify_outbox_max", 5, r"notify_outbox_max must be a whole number from 10 to 100000"),
    ("notify_outbox_max", float("inf"), r"notify_outbox_max must be a whole number"),
])
def test_a_bad_notify_number_is_refused_even_without_targets(tmp_path, key, value, message):
    with pytest.raises(watcher_config.ConfigError, match=message):
        notify_config(tmp_path, [], **{key: value})


def test_a_target_takes_the_defaults_and_its_own_values(tmp_path):
    cfg = notify_config(tmp_path, [{"url": "http://127.0.0.1:5000/endpoint"},
                                   {"url": "https://eda.example.internal/api/eda/v1/external_event_stream/x/post/",
                                    "token_file": "/etc/azure-imds-watcher/eda.token", "timeout": 3,
                                    "max_attempts": 4, "headers": {"X-Team": "web"}}],
                        notify_timeout=7, notify_max_attempts=9)
    assert cfg["notify"] == [
        {"url": "http://127.0.0.1:5000/endpoint", "token_file": None, "headers": {}, "timeout": 7.0, "max_attempts": 9},
        {"url": "https://eda.example.internal/api/eda/v1/external_event_stream/x/post/",
         "token_file": "/etc/azure-imds-watcher/eda.token", "headers": {"X-Team": "web"}, "timeout": 3.0,
         "max_attempts": 4},
    ]


def test_check_config_refuses_a_bad_target_with_exit_2_and_no_traceback(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"notify": [{"url": "http://127.0.0.1/x", "max_attempts": "many"}]}))
    proc = subprocess.run(watcher_command("check-config", "--config", str(path)), env=watcher_environment(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr.decode()
    assert "notify[0].max_attempts must be a whole number from 1 to 1000, got 'many'" in proc.stderr.decode()


# --------------------------------------------------------------------------------------------
# The outbox
# --------------------------------------------------------------------------------------------

def test_a_transition_is_sent_only_once_the_state_file_holds_it(tmp_path):
    _cfg, store, notifications, _senders, _log, _metrics = wired(tmp_path, [{"url": "http://127.0.0.1:9/x"}])
    notifications.observe(doc(event(ID_A)))
    assert notifications.first_for("http://127.0.0.1:9/x") is None
    store.write_now()
    entry = notifications.first_for("http://127.0.0.1:9/x")
    assert entry["body"]["type"] == "scheduled"
    with open(store.path) as handle:
        on_disk = json.load(handle)["notify"]
    assert [e["body"]["notification_id"] for e in on_disk["outbox"]] == ["web_0/%s/scheduled" % ID_A.lower()]
    assert on_disk["tracker"]["records"][ID_A.lower()]["emitted"] == ["scheduled"]


def test_the_body_is_the_transition_with_observer_and_version(tmp_path):
    _cfg, store, notifications, _senders, _log, _metrics = wired(tmp_path, [{"url": "http://127.0.0.1:9/x"}])
    notifications.observe(doc(event(ID_A, resources=("web_1",)), incarnation=4))
    store.write_now()
    body = notifications.first_for("http://127.0.0.1:9/x")["body"]
    assert body == {
        "type": "scheduled", "scheduled_event": event(ID_A, resources=("web_1",)), "document_incarnation": 4,
        "resource_name": "web_0", "affects_this_host": False, "seen_scheduled": True,
        "auto_approved": False, "started_before_seen": False, "observer": "web_0",
        "watcher_version": "9.9.9", "notification_id": "web_0/%s/scheduled" % ID_A.lower(),
        "observed_at": "2023-11-14T22:13:20Z"}


def test_a_full_outbox_drops_the_oldest_and_counts_them(tmp_path):
    _cfg, store, notifications, _senders, log, metrics = wired(tmp_path, [{"url": "http://127.0.0.1:9/x"}],
                                                               notify_outbox_max=10)
    ids = ["%08X-0000-4000-8000-%012X" % (n, n) for n in range(12)]
    for number, event_id in enumerate(ids):
        log.apply(notifications.observe(doc(*[event(i) for i in ids[:number + 1]])))
    store.write_now()
    with open(store.path) as handle:
        kept = [e["body"]["scheduled_event"]["event_id"] for e in json.load(handle)["notify"]["outbox"]]
    assert kept == ids[2:]
    assert metrics.value('azure_imds_watcher_notifications_total{outcome="dropped"}') == 2
    assert metrics.value("azure_imds_watcher_notify_outbox") == 10
    dropped = log.messages("notify_dropped")
    assert len(dropped) == 2 and "notify_outbox_max 10" in dropped[0]


def test_an_unchanged_document_writes_no_state(tmp_path):
    _cfg, store, notifications, _senders, _log, _metrics = wired(tmp_path, [{"url": "http://127.0.0.1:9/x"}])
    writes = []
    store.on_write = writes.append
    for _poll in range(5):
        notifications.observe(doc(event(ID_A)))
        store.save({}, "web_0")
    assert writes == ["ok"]


def test_restore_goes_on_and_drops_receivers_no_longer_configured(tmp_path):
    _cfg, store, notifications, _senders, _log, _metrics = wired(
        tmp_path, [{"url": "http://127.0.0.1:9/a"}, {"url": "http://127.0.0.1:9/b"}])
    notifications.observe(doc(event(ID_A)))
    store.write_now()
    section = StateStore(store.directory).load().notify
    cfg = notify_config(tmp_path, [{"url": "http://127.0.0.1:9/b"}])
    again = watcher_notify.Notifications(cfg, "web_0", "9.9.9")
    notes, problem = again.restore(section)
    assert problem is None
    assert notes[0] == "1 unsent notification to receivers no longer in notify discarded"
    assert again.first_for("http://127.0.0.1:9/b")["body"]["type"] == "scheduled"
    # The tracker went on: the same document reveals nothing new, its end does.
    assert again.observe(doc(event(ID_A))) == []
    lines = again.observe(doc(incarnation=2))
    assert [line.action for line in lines] == ["notify_queued"] and "cancelled" in lines[0].message


def test_a_write_before_notify_is_wired_keeps_the_loaded_section(tmp_path):
    """A restarted watcher writes the state when it ends its killed predecessor's handlers, before
    its notify action is set up: the outbox and the tracker's memory must survive that write
    (the kill soak lost the end of four events when they did not)."""
    _cfg, store, notifications, _senders, _log, _metrics = wired(tmp_path, [{"url": "http://127.0.0.1:9/x"}])
    notifications.observe(doc(event(ID_A)))
    store.write_now()
    with open(store.path) as handle:
        section = json.load(handle)["notify"]
    restarted = StateStore(store.directory)
    restarted.load()
    leftover = {"pid": 4242, "pgid": 4242, "start_ticks": 1, "boot_id": "b", "event_key": ID_A.lower(),
                "event_id": ID_A, "phase": "drain", "handler": "10-lb", "started_at": 1.0}
    restarted.handler_started(leftover)
    restarted.handler_ended(4242)
    with open(store.path) as handle:
        assert json.load(handle)["notify"] == section
    restarted.forget_notify()
    restarted.handler_started(leftover)
    with open(store.path) as handle:
        assert "notify" not in json.load(handle)


@pytest.mark.parametrize("section, problem", [
    ({"version": 1, "next_id": 1, "outbox": [], "tracker": {"version": 7}}, "tracker: version: 7"),
    ({"version": 1, "next_id": 2, "outbox": [{"id": 5, "body": {"type": "x"}, "pending": []}], "tracker": {}},
     "outbox[0]: id 5 is not below next_id 2"),
    ({"version": 1, "next_id": 2, "outbox": "none", "tracker": {}}, "outbox is not a list"),
    ([], "not a JSON object"),
])
def test_a_notify_section_it_cannot_trust_is_not_used(tmp_path, section, problem):
    cfg = notify_config(tmp_path, [{"url": "http://127.0.0.1:9/b"}])
    notifications = watcher_notify.Notifications(cfg, "web_0", "9.9.9")
    assert notifications.restore(section)[1].startswith(problem)
    # Afresh: what is present now is notified (again: duplicates, never losses).
    assert len(notifications.observe(doc(event(ID_A)))) == 1


# --------------------------------------------------------------------------------------------
# The sender
# --------------------------------------------------------------------------------------------

def test_a_receiver_gets_the_notifications_in_order(tmp_path, receiver):
    receiver.start()
    _cfg, store, notifications, senders, _log, metrics = wired(tmp_path, [{"url": receiver.url}])
    notifications.observe(doc(event(ID_A), event(ID_B)))
    notifications.observe(doc(event(ID_A, status="Started"), event(ID_B), event(ID_C, status="Started")))
    store.write_now()
    senders[0].send_pending_once()
    assert [(b["scheduled_event"]["event_id"], b["type"]) for b in receiver.bodies()] == [
        (ID_A, "scheduled"), (ID_B, "scheduled"), (ID_A, "started"), (ID_C, "started")]
    assert receiver.posts[0]["headers"]["Content-Type"] == "application/json"
    assert receiver.posts[0]["headers"]["User-Agent"] == "azure-imds-watcher/9.9.9"
    assert receiver.posts[0]["path"] == "/endpoint"
    assert notifications.unsent() == 0
    assert metrics.value('azure_imds_watcher_notifications_total{outcome="sent"}') == 4
    with open(store.path) as handle:
        assert json.load(handle)["notify"]["outbox"] == []


def test_a_receiver_down_then_up_gets_it_after_retries_with_backoff(tmp_path, receiver):
    port = free_port()
    waits = []

    def wait(seconds):
        waits.append(seconds)
        if len(waits) == 3:
            receiver.start(port)          # the receiver comes up after the third failure
        return False

    _cfg, store, notifications, senders, log, metrics = wired(
        tmp_path, [{"url": "http://127.0.0.1:%d/endpoint" % port, "max_attempts": 10}], wait=wait)
    notifications.observe(doc(event(ID_A)))
    store.write_now()
    entry = notifications.first_for("http://127.0.0.1:%d/endpoint" % port)
    assert senders[0].deliver(entry, until_failure=False) is True
    assert [b["type"] for b in receiver.bodies()] == ["scheduled"]
    # Backoff: 1, 2, 4 s (the jitter is fixed at its top by the test's rng).
    assert waits == [1.0, 2.0, 4.0]
    assert metrics.value("azure_imds_watcher_notify_attempt_failures_total") == 3
    assert metrics.value('azure_imds_watcher_notifications_total{outcome="sent"}') == 1
    assert [line[1] for line in log.lines] == ["notify_failed", "notify_recovered"]
    assert "attempt 1 of 10 failed" in log.lines[0][2]
    assert "delivered again after 3 failed attempts" in log.lines[1][2]


def test_a_receiver_that_never_answers_2xx_is_given_up_after_max_attempts(tmp_path, receiver):
    receiver.start()
    receiver.status = 503
    waits = []
    _cfg, store, notifications, senders, log, metrics = wired(
        tmp_path, [{"url": receiver.url, "max_attempts": 3}], wait=lambda s: waits.append(s) or False)
    notifications.observe(doc(event(ID_A)))
    store.write_now()
    assert senders[0].deliver(notifications.first_for(receiver.url), until_failure=False) is True
    assert len(receiver.refused) == 3 and receiver.posts == []
    assert waits == [1.0, 2.0]
    assert notifications.unsent() == 0
    assert metrics.value('azure_imds_watcher_notifications_total{outcome="failed"}') == 1
    assert "gave up after 3 attempts" in log.messages("notify_given_up")[0]
    assert "answered 503" in log.messages("notify_given_up")[0]


def test_retry_after_is_honoured_up_to_a_minute(tmp_path):
    cfg = notify_config(tmp_path, [{"url": "http://127.0.0.1:9/x"}])
    sender = watcher_notify.senders_for(cfg, None, "1", LogSink(), None, None, rng=lambda: 0.0)[0]
    assert sender.delay(1) == 0.5
    assert sender.delay(10) == 30.0
    assert sender.delay(3, retry_after=7) == 7
    assert sender.delay(3, retry_after=3600) == 60.0


def test_the_token_file_is_read_at_send_time_into_a_bearer_header(tmp_path, receiver):
    receiver.start()
    token = tmp_path / "token"
    _cfg, store, notifications, senders, log, _metrics = wired(
        tmp_path, [{"url": receiver.url, "token_file": str(token), "headers": {"X-Team": "web"}}])
    notifications.observe(doc(event(ID_A)))
    store.write_now()
    # Missing: a logged failure, the notification stays for later, nothing crashes.
    senders[0].send_pending_once()
    assert receiver.posts == [] and notifications.unsent() == 1
    assert "cannot read token_file %s" % token in log.messages("notify_failed")[0]
    token.write_text("s3cr3t-token\n")
    senders[0].send_pending_once()
    assert receiver.posts[0]["headers"]["Authorization"] == "Bearer s3cr3t-token"
    assert receiver.posts[0]["headers"]["X-Team"] == "web"
    assert all("s3cr3t" not in line[2] for line in log.lines)


def test_a_receiver_that_hangs_is_cut_at_the_timeout(tmp_path, receiver):
    receiver.start()
    receiver.release.clear()
    cfg = notify_config(tmp_path, [{"url": receiver.url, "timeout": 0.5}])
    # The receiver holds its answer for two minutes; the POST gives up at its own deadline instead.
    with pytest.raises(watcher_notify.SendFailure, match="no answer within 0.5s"):
        watcher_notify.post(cfg["notify"][0], {"type": "scheduled"}, "1")
    assert receiver.posts == []


def test_https_is_verified_against_the_system_authorities_and_works_with_a_trusted_one(tmp_path, receiver):
    import ssl  # pylint: disable=import-outside-toplevel

    cert, key = self_signed_certificate(str(tmp_path))
    receiver.start(tls=(cert, key))
    target = notify_config(tmp_path, [{"url": receiver.url, "timeout": 30}])["notify"][0]
    with pytest.raises(watcher_notify.SendFailure, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        watcher_notify.post(target, {"type": "scheduled"}, "1")
    assert receiver.posts == []
    trusted = ssl.create_default_context(cafile=cert)
    assert watcher_notify.post(target, {"type": "scheduled"}, "1", tls=trusted) == 200
    assert receiver.bodies() == [{"type": "scheduled"}]


def test_the_loop_hands_transitions_to_the_notify_action(tmp_path, receiver):
    """The daemon's loop in this process: poll, queue, write, send from the sender's thread."""
    from .test_daemon import build, doc as answer_doc, scheduled

    receiver.start()
    cfg = notify_config(tmp_path, [{"url": receiver.url}], approval={"policy": "none"})
    watcher, _transport, _clock, _log = build(tmp_path, [answer_doc(scheduled())] * 3, cfg=cfg)
    watcher.resolve_name()
    watcher.load_state()
    watcher.poll()
    assert receiver.posts == []          # the senders are started by run_forever, not by a poll
    for sender in watcher.senders:
        sender.start()
    try:
        bodies = receiver.wait_for(lambda b: b, RECEIVER_WAIT)
    finally:
        for sender in watcher.senders:
            sender.stop()
    assert [(b["type"], b["observer"], b["affects_this_host"]) for b in bodies] == [("scheduled", "web_0", True)]
    assert isinstance(daemon.Watcher, type) and os.path.exists(watcher.store.path)
