# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event source plugin without the engine: loaded the way ansible-rulebook loads it (run by
path), polling the mock IMDS on 127.0.0.1. Backoff delays are read from what the poller returns,
never waited for; the asyncio tests bound real time only with generous limits."""

import asyncio
import json
import logging
import os

import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import FakeClock, start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import ROOT

SOURCE_PATH = os.path.join(ROOT, "extensions", "eda", "plugins", "event_source", "scheduled_events.py")


def run_path(path):
    """What runpy.run_path does with a plain file, as ansible-rulebook loads a source. runpy itself
    cannot be used here: under ansible-test the collection loader's path hook claims every path in
    the collection, and runpy then looks for a __main__ module inside the file."""
    namespace = {"__name__": "<run_path>", "__file__": path}
    with open(path, encoding="utf-8") as handle:
        exec(compile(handle.read(), path, "exec"), namespace)  # pylint: disable=exec-used
    return namespace


SOURCE = run_path(SOURCE_PATH)
check_args = SOURCE["check_args"]
SourceConfigError = SOURCE["SourceConfigError"]
Poller = SOURCE["Poller"]
FLEET = {"default_vm": "web_1",
         "groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]}]}


@pytest.fixture
def mock():
    with start_mock(fleet=FLEET) as handle:
        yield handle


def options(mock, **given):
    clean, _warnings = check_args(dict({"imds_url": mock.vm_url("web_1")}, **given))
    return clean


def add_event(mock, **spec):
    return mock.control("POST", "events", spec)["event_id"]


class Clock(object):
    """A monotonic clock the test moves: the poller's pacing is computed, never slept."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def poller(mock, **given):
    clock = Clock()
    result = Poller(options(mock, **given), clock=clock, rng=lambda: 1.0)
    result.clock = clock
    return result


# -- options, checked once at start ------------------------------------------------------------

def test_defaults():
    clean, warnings = check_args({})
    assert clean == {"imds_url": None, "api_version": "2020-07-01", "request_timeout": 120.0, "poll_interval": 1.0,
                     "this_host_only": False, "emit_existing": True, "event_ids": None, "event_types": None,
                     "event_statuses": None, "event_sources": None, "resource_name": None, "max_pending_events": 1000}
    assert warnings == []


def test_the_documented_options_are_the_accepted_options():
    documented = yaml.safe_load(SOURCE["DOCUMENTATION"])
    assert sorted(documented["options"]) == sorted(SOURCE["OPTIONS"])
    assert documented["version_added"] == "0.1.0"
    defaults = check_args({})[0]
    for name, spec in documented["options"].items():
        if "default" in spec:
            assert defaults[name] == (float(spec["default"]) if spec["type"] == "float" else spec["default"]), name
    assert yaml.safe_load(SOURCE["EXAMPLES"])[0]["sources"][0]["azure_imds.scheduled_events.scheduled_events"]


BAD_NUMBERS = [float("nan"), float("inf"), float("-inf"), -1, 1e308, "abc", True, [1], u"\uff15", u"\uff11e3", "nan",
               "inf", None]


@pytest.mark.parametrize("name, minimum", [("poll_interval", 0.2), ("request_timeout", 0.1)])
@pytest.mark.parametrize("value", BAD_NUMBERS + [0], ids=repr)
def test_a_bad_number_is_refused_naming_the_option_and_the_range(name, minimum, value):
    with pytest.raises(SourceConfigError) as refused:
        check_args({name: value})
    assert str(refused.value).startswith("%s must be a number from %s to 86400 (seconds), got " % (name, minimum))


def test_polling_faster_than_the_service_allows_is_refused():
    with pytest.raises(SourceConfigError, match=r"poll_interval must be a number from 0.2 .* got 0.19"):
        check_args({"poll_interval": 0.19})
    assert check_args({"poll_interval": 0.2})[0]["poll_interval"] == 0.2
    assert check_args({"poll_interval": "2.5"})[0]["poll_interval"] == 2.5    # templated text


@pytest.mark.parametrize("value", ["http://127.0.0.1:abc/vm/web_0", "http://127.0.0.1:99999/vm/web_0", "http://[::1",
                                   "http://127.0.0.1:1/vm/web 0", "", "ftp://127.0.0.1/x", 5])
