"""The loop never crash-loops: malformed documents, a failing planner, a state file that cannot be
written, bad state records and hostile text are each logged with context while the loop goes on.
Time is the fake clock of the scripted transport; every request is the real shared client's."""

import io
import json
import os

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import daemon
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import log as watcher_log
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import records as watcher_records
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import status as watcher_status

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import answer
from .helpers import ID_A, ID_B, config, document
from .test_daemon import build, gaps, methods, scheduled


def doc(*events, incarnation=1):
    return answer(200, document(*events, incarnation=incarnation))


def start(watcher):
    watcher.resolve_name()
    watcher.load_state()
    return watcher


# --------------------------------------------------------------------------------------------
# One guarded boundary per iteration
# --------------------------------------------------------------------------------------------

def test_an_unexpected_error_inside_a_poll_is_logged_and_the_loop_goes_on_after_a_backoff(tmp_path, monkeypatch):
    steps = [doc(scheduled()), doc(scheduled()), answer(200, "")] + [doc(scheduled())] * 5
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1006.5)
    start(watcher)
    real_observe = watcher.planner.observe
    calls = []

    def broken_once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise KeyError("event_status")
        return real_observe(*args)

    monkeypatch.setattr(watcher.planner, "observe", broken_once)
    assert watcher.run_forever() == cli.EXIT_OK
    errors = log.messages("internal_error")
    assert len(errors) == 1
    assert "KeyError: 'event_status' at test_hardening_loop.py" in errors[0] and "the watcher goes on" in errors[0]
    assert "internal_recovered" in log.actions()
    # The failed poll was followed by a backoff (the internal rule's first step, 1 s here), then
    # whole ticks again; the event was drained and approved once all the same.
    assert methods(transport).count("POST") == 1 and log.actions().count("approval_sent") == 1
    gets = [t for t, m in zip(transport.requests.times, methods(transport)) if m == "GET"]
    assert gaps(gets) == [1.0] * (len(gets) - 1)


def test_repeated_internal_errors_back_off_to_the_cap_and_log_once_a_minute(tmp_path, monkeypatch):
    steps = [doc()] * 40
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1090.0)
    start(watcher)
    monkeypatch.setattr(watcher.planner, "observe", lambda *a: 1 / 0)
    watcher.run_forever()
    assert gaps(transport.requests.times)[:5] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert max(gaps(transport.requests.times)) == daemon.MAX_BACKOFF
    assert len(log.messages("internal_error")) == 2            # the first, and a reminder after a minute
    assert "ZeroDivisionError" in log.messages("internal_error")[0]


def test_a_state_write_that_fails_starts_no_handler_and_is_retried(tmp_path, monkeypatch):
    steps = [doc(scheduled())] * 4
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1003.5)
    start(watcher)
    started = []
    real_start = watcher._start_job
    monkeypatch.setattr(watcher, "_start_job", lambda job: (started.append(clock.now), real_start(job)))
    real_save = watcher.store.save
    failures = []

    def full_disk(records, name):
        if not failures and any(r["drain"] == "running" for r in records.values()):
            failures.append(clock.now)
            raise OSError(28, "No space left on device")
        return real_save(records, name)

    monkeypatch.setattr(watcher.store, "save", full_disk)
    watcher.run_forever()
    # The first attempt could not put "drain running" on disk, so the drain did not start then;
    # the next poll (after the internal backoff) started it, once.
    assert failures == [1000.0] and len(started) == 1 and started[0] > failures[0]
    assert "No space left on device" in log.messages("internal_error")[0]
    state = json.loads(open(os.path.join(watcher.config["state_dir"], "state.json")).read())
    assert state["records"][ID_A.lower()]["drain"] == "succeeded"
    assert log.actions().count("approval_sent") == 1


# --------------------------------------------------------------------------------------------
# Documents the client reads field by field
# --------------------------------------------------------------------------------------------

