"""The daemon loop with the real shared client over a scripted transport and a fake clock:
pacing, backoff, approvals right after a drain, dry run, logging, the command line."""

import io
import json
import os
import socket
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _retry
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import daemon
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import log as watcher_log

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock, ScriptedTransport, answer, fail
from .helpers import ID_A, ID_B, LogSink, config, document, raw_event

EPOCH = 1700000000.0


class TimedList(list):
    """transport.requests that also notes the fake time of each request."""

    def __init__(self, clock):
        super(TimedList, self).__init__()
        self.clock = clock
        self.times = []

    def append(self, item):
        self.times.append(self.clock.now)
        super(TimedList, self).append(item)


class InlineWatcher(daemon.Watcher):
    """Runs each phase job in the loop's own thread with a scripted outcome, so that the fake clock
    alone decides what happens when."""

    outcomes = None

    def _start_job(self, job):
        self.results.put((job, self.outcomes.get(job.phase, True), "scripted"))


def build(tmp_path, steps, cfg=None, name="web_0", dry_run=False, outcomes=None, stop_after=None):
    clock = FakeClock(start=1000.0)
    transport = ScriptedTransport(clock, steps)
    transport.requests = TimedList(clock)
    cfg = cfg or config(tmp_path, resource_name=name)
    client = cli.make_client(cfg, clock=clock, sleep=clock.sleep, connection_factory=transport,
                             wall_clock=lambda: EPOCH + clock.now, environ={}, rng=lambda: 1.0)
    log = LogSink()
    store = cli.StateStore(cfg["state_dir"])

    def idle(seconds):
        clock.sleep(seconds)
        if stop_after is not None and clock.now >= stop_after:
            watcher.stopping = True

    watcher = InlineWatcher(cfg, client, log, store, clock=clock, wall_clock=lambda: EPOCH + clock.now,
                            dry_run=dry_run, retry_policy=_retry.RetryPolicy(rng=lambda: 1.0), idle=idle)
    watcher.outcomes = outcomes or {}
    return watcher, transport, clock, log


def doc(*events):
    return answer(200, document(*events))


def scheduled(event_id=ID_A, resources=("web_0",), **kw):
    # NotBefore an hour after the fake wall clock: drains are never cut by it here.
    kw.setdefault("not_before", "Wed, 15 Nov 2023 00:00:00 GMT")
    return raw_event(event_id=event_id, resources=resources, **kw)


def gaps(times):
    return [round(b - a, 3) for a, b in zip(times, times[1:])]


def methods(transport):
    return [r[0] for r in transport.requests]


# --------------------------------------------------------------------------------------------
# Pacing and backoff
# --------------------------------------------------------------------------------------------

def test_polls_once_per_interval_on_whole_ticks(tmp_path):
    steps = [answer(200, document(), cost=0.2)] * 6
    watcher, transport = build(tmp_path, steps, stop_after=1005.5)[:2]
    watcher.resolve_name()
    watcher.load_state()
    assert watcher.run_forever() == cli.EXIT_OK
    # Each request took 0.2 s, yet they start exactly one interval apart.
    assert gaps(transport.requests.times) == [1.0] * 5


def test_vm_name_comes_from_imds_and_counts_as_a_request(tmp_path):
    steps = [answer(200, "web_0"), doc(), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, cfg=config(tmp_path), stop_after=1002.5)
    assert watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert watcher.resource_name == "web_0"
    assert "/metadata/instance/compute/name" in transport.requests[0][1]
    assert gaps(transport.requests.times) == [1.0, 1.0]
    assert "this VM is web_0 (from IMDS compute/name)" in log.messages("startup")[0]