def test_a_bad_imds_url_is_refused_naming_it(value):
    with pytest.raises(SourceConfigError, match="imds_url"):
        check_args({"imds_url": value})


@pytest.mark.parametrize("args, message", [
    ({"poll_intervall": 1}, r"unknown option poll_intervall; the options are imds_url, "),
    ({"this_host_only": "yes please"}, r"this_host_only must be true or false, got 'yes please'"),
    ({"emit_existing": 1}, r"emit_existing must be true or false, got 1"),
    ({"event_types": []}, r"event_types is an empty list, which would match no event"),
    ({"event_statuses": ["Completed"]}, r"event_statuses: 'Completed' is not one of Scheduled, Started"),
    ({"event_sources": [3]}, r"event_sources must be a list of strings"),
    ({"event_ids": ["not-a-guid"]}, r"not-a-guid"),
    ({"api_version": "2099-01-01"}, r"2099-01-01"),
    ({"resource_name": ""}, r"resource_name must be this VM's name"),
    ("poll_interval=1", r"the source's arguments must be a mapping"),
])
def test_bad_options_are_refused_with_a_message_naming_them(args, message):
    with pytest.raises(SourceConfigError, match=message):
        check_args(args)


def test_an_unknown_event_type_is_kept_with_a_warning_and_engine_keys_pass():
    clean, warnings = check_args({"event_types": ["Hibernate"], "this_host_only": "true", "eda_feedback_queue": None})
    assert clean["event_types"] == ["Hibernate"] and clean["this_host_only"] is True
    assert warnings and "event_types: 'Hibernate' is not a Scheduled Events type" in warnings[0]


def test_main_refuses_a_bad_option_before_any_request(mock, caplog):
    with caplog.at_level(logging.ERROR):
        with pytest.raises(SourceConfigError):
            asyncio.run(asyncio.wait_for(SOURCE["main"](asyncio.Queue(), {
                "imds_url": mock.vm_url("web_1"), "poll_interval": 0.1}), 60))
    assert "poll_interval must be a number from 0.2" in caplog.text
    assert mock.control("GET", "audit")["requests"] == []


# -- polling ---------------------------------------------------------------------------------

def test_the_vm_name_is_read_from_imds_and_each_poll_is_one_request(mock):
    source = poller(mock)
    assert source.start() == 0.0
    assert source.options["resource_name"] == "web_1"
    reboot = add_event(mock, event_type="Reboot", resources=["web_1"])
    transitions, delay = source.poll()
    assert [(t["type"], t["scheduled_event"]["event_id"], t["affects_this_host"]) for t in transitions] == [
        ("scheduled", reboot, True)]
    # The event as scheduled_event_info returns it, annotations included.
    assert transitions[0]["scheduled_event"]["seconds_to_not_before"] > 0
    assert delay == 1.0
    # The audit names the VM and the path below its /vm/<name> prefix.
    requests = [(r["vm"], r["method"], r["path"].split("?")[0]) for r in mock.control("GET", "audit")["requests"]]
    assert requests == [("web_1", "GET", "/metadata/instance/compute/name"),
                        ("web_1", "GET", "/metadata/scheduledevents")]


def test_pacing_counts_from_the_start_of_the_request(mock):
    source = poller(mock, resource_name="web_1", poll_interval=0.5)
    source.start()
    real_clock = source.clock
    ticks = iter([10.0, 10.3])
    source._clock = lambda: next(ticks)    # the request took 0.3 s: the next one starts 0.2 s later
    assert source.poll()[1] == pytest.approx(0.2)
    source._clock = real_clock


def test_filters_and_this_host_only_select_what_is_emitted_while_everything_is_tracked(mock):
    source = poller(mock, resource_name="web_1", this_host_only=True, event_types=["Reboot"])
    source.start()
    mine = add_event(mock, event_type="Reboot", resources=["web_1"])
    add_event(mock, event_type="Reboot", resources=["web_0"])
    add_event(mock, event_type="Freeze", resources=["web_1"])
    transitions, _delay = source.poll()
    assert [t["scheduled_event"]["event_id"] for t in transitions] == [mine]
    assert len(source.tracker.records) == 3