def test_malformed_events_never_crash_the_loop_and_the_healthy_ones_are_acted_on(tmp_path):
    healthy = scheduled()
    odd = [
        dict(scheduled(event_id=ID_B), Resources="web_0"),                      # one string: a one-element list
        dict(scheduled(event_id="0A1B2C3D-4E5F-4061-8273-94A5B6C7D8E9"), Resources=7),
        dict(scheduled(), EventId=12345),                                       # EventId a number
        dict(scheduled(event_id="11111111-2222-4333-8444-555555555555"), NotBefore="the day after"),
        "not an event",
    ]
    steps = [doc(healthy, *odd, incarnation=3)] + [answer(200, "")] * 3 + [doc(healthy, *odd, incarnation=3)] * 3
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1003.5)
    start(watcher)
    assert watcher.run_forever() == cli.EXIT_OK
    assert "internal_error" not in log.actions(), log.messages("internal_error")
    # The healthy event, the one whose Resources was a single string and the one whose NotBefore
    # could not be read (its drain is then limited by its timeout alone) were drained and approved;
    # the one whose Resources was a number names no VM, the one without an EventId is set aside.
    approved = [json.loads(r[2])["StartRequests"] for r in transport.requests if r[0] == "POST"]
    assert sorted(a["EventId"] for batch in approved for a in batch) == sorted(
        [ID_A, ID_B, "11111111-2222-4333-8444-555555555555"])
    # What could not be read is logged once for this incarnation, not once a poll.
    warnings = log.messages("document_warning")
    assert warnings and len(warnings) == len(set(warnings))
    assert any("EventId" in w for w in warnings) and any("Resources" in w for w in warnings)
    set_aside = log.messages("event_set_aside")
    assert len(set_aside) == 1 and "no readable EventId" in set_aside[0]


def test_document_warnings_are_logged_again_for_a_new_incarnation(tmp_path):
    odd = dict(scheduled(resources=["web_1"]), DurationInSeconds="long")
    steps = [doc(odd, incarnation=1)] * 3 + [doc(odd, incarnation=2)] * 2
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1004.5)
    start(watcher)
    watcher.run_forever()
    warnings = log.messages("document_warning")
    assert len(warnings) == 2
    assert "incarnation 1" in warnings[0] and "incarnation 2" in warnings[1]


def test_an_event_id_that_is_not_a_guid_is_drained_but_never_sent_in_an_approval(tmp_path):
    odd = scheduled(event_id="not-a-guid")
    steps = [doc(odd, scheduled(event_id=ID_B)), answer(200, "")] + [doc(odd, scheduled(event_id=ID_B))] * 2
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1002.5)
    start(watcher)
    watcher.run_forever()
    assert "internal_error" not in log.actions()
    assert json.loads(transport.requests[1][2]) == {"StartRequests": [{"EventId": ID_B}]}
    failed = log.messages("approval_failed")
    assert len(failed) == 1 and "not-a-guid" in failed[0] and "not a GUID" in failed[0] and "not retried" in failed[0]


# --------------------------------------------------------------------------------------------
# Time: Retry-After and the loop's own cap; one deadline per call
# --------------------------------------------------------------------------------------------

def test_a_429_asking_for_an_hour_never_makes_the_watcher_wait_beyond_its_cap(tmp_path):
    steps = [doc(), answer(429, {"error": "Too many requests"}, headers=[("Retry-After", "3600")]),
             answer(429, {"error": "Too many requests"}, headers=[("Retry-After", "Wed, 21 Oct 2099 07:28:00 GMT")]),
             doc(), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1022.5)
    start(watcher)
    watcher.run_forever()
    assert gaps(transport.requests.times) == [1.0, daemon.MAX_BACKOFF, daemon.MAX_BACKOFF, 1.0]
    assert daemon.MAX_BACKOFF <= 10.0 < 30.0          # within a Preempt's notice


class DeadlineSpy(object):
    """Wraps the client: records the Deadline each call gets and its time left at that moment."""

    def __init__(self, client):
        self._client = client
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get_scheduled_events(self, deadline=None):
        self.calls.append(("GET", deadline.remaining() if deadline is not None else None))
        return self._client.get_scheduled_events(deadline=deadline)

    def approve(self, event_ids, deadline=None):
        self.calls.append(("POST", deadline.remaining() if deadline is not None else None))
        return self._client.approve(event_ids, deadline=deadline)


def test_every_call_gets_a_deadline_and_the_client_is_never_changed(tmp_path):
    cfg = config(tmp_path, resource_name="web_0", request_timeout=7, first_request_timeout=90)
    steps = [doc(scheduled()), answer(200, ""), doc(scheduled()), doc()]
    watcher, transport, clock, log = build(tmp_path, steps, cfg=cfg, stop_after=1002.5)
    before = (watcher.client.request_timeout, watcher.client.retry_timeout)
    watcher.client = DeadlineSpy(watcher.client)
    start(watcher)
    watcher.run_forever()
    assert watcher.client.calls == [("GET", 90.0), ("POST", 7.0), ("GET", 7.0), ("GET", 7.0)]
    assert (watcher.client.request_timeout, watcher.client.retry_timeout) == before == (90.0, 0.0)