def test_429_retry_after_is_honoured_and_500s_back_off_by_the_client_table(tmp_path):
    steps = [doc(),
             answer(429, {"error": "Too many requests"}, headers=[("Retry-After", "3")]),
             answer(500), answer(500), answer(500), answer(500),
             doc(), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1013.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    # 429 waits its Retry-After; 500s wait 0.5, 1, 2, 4 s (never less than the interval).
    assert gaps(transport.requests.times) == [1.0, 3.0, 1.0, 1.0, 2.0, 4.0, 1.0]
    errors = log.messages("imds_error")
    assert len(errors) == 1 and "HTTP 429" in errors[0] and "keeps polling" in errors[0]
    assert log.messages("imds_recovered") == ["IMDS answers again after 5 failed requests over 11.0s"]


def test_the_client_makes_one_attempt_per_poll_so_the_loop_paces_every_retry(tmp_path):
    steps = [fail(socket.timeout("timed out")), answer(410), answer(410), fail(ConnectionResetError("reset")),
             answer(200, ""), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1005.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    # The dropped kept-alive connection is a failed attempt too, not a silent second request.
    assert gaps(transport.requests.times) == [1.0] * 5
    assert watcher.client.retry_timeout == 0


def test_errors_the_client_does_not_retry_still_keep_the_daemon_polling(tmp_path):
    steps = [answer(404, {"error": "Not found"})] * 4 + [doc()]
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1015.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert len(transport.requests) == 5
    assert gaps(transport.requests.times) == [1.0, 2.0, 4.0, 8.0]
    assert "HTTP 404" in log.messages("imds_error")[0]


def test_first_poll_gets_the_long_timeout_for_the_service_switching_on(tmp_path):
    steps = [doc(), doc()]
    watcher, transport = build(tmp_path, steps, stop_after=1001.5)[:2]
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    read_timeouts = [v for k, v in transport.log if k == "settimeout"]
    assert read_timeouts[0] == 120.0 and read_timeouts[-1] == 10.0


# --------------------------------------------------------------------------------------------
# Acting
# --------------------------------------------------------------------------------------------

def test_approval_goes_out_as_soon_as_the_drain_succeeds_and_the_next_poll_waits(tmp_path):
    steps = [doc(scheduled()), answer(200, ""), doc(scheduled(status="Started", not_before="")), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1002.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport)[:3] == ["GET", "POST", "GET"]
    assert transport.requests.times[1] == transport.requests.times[0]   # same instant as the poll
    assert json.loads(transport.requests[1][2]) == {"StartRequests": [{"EventId": ID_A}]}
    assert transport.requests.times[2] - transport.requests.times[1] >= 1.0
    assert log.actions().count("approval_sent") == 1


def test_failed_drain_sends_no_approval(tmp_path):
    steps = [doc(scheduled())] * 4
    watcher, transport, clock, log = build(tmp_path, steps, outcomes={"drain": False}, stop_after=1003.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport) == ["GET"] * 4
    assert "approval_withheld" in log.actions()


def test_event_for_another_vm_is_not_acted_on(tmp_path):
    steps = [doc(scheduled(resources=["web_1"]))] * 3
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1002.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport) == ["GET"] * 3
    assert log.actions() == ["startup", "event_seen", "shutdown"]


def test_approval_failure_is_retried_by_the_client_backoff_while_scheduled(tmp_path):
    user = scheduled(source="User")
    cfg = config(tmp_path, resource_name="web_0", approval={"user_events_at_once": True})
    steps = [doc(user), answer(503), doc(user), answer(200, ""), doc(user), doc(user)]
    watcher, transport, clock, log = build(tmp_path, steps, cfg=cfg, stop_after=1003.5)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport) == ["GET", "POST", "GET", "POST", "GET", "GET"]
    assert "HTTP 503" in log.messages("approval_failed")[0]
    assert log.actions().count("approval_sent") == 1


def test_state_on_disk_says_drain_running_before_the_handler_starts(tmp_path):
    seen = {}

    class Peek(InlineWatcher):
        def _start_job(self, job):
            with open(os.path.join(self.config["state_dir"], "state.json")) as handle:
                seen["drain"] = json.load(handle)["records"][ID_A.lower()]["drain"]
            super(Peek, self)._start_job(job)

    steps = [doc(scheduled()), answer(200, "")]
    watcher, transport, clock, log = build(tmp_path, steps)
    watcher.__class__ = Peek
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_once()
    assert seen == {"drain": "running"}


def test_once_finishes_what_its_poll_started(tmp_path):
    steps = [doc(scheduled(), scheduled(event_id=ID_B, event_type="Redeploy")), answer(200, ""), answer(200, "")]
    watcher, transport, clock, log = build(tmp_path, steps)
    watcher.resolve_name()
    watcher.load_state()
    assert watcher.run_once() == cli.EXIT_OK
    assert methods(transport) == ["GET", "POST", "POST"]
    assert not watcher.planner.has_work()


def test_once_reports_an_imds_failure(tmp_path):
    watcher, transport, clock, log = build(tmp_path, [answer(500)])
    watcher.resolve_name()
    watcher.load_state()
    assert watcher.run_once() == cli.EXIT_FAILED
    assert "HTTP 500" in log.messages("imds_error")[0]


