"""The wait of scheduled_event_wait: a predicate (Goal) and a clock (Waiter), driven by a fake clock.

Each scripted step is what one run of scheduled_event_info returns and how long it took; nothing
here sleeps for real.
"""

import jmespath
import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils import _wait_state
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils._wait_state import (
    Condition, Goal, Waiter, WaitInputError)

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock

REBOOT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
FREEZE_ID = "0B5D9B1B-5F41-4BB0-A5D9-0C0E0B7A6F10"


def raw_event(event_id=REBOOT_ID, event_type="Reboot", status="Scheduled", resources=("vm0",)):
    return {"EventId": event_id, "EventStatus": status, "EventType": event_type, "ResourceType": "VirtualMachine",
            "Resources": list(resources), "NotBefore": "" if status == "Started" else "Mon, 11 Apr 2022 22:26:58 GMT",
            "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}


def norm(raw):
    return {"event_id": raw["EventId"], "event_type": raw["EventType"], "event_status": raw["EventStatus"],
            "resources": raw["Resources"]}


def doc(incarnation, *raw_events, matching=None, polls=1, resource_name="vm0"):
    """A successful info module result. matching: the events that pass the filters (default: all)."""
    document = {"DocumentIncarnation": incarnation, "Events": list(raw_events)}
    events = [norm(e) for e in (raw_events if matching is None else matching)]
    return {"changed": False, "document": document, "document_incarnation": incarnation, "events": events,
            "resource_name": resource_name, "polls": polls}


def failed(msg="GET http://127.0.0.1:1/metadata/scheduledevents failed with HTTP 400."):
    return {"failed": True, "msg": msg}


def unreachable(msg="Failed to connect to the host via ssh: Connection refused"):
    return {"unreachable": True, "msg": msg}


class ScriptedModule:
    """run_module for the Waiter: plays (result, seconds the run took) steps and records each call."""

    def __init__(self, clock, steps):
        self.clock = clock
        self.steps = list(steps)
        self.calls = []  # (module_args, time_left, clock at start)

    def __call__(self, module_args, time_left):
        self.calls.append((dict(module_args), time_left, self.clock.now))
        assert self.steps, "the waiter ran the module more often than scripted: %r" % (module_args,)
        result, cost = self.steps.pop(0)
        self.clock.now += cost
        return result


def make(steps, goal=None, timeout=60.0, clock=None, resets=None, **kwargs):
    clock = clock or FakeClock()
    module = ScriptedModule(clock, steps)
    base = kwargs.pop("module_args", {"imds_url": "http://127.0.0.1:8080/vm/vm0", "api_version": "2020-07-01",
                                      "event_types": None, "this_host_only": True})
    waiter = Waiter(goal or Goal(), module, base, timeout=timeout, clock=clock, sleep_fn=clock.sleep,
                    reset_connection=(lambda: resets.append(clock.now)) if resets is not None else None, **kwargs)
    return waiter, module, clock


# -- states -------------------------------------------------------------------------------------

def test_absent_holds_on_the_first_read_with_one_plain_run():
    waiter, module, clock = make([(doc(1), 0.2)])
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 1 and outcome.polls == 1
    args = module.calls[0][0]
    assert not set(_wait_state.WATCH_OPTIONS) & set(args), "the first run is a plain read, not a watch"
    assert args["imds_url"] == "http://127.0.0.1:8080/vm/vm0" and args["this_host_only"] is True
    assert "event_types" not in args, "unset options are left to the module's defaults"
    assert clock.sleeps == []


def test_absent_waits_until_the_matching_event_leaves():
    event = raw_event()
    waiter, module, clock = make([(doc(2, event), 0.2), (doc(2, event, polls=5), 5.0), (doc(3, polls=3), 3.0)],
                                 sleep=1.0)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 3 and outcome.polls == 9
    watch = module.calls[1][0]
    assert watch["changed_since"] == 2 and watch["poll_interval"] == 1.0 and watch["resource_name"] == "vm0"
    assert module.calls[2][0]["changed_since"] == 2
    assert outcome.snapshot.incarnation == 3 and outcome.snapshot.events == []
    assert clock.sleeps == [], "a watch that ran its course is followed at once by the next one"


def test_present_waits_for_a_matching_event():
    waiter, module, _clock = make([(doc(1), 0.1), (doc(2, raw_event()), 4.0)], goal=Goal("present"))
    outcome = waiter.run()
    assert outcome.reached and [e["event_id"] for e in outcome.snapshot.events] == [REBOOT_ID]


def test_present_ignores_events_the_filters_dropped():
    other = raw_event(FREEZE_ID, "Freeze", resources=("vm1",))
    steps = [(doc(1, other, matching=[]), 0.1), (doc(2, other, matching=[]), 60.0)]
    waiter, _module, _clock = make(steps, goal=Goal("present"), timeout=30)
    outcome = waiter.run()
    assert not outcome.reached


def test_started_needs_a_matching_event_in_status_started():
    scheduled, started = raw_event(), raw_event(status="Started")
    waiter, _module, _clock = make([(doc(2, scheduled), 0.1), (doc(3, started), 2.0)], goal=Goal("started"))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 2 and outcome.snapshot.events[0]["event_status"] == "Started"


def test_completed_waits_for_the_events_of_the_start_to_leave_not_for_a_status_change():
    scheduled, started = raw_event(), raw_event(status="Started")
    later = raw_event(FREEZE_ID, "Freeze")
    steps = [(doc(2, scheduled), 0.1),
             (doc(3, started), 2.0),           # started: still in the document
             (doc(4, later), 2.0),             # the reboot left, a new event arrived: not ours to wait for
             ]
    waiter, _module, _clock = make(steps, goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 3


def test_completed_compares_event_ids_without_regard_to_case():
    upper = raw_event(REBOOT_ID)
    lower = raw_event(REBOOT_ID.lower(), status="Started")
    waiter, _module, _clock = make([(doc(2, upper), 0.1), (doc(3, lower), 2.0), (doc(4), 2.0)], goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 3, "a lower-case echo of the id is the same event"


def test_completed_counts_an_event_that_stopped_matching_the_filters_as_still_there():
    scheduled = raw_event()
    # event_statuses=[Scheduled]: once started the event no longer matches, but it has not completed.
    steps = [(doc(2, scheduled), 0.1), (doc(3, raw_event(status="Started"), matching=[]), 2.0), (doc(4), 2.0)]
    waiter, _module, _clock = make(steps, goal=Goal("completed"))
    assert waiter.run().runs == 3


def test_completed_with_nothing_matching_at_the_start_ends_at_once():
    waiter, _module, _clock = make([(doc(5, raw_event(), matching=[]), 0.1)], goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 1


def test_changed_measures_from_the_first_read():
    waiter, module, _clock = make([(doc(7), 0.1), (doc(7), 60.0), (doc(9), 1.0)], goal=Goal("changed"), timeout=600)
    outcome = waiter.run()
    assert outcome.reached and outcome.snapshot.incarnation == 9
    assert [c[0].get("changed_since") for c in module.calls] == [None, 7, 7]


def test_changed_since_incarnation_that_already_differs_ends_at_once():
    waiter, _module, _clock = make([(doc(7), 0.1)], goal=Goal("changed", since_incarnation=5))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 1


def test_changed_since_incarnation_equal_to_the_document_waits_for_the_next():
    waiter, module, _clock = make([(doc(5), 0.1), (doc(6), 3.0)], goal=Goal("changed", since_incarnation=5))
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 2 and module.calls[1][0]["changed_since"] == 5


def test_since_incarnation_is_refused_for_other_states():
    with pytest.raises(WaitInputError, match="since_incarnation applies only to state=changed"):
        Goal("absent", since_incarnation=3)


def test_unknown_state_is_refused():
    with pytest.raises(WaitInputError, match="'gone' is not one of absent, present"):
        Goal("gone")


# -- condition ------------------------------------------------------------------------------------

NO_REBOOT = "length(Events[?EventType=='Reboot']) == `0`"


def test_condition_alone_decides_when_no_state_is_given():
    freeze = raw_event(FREEZE_ID, "Freeze")
    goal = Goal(condition=Condition(NO_REBOOT))
    assert goal.state is None
    # A Freeze matches the (absent) filters, yet the condition alone decides and it holds.
    waiter, _module, _clock = make([(doc(2, raw_event(), freeze), 0.1), (doc(3, freeze), 2.0)], goal=goal)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 2


def test_condition_and_state_must_both_hold():
    goal = Goal("present", condition=Condition("Events[?EventStatus=='Started']"))
    steps = [(doc(2, raw_event()), 0.1),                    # present, not started
             (doc(3), 2.0),                                  # neither
             (doc(4, raw_event(status="Started")), 2.0)]     # both
    waiter, _module, _clock = make(steps, goal=goal)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 3


def test_no_state_and_no_condition_means_absent():
    assert Goal().state == "absent"


def test_condition_uses_jmespath_truth_where_zero_is_true():
    condition = Condition("DocumentIncarnation")
    assert condition.holds({"DocumentIncarnation": 0, "Events": []})
    assert not Condition("Events").holds({"DocumentIncarnation": 1, "Events": []})
    assert not Condition("Missing").holds({"DocumentIncarnation": 1, "Events": []})


def test_invalid_condition_is_refused_when_compiled():
    with pytest.raises(WaitInputError, match=r"condition 'Events\[\?' is not a valid JMESPath expression.*backticks"):
        Condition("Events[?")


def test_empty_condition_is_refused():
    with pytest.raises(WaitInputError, match="condition is empty"):
        Condition("  ")


def test_condition_that_cannot_be_evaluated_names_the_document_shape():
    condition = Condition("length(DocumentIncarnation) > `0`")
    with pytest.raises(WaitInputError, match="cannot be evaluated.*DocumentIncarnation \\(a number\\)"):
        condition.holds({"DocumentIncarnation": 1, "Events": []})


def test_condition_without_jmespath_names_the_install_command(monkeypatch):
    monkeypatch.setattr(_wait_state, "jmespath", None)
    with pytest.raises(WaitInputError, match="needs the Python library jmespath on the Ansible controller.*"
                                             "`pip install jmespath`"):
        Condition(NO_REBOOT)


def test_condition_is_the_real_library_s_compiled_expression():
    condition = Condition(NO_REBOOT)
    assert condition._compiled.parsed == jmespath.compile(NO_REBOOT).parsed
    assert condition.holds({"DocumentIncarnation": 1, "Events": []})


# -- timeout, delay, sleep ----------------------------------------------------------------------------

def test_timeout_reports_what_was_waited_for_and_last_seen():
    event = raw_event()
    waiter, module, clock = make([(doc(2, event), 0.1), (doc(2, event, polls=60), 60.0), (doc(2, event), 29.9)],
                                 timeout=90, chunk=60)
    outcome = waiter.run()
    assert not outcome.reached and outcome.fatal is None
    assert outcome.elapsed == pytest.approx(90.0)
    assert module.calls[2][0]["max_wait"] == pytest.approx(29.9), "the last chunk gets only the time left"
    text = _wait_state.timeout_message(waiter.goal, outcome, 90)
    assert text.startswith("Timed out after 90.0s (timeout=90) waiting for state=absent; last seen: "
                           "DocumentIncarnation 2 with 1 matching event (Reboot %s Scheduled)" % REBOOT_ID)


def test_timeout_message_without_any_document_gives_the_last_error():
    waiter, _module, _clock = make([(doc(1, raw_event()), 0.1), (failed("boom"), 5.0)], timeout=5)
    outcome = waiter.run()
    outcome.snapshot = None
    text = _wait_state.timeout_message(waiter.goal, outcome, 5)
    assert "no Scheduled Events document could be read; last error: boom." in text


def test_timeout_of_zero_still_reads_once():
    waiter, module, _clock = make([(doc(1, raw_event()), 0.1)], timeout=0)
    outcome = waiter.run()
    assert not outcome.reached and outcome.runs == 1
    assert module.calls[0][0]["retry_timeout"] == 0.0
    assert module.calls[0][0]["request_timeout"] == _defaults.MIN_REQUEST_TIMEOUT


def test_delay_is_slept_first_and_counts_against_the_timeout():
    waiter, module, clock = make([(doc(1), 0.1)], delay=10, timeout=30)
    waiter.run()
    assert clock.sleeps == [10.0]
    assert module.calls[0][2] == 1010.0 and module.calls[0][1] == pytest.approx(20.0)


def test_delay_longer_than_the_timeout_is_cut_to_it():
    waiter, module, clock = make([(doc(1, raw_event()), 0.1)], delay=100, timeout=30)
    outcome = waiter.run()
    assert clock.sleeps == [30.0] and outcome.runs == 1 and not outcome.reached


def test_a_watch_that_returns_early_unchanged_does_not_spin():
    event = raw_event()
    waiter, _module, clock = make([(doc(2, event), 0.1), (doc(2, event), 0.05), (doc(3), 1.0)], sleep=2.0)
    outcome = waiter.run()
    assert outcome.reached and clock.sleeps == [pytest.approx(1.95)]


# -- failures and recovery ----------------------------------------------------------------------------

def test_module_failures_after_the_first_document_are_retried_until_recovery():
    event = raw_event()
    steps = [(doc(2, event), 0.1),
             (failed("GET ... did not succeed within retry_timeout; last failure: HTTP 410"), 30.0),
             (failed("no Instance Metadata Service at http://127.0.0.1:1"), 5.0),
             (doc(4), 1.0)]
    waiter, module, clock = make(steps, sleep=1.0, timeout=120)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 4 and outcome.fatal is None
    assert clock.sleeps == [1.0, 1.0], "one sleep after each failure"
    assert outcome.last_error.startswith("no Instance Metadata Service")
    assert module.calls[3][0]["changed_since"] == 2, "the watch resumes from the last document seen"


def test_a_failure_of_the_very_first_run_ends_the_wait_at_once():
    waiter, module, clock = make([(failed("no Instance Metadata Service at http://127.0.0.1:9: is this an Azure VM?"),
                                   5.0)])
    outcome = waiter.run()
    assert not outcome.reached and outcome.fatal.startswith("no Instance Metadata Service")
    assert len(module.calls) == 1 and clock.sleeps == []


def test_a_result_without_a_document_counts_as_a_failure():
    waiter, _module, _clock = make([({"changed": False, "events": []}, 0.1)])
    outcome = waiter.run()
    assert "returned no Scheduled Events document" in outcome.fatal


def test_skipped_module_is_a_failure_with_its_reason():
    waiter, _module, _clock = make([({"skipped": True, "msg": "check mode not supported"}, 0.1)])
    assert waiter.run().fatal == "the info module was skipped: check mode not supported"


def test_unreachable_host_is_retried_with_a_connection_reset_and_the_wait_resumes():
    event = raw_event()
    resets = []
    steps = [(doc(2, event, resource_name="web_1"), 0.1),
             (unreachable(), 10.0),
             (unreachable("Data could not be sent to remote host"), 0.5),
             (doc(5), 0.3)]
    waiter, module, clock = make(steps, resets=resets, sleep=1.0, timeout=60)
    outcome = waiter.run()
    assert outcome.reached and outcome.unreachable == 2 and len(resets) == 2
    assert clock.sleeps == [1.0, 1.0]
    resumed = module.calls[3][0]
    assert resumed["changed_since"] == 2 and resumed["resource_name"] == "web_1"


def test_unreachable_from_the_start_is_retried_and_then_a_module_failure_too():
    resets = []
    steps = [(unreachable(), 2.0), (failed("IMDS not up yet"), 5.0), (doc(1), 0.1)]
    waiter, module, _clock = make(steps, resets=resets, timeout=60)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 3 and len(resets) == 1
    assert "changed_since" not in module.calls[2][0], "without any document yet the next run is a plain read"


def test_unreachable_until_the_deadline_times_out_with_the_connection_error():
    resets = []
    steps = [(doc(2, raw_event()), 0.1)] + [(unreachable("ssh: connect to host web_1 port 22: No route"), 3.0)] * 3
    waiter, _module, clock = make(steps, resets=resets, timeout=12, sleep=1.0)
    outcome = waiter.run()
    assert not outcome.reached and outcome.runs == 4 and len(resets) == 3
    assert outcome.elapsed == pytest.approx(12.0)
    assert clock.sleeps == [1.0, 1.0, pytest.approx(0.9)], "the last sleep is cut to the time left"
    text = _wait_state.timeout_message(waiter.goal, outcome, 12)
    assert "last error: host unreachable: ssh: connect to host web_1 port 22: No route" in text


# -- deadline clamping of the module arguments ----------------------------------------------------------

def test_every_run_gets_timeouts_and_max_wait_cut_to_the_time_left():
    event = raw_event()
    steps = [(doc(2, event), 0.5), (doc(2, event), 60.0), (doc(2, event), 39.0), (doc(2, event), 0.5)]
    waiter, module, _clock = make(steps, timeout=100, chunk=60, sleep=2.0, request_timeout=120, retry_timeout=90)
    outcome = waiter.run()
    assert not outcome.reached
    first, second, third, fourth = [c[0] for c in module.calls]
    assert (first["request_timeout"], first["retry_timeout"]) == (100.0, 90.0)
    assert (second["max_wait"], second["request_timeout"], second["retry_timeout"]) == (60.0, 99.5, 90.0)
    assert second["poll_interval"] == 2.0
    assert third["max_wait"] == pytest.approx(39.5)
    assert third["request_timeout"] == pytest.approx(39.5) and third["retry_timeout"] == pytest.approx(39.5)
    assert fourth["max_wait"] == pytest.approx(0.5) and fourth["retry_timeout"] == pytest.approx(0.5)
    assert fourth["request_timeout"] == pytest.approx(0.5)
    assert [round(c[1], 3) for c in module.calls] == [100.0, 99.5, 39.5, 0.5]


def test_a_request_timeout_never_goes_below_what_the_module_accepts():
    waiter = make([], timeout=100)[0]
    args = waiter.module_args(None, 0.01)
    assert args["request_timeout"] == _defaults.MIN_REQUEST_TIMEOUT and args["retry_timeout"] == pytest.approx(0.01)


def test_a_given_resource_name_is_kept_over_the_learned_one():
    steps = [(doc(2, raw_event(), resource_name="web_1"), 0.1), (doc(3), 1.0)]
    waiter, module, _clock = make(steps, module_args={"resource_name": "web_1", "imds_url": None})
    waiter.run()
    assert module.calls[1][0]["resource_name"] == "web_1" and "imds_url" not in module.calls[1][0]


def test_patience_for_a_watch_is_its_max_wait_plus_the_grace():
    assert _wait_state.run_patience({"max_wait": 60.0}, 300.0, grace=30.0) == 90.0
    assert _wait_state.run_patience({"max_wait": 60.0}, 20.0, grace=30.0) == 50.0


def test_patience_for_a_plain_read_is_the_time_left_plus_the_grace():
    assert _wait_state.run_patience({"request_timeout": 120.0}, 45.0, grace=30.0) == 75.0
    assert _wait_state.run_patience({}, -3.0, grace=30.0) == 30.0


# -- progress lines -----------------------------------------------------------------------------

def with_lines(steps, interval=60.0, **kwargs):
    lines = []
    clock = kwargs.pop("clock", None) or FakeClock()
    waiter, module, clock = make(steps, clock=clock, progress_interval=interval,
                                 progress=lambda line: lines.append((clock.now - 1000.0, line)), **kwargs)
    return waiter, lines, clock


def test_progress_lines_come_once_per_interval_with_what_is_awaited_and_seen():
    reboot = raw_event()
    steps = [(doc(1, reboot), 0.2)] + [(doc(1, reboot), 20.0)] * 9 + [(doc(2, raw_event(status="Started")), 1.0)]
    waiter, lines, clock = with_lines(steps, goal=Goal(state="started"), timeout=900.0)
    assert waiter.run().reached
    assert [when for when, dummy in lines] == [pytest.approx(60.2), pytest.approx(120.2), pytest.approx(180.2)]
    assert lines[0][1] == ("waiting for state=started; now: Reboot C7061BAC Scheduled (DocumentIncarnation 1); "
                           "1 event seen; 1m00s elapsed of 15m00s")
    assert lines[2][1].endswith("3m00s elapsed of 15m00s")


def test_progress_lines_keep_their_spacing_through_sleeps_after_failures():
    steps = [(doc(1, raw_event()), 0.0)] + [(unreachable(), 0.0)] * 200
    waiter, lines, clock = with_lines(steps, interval=30.0, timeout=125.0, sleep=1.0, resets=[])
    outcome = waiter.run()
    assert not outcome.reached
    assert [when for when, dummy in lines] == [30.0, 60.0, 90.0, 120.0]
    # The sleeps were cut where a line was due, never lengthened: the wait ends at its deadline.
    assert clock.now - 1000.0 == pytest.approx(125.0)
    assert "now: the last read failed (host unreachable: Failed to connect to the host via ssh: Connection refused); " \
           "before that Reboot C7061BAC Scheduled (DocumentIncarnation 1)" in lines[0][1]


def test_a_late_line_moves_the_next_to_its_own_slot_and_never_doubles():
    steps = [(doc(1, raw_event()), 0.2), (doc(1, raw_event()), 150.0), (doc(1, raw_event()), 40.0), (doc(2), 1.0)]
    waiter, lines, clock = with_lines(steps, goal=Goal(state="absent"), timeout=900.0)
    assert waiter.run().reached
    assert [when for when, dummy in lines] == [pytest.approx(150.2), pytest.approx(190.2)]


def test_progress_counts_distinct_events_and_names_at_most_three():
    events = [raw_event(event_id="%08X-0000-0000-0000-000000000000" % n) for n in range(5)]
    steps = [(doc(1, events[0]), 0.2), (doc(2, *events), 70.0), (doc(3), 1.0)]
    waiter, lines, clock = with_lines(steps, goal=Goal(state="absent"), timeout=900.0)
    assert waiter.run().reached
    assert len(lines) == 1
    assert ("now: Reboot 00000000 Scheduled, Reboot 00000001 Scheduled, Reboot 00000002 Scheduled and 2 more "
            "(DocumentIncarnation 2); 5 events seen; 1m10s elapsed") in lines[0][1]


def test_progress_before_any_answer_says_so():
    waiter, lines, clock = with_lines([(unreachable(), 61.0), (doc(1), 0.1)], timeout=900.0, resets=[])
    assert waiter.run().reached
    assert lines == [(61.0, "waiting for state=absent; now: no document read yet (host unreachable: Failed to connect "
                            "to the host via ssh: Connection refused); 0 events seen; 1m01s elapsed of 15m00s")]


def test_no_progress_interval_means_no_line_and_unchanged_sleeps():
    steps = [(doc(1, raw_event()), 0.0)] + [(unreachable(), 0.0)] * 200
    waiter, lines, clock = with_lines(steps, interval=0.0, timeout=125.0, sleep=1.0, resets=[])
    waiter.run()
    assert lines == []
    assert set(clock.sleeps) == {1.0}


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.9, "59s"), (60, "1m00s"), (600, "10m00s"),
                                           (3723, "1h02m03s"), (-1, "0s")])
def test_durations_read_as_an_operator_reads_them(seconds, text):
    assert _wait_state.duration_text(seconds) == text


# -- the Scheduled Events Policy: events first seen Started -------------------------------------

def sourced(raw, source):
    """doc()'s events carry only what norm() keeps; these carry EventSource too."""
    event = norm(raw)
    event["event_source"] = source
    return event


def doc_from(incarnation, *pairs):
    """A result whose matching events are (raw event, EventSource) pairs."""
    result = doc(incarnation, *[raw for raw, _source in pairs])
    result["events"] = [sourced(raw, source) for raw, source in pairs]
    return result


def test_a_user_event_first_seen_started_is_reported_as_approved_by_the_policy():
    started = raw_event(status="Started")
    waiter, _module, _clock = make([(doc_from(2, (started, "User")), 0.1), (doc(3), 2.0)], goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.reached
    assert outcome.auto_approved == [REBOOT_ID] and outcome.started_before_seen == []


def test_a_user_event_seen_scheduled_before_it_started_is_not_an_automatic_approval():
    steps = [(doc_from(2, (raw_event(), "User")), 0.1), (doc_from(3, (raw_event(status="Started"), "User")), 2.0),
             (doc(4), 2.0)]
    waiter, _module, _clock = make(steps, goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.reached and outcome.auto_approved == [] and outcome.started_before_seen == []


def test_a_platform_event_first_seen_started_only_started_before_it_was_seen():
    started = raw_event(status="Started")
    waiter, _module, _clock = make([(doc_from(2, (started, "Platform")), 0.1), (doc(3), 2.0)],
                                   goal=Goal("completed"))
    outcome = waiter.run()
    assert outcome.auto_approved == [] and outcome.started_before_seen == [REBOOT_ID]


def test_an_event_the_play_saw_before_the_wait_is_not_first_seen_by_it():
    started = raw_event(status="Started")
    waiter, _module, _clock = make([(doc_from(2, (started, "User")), 0.1), (doc(3), 2.0)],
                                   goal=Goal("completed"), seen_event_ids=[REBOOT_ID.lower()])
    outcome = waiter.run()
    assert outcome.reached and outcome.auto_approved == [] and outcome.started_before_seen == []


# -- one run for the first read and the watch after it (watch_first_read) -------------------------

def with_first_read(result, first):
    """A run of the info module with watch_unless_state that watched on after its first read."""
    return dict(result, first_read={"document_incarnation": first["document_incarnation"], "events": first["events"]})


def test_watch_first_read_reaches_absent_in_one_run_that_reads_then_watches():
    event = raw_event()
    waiter, module, clock = make([(with_first_read(doc(3, polls=6), doc(2, event)), 6.0)], watch_first_read=True,
                                 sleep=1.0, chunk=120.0)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 1 and outcome.polls == 6
    args = module.calls[0][0]
    assert (args["watch_unless_state"], args["max_wait"], args["poll_interval"]) == ("absent", 60.0, 1.0)
    assert "changed_since" not in args
    assert outcome.seen_event_ids == [REBOOT_ID], "the first read's event counts as seen"


def test_watch_first_read_takes_the_baseline_of_completed_from_the_first_read():
    event = raw_event()
    other = raw_event(event_id="0C2E5F11-1111-4222-8333-944455556666")
    # The first read had the Reboot; the watch returned with another event only: the Reboot completed.
    steps = [(with_first_read(doc(3, other), doc(2, event)), 4.0)]
    waiter, module, clock = make(steps, goal=Goal(state="completed"), watch_first_read=True)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 1
    assert module.calls[0][0]["watch_unless_state"] == "absent"


def test_watch_first_read_goes_on_watching_from_the_last_document():
    event = raw_event()
    steps = [(with_first_read(doc(2, event, polls=60), doc(2, event)), 60.0), (doc(4, polls=2), 2.0)]
    waiter, module, clock = make(steps, timeout=300.0, watch_first_read=True, chunk=60.0)
    outcome = waiter.run()
    assert outcome.reached and outcome.runs == 2
    second = module.calls[1][0]
    assert second["changed_since"] == 2 and "watch_unless_state" not in second


@pytest.mark.parametrize("goal", [Goal(state="changed"), Goal(condition=Condition("DocumentIncarnation"))],
                         ids=["changed", "condition alone"])
def test_watch_first_read_is_a_plain_read_for_goals_the_module_cannot_check(goal):
    waiter, module, clock = make([(doc(1), 0.2), (doc(2), 1.0)], goal=goal, watch_first_read=True)
    waiter.run()
    first = module.calls[0][0]
    assert not set(_wait_state.WATCH_OPTIONS + ("watch_unless_state",)) & set(first)


def test_patience_for_a_first_read_that_watches_on_is_the_time_left_plus_the_grace():
    args = {"max_wait": 60.0, "watch_unless_state": "absent"}
    assert _wait_state.run_patience(args, 300.0, grace=30.0) == 330.0
