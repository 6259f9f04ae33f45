"""The daemon loop when the wall clock steps (issue 22, item 6): the monotonic clock (the fake
clock) and the wall clock are injected apart, and the wall clock is moved while the loop runs.
Approval retries are timed on the monotonic clock; NotBefore is decided afresh at each poll."""

from .helpers import ID_A, config
from .test_daemon import EPOCH, answer, build, doc, methods, scheduled


def stepped_wall(clock, offset, start, end=float("inf")):
    """The wall clock of the loop: EPOCH + the monotonic clock, off by offset seconds while the
    monotonic clock is in [start, end)."""
    return lambda: EPOCH + clock.now + (offset if start <= clock.now < end else 0.0)


def test_a_wall_clock_stepped_back_after_a_failed_approval_does_not_delay_the_retry(tmp_path):
    user = scheduled(source="User")
    cfg = config(tmp_path, resource_name="web_0", approval={"user_events_at_once": True})
    steps = [doc(user), answer(503), doc(user), answer(200, ""), doc(user), doc(user)]
    watcher, transport, clock, log = build(tmp_path, steps, cfg=cfg, stop_after=1003.5)
    # The approval fails at 1000.0; from then on the wall clock is an hour behind.
    watcher._wall_clock = stepped_wall(clock, -3600.0, 1000.001)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport) == ["GET", "POST", "GET", "POST", "GET", "GET"]
    assert transport.requests.times[3] - transport.requests.times[1] <= 10.0    # MAX_BACKOFF, not an hour
    assert "HTTP 503" in log.messages("approval_failed")[0]
    assert log.actions().count("approval_sent") == 1


def test_a_wall_clock_jump_as_the_event_appears_does_not_skip_its_drain_for_good(tmp_path):
    # NotBefore 600 s after the first poll; the wall clock is 700 s ahead for the first 5 s.
    event = scheduled(not_before="Tue, 14 Nov 2023 22:40:00 GMT")
    steps = [doc(event)] * 6 + [answer(200, "")] + [doc(event)] * 2
    watcher, transport, clock, log = build(tmp_path, steps, stop_after=1007.5)
    watcher._wall_clock = stepped_wall(clock, 700.0, 1000.0, 1005.0)
    watcher.resolve_name()
    watcher.load_state()
    watcher.run_forever()
    assert methods(transport) == ["GET"] * 6 + ["POST"] + ["GET"] * 2
    assert transport.requests.times[6] == 1005.0          # drained and approved at the first right poll
    assert log.actions().count("drain_held") == 1 and log.actions().count("drain_resumed") == 1
    assert "phase_skipped" not in log.actions()
    assert watcher.planner.records[ID_A.lower()]["drain"] == "succeeded"
    assert log.actions().count("approval_sent") == 1
