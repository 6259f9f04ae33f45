"""Issue 10, fault matrix: every IMDS fault against every consumer, from one table.

Each row is a fault the mock IMDS serves (docs/docsite/rst/mock_imds.rst, Faults); each consumer meets it with
small deadlines (request_timeout 3 s, retry_timeout 6 s, a wait timeout of 15 s). A cell passes
when the consumer gives the documented outcome: success, or a clean error (a readable message
saying what happened, no traceback) within its deadline; the watcher logs the fault, keeps
polling, and acts on the event once IMDS answers again. Crashes and hangs are counted apart.
"""

import re

import pytest

from .board import BOARD, CLEAN_ERROR, CRASH, HANG, SUCCESS, WRONG
from .drivers import Cell, VM, observe_module, observe_wait, observe_watcher
from .win_drivers import observe_win_uri

try:
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _imds
    RETRY_AFTER_CAP = float(getattr(_imds, "RETRY_AFTER_CAP", 60.0))
except Exception:  # pylint: disable=broad-except
    # The contract's figure; a broken _imds fails every cell on its own.
    RETRY_AFTER_CAP = 60.0

# The twins on the win_uri path (Windows hosts, issue 26) are named "<consumer> (win_uri)"; a row's
# expectations for a consumer hold for its twin unless the row says otherwise (win_uri_note).
WIN_URI_TWINS = ("info (win_uri)", "approve (win_uri)", "wait (win_uri)")
CONSUMERS = ("info", "approve", "wait", "watcher") + WIN_URI_TWINS
OTHER_EVENT_ID = "0A1B2C3D-4E5F-4061-8273-94A5B6C7D8E9"
MIB = 1024 * 1024


class FaultRow(object):
    """One fault and what every consumer must make of it.

    faults: fault specs for POST /_mock/faults; document(cell): a document served instead of the
    real one (status 200, GET only, until removed); transient: the fault ends by itself (count);
    expect: SUCCESS or CLEAN_ERROR; error_words: what a clean error must say; warn_field: the field
    a warning must name; checks(consumer, cell, obs): the row's own success checks.
    """

    def __init__(self, name, faults=(), document=None, transient=False, expect=SUCCESS, error_words=None,
                 warn_field=None, target="mock", proxy=False, acts_during_fault=False, checks=None,
                 may_fail=(), quiet=False, recover_within=30.0, max_rss_mib=None, drain_handler=False,
                 win_uri_note=None, win_uri_faults=None):
        self.name = name
        self.faults = list(faults)
        self.document = document
        self.transient = transient
        self.expect = expect
        self.error_words = error_words
        self.warn_field = warn_field
        self.target = target
        self.proxy = proxy
        self.watcher_acts_during_fault = acts_during_fault
        self.checks = checks
        self.may_fail = may_fail          # consumers for which a clean error is as good as success
        self.quiet = quiet                # nothing worth a warning happens (the watcher need not log)
        self.recover_within = recover_within
        self.max_rss_mib = max_rss_mib
        self.drain_handler = drain_handler    # the watcher gets a drain handler that must succeed
        self.win_uri_note = win_uri_note      # why the twins on the win_uri path meet the fault otherwise
        self.win_uri_faults = win_uri_faults  # the faults the twins meet instead (see win_uri_note)

    def __repr__(self):
        return self.name

    def fault_specs(self, cell, twin=False):
        faults = self.win_uri_faults if twin and self.win_uri_faults is not None else self.faults
        specs = [dict(f) for f in faults]
        if self.document is not None:
            import json
            document = self.document(cell)
            body = document if isinstance(document, str) else json.dumps(document)
            specs.append({"kind": "status", "status": 200, "body": body,
                          "methods": ["GET"], "paths": ["scheduledevents"]})
        return specs

    def allowed(self, consumer):
        if consumer in self.may_fail or base_consumer(consumer) in self.may_fail:
            return (SUCCESS, CLEAN_ERROR)
        return (self.expect,)

    def watcher_limit(self):
        return self.recover_within


def base_consumer(consumer):
    """The consumer whose documented outcome a twin must give: "wait (win_uri)" -> "wait"."""
    return consumer.split(" ", 1)[0]