# --------------------------------------------------------------------------------------------
# An event gone for one poll is not finished
# --------------------------------------------------------------------------------------------

def test_one_empty_document_is_not_the_end_of_an_event(tmp_path):
    ev = scheduled()
    steps = [doc(ev, incarnation=4), answer(200, ""), doc(incarnation=4)] + [doc(ev, incarnation=4)] * 2
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1003.5)
    start(watcher)
    watcher.run_forever()
    assert "event_gone" not in log.actions() and "recover" not in [phase for _key, phase in watcher.planner.queue]
    assert log.messages("event_missing") and "not taken as gone" in log.messages("event_missing")[0]
    record = watcher.planner.records[ID_A.lower()]
    assert record["drain"] == "succeeded" and record["recover"] is None and not record["gone"]


def test_two_empty_documents_in_a_row_end_it_and_its_return_never_brings_a_second_drain(tmp_path):
    ev = scheduled()
    watcher, transport, clock, log = build(
        tmp_path, [doc(ev, incarnation=4), answer(200, ""), doc(incarnation=4), doc(incarnation=4),
                   doc(ev, incarnation=4), doc(ev, incarnation=4), doc(incarnation=5)], stop_after=1006.5)
    watcher.outcomes = {}
    phases = []
    real_start = watcher._start_job
    watcher._start_job = lambda job: (phases.append(job.phase), real_start(job))
    start(watcher)
    watcher.run_forever()
    assert phases == ["drain", "recover"]            # never a second drain, nor a second recover here
    assert log.actions().count("approval_sent") == 1
    back = log.messages("event_back")
    assert len(back) == 1 and "not run again" in back[0]


def test_a_newer_incarnation_without_the_event_ends_it_at_once(tmp_path):
    ev = scheduled()
    watcher, transport, clock, log = build(tmp_path, [doc(ev, incarnation=4), answer(200, ""), doc(incarnation=5)],
                                           stop_after=1001.5)
    phases = []
    real_start = watcher._start_job
    watcher._start_job = lambda job: (phases.append(job.phase), real_start(job))
    start(watcher)
    watcher.run_forever()
    assert phases == ["drain", "recover"] and "event_missing" not in log.actions()


# --------------------------------------------------------------------------------------------
# State records, one by one
# --------------------------------------------------------------------------------------------

def good_record(event_id=ID_A, **fields):
    record = watcher_records.new_record({"event_id": event_id, "event_type": "Reboot", "event_status": "Scheduled",
                                         "resources": ["web_0"], "not_before": None}, True, 3)
    record.update(fields)
    return record


@pytest.mark.parametrize("bad, reason", [
    ({"drain": "running"}, "missing"),                                # the KeyError of the issue
    (dict(good_record(ID_B), drain=3), "drain has an impossible value 3"),
    (dict(good_record(ID_B), mine="yes"), "mine has an impossible value"),
    (dict(good_record(ID_B), event=[]), "event is not a JSON object"),
    (dict(good_record(ID_B), event={"event_id": 5}), "does not match the key"),
    (dict(good_record(ID_B), approval_retry_at="soon"), "approval_retry_at"),
    (dict(good_record(ID_B), drain=["x"]), "drain has an impossible value"),
    ("a string", "not a JSON object"),
])
def test_a_bad_record_is_set_aside_and_logged_the_rest_kept(tmp_path, bad, reason):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    good = good_record(ID_A, drain="succeeded", approval="sent")
    (state_dir / "state.json").write_text(json.dumps({"version": 1, "resource_name": "web_0", "records": {
        ID_A.lower(): good, ID_B.lower(): bad}}))
    watcher, transport, clock, log = build(tmp_path, [doc(scheduled())], stop_after=1000.5)
    start(watcher)
    assert set(watcher.planner.records) == {ID_A.lower()}
    assert watcher.planner.records[ID_A.lower()]["drain"] == "succeeded"
    notes = log.messages("state_unreadable")
    assert len(notes) == 1 and ID_B.lower() in notes[0] and reason in notes[0] and "set aside" in notes[0]
    on_disk = json.loads((state_dir / "state.json").read_text())
    assert on_disk["set_aside"][0]["key"] == ID_B.lower() and on_disk["set_aside"][0]["record"] == bad
    assert reason in on_disk["set_aside"][0]["reason"]
    assert watcher.run_once() == cli.EXIT_OK                       # and the loop runs
    assert json.loads((state_dir / "state.json").read_text())["set_aside"][0]["record"] == bad