def test_emit_existing_false_announces_only_what_comes_later(mock):
    add_event(mock, event_type="Reboot", resources=["web_1"])
    source = poller(mock, resource_name="web_1", emit_existing=False)
    source.start()
    assert source.poll()[0] == []
    later = add_event(mock, event_type="Redeploy", resources=["web_1"])
    assert [t["scheduled_event"]["event_id"] for t in source.poll()[0]] == [later]


def test_a_user_event_first_seen_started_is_put_on_the_queue_as_approved_by_the_policy(mock):
    source = poller(mock, resource_name="web_1")
    source.start()
    scheduled = add_event(mock, event_type="Reboot", resources=["web_1"], event_source="User")
    assert [t["type"] for t in source.poll()[0]] == ["scheduled"]
    mock.control("POST", "events/%s/start" % scheduled)
    policy = add_event(mock, event_type="Redeploy", resources=["web_1"], event_source="User", status="Started")
    platform = add_event(mock, event_type="Reboot", resources=["web_1"], status="Started")
    found = dict((t["scheduled_event"]["event_id"], t) for t in source.poll()[0])
    assert [found[eid]["type"] for eid in (scheduled, policy, platform)] == ["started"] * 3
    assert [found[eid]["auto_approved"] for eid in (scheduled, policy, platform)] == [False, True, False]
    assert [found[eid]["started_before_seen"] for eid in (scheduled, policy, platform)] == [False, False, True]


def test_imds_faults_are_polled_through_with_the_client_s_backoff_and_logged_once(mock, caplog):
    source = poller(mock, resource_name="web_1")
    source.start()
    mock.control("POST", "faults", {"kind": "status", "status": 500, "count": 3})
    with caplog.at_level(logging.WARNING):
        delays = [source.poll() for _attempt in range(3)]
        reboot = add_event(mock, event_type="Reboot", resources=["web_1"])
        transitions, delay = source.poll()
    # 500: 0.5 s, doubling (jitter fixed at its top), never below the poll interval.
    assert [d for t, d in delays] == [1.0, 1.0, 2.0] and all(t == [] for t, d in delays)
    assert [t["scheduled_event"]["event_id"] for t in transitions] == [reboot] and delay == 1.0
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 1 and "500" in failures[0].getMessage()
    assert "IMDS answers again after" in caplog.text
    # One request per poll: the client itself does not retry (the loop paces every attempt).
    assert len(mock.control("GET", "audit")["requests"]) == 4


def test_throttling_honours_retry_after_up_to_the_cap(mock):
    source = poller(mock, resource_name="web_1")
    source.start()
    mock.control("POST", "faults", {"kind": "status", "status": 429, "count": 2, "retry_after": 3})
    assert source.poll()[1] == 3.0
    mock.control("POST", "faults", {"kind": "status", "status": 429, "count": 1, "retry_after": 600})
    source.poll()
    assert source.poll()[1] == SOURCE["MAX_BACKOFF"]


def test_an_error_the_client_does_not_retry_is_polled_through_too(mock):
    source = poller(mock, resource_name="web_1")
    source.start()
    mock.control("POST", "faults", {"kind": "status", "status": 400, "count": 1})
    assert source.poll() == ([], 1.0)
    assert source.poll()[0] == []


def test_the_vm_name_is_retried_until_imds_answers(mock):
    mock.control("POST", "faults", {"kind": "status", "status": 503, "count": 2})
    source = poller(mock)
    assert source.start() > 0 and source.tracker is None
    assert source.start() > 0
    assert source.start() == 0.0 and source.tracker.resource_name == "web_1"


