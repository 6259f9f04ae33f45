"""The watcher's decisions without any I/O: policies, time limits, handler input, the planner."""

import json

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.decisions import (
    Planner, approval_policy, handler_environment, handler_input, handler_time_limit, owes_recover)

from .helpers import ID_A, ID_B, ID_C, NOT_BEFORE, NOW, approval, event


def planner(name="web_0", **approval_overrides):
    return Planner(name, approval(**approval_overrides))


def observe(p, events, now):
    """Each call a newer document (DocumentIncarnation + 1), as when events come and go."""
    p.test_incarnation = getattr(p, "test_incarnation", 0) + 1
    return p.observe(events, now, p.test_incarnation)


def all_finished(p):
    """Nothing more will be done for any event the planner remembers."""
    return not p.has_work() and all(p.finished(key) for key in p.records)


def run_phase(p, ok=True, summary="1 handler: x ok"):
    """Start the next job and finish it; returns (job, actions of both steps)."""
    job, actions = p.next_job(NOW)
    assert job is not None, "expected a job to run"
    assert p.records[job.key][job.phase] == "running"
    return job, actions + p.job_finished(job.key, job.phase, ok, summary)


# --------------------------------------------------------------------------------------------
# Approval policy
# --------------------------------------------------------------------------------------------

def test_default_policy_is_approve_after_drain():
    assert approval_policy(event(), "web_0", approval()) == ("after_drain", "default policy")


def test_user_events_are_approved_at_once_only_when_asked():
    user = event(source="User")
    assert approval_policy(user, "web_0", approval())[0] == "after_drain"
    policy, reason = approval_policy(user, "web_0", approval(user_events_at_once=True))
    assert policy == "immediate" and "User" in reason


@pytest.mark.parametrize("duration, expected", [(0, "immediate"), (5, "immediate"), (8, "immediate"),
                                                (9, "after_drain"), (-1, "after_drain"), (None, "after_drain")])
def test_short_freeze_is_approved_at_once_like_the_microsoft_sample(duration, expected):
    # Microsoft's sample: 0 <= DurationInSeconds < 9. The default configuration says so.
    freeze = event(event_type="Freeze", duration=duration)
    assert approval_policy(freeze, "web_0", approval())[0] == expected


def test_freeze_shortcut_can_be_switched_off_and_only_applies_to_freeze():
    assert approval_policy(event(event_type="Freeze", duration=5), "web_0",
                           approval(freeze_max_duration=None))[0] == "after_drain"
    assert approval_policy(event(event_type="Reboot", duration=5), "web_0", approval())[0] == "after_drain"


def test_rules_match_type_and_source_and_win_over_shortcuts():
    rules = [{"event_types": ["Preempt"], "policy": "none"},
             {"event_types": ["Freeze"], "event_sources": ["Platform"], "policy": "after_drain"}]
    cfg = approval(rules=rules, user_events_at_once=True)
    assert approval_policy(event(event_type="Preempt"), "web_0", cfg) == ("none", "approval rule 0")
    assert approval_policy(event(event_type="Freeze", duration=2), "web_0", cfg) == ("after_drain", "approval rule 1")
    # The second rule wants source Platform: a User freeze falls through to the User shortcut.
    assert approval_policy(event(event_type="Freeze", source="User"), "web_0", cfg)[0] == "immediate"


def test_leader_only_withholds_approval_from_every_vm_but_the_first_in_resources():
    ev = event(resources=["web_1", "web_0"], source="User")
    cfg = approval(leader_only=True, user_events_at_once=True)
    policy, reason = approval_policy(ev, "web_0", cfg)
    assert policy == "none" and "web_1" in reason
    assert approval_policy(ev, "web_1", cfg)[0] == "immediate"


# --------------------------------------------------------------------------------------------
# Handler time limits and input
# --------------------------------------------------------------------------------------------

def test_drain_limit_is_cut_so_that_even_the_kill_lands_by_not_before():
    not_before = NOW + 60
    assert handler_time_limit(300, "drain", not_before, NOW, 5) == (55, "NotBefore")
    assert handler_time_limit(30, "drain", not_before, NOW, 5) == (30, "timeout")
    assert handler_time_limit(300, "drain", not_before, NOW + 58, 5)[0] <= 0