def test_a_record_written_before_the_new_fields_still_loads():
    old = good_record()
    for field in ("seen_incarnation", "missing_polls", "gone_at"):
        del old[field]
    record, problem = watcher_records.check_record(ID_A.lower(), old)
    assert problem is None and record["missing_polls"] == 0 and record["seen_incarnation"] is None


# --------------------------------------------------------------------------------------------
# Logs: a newline inside a field never forges a line
# --------------------------------------------------------------------------------------------

HOSTILE = "x\nERROR: event 00000000: approval sent\r\x1b[31m\u2028<3>"


@pytest.mark.parametrize("log_format, journald", [("text", False), ("text", True), ("json", False), ("json", True)])
def test_a_control_character_in_a_field_never_forges_a_log_line(log_format, journald):
    out = io.StringIO()
    log = watcher_log.Logger(out, log_format, journald=journald, wall_clock=lambda: 0.0)
    log("info", "handler_output", "event X: drain/10-x: %s" % HOSTILE, line=HOSTILE)
    lines = out.getvalue().split("\n")
    assert len(lines) == 2 and lines[1] == ""
    line = lines[0]
    assert "\r" not in line and "\x1b" not in line and "\u2028" not in line
    if log_format == "json":
        record = json.loads(line[3:] if journald else line)
        assert record["message"].endswith(HOSTILE) and record["line"] == HOSTILE
    else:
        assert "\\x0aERROR: event 00000000" in line and "\\x1b[31m" in line and "\\u2028" in line
        assert line.startswith("<6>") == journald


def test_an_imds_description_with_a_newline_stays_on_one_line_end_to_end(tmp_path):
    ev = dict(scheduled(resources=["web_1"]), Description="maintenance\nERROR: forged line")
    out = io.StringIO()
    watcher, transport, clock, log = build(tmp_path, [doc(ev)], stop_after=1000.5)
    watcher.log = watcher_log.Logger(out, "text", journald=False)
    start(watcher)
    watcher.run_once()
    assert not any(line.startswith("ERROR: forged") for line in out.getvalue().splitlines())
    assert not any(" ERROR: forged" in line.split(" ", 1)[1][:14] for line in out.getvalue().splitlines())


# --------------------------------------------------------------------------------------------
# The command line never shows a traceback
# --------------------------------------------------------------------------------------------

def test_an_internal_error_of_a_command_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"resource_name": "web_0", "imds_url": "http://127.0.0.1:9",
                                "state_dir": str(tmp_path / "state")}))
    monkeypatch.setattr(watcher_status, "status_report", lambda *a: {}["boom"])
    assert cli.main(["status", "--config", str(path)]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: KeyError: 'boom'" in err and "Traceback" not in err


def test_start_and_stop_report_file_errors_without_a_traceback(tmp_path, capsys):
    pid_file = str(tmp_path / "missing-dir" / "watcher.pid")
    assert cli.main(["stop", "--pid-file", pid_file]) == cli.EXIT_OK
    assert "not running" in capsys.readouterr().out
    assert cli.main(["start", "--pid-file", pid_file, "--config", str(tmp_path / "none.json"),
                     "--log-file", str(tmp_path / "missing-dir" / "log")]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert "does not exist" in captured.out and "Traceback" not in captured.err


def test_run_whose_state_directory_cannot_be_created_keeps_trying_without_exiting(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = config(tmp_path, resource_name="web_0", state_dir=str(blocker / "state"))
    watcher, transport, clock, log = build(tmp_path, [], cfg=cfg)
    attempts = []

    def sleep(seconds):
        attempts.append(seconds)
        if len(attempts) == 3:
            watcher.stopping = True

    watcher._sleep = sleep
    assert watcher.end_leftovers() is False                # stopped while waiting, never raised
    assert len(attempts) == 3 and max(attempts) <= daemon.MAX_BACKOFF
    assert len(log.messages("state_unusable")) == 1 and "cannot create the state directory" in \
        log.messages("state_unusable")[0]


def test_a_pid_file_that_cannot_be_written_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"resource_name": "web_0", "state_dir": str(tmp_path / "state")}))
    assert cli.main(["run", "--once", "--config", str(path), "--pid-file",
                     str(tmp_path / "missing" / "pid")]) == cli.EXIT_USAGE
    assert "cannot write the pid file" in capsys.readouterr().out
