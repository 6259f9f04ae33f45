"""Issue 24: the hardening tables extended to the control-plane modules.

scheduled_events_policy, fleet_event_info and fleet_event_approve, each run as Ansible runs a
module, against the mock's control-plane face (its own mock per cell). Two tables, counted in the
same tallies as test_bad_input.py's and test_fault_matrix.py's (conftest.py prints them):

- bad input: every option given wrong types, numbers no option may take, strings no Azure name
  can be (huge, nested, NUL; see STRING_VALUES on unpaired surrogates), non-GUID subscriptions, malformed ids, bad
  api-versions, a cloud_environment that is no URL, an unknown auth_source. Each must be refused
  at once: a clear error naming the option, no traceback, no request in the mock's ARM audit.
- faults: what Resource Manager and Resource Graph answer when things go wrong (403, an expired
  token, 429 with and without Retry-After, the Resource Graph quota spent, 5xx, a reset or dropped
  connection, garbled JSON). Each must end in success (a bounded retry) or a clean error saying
  what happened, within request_timeout + retry_timeout; never a crash or a hang.
"""

import json
import re
import ssl
import urllib.parse
import urllib.request

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.tests.support.bad_input import NUMBER_VALUES
from .board import ACCEPTED, BOARD, CLEAN_ERROR, CRASH, EXCEPTION, HANG, REFUSED, SUCCESS, WRONG
from .drivers import INTERNAL_ERROR, run_module

SUB = "11111111-1111-1111-1111-111111111111"
PUBLISH = {"scheduledEventsAdditionalPublishingTargets": {"eventGridAndResourceGraph": {
    "enable": True, "scheduledEventsApiVersion": "2020-07-01"}}}
FLEET = {"subscription_id": SUB, "resource_group": "rg-web", "scheduled_events_policy": PUBLISH, "default_vm": "web0",
         "groups": [{"name": "web", "kind": "zonal", "vms": ["web0", "web1"]}]}
CLIENT, SECRET, TENANT = "hardening-app", "hardening-secret", "hardening-tenant"
EVENT_ID = "5D9B5CF1-4B1E-4D7B-9E0A-2C6E0F1A3B4C"
VM_ID = "/subscriptions/%s/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web0" % SUB
EVENT_ARM_ID = VM_ID + "/providers/Microsoft.Maintenance/scheduledevents/" + EVENT_ID
REQUEST_TIMEOUT = 3.0
RETRY_TIMEOUT = 6.0
MARGIN = 15.0
CASE_LIMIT = 90.0
MODULE_NAMES = {"policy": "scheduled_events_policy", "fleet info": "fleet_event_info",
                "fleet approve": "fleet_event_approve"}
# What each module needs to do something.
BASE_ARGS = {
    "policy": {"resource_group": "rg-web", "name": "web0", "auto_approve_user_reboot": True},
    "fleet info": {"subscriptions": [SUB]},
    "fleet approve": {"ids": [EVENT_ARM_ID]},
}


class ControlPlane(object):
    """A mock with its control-plane face, a principal allowed everything on SUB and one event."""

    def __init__(self):
        self.mock = start_mock(arm=True, fleet=FLEET, rate_limit=False)
        self.mock.control("POST", "arm/principals", {"client_id": CLIENT, "secret": SECRET, "tenant": TENANT})
        self.mock.control("POST", "arm/grants", {"principal": CLIENT, "role": "Contributor",
                                                 "scope": "/subscriptions/" + SUB})
        self.mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0"], "notice": 3600,
                                             "event_id": EVENT_ID})

    def args(self, target):
        args = {"client_id": CLIENT, "secret": SECRET, "tenant": TENANT, "subscription_id": SUB,
                "cloud_environment": self.mock.arm_url, "request_timeout": REQUEST_TIMEOUT,
                "retry_timeout": RETRY_TIMEOUT}
        args.update(BASE_ARGS[target])
        return args

    def env(self):
        return {"REQUESTS_CA_BUNDLE": self.mock.ca_path}

    def arm_requests(self):
        return self.mock.control("GET", "audit")["arm_requests"]

    def token(self):
        form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": CLIENT, "client_secret": SECRET,
                                       "scope": self.mock.arm_scope}).encode("ascii")
        return self._https("POST", "/login/%s/oauth2/v2.0/token" % TENANT, form,
                           {"Content-Type": "application/x-www-form-urlencoded"})["access_token"]

    def spend_graph_quota(self):
        """One Resource Graph query as the principal, so that a quota of 1 is spent for the module."""
        body = json.dumps({"subscriptions": [SUB], "query": "maintenanceresources"}).encode("utf-8")
        self._https("POST", "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01", body,
                    {"Content-Type": "application/json", "Authorization": "Bearer " + self.token()})

    def _https(self, method, path, data, headers):
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(
            context=ssl.create_default_context(cafile=self.mock.ca_path)), urllib.request.ProxyHandler({}))
        with opener.open(urllib.request.Request(self.mock.arm_url + path, data=data, method=method,
                                                headers=headers), timeout=10) as answer:
            return json.loads(answer.read().decode("utf-8"))

    def close(self):
        self.mock.stop()