def test_other_phases_and_events_without_not_before_keep_their_timeout():
    assert handler_time_limit(300, "started", NOW + 10, NOW, 5) == (300, "timeout")
    assert handler_time_limit(300, "recover", NOW + 10, NOW, 5) == (300, "timeout")
    assert handler_time_limit(300, "drain", None, NOW, 5) == (300, "timeout")


def test_handler_environment_carries_every_field_as_plain_strings():
    ev = event(resources=["web_0", "web_1"], duration=7, description="Host update; $(reboot) `x`")
    env = handler_environment(ev, "drain", "web_0")
    assert env == {
        "SE_EVENT_ID": ID_A, "SE_EVENT_TYPE": "Reboot", "SE_EVENT_STATUS": "Scheduled",
        "SE_NOT_BEFORE": NOT_BEFORE, "SE_RESOURCES": "web_0 web_1", "SE_EVENT_SOURCE": "Platform",
        "SE_DURATION": "7", "SE_DESCRIPTION": "Host update; $(reboot) `x`", "SE_PHASE": "drain",
        "SE_RESOURCE_NAME": "web_0",
    }
    started = handler_environment(event(status="Started", duration=None, source=None), "started", "web_0")
    assert started["SE_NOT_BEFORE"] == "" and started["SE_DURATION"] == "" and started["SE_EVENT_SOURCE"] == ""


def test_handler_input_is_the_normalised_event_with_phase_and_name():
    doc = json.loads(handler_input(event(), "recover", "web_0"))
    assert doc["event_id"] == ID_A and doc["phase"] == "recover" and doc["resource_name"] == "web_0"
    assert doc["not_before"] == NOT_BEFORE and doc["resources"] == ["web_0"]


# --------------------------------------------------------------------------------------------
# The planner: one event through its life
# --------------------------------------------------------------------------------------------

def test_full_life_drain_approve_started_recover():
    p = planner()
    actions = observe(p, [event()], NOW)
    assert [a.action for a in actions] == ["event_seen", "policy"]
    assert "names this VM (web_0)" in actions[0].message
    assert p.pending_approvals(NOW) == []          # not before the drain
    job = run_phase(p)[0]
    assert job.phase == "drain" and job.event["event_id"] == ID_A
    assert p.pending_approvals(NOW) == [ID_A.lower()]
    assert p.approval_sent([ID_A.lower()])[0].action == "approval_sent"
    assert p.pending_approvals(NOW) == []
    observe(p, [event(status="Started")], NOW + 5)
    job = run_phase(p)[0]
    assert job.phase == "started"
    assert observe(p, [event(status="Started")], NOW + 6) == []   # nothing new, nothing logged
    assert not p.has_work()
    actions = observe(p, [], NOW + 60)
    assert "recover is due" in actions[0].message
    job = run_phase(p)[0]
    assert job.phase == "recover"
    assert all_finished(p)                          # nothing left to do once recovered
    assert not p.has_work()


def test_event_for_another_vm_is_logged_and_never_acted_on():
    p = planner()
    actions = observe(p, [event(resources=["web_1", "web_10"])], NOW)
    assert [a.action for a in actions] == ["event_seen"]
    assert "does not name this VM" in actions[0].message
    assert not p.has_work() and p.pending_approvals(NOW) == []
    observe(p, [event(resources=["web_1", "web_10"], status="Started")], NOW + 1)
    assert not p.has_work()
    assert observe(p, [], NOW + 2)[0].fields["mine"] is False
    assert all_finished(p)


def test_name_match_is_exact():
    p = planner("web_1")
    observe(p, [event(resources=["web_10", "web_11"])], NOW)
    assert not p.has_work()


def test_event_ids_match_without_regard_to_case():
    p = planner()
    observe(p, [event(event_id=ID_A)], NOW)
    run_phase(p)
    observe(p, [event(event_id=ID_A.lower(), status="Started")], NOW + 1)
    assert len(p.records) == 1
    job = p.next_job(NOW)[0]
    assert job.phase == "started"