# -- the row's own checks on a success ------------------------------------------------------------

def _events_by_id(obs):
    return dict(((e.get("event_id") or "").lower() or None, e) for e in (obs.events or []))


def _the_event(cell, obs):
    return _events_by_id(obs).get(cell.event_id.lower())


def default_checks(consumer, cell, obs):
    """The real document was served in the end: the event is reported, or approved."""
    if consumer in ("info", "wait") and _the_event(cell, obs) is None:
        return ["event %s is not among the events reported: %r" % (cell.event_id, obs.events)]
    if consumer == "approve":
        if [str(e).lower() for e in (obs.approved or [])] != [cell.event_id.lower()]:
            return ["approved %r, not [%s]" % (obs.approved, cell.event_id)]
        if not cell.approvals_of_the_event():
            return ["the mock's audit shows no approval of %s" % cell.event_id]
    return []


def unreadable_event_id_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        ids = [e.get("event_id") for e in obs.events or []]
        if ids != [None]:
            return ["expected the one event with event_id read as null, got event_ids %r" % (ids,)]
    if consumer == "approve" and obs.approved:
        return ["approved %r although no EventId could be read" % (obs.approved,)]
    return []


def mixed_event_id_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        ids = sorted((e.get("event_id") or "") for e in obs.events or [])
        if ids != sorted(["", cell.event_id]):
            return ["expected the healthy event %s and one with a null event_id, got %r" % (cell.event_id, ids)]
    if consumer == "approve" and obs.approved != [cell.event_id]:
        return ["approved %r, not the healthy event alone [%s]" % (obs.approved, cell.event_id)]
    return []


def unreadable_resources_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        event = _the_event(cell, obs)
        if event is None:
            return ["the event with unreadable Resources is not reported: %r" % (obs.events,)]
        if event.get("affects_this_host") is not False:
            return ["an event whose Resources could not be read is said to affect this host: %r" % (event,)]
    if consumer == "approve" and obs.approved:
        return ["approved %r although the event's Resources could not be read" % (obs.approved,)]
    return []


def single_string_resources_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        event = _the_event(cell, obs)
        if event is None or event.get("resources") != [VM]:
            return ["Resources \"%s\" was not read as [\"%s\"]: %r" % (VM, VM, event)]
        if event.get("affects_this_host") is not True:
            return ["the event names this VM but affects_this_host is %r" % (event.get("affects_this_host"),)]
    if consumer == "approve" and obs.approved != [cell.event_id]:
        return ["approved %r, not [%s]" % (obs.approved, cell.event_id)]
    return []


def healthy_beside_unreadable_not_before_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        found = _events_by_id(obs)
        healthy, broken = found.get(cell.event_id.lower()), found.get(OTHER_EVENT_ID.lower())
        problems = []
        if healthy is None or not healthy.get("not_before"):
            problems.append("the healthy event %s is not reported with its NotBefore: %r" % (cell.event_id, healthy))
        if broken is None or broken.get("not_before") is not None:
            problems.append("the event with the unreadable NotBefore is not reported with not_before null: %r"
                            % (broken,))
        return problems
    if consumer == "approve" and obs.approved != [cell.event_id]:
        return ["approved %r, not the healthy event [%s]" % (obs.approved, cell.event_id)]
    return []


def _deep_field(document, name, depth):
    """document as JSON text with the extra field name, depth arrays deep, added to its last event
    (as text: json.dumps itself recurses once per level)."""
    import json
    document["Events"][-1][name] = "@deep@"
    return json.dumps(document).replace('"@deep@"', "[" * depth + "]" * depth)


def deep_field_checks(consumer, cell, obs):
    """The event beside (or carrying) the deep field is handled; the deep field is left out."""
    if consumer in ("info", "wait"):
        event = _the_event(cell, obs)
        if event is None:
            return ["the healthy event %s is not reported: %r" % (cell.event_id, obs.events)]
        if any("nested" in e for e in obs.events or []):
            return ["the field nested too deep was not left out"]
    if consumer == "approve" and obs.approved != [cell.event_id]:
        return ["approved %r, not [%s]" % (obs.approved, cell.event_id)]
    return default_checks(consumer, cell, obs)