def _short(text, size=400):
    text = " ".join(str(text).split())
    return text if len(text) <= size else text[:size] + "..."


# ==================================================================================================
# Bad input
# ==================================================================================================

HUGE = "a" * 1000000
NUL = "rg\x00web"
DEEP = "@"
for _ in range(200):
    DEEP = [DEEP]

# No number here: Ansible turns 12345 given for a str option into "12345", a valid Azure name.
# No unpaired surrogate anywhere in this table: ansible-core's AnsibleModule() dies on one while it
# logs the arguments (UnicodeEncodeError in _log_invocation), before any module code runs, for every
# module of the collection alike; see the report of issue 24's hardening.
STRING_VALUES = [("huge", HUGE), ("nested_200_deep", DEEP), ("nul", NUL), ("quote", "rg') | project secrets"),
                 ("empty", ""), ("dict", {"a": "b"})]
GUID_VALUES = [("not_guid", "my-subscription"), ("braces", "{%s}" % SUB), ("short", SUB[:-1]), ("number", 42),
               ("nul", SUB[:-1] + "\x00"), ("huge", HUGE),
               ("nested_200_deep", DEEP)]
EVENT_ID_VALUES = [
    ("not_an_id", "reboot web0 please"),
    ("vm_id_only", VM_ID),
    ("event_not_guid", VM_ID + "/providers/Microsoft.Maintenance/scheduledevents/not-a-guid"),
    ("subscription_not_guid", EVENT_ARM_ID.replace(SUB, "my-subscription")),
    ("other_provider", EVENT_ARM_ID.replace("Microsoft.Compute", "Microsoft.Storage")),
    ("trailing_acknowledge", EVENT_ARM_ID + "/acknowledge"),
    ("path_traversal", VM_ID + "/../../providers/Microsoft.Maintenance/scheduledevents/" + EVENT_ID),
    ("nul", EVENT_ARM_ID + "\x00"), ("huge", HUGE),
    ("number", 12345), ("nested_200_deep", DEEP),
]
API_VERSION_VALUES = [("word", "latest"), ("bad_date", "2025-13-45-x"), ("number", 20250401), ("nul", "2025-04-01\x00"),
                      ("huge", HUGE), ("list", ["2025-04-01"])]
POLICY_API_VERSION_VALUES = API_VERSION_VALUES + [("older_than_2025_04_01", "2024-11-01")]
CLOUD_VALUES = [("word", "AzureMoon"), ("plain_http", "http://127.0.0.1:{arm_port}/"), ("ftp", "ftp://127.0.0.1/"),
                ("https_no_host", "https://"), ("space", "https://127.0.0.1:{arm_port}/ x"),
                ("port_99999", "https://127.0.0.1:99999/"), ("nul", "https://127.0.0.1:{arm_port}/\x00"),
                ("huge", "https://" + HUGE), ("label_64", "https://%s.example/" % ("a" * 64)),
                ("number", 443), ("nested_200_deep", DEEP)]
AUTH_SOURCE_VALUES = [("unknown", "kerberos"), ("empty", ""), ("number", 5), ("nul", "env\x00"), ("list", ["env"])]
BOOL_VALUES = [("word", "maybe"), ("number_2", 2), ("list", [True]), ("nan", float("nan")), ("dict", {"a": 1})]


# ansible-core logs a module's arguments (syslog or journal) before the module runs, and refuses a
# NUL in any of them with this; the module never sees the value.
ANSIBLE_NUL = re.compile(r"embedded null (character|byte)")


class Option(object):
    """One option of one control-plane module and the values it must refuse.

    listed: the module takes a list (each bad value is given as its one element, except nested)."""

    def __init__(self, target, name, values, named=None, listed=False):
        self.target = target
        self.name = name
        self.values = values
        self.named = named or re.escape(name)
        self.listed = listed


def _numbers(zero_ok=False):
    return [(label, value) for label, value in NUMBER_VALUES if not (label == "zero" and zero_ok)]