def test_failed_drain_is_never_approved():
    p = planner()
    observe(p, [event()], NOW)
    actions = run_phase(p, ok=False, summary="1 handler: 10-lb exit 3")[1]
    withheld = [a for a in actions if a.action == "approval_withheld"]
    assert withheld and withheld[0].level == "error" and NOT_BEFORE in withheld[0].message
    assert p.pending_approvals(NOW) == []
    observe(p, [event()], NOW + 1)                    # still Scheduled: nothing changes
    assert p.pending_approvals(NOW + 1) == [] and not p.has_work()
    # The platform starts it at NotBefore anyway; the watcher still runs started and recover.
    observe(p, [event(status="Started")], NOW + 900)
    assert run_phase(p)[0].phase == "started"
    observe(p, [], NOW + 1000)
    assert run_phase(p)[0].phase == "recover"


def test_immediate_policy_approves_at_first_sight_without_a_drain():
    p = planner(user_events_at_once=True)
    observe(p, [event(source="User")], NOW)
    assert p.pending_approvals(NOW) == [ID_A.lower()]
    assert not p.has_work()


def test_policy_none_drains_and_never_approves():
    p = planner(rules=[{"event_types": ["Reboot"], "policy": "none"}])
    observe(p, [event()], NOW)
    actions = run_phase(p)[1]
    assert "approval_not_needed" in [a.action for a in actions]
    assert p.pending_approvals(NOW) == []


def test_event_first_seen_started_runs_started_then_recover_and_no_drain():
    p = planner()
    observe(p, [event(status="Started")], NOW)
    job = run_phase(p)[0]
    assert job.phase == "started"
    assert p.records[ID_A.lower()]["drain"] is None and p.records[ID_A.lower()]["policy"] is None
    observe(p, [], NOW + 10)
    assert run_phase(p)[0].phase == "recover"


def test_started_waits_behind_a_running_drain():
    p = planner()
    observe(p, [event()], NOW)
    job = p.next_job(NOW)[0]
    observe(p, [event(status="Started")], NOW + 1)        # another VM approved it
    assert p.next_job(NOW + 1) == (None, [])              # one job at a time
    p.job_finished(job.key, "drain", True, "ok")
    assert p.pending_approvals(NOW + 2) == []             # already Started: nothing to approve
    assert p.next_job(NOW + 2)[0].phase == "started"


def test_cancelled_before_the_drain_started_owes_nothing():
    p = planner()
    observe(p, [event(event_id=ID_B, resources=["web_0"])], NOW)
    first = p.next_job(NOW)[0]
    observe(p, [event(event_id=ID_B), event(event_id=ID_C)], NOW)
    observe(p, [event(event_id=ID_B)], NOW + 1)            # ID_C cancelled while it waited
    p.job_finished(first.key, "drain", True, "ok")
    job, actions = p.next_job(NOW + 1)
    assert job is None
    assert "left the document before its drain" in actions[0].message
    assert p.finished(ID_C.lower()) and p.records[ID_C.lower()]["drain"] == "skipped"


def test_cancelled_after_its_drain_gets_a_recover():
    p = planner()
    observe(p, [event()], NOW)
    run_phase(p)
    p.approval_sent([ID_A.lower()])
    actions = observe(p, [], NOW + 30)
    assert "recover is due" in actions[0].message
    assert run_phase(p)[0].phase == "recover"


def test_drain_is_not_started_once_not_before_has_passed_and_skipped_when_the_event_leaves():
    p = planner()
    observe(p, [event()], NOW + 901)
    job, actions = p.next_job(NOW + 901)
    assert job is None and "NotBefore" in actions[0].message and actions[0].level == "warning"
    # Not final while the event is Scheduled: the wall clock may be wrong (issue 22, item 6).
    assert p.records[ID_A.lower()]["drain"] is None
    assert p.pending_approvals(NOW + 901) == []
    actions = observe(p, [], NOW + 1000)
    assert p.records[ID_A.lower()]["drain"] == "skipped"
    assert "phase_skipped" in [a.action for a in actions]
    assert all_finished(p)


def test_several_events_queue_in_order_and_run_one_at_a_time():
    p = planner()
    observe(p, [event(event_id=ID_A), event(event_id=ID_B, event_type="Redeploy")], NOW)
    order = []
    while p.has_work():
        job = run_phase(p)[0]
        order.append((job.phase, job.event["event_id"]))
    assert order == [("drain", ID_A), ("drain", ID_B)]
    assert p.pending_approvals(NOW) == sorted([ID_A.lower(), ID_B.lower()])