def test_dry_run_says_what_it_would_do_and_does_nothing(tmp_path):
    cfg = config(tmp_path, resource_name="web_0")
    os.makedirs(os.path.join(cfg["handlers_dir"], "drain"))
    with open(os.path.join(cfg["handlers_dir"], "drain", "10-x"), "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(cfg["handlers_dir"], "drain", "10-x"), 0o755)
    watcher, transport, clock, log = build(tmp_path, [doc(scheduled())], cfg=cfg, dry_run=True)
    watcher.__class__ = daemon.Watcher       # the real dispatch: it must not start anything
    watcher.resolve_name()
    watcher.load_state()
    assert watcher.run_once() == cli.EXIT_OK
    assert methods(transport) == ["GET"]
    dry = log.messages("dry_run")
    assert dry == ["DRY RUN: would run the drain handlers of event %s: drain/10-x" % ID_A,
                   "DRY RUN: would approve event %s (policy after_drain)" % ID_A]
    assert "handler_started" not in log.actions()
    assert not os.path.exists(os.path.join(cfg["state_dir"], "state.json"))


# --------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------

def test_text_lines_carry_a_time_outside_the_journal():
    out = io.StringIO()
    log = watcher_log.Logger(out, "text", journald=False, wall_clock=lambda: EPOCH + 0.25)
    log("info", "event_seen", "event X: seen")
    log("error", "approval_failed", "event X: approval failed")
    assert out.getvalue().splitlines() == ["2023-11-14T22:13:20.250Z event X: seen",
                                           "2023-11-14T22:13:20.250Z ERROR: event X: approval failed"]


def test_journal_lines_carry_a_priority_and_no_time():
    out = io.StringIO()
    log = watcher_log.Logger(out, "text", journald=True)
    log("info", "a", "seen")
    log("warning", "b", "careful")
    log("error", "c", "broken")
    assert out.getvalue().splitlines() == ["<6>seen", "<4>WARNING: careful", "<3>ERROR: broken"]


def test_journald_is_detected_from_journal_stream_matching_the_stream(tmp_path):
    path = tmp_path / "out"
    with open(str(path), "w") as stream:
        st = os.fstat(stream.fileno())
        assert watcher_log.under_journald(stream, {"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)})
        assert not watcher_log.under_journald(stream, {"JOURNAL_STREAM": "1:2"})
        assert not watcher_log.under_journald(stream, {})


def test_json_lines():
    out = io.StringIO()
    log = watcher_log.Logger(out, "json", journald=False, wall_clock=lambda: EPOCH)
    log("info", "handler_finished", "done", event_id=ID_A, exit_code=0, duration=0.012)
    record = json.loads(out.getvalue())
    assert record == {"time": "2023-11-14T22:13:20.000Z", "level": "info", "action": "handler_finished",
                      "message": "done", "event_id": ID_A, "exit_code": 0, "duration": 0.012}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def test_configuration_errors_exit_2_with_the_fix_and_no_traceback(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{"poll_interval": 0}')
    assert cli.main(["run", "--once", "--config", str(path)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "configuration error" in err and "poll_interval" in err and "Traceback" not in err


def test_check_config_says_whether_the_file_is_valid(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"approval": {"leader_only": true}}')
    bad.write_text('{"approval": {"leader": true}}')
    assert cli.main(["check-config", "--config", str(good)]) == cli.EXIT_OK
    assert "is valid" in capsys.readouterr().out
    assert cli.main(["check-config", "--config", str(bad)]) == cli.EXIT_USAGE
    assert "unknown key 'leader'" in capsys.readouterr().err


def test_https_imds_url_is_refused_when_the_tls_library_is_not_loaded(tmp_path, capsys, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text('{"imds_url": "https://169.254.169.254"}')
    monkeypatch.setitem(sys.modules, "ssl", None)     # as when run as a program
    assert cli.main(["check-config", "--config", str(path)]) == cli.EXIT_USAGE
    assert "no TLS endpoint" in capsys.readouterr().err


def test_bad_url_on_the_command_line_is_a_configuration_error(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text("{}")
    assert cli.main(["status", "--config", str(path), "--imds-url", "ftp://x"]) == 2
    assert "imds_url" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--bogus"])
    assert info.value.code == cli.EXIT_USAGE
    assert "see --help" in capsys.readouterr().err