OPTIONS = []
for _target in MODULE_NAMES:
    OPTIONS += [
        Option(_target, "request_timeout", _numbers()),
        Option(_target, "retry_timeout", _numbers(zero_ok=True)),
        Option(_target, "subscription_id", GUID_VALUES),
        Option(_target, "cloud_environment", CLOUD_VALUES),
        Option(_target, "auth_source", AUTH_SOURCE_VALUES),
    ]
OPTIONS += [
    Option("policy", "resource_group", STRING_VALUES),
    Option("policy", "name", STRING_VALUES),
    Option("policy", "resource_type", [("unknown", "virtual_machine_set"), ("number", 3), ("nul", "availability_set\x00")]),
    Option("policy", "api_version", POLICY_API_VERSION_VALUES),
    Option("policy", "publish_to_event_grid_and_resource_graph", BOOL_VALUES),
    Option("policy", "auto_approve_user_reboot", BOOL_VALUES),
    Option("policy", "auto_approve_user_redeploy", BOOL_VALUES),
    Option("policy", "auto_approve_all_instances_down", BOOL_VALUES),
    Option("fleet info", "subscriptions", GUID_VALUES, listed=True),
    Option("fleet info", "resource_groups", STRING_VALUES, listed=True),
    Option("fleet info", "resource_names", STRING_VALUES, listed=True),
    Option("fleet info", "event_types", STRING_VALUES, listed=True),
    Option("fleet info", "event_sources", [("unknown", "Customer"), ("nul", "User\x00"), ("number", 1)], listed=True),
    Option("fleet info", "event_statuses", [("unknown", "Done"), ("nul", "Started\x00"), ("number", 1)], listed=True),
    Option("fleet info", "include_approvals", BOOL_VALUES),
    Option("fleet info", "approvals_days", [("zero", 0), ("negative", -1), ("above_90", 91), ("huge", 10 ** 12),
                                            ("string", "abc"), ("nan", float("nan")), ("list", [7])]),
    Option("fleet approve", "ids", EVENT_ID_VALUES, listed=True),
    Option("fleet approve", "api_version", API_VERSION_VALUES + [("older_than_ga", "2023-01-01")]),
]
# Values Ansible itself turns into something usable before the module sees them: a number given
# for a str option becomes its text, which can then be a good value ("5" for auth_source is not),
# and an empty list element for an optional list filter is refused as an empty filter.


class Case(object):
    def __init__(self, option, label, value):
        self.option = option
        self.label = label
        self.value = value
        self.id = "cp-%s-%s-%s" % (option.target.replace(" ", "_"), option.name, label)

    def __repr__(self):
        return self.id

    def value_for(self, plane):
        value = self.value
        if isinstance(value, str):
            value = value.replace("{arm_port}", plane.mock.arm_url.rsplit(":", 1)[1])
        if self.option.listed and not isinstance(value, list):
            value = [value]
        return value


CASES = [Case(option, label, value) for option in OPTIONS for label, value in option.values]


class Verdict(object):
    def __init__(self, outcome, reason=None):
        self.outcome = outcome
        self.reason = reason


def check_case(case):
    plane = ControlPlane()
    try:
        args = plane.args(case.option.target)
        args[case.option.name] = case.value_for(plane)
        run = run_module(MODULE_NAMES[case.option.target], args, env=plane.env(), timeout=CASE_LIMIT)
        requests = plane.arm_requests()
    finally:
        plane.close()
    if run.process.killed:
        return Verdict(HANG, "still running after %gs" % CASE_LIMIT)
    if run.result is None or "Traceback" in run.process.output:
        return Verdict(EXCEPTION, "rc %s: %s" % (run.process.returncode, _short(run.process.output[-600:])))
    if not run.result.get("failed"):
        return Verdict(ACCEPTED, "the module succeeded (%d ARM requests)" % len(requests))
    message = run.result.get("msg")
    if not isinstance(message, str) or not message.strip():
        return Verdict(ACCEPTED, "no error message")
    if INTERNAL_ERROR.search(message):
        return Verdict(EXCEPTION, "an internal error reached the user: %s" % _short(message))
    if not re.search(case.option.named, message) and not (case.label == "nul" and ANSIBLE_NUL.search(message)):
        return Verdict(ACCEPTED, "the error does not name %s: %s" % (case.option.name, _short(message)))
    if requests:
        return Verdict(ACCEPTED, "%d ARM request(s) before the refusal: %s" % (
            len(requests), ", ".join("%s %s" % (r["method"], r["path"]) for r in requests[:3])))
    return Verdict(REFUSED)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_control_plane_bad_value_is_refused_at_once(case):
    verdict = BOARD.result(case.id, lambda: check_case(case), 40 * CASE_LIMIT)
    BOARD.count("bad input", case.id, verdict.outcome, (case.option.target, case.option.name), failure=verdict.reason)
    assert verdict.outcome == REFUSED, "%s = %r: %s: %s" % (case.option.name, _short(repr(case.value), 100),
                                                            verdict.outcome, verdict.reason)