def test_an_event_with_a_deep_field_and_a_lone_surrogate_does_not_stop_the_source(mock, caplog):
    # Issue 22: a field nested 600 deep raised RecursionError in every poll (the tracker copies each
    # event), and a lone surrogate reached the engine as text no UTF-8 encoder takes.
    source = poller(mock, resource_name="web_1")
    source.start()
    view = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web_1"]})
    odd_id = "0A1B2C3D-4E5F-4061-8273-94A5B6C7D8E9"
    events = [{"EventId": event_id, "EventType": "Reboot", "EventStatus": "Scheduled", "ResourceType": "VirtualMachine",
               "Resources": ["web_1"], "NotBefore": view["not_before_rfc1123"], "Description": description,
               "EventSource": "Platform", "DurationInSeconds": -1, "Nested": "@deep@"}
              for event_id, description in ((view["event_id"], "fine"), (odd_id, u"Host \ud800 repair"))]
    del events[0]["Nested"]
    body = json.dumps({"DocumentIncarnation": 2, "Events": events}).replace('"@deep@"', "[" * 600 + "]" * 600)
    mock.control("POST", "faults", {"kind": "status", "status": 200, "body": body, "paths": ["scheduledevents"]})
    with caplog.at_level(logging.WARNING):
        transitions, _delay = source.poll()
    seen = dict((t["scheduled_event"]["event_id"], t["scheduled_event"]) for t in transitions)
    assert sorted(seen) == sorted([view["event_id"], odd_id])
    assert "nested" not in seen[odd_id] and seen[odd_id]["description"] == u"Host \ufffd repair"
    json.dumps(transitions, ensure_ascii=False).encode("utf-8")
    assert "the field 'Nested' nests deeper than" in caplog.text and "unpaired surrogates" in caplog.text


# -- the asyncio loop -------------------------------------------------------------------------

def test_run_puts_each_transition_on_the_queue_and_stops_when_cancelled(mock):
    async def scenario():
        queue = asyncio.Queue()
        task = asyncio.ensure_future(SOURCE["main"](queue, {"imds_url": mock.vm_url("web_1"), "poll_interval": 0.2}))
        reboot = add_event(mock, event_type="Reboot", resources=["web_1"], duration=600)
        scheduled = await asyncio.wait_for(queue.get(), 120)
        mock.control("POST", "events/%s/start" % reboot)
        started = await asyncio.wait_for(queue.get(), 120)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return reboot, scheduled, started

    reboot, scheduled, started = asyncio.run(scenario())
    assert (scheduled["type"], scheduled["scheduled_event"]["event_id"]) == ("scheduled", reboot)
    assert (started["type"], started["scheduled_event"]["event_status"]) == ("started", "Started")
    statuses = set(r["status"] for r in mock.control("GET", "audit")["requests"])
    assert statuses == {200}       # the mock's 5 requests/s limit was never hit


# -- a busy rulebook (issue 22, item 5) ---------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, 1.5, 100001, "abc", True, [1], float("nan"), None], ids=repr)
def test_a_bad_max_pending_events_is_refused_naming_the_option_and_the_range(value):
    with pytest.raises(SourceConfigError) as refused:
        check_args({"max_pending_events": value})
    assert str(refused.value).startswith("max_pending_events must be a whole number from 1 to 100000 (events), got ")


def test_max_pending_events_takes_a_whole_number_also_as_templated_text():
    assert check_args({"max_pending_events": 1})[0]["max_pending_events"] == 1
    assert check_args({"max_pending_events": "250"})[0]["max_pending_events"] == 250


class HeldSleep(object):
    """The source's sleep between polls, held by the test: the source polls when the test says so,
    and the test learns when that poll is over (the source is back in its sleep). Nothing waits
    on real seconds; a source that never gets back to its sleep fails the test after LIMIT."""

    LIMIT = 60.0

    def __init__(self):
        self.polls = 0
        self._asleep = asyncio.Event()
        self._go = asyncio.Event()

    async def __call__(self, _delay):
        self.polls += 1
        self._asleep.set()
        await self._go.wait()
        self._go.clear()

    async def first_poll(self):
        await self._wait("the first poll")

    async def poll_once(self, what):
        self._asleep.clear()
        self._go.set()
        await self._wait(what)

    async def _wait(self, what):
        try:
            await asyncio.wait_for(self._asleep.wait(), self.LIMIT)
        except asyncio.TimeoutError:
            pytest.fail("the source did not come back to its next poll after %s: polling waits on the "
                        "rulebook's queue" % what)


def transitions_of(handle, event_id):
    return [t["to"] for t in handle.control("GET", "audit")["transitions"] if t["event_id"] == event_id]


async def take_all(queue, count):
    taken = [await asyncio.wait_for(queue.get(), HeldSleep.LIMIT) for _index in range(count)]
    for _turn in range(5):        # let the feeder run: nothing more comes
        await asyncio.sleep(0)
    assert queue.empty()
    return [(t["type"], t["scheduled_event"]["event_id"], t["seen_scheduled"]) for t in taken]