LONE_SURROGATE_DESCRIPTION = u"Host server \ud800 is undergoing maintenance."


def lone_surrogate_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        event = _the_event(cell, obs)
        if event is None or event.get("description") != LONE_SURROGATE_DESCRIPTION.replace(u"\ud800", u"\ufffd"):
            return ["the unpaired surrogate was not replaced with U+FFFD: %r" % (event,)]
    return default_checks(consumer, cell, obs)


def nul_checks(consumer, cell, obs):
    if consumer in ("info", "wait"):
        event = _the_event(cell, obs)
        if event is None or "\x00" not in (event.get("description") or "") + (event.get("event_type") or ""):
            return ["the event is not reported with its text as sent: %r" % (event,)]
    return default_checks(consumer, cell, obs)


# -- the table ------------------------------------------------------------------------------------

def _burst(status, count=2):
    return FaultRow("%d_burst" % status, [{"kind": "status", "status": status, "count": count}], transient=True)


ROWS = [
    FaultRow("410_burst", [{"kind": "status", "status": 410, "count": 3}], transient=True),
    FaultRow("429_retry_after_1", [{"kind": "status", "status": 429, "retry_after": 1, "count": 2}],
             transient=True),
    # Capped (RETRY_AFTER_CAP) and never past the deadline: a module may wait to its deadline and
    # retry, or fail at once saying why; the watcher polls again within the cap.
    FaultRow("429_retry_after_3600", [{"kind": "status", "status": 429, "retry_after": 3600, "count": 1}],
             transient=True, error_words=r"Retry-After|retry after", may_fail=("info", "approve", "wait"),
             recover_within=RETRY_AFTER_CAP + 25),
    FaultRow("429_retry_after_past_date",
             [{"kind": "status", "status": 429, "retry_after": "Sat, 01 Jan 2000 00:00:00 GMT", "count": 2}],
             transient=True),
    _burst(500), _burst(502), _burst(503), _burst(504),
    FaultRow("500_persistent", [{"kind": "status", "status": 500}], expect=CLEAN_ERROR, error_words=r"\b500\b"),
    FaultRow("empty_body", [{"kind": "empty_body", "count": 1}], transient=True),
    FaultRow("non_json_body", [{"kind": "malformed_json", "count": 1}], transient=True),
    FaultRow("event_id_a_number",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [cell.raw_event(EventId=12345)]},
             warn_field="EventId", checks=unreadable_event_id_checks, may_fail=("approve",),
             error_words=r"EventId"),
    FaultRow("resources_a_number",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [cell.raw_event(Resources=7)]},
             warn_field="Resources", checks=unreadable_resources_checks),
    FaultRow("event_ids_number_and_string",
             document=lambda cell: {"DocumentIncarnation": 7,
                                    "Events": [cell.raw_event(EventId=98765), cell.raw_event()]},
             warn_field="EventId", checks=mixed_event_id_checks, acts_during_fault=True),
    FaultRow("resources_one_string",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [cell.raw_event(Resources=VM)]},
             checks=single_string_resources_checks, acts_during_fault=True, quiet=True),
    FaultRow("not_before_unreadable_beside_healthy",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [
                 cell.raw_event(EventId=OTHER_EVENT_ID, Resources=["web_1"], NotBefore="the day after tomorrow"),
                 cell.raw_event()]},
             warn_field="NotBefore", checks=healthy_beside_unreadable_not_before_checks, acts_during_fault=True),
    FaultRow("incarnation_not_a_number",
             document=lambda cell: {"DocumentIncarnation": "seven", "Events": [cell.raw_event()]},
             warn_field="DocumentIncarnation", acts_during_fault=True),
    FaultRow("events_not_a_list",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": "none today"},
             expect=CLEAN_ERROR, error_words=r"\bEvents\b"),
    FaultRow("dropped_connection", [{"kind": "drop", "count": 1}], transient=True),
    FaultRow("connection_reset", [{"kind": "reset", "count": 1}], transient=True),
    FaultRow("trickle_1_byte_per_s", [{"kind": "trickle", "interval": 1}], expect=CLEAN_ERROR,
             error_words=r"request_timeout|retry_timeout|timed out|time ?out|within|deadline"),
    FaultRow("oversize_300MB", [{"kind": "oversize", "size": 300 * MIB}], expect=CLEAN_ERROR,
             error_words=r"MiB|bytes|too large|larger|size", max_rss_mib=150,
             win_uri_note="win_uri has no size cap: it reads the whole answer into memory on the host and returns it "
                          "in its result, and the client's 1 MiB cap is applied on the controller after that. The "
                          "twins meet 2 MiB (over the cap), not 300 MB, which would only measure win_uri's and "
                          "Ansible's own handling of a 300 MB result; their memory is win_uri's, not measured.",
             win_uri_faults=[{"kind": "oversize", "size": 2 * MIB}]),
    FaultRow("redirect_307", [{"kind": "redirect"}], expect=CLEAN_ERROR, error_words=r"redirect"),
    FaultRow("refused_connection", target="refused", expect=CLEAN_ERROR,
             error_words=r"refused|no Instance Metadata Service|Azure VM"),
    FaultRow("proxy_variables_set", proxy=True, quiet=True),
    # Issue 22, items 2 to 4: event text no consumer may choke on. The watcher drains each through
    # a handler that checks its standard input and its SE_* variables.
    FaultRow("extra_field_600_deep_beside_healthy",
             document=lambda cell: _deep_field({"DocumentIncarnation": 7, "Events": [
                 cell.raw_event(), cell.raw_event(EventId=OTHER_EVENT_ID, Resources=["web_1"])]}, "Nested", 600),
             warn_field="Nested", checks=deep_field_checks, acts_during_fault=True, drain_handler=True),
    FaultRow("extra_field_30000_deep_in_the_event",
             document=lambda cell: _deep_field({"DocumentIncarnation": 7, "Events": [cell.raw_event()]},
                                               "Nested", 30000),
             warn_field="Nested", checks=deep_field_checks, acts_during_fault=True, drain_handler=True),
    FaultRow("description_lone_surrogate",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [
                 cell.raw_event(Description=LONE_SURROGATE_DESCRIPTION)]},
             warn_field="Description", checks=lone_surrogate_checks, acts_during_fault=True, drain_handler=True),
    FaultRow("description_nul",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [
                 cell.raw_event(Description=u"Host server\x00is undergoing maintenance.")]},
             checks=nul_checks, acts_during_fault=True, quiet=True, drain_handler=True),
    FaultRow("event_type_nul",
             document=lambda cell: {"DocumentIncarnation": 7, "Events": [cell.raw_event(EventType=u"Re\x00boot")]},
             checks=nul_checks, acts_during_fault=True, quiet=True, drain_handler=True),
]