def test_every_option_of_the_control_plane_modules_is_in_the_table():
    from ansible_collections.azure_imds.scheduled_events.plugins.modules import (
        fleet_event_approve, fleet_event_info, scheduled_events_policy)
    modules = {"policy": scheduled_events_policy, "fleet info": fleet_event_info, "fleet approve": fleet_event_approve}
    # Options whose values are not checked by the module: credentials go to the identity provider
    # as they are (a wrong one is its refusal, see the fault table), profile names a file section.
    unchecked = {"client_id", "secret", "tenant", "profile"}
    for target, module in modules.items():
        options = set(module.argument_spec()) - unchecked
        assert options == set(o.name for o in OPTIONS if o.target == target), target


# ==================================================================================================
# Faults of Resource Manager and Resource Graph
# ==================================================================================================

# Faults on Resource Manager's resources and Resource Graph, not on sign-in.
ARM_PATHS = ["/providers/", "/subscriptions/"]


class FaultRow(object):
    """faults: specs for POST /_mock/arm/faults (paths default ARM_PATHS); setup(plane): more to do;
    expect: the outcomes allowed; error_words: what a clean error must say."""

    def __init__(self, name, faults=(), setup=None, expect=(SUCCESS,), error_words=None, sees_nothing=False):
        self.name = name
        self.sees_nothing = sees_nothing   # Resource Graph shows the principal no row (no role at all)
        self.faults = [dict({"paths": ARM_PATHS}, **f) for f in faults]
        self.setup = setup
        self.expect = expect
        self.error_words = error_words

    def __repr__(self):
        return self.name


def _no_grants(plane):
    plane.mock.control("DELETE", "arm/grants")


def _reader_only(plane):
    plane.mock.control("DELETE", "arm/grants")
    plane.mock.control("POST", "arm/grants", {"principal": CLIENT, "role": "Reader", "scope": "/subscriptions/" + SUB})


def _graph_quota_spent(plane):
    plane.mock.control("POST", "arm/config", {"graph_quota": 1, "graph_window": 2})
    plane.spend_graph_quota()


def _graph_quota_spent_long(plane):
    plane.mock.control("POST", "arm/config", {"graph_quota": 1, "graph_window": 3600})
    plane.spend_graph_quota()


ROWS = [
    # Resource Graph answers a principal without any role an empty result, not 403 (it shows what
    # the caller may read): the listing is empty and the approval finds no such event.
    FaultRow("arm_403_no_role", setup=_no_grants, expect=(CLEAN_ERROR, SUCCESS),
             error_words=r"403|AuthorizationFailed|role|knows no scheduled event", sees_nothing=True),
    FaultRow("arm_403_reader_only", setup=_reader_only, expect=(CLEAN_ERROR, SUCCESS),
             error_words=r"403.*(ScheduledEventContributor|Contributor)|(ScheduledEventContributor|Contributor).*403"),
    FaultRow("arm_401_expired_token", [{"kind": "status", "status": 401, "code": "ExpiredAuthenticationToken"}],
             expect=(CLEAN_ERROR,), error_words=r"expired"),
    FaultRow("arm_429_retry_after_1", [{"kind": "status", "status": 429, "retry_after": 1, "count": 2}]),
    FaultRow("arm_429_without_retry_after", [{"kind": "status", "status": 429, "count": 2}]),
    FaultRow("arm_429_retry_after_3600", [{"kind": "status", "status": 429, "retry_after": 3600, "count": 1}],
             expect=(CLEAN_ERROR,), error_words=r"Retry-After.*retry_timeout|retry_timeout.*Retry-After"),
    FaultRow("graph_quota_spent_2s", setup=_graph_quota_spent),
    FaultRow("graph_quota_spent_1h", setup=_graph_quota_spent_long, expect=(CLEAN_ERROR, SUCCESS),
             error_words=r"429.*retry_timeout"),
    FaultRow("arm_500_burst", [{"kind": "status", "status": 500, "count": 2}]),
    FaultRow("arm_503_burst", [{"kind": "status", "status": 503, "count": 2}]),
    FaultRow("arm_500_persistent", [{"kind": "status", "status": 500}], expect=(CLEAN_ERROR,), error_words=r"\b500\b"),
    FaultRow("arm_connection_reset", [{"kind": "reset", "count": 1}], expect=(SUCCESS, CLEAN_ERROR),
             error_words=r"no answer|reset|connection|aborted"),
    FaultRow("arm_connection_dropped", [{"kind": "drop", "count": 1}], expect=(SUCCESS, CLEAN_ERROR),
             error_words=r"no answer|connection|closed|aborted"),
    FaultRow("arm_connection_reset_persistent", [{"kind": "reset"}], expect=(CLEAN_ERROR,),
             error_words=r"no answer|reset|connection|aborted"),
    FaultRow("arm_garbled_json", [{"kind": "malformed_json", "count": 1}], expect=(CLEAN_ERROR, SUCCESS),
             error_words=r"JSON|decode|deserializ|garbled|could not be read|unreadable"),
]
CONSUMERS = tuple(MODULE_NAMES)
CELL_LIMIT = 200.0