# --------------------------------------------------------------------------------------------
# Approval retries
# --------------------------------------------------------------------------------------------

def test_retryable_approval_failure_is_retried_after_its_backoff_while_scheduled():
    p = planner(user_events_at_once=True)
    observe(p, [event(source="User")], NOW)
    actions = p.approval_failed([ID_A.lower()], "HTTP 500", NOW + 2)
    assert actions[0].level == "error" and "trying again" in actions[0].message
    assert p.pending_approvals(NOW + 1) == []
    assert p.pending_approvals(NOW + 2) == [ID_A.lower()]
    observe(p, [event(source="User", status="Started")], NOW + 3)
    assert p.pending_approvals(NOW + 3) == []


def test_approval_failure_that_is_not_retryable_stops_trying():
    p = planner(user_events_at_once=True)
    observe(p, [event(source="User")], NOW)
    actions = p.approval_failed([ID_A.lower()], "HTTP 400", None)
    assert "not retried" in actions[0].message
    assert p.pending_approvals(NOW + 100) == []


# --------------------------------------------------------------------------------------------
# Restarts: at most one drain, at least one recover
# --------------------------------------------------------------------------------------------

def restarted(p):
    """A new planner over the same records, as after a crash (the queue lived in memory)."""
    fresh = Planner(p.resource_name, p.approval, json.loads(json.dumps(p.records)))
    fresh.test_incarnation = getattr(p, "test_incarnation", 0)
    return fresh, fresh.restore()


def test_drain_cut_short_by_a_restart_is_not_run_again_and_not_approved():
    p = planner()
    observe(p, [event()], NOW)
    p.next_job(NOW)                                     # drain running when the process dies
    p, actions = restarted(p)
    assert [a.action for a in actions] == ["drain_interrupted"]
    assert actions[0].level == "error" and "not run again" in actions[0].message
    observe(p, [event()], NOW + 5)
    assert not p.has_work() and p.pending_approvals(NOW + 5) == []
    observe(p, [event(status="Started")], NOW + 900)
    assert run_phase(p)[0].phase == "started"
    observe(p, [], NOW + 1000)
    job = run_phase(p)[0]
    assert job.phase == "recover"
    assert all_finished(p)


def test_drain_that_was_queued_but_not_started_runs_after_a_restart():
    p = planner()
    observe(p, [event(event_id=ID_A), event(event_id=ID_B)], NOW)
    run_phase(p)                                        # A drained; B still waiting when killed
    p, actions = restarted(p)
    assert actions == []
    observe(p, [event(event_id=ID_A), event(event_id=ID_B)], NOW + 1)
    assert run_phase(p)[0].event["event_id"] == ID_B
    assert not p.has_work()


def test_drain_succeeded_but_approval_not_sent_before_the_kill_is_approved_after_restart():
    p = planner()
    observe(p, [event()], NOW)
    run_phase(p)
    p = restarted(p)[0]
    observe(p, [event()], NOW + 2)
    assert p.pending_approvals(NOW + 2) == [ID_A.lower()]
    assert not p.has_work()


def test_event_that_vanished_while_the_watcher_was_down_still_gets_its_recover():
    p = planner()
    observe(p, [event()], NOW)
    run_phase(p)
    p.approval_sent([ID_A.lower()])
    p, actions = restarted(p)
    assert actions == []
    observe(p, [], NOW + 600)
    job = run_phase(p)[0]
    assert job.phase == "recover"


def test_recover_cut_short_by_a_restart_runs_again():
    p = planner()
    observe(p, [event()], NOW)
    run_phase(p)
    observe(p, [], NOW + 10)
    p.next_job(NOW + 10)                               # recover running when killed
    p, actions = restarted(p)
    assert [a.action for a in actions] == ["recover_interrupted"]
    observe(p, [], NOW + 20)
    assert run_phase(p)[0].phase == "recover"
    assert all_finished(p)


def test_started_cut_short_is_not_rerun_but_still_owes_recover():
    p = planner()
    observe(p, [event(status="Started")], NOW)
    p.next_job(NOW)
    p, actions = restarted(p)
    assert [a.action for a in actions] == ["started_interrupted"]
    observe(p, [event(status="Started")], NOW + 1)
    assert not p.has_work()
    assert owes_recover(p.records[ID_A.lower()])
    observe(p, [], NOW + 2)
    assert run_phase(p)[0].phase == "recover"