def test_polling_goes_on_while_the_rulebook_is_busy_and_started_events_are_never_reported_cancelled():
    """The engine's queue holds one event and the rulebook takes none while two events go through
    Scheduled, Started and away on the mock's clock: every poll still happens, and once the rulebook
    takes its events they are all there, in order, ended and never cancelled."""
    clock = FakeClock()

    async def scenario(handle):
        queue = asyncio.Queue(maxsize=1)
        held = HeldSleep()
        source = Poller(options(handle, resource_name="web_1"), clock=clock, rng=lambda: 1.0)
        task = asyncio.ensure_future(SOURCE["run"](queue, source.options, poller=source, sleep=held))
        await held.first_poll()
        events = []
        for number in range(2):
            event_id = add_event(handle, event_type="Reboot", resources=["web_1"], notice=3, duration=2)
            events.append(event_id)
            # One poll a simulated second until the mock's audit shows the event removed and a poll
            # has read the document without it.
            while "removed" not in transitions_of(handle, event_id):
                clock.tick(1)
                await held.poll_once("a poll while event %d was %s" % (number, transitions_of(handle, event_id)[-1]))
            clock.tick(1)
            await held.poll_once("the poll after event %d left" % number)
        assert queue.qsize() == 1          # the rulebook has taken nothing all along
        taken = await take_all(queue, 6)
        task.cancel()
        await asyncio.wait([task])
        return events, held.polls, taken

    with start_mock(fleet=FLEET, clock=clock) as handle:
        (first, second), polls, taken = asyncio.run(scenario(handle))
        audit = handle.control("GET", "audit")
        for event_id in (first, second):
            assert transitions_of(handle, event_id) == ["Scheduled", "Started", "removed"]
    assert taken == [("scheduled", first, True), ("started", first, True), ("ended", first, True),
                     ("scheduled", second, True), ("started", second, True), ("ended", second, True)]
    reads = [r for r in audit["requests"] if r["path"].startswith("/metadata/scheduledevents")]
    assert len(reads) == polls and all(r["status"] == 200 for r in reads)


def test_a_full_buffer_drops_the_oldest_events_counts_and_logs_them(caplog):
    """max_pending_events 2, a queue of one that is never read: of five events scheduled at once,
    the rulebook gets the first (it fits the queue before the next is polled) and the last two;
    the other two are dropped, each logged with the count so far, and polling goes on."""
    clock = FakeClock()

    async def scenario(handle):
        queue = asyncio.Queue(maxsize=1)
        held = HeldSleep()
        source = Poller(options(handle, resource_name="web_1", max_pending_events=2), clock=clock, rng=lambda: 1.0)
        task = asyncio.ensure_future(SOURCE["run"](queue, source.options, poller=source, sleep=held))
        await held.first_poll()
        first = add_event(handle, event_type="Freeze", resources=["web_1"], notice=600)
        clock.tick(1)
        await held.poll_once("the first event")
        later = [add_event(handle, event_type="Reboot", resources=["web_1"], notice=600) for _index in range(4)]
        clock.tick(1)
        await held.poll_once("four events at once")
        clock.tick(1)
        await held.poll_once("a poll with a full buffer")
        taken = await take_all(queue, 3)
        task.cancel()
        await asyncio.wait([task])
        # One NotBefore for the four: the source orders them by EventId (as scheduled_event_info).
        return [first] + sorted(later), taken

    with caplog.at_level(logging.WARNING), start_mock(fleet=FLEET, clock=clock) as handle:
        ids, taken = asyncio.run(scenario(handle))
    assert taken == [("scheduled", ids[0], True), ("scheduled", ids[3], True), ("scheduled", ids[4], True)]
    drops = [r.getMessage() for r in caplog.records if "dropped the oldest" in r.getMessage()]
    assert len(drops) == 2
    assert "scheduled %s (Reboot); 1 dropped since start" % ids[1] in drops[0]
    assert "scheduled %s (Reboot); 2 dropped since start" % ids[2] in drops[1]
    assert "the rulebook has not taken the last 2 events (max_pending_events)" in drops[0]