def _observe(row, consumer):
    plane = ControlPlane()
    try:
        if row.setup is not None:
            row.setup(plane)
        for fault in row.faults:
            plane.mock.control("POST", "arm/faults", fault)
        run = run_module(MODULE_NAMES[consumer], plane.args(consumer), env=plane.env(), timeout=CASE_LIMIT)
        state = plane.mock.control("GET", "events")
    finally:
        plane.close()
    outcome = run.outcome
    reasons = []
    message = (run.result or {}).get("msg") if outcome != SUCCESS else None
    if outcome in (CRASH, HANG):
        reasons.append(run.describe())
        return outcome, reasons
    bound = REQUEST_TIMEOUT + RETRY_TIMEOUT + MARGIN
    if run.process.elapsed > bound:
        reasons.append("took %.1fs, more than request_timeout + retry_timeout + %gs margin (%.1fs)"
                       % (run.process.elapsed, MARGIN, bound))
    if outcome not in row.expect:
        reasons.append("expected %s, got %s: %s" % (" or ".join(row.expect), outcome, _short(message)))
    elif outcome == CLEAN_ERROR and row.error_words and not re.search(row.error_words, message or "", re.I | re.S):
        reasons.append("the error does not say what happened (/%s/): %s" % (row.error_words, _short(message)))
    elif outcome == SUCCESS:
        if row.sees_nothing and consumer == "fleet info":
            if run.result.get("events"):
                reasons.append("events listed to a principal without a role: %r" % (run.result.get("events"),))
        else:
            reasons += _success_checks(consumer, run.result, state)
    return (WRONG if reasons else outcome), reasons


def _success_checks(consumer, result, state):
    events = state if isinstance(state, list) else state.get("events", [])
    ours = [e for e in events if str(e.get("event_id", "")).upper() == EVENT_ID]
    if consumer == "fleet info" and [e.get("event_id") for e in result.get("events", [])] != [EVENT_ID]:
        return ["the event %s is not the one event listed: %r" % (EVENT_ID, result.get("events"))]
    if consumer == "fleet approve":
        if [i.lower() for i in result.get("approved", [])] != [EVENT_ARM_ID.lower()]:
            return ["approved %r, not [%s]" % (result.get("approved"), EVENT_ARM_ID)]
        if not ours or ours[0].get("status", ours[0].get("EventStatus")) not in ("Started", "started"):
            return ["the mock does not show the event Started: %r" % (ours,)]
    if consumer == "policy" and result.get("policy", {}).get("userInitiatedReboot", {}).get("automaticallyApprove") \
            is not True:
        return ["the policy returned does not auto-approve user reboots: %r" % (result.get("policy"),)]
    return []


def _key(row, consumer):
    return "cp-%s-%s" % (row.name, consumer.replace(" ", "_"))


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_control_plane_fault_cell(row, consumer):
    key = _key(row, consumer)
    outcome, reasons = BOARD.result(key, lambda: _observe(row, consumer), CELL_LIMIT)
    BOARD.count("fault matrix", key, outcome, (row.name, consumer), failure="; ".join(reasons) if reasons else None)
    assert not reasons, "%s x %s (%s): %s" % (row.name, consumer, outcome, "; ".join(reasons))


# -- the runner's side (board.py, conftest.py) -------------------------------------------------------

def prefetch(params):
    if "case" in params:
        case = params["case"]
        return 0.0, "input", case.id, lambda: check_case(case)
    row, consumer = params["row"], params["consumer"]
    return 10.0, "matrix", _key(row, consumer), lambda: _observe(row, consumer)


def cells():
    works = dict((case.id, prefetch({"case": case})[3]) for case in CASES)
    works.update((_key(row, consumer), prefetch({"row": row, "consumer": consumer})[3])
                 for row in ROWS for consumer in CONSUMERS)
    return works