# Seconds a cell may take in all (its deadlines, recovery and stop) before the test gives up on it.
CELL_LIMIT = 400.0


def judge(row, consumer, cell, obs):
    """The reasons the cell is not as documented (empty when it is)."""
    reasons = list(obs.problems)
    if obs.outcome not in row.allowed(consumer):
        reasons.append("expected %s, got %s: %s" % (" or ".join(row.allowed(consumer)), obs.outcome, obs.message))
        return reasons
    words = re.compile(row.error_words, re.I) if row.error_words else None
    twin, consumer = consumer, base_consumer(consumer)
    if consumer != "watcher":
        if obs.outcome == CLEAN_ERROR and words and not words.search(obs.message or ""):
            reasons.append("the error does not say what happened (/%s/): %s" % (row.error_words, obs.message))
        if obs.outcome == SUCCESS:
            reasons += (row.checks or default_checks)(consumer, cell, obs)
            if row.warn_field and not any(row.warn_field in w for w in obs.warnings):
                reasons.append("no warning names %s: warnings %r" % (row.warn_field, obs.warnings))
    else:
        if not row.quiet and not obs.warnings:
            reasons.append("the watcher logged no warning or error about the fault")
        if row.warn_field and not any(row.warn_field in w for w in obs.warnings):
            reasons.append("no warning of the watcher names %s: %r" % (row.warn_field, obs.warnings[:5]))
        if row.expect == CLEAN_ERROR and words and not any(words.search(w) for w in obs.warnings):
            reasons.append("no log line of the watcher says what happened (/%s/): %r"
                           % (row.error_words, obs.warnings[:5]))
    if row.max_rss_mib and twin not in WIN_URI_TWINS and obs.max_rss_kib and obs.max_rss_kib > row.max_rss_mib * 1024:
        reasons.append("peak memory %.0f MiB, more than %d MiB" % (obs.max_rss_kib / 1024.0, row.max_rss_mib))
    if cell.trap is not None and cell.trap.connections:
        reasons.append("%d connection(s) went to the proxy of the environment" % cell.trap.connections)
    if row.faults and row.faults[0]["kind"] == "redirect" and cell.followed_redirects():
        reasons.append("the redirect was followed: %r" % (cell.followed_redirects(),))
    return reasons