def test_an_event_whose_resources_come_to_name_this_vm_becomes_its_own():
    p = planner()
    observe(p, [event(resources=[])], NOW)                 # Resources unreadable: read as empty
    assert not p.has_work() and not p.records[ID_A.lower()]["mine"]
    actions = observe(p, [event(resources=["web_0"])], NOW + 1)
    assert [a.action for a in actions] == ["event_seen", "policy"] and "names this VM" in actions[0].message
    assert run_phase(p)[0].phase == "drain"
    assert p.pending_approvals(NOW + 1) == [ID_A.lower()]
    observe(p, [event(resources=["web_1"])], NOW + 2)      # and it stays this VM's
    assert p.records[ID_A.lower()]["mine"]


# --------------------------------------------------------------------------------------------
# The wall clock steps (issue 22, item 6): NotBefore is decided afresh at each poll
# --------------------------------------------------------------------------------------------

def test_a_drain_held_back_by_a_wall_clock_jump_runs_once_the_clock_is_right_again():
    p = planner()
    observe(p, [event()], NOW + 1600)                   # the clock jumped ahead: NotBefore looks passed
    job, actions = p.next_job(NOW + 1600)
    assert job is None and [a.action for a in actions] == ["drain_held"]
    assert "decided again at each poll" in actions[0].message.lower()
    for late in (1601, 1602):                            # held, logged once
        observe(p, [event()], NOW + late)
        assert p.next_job(NOW + late) == (None, [])
    observe(p, [event()], NOW + 5)                       # NTP put it right
    job, actions = p.next_job(NOW + 5)
    assert job is not None and job.phase == "drain"
    assert [a.action for a in actions] == ["drain_resumed"]
    p.job_finished(job.key, "drain", True, "ok")
    assert p.pending_approvals(NOW + 6) == [ID_A.lower()]


def test_a_held_drain_is_skipped_for_good_once_the_event_starts_and_started_still_runs():
    p = planner()
    observe(p, [event()], NOW + 901)
    assert p.next_job(NOW + 901)[0] is None
    actions = observe(p, [event(status="Started")], NOW + 902)
    skipped = [a for a in actions if a.action == "phase_skipped"]
    assert len(skipped) == 1 and "is now Started" in skipped[0].message
    assert p.records[ID_A.lower()]["drain"] == "skipped"
    assert run_phase(p)[0].phase == "started"
    observe(p, [], NOW + 1000)
    assert run_phase(p)[0].phase == "recover"
    assert all_finished(p)


def test_a_held_drain_queued_behind_another_job_is_not_skipped_twice():
    later = "2023-11-14T23:00:00Z"                       # B's NotBefore, ahead of the clock
    p = planner()
    observe(p, [event(), event(event_id=ID_B, not_before=later)], NOW + 901)
    job, actions = p.next_job(NOW + 901)                 # A's drain is held, B's runs
    assert job.key == ID_B.lower() and [a.action for a in actions] == ["drain_held"]
    observe(p, [event(), event(event_id=ID_B, not_before=later)], NOW + 902)
    assert (ID_A.lower(), "drain") in p.queue            # planned again, waiting behind B's drain
    actions = observe(p, [event(status="Started"), event(event_id=ID_B, not_before=later)], NOW + 903)
    actions += p.job_finished(job.key, "drain", True, "ok")
    job, more = p.next_job(NOW + 903)
    assert [a.action for a in actions + more].count("phase_skipped") == 1
    assert job.phase == "started" and job.key == ID_A.lower()


def test_approval_retries_follow_the_clock_they_are_given_and_a_restart_retries_at_once():
    p = planner(user_events_at_once=True)
    observe(p, [event(source="User")], NOW)
    p.approval_failed([ID_A.lower()], "HTTP 503", 50.5)   # the daemon's monotonic clock, not the epoch
    assert p.pending_approvals(50.0) == [] and p.pending_approvals(50.5) == [ID_A.lower()]
    # A new run has a monotonic clock of its own: the old time means nothing, try at once.
    p, actions = restarted(p)
    assert actions == [] and p.records[ID_A.lower()]["approval_retry_at"] is None
    assert p.pending_approvals(0.0) == [ID_A.lower()]