class Verdict(object):
    def __init__(self, outcome, reasons):
        self.outcome = outcome
        self.reasons = reasons


OBSERVERS = {
    "info": lambda cell: observe_module("scheduled_event_info", cell),
    "approve": lambda cell: observe_module("scheduled_event_approve", cell),
    "wait": observe_wait,
    "watcher": observe_watcher,
    "info (win_uri)": lambda cell: observe_win_uri("scheduled_event_info", cell),
    "approve (win_uri)": lambda cell: observe_win_uri("scheduled_event_approve", cell),
    "wait (win_uri)": lambda cell: observe_win_uri("scheduled_event_wait", cell),
}


def run_cell(row, consumer):
    try:
        cell = Cell(row)
    except Exception as exc:  # pylint: disable=broad-except
        return Verdict("setup error", ["the cell could not be set up: %s: %s" % (type(exc).__name__, exc)])
    try:
        try:
            cell.set_faults(twin=consumer in WIN_URI_TWINS)
        except Exception as exc:  # pylint: disable=broad-except
            return Verdict("setup error", ["the mock refused the fault: %s" % (exc,)])
        obs = OBSERVERS[consumer](cell)
        reasons = judge(row, consumer, cell, obs)
    finally:
        cell.close()
    outcome = obs.outcome if (obs.outcome in (CRASH, HANG) or not reasons) else WRONG
    return Verdict(outcome, reasons)


def _cost(row, consumer):
    """Rough seconds a cell takes, to start the slow ones first."""
    cost = row.recover_within if consumer == "watcher" and row.transient else 0.0
    if row.expect == CLEAN_ERROR:
        cost += 10
    return cost + (5 if base_consumer(consumer) in ("wait", "watcher") else 0)


def _key(row, consumer):
    return "%s-%s" % (row.name, consumer)


def prefetch(params):
    row, consumer = params["row"], params["consumer"]
    return _cost(row, consumer), "matrix", _key(row, consumer), lambda: run_cell(row, consumer)


def cells():
    """Every cell a runner can be asked for (board.py), by key."""
    return dict((_key(row, consumer), prefetch({"row": row, "consumer": consumer})[3])
                for row in ROWS for consumer in CONSUMERS)


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_fault_matrix_cell(row, consumer):
    key = _key(row, consumer)
    verdict = BOARD.result(key, lambda: run_cell(row, consumer), CELL_LIMIT)
    BOARD.count("fault matrix", key, verdict.outcome, (row.name, consumer),
                failure="; ".join(verdict.reasons) if verdict.reasons else None)
    assert not verdict.reasons, "%s x %s (%s): %s" % (row.name, consumer, verdict.outcome,
                                                      "; ".join(verdict.reasons))


def test_the_table_covers_every_fault_kind_of_the_issue():
    kinds = set()
    for row in ROWS:
        kinds.update(f["kind"] for f in row.faults)
    assert kinds >= {"status", "empty_body", "malformed_json", "drop", "reset", "trickle", "oversize", "redirect"}
    statuses = set(f.get("status") for row in ROWS for f in row.faults if f["kind"] == "status")
    assert statuses >= {410, 429, 500, 502, 503, 504}
    assert [row.name for row in ROWS if row.target == "refused"] and [row.name for row in ROWS if row.proxy]
    assert len([row for row in ROWS if row.document is not None]) == 12
