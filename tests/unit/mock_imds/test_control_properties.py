# -*- coding: utf-8 -*-
"""Property: no control request, however malformed, changes the state unless it is accepted,
drops the connection, or stops the IMDS side from answering."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import FakeClock

from .helpers import SE

try:
    import http.client as http_client
except ImportError:  # pragma: no cover
    http_client = None

FLEET = {"default_vm": "web_0", "groups": [
    {"name": "avset", "kind": "availability_set", "vms": ["web_0", "web_1", "web_2"]},
    {"name": "ss", "kind": "scale_set", "vms": ["ss_0", "ss_1"]},
]}
KNOWN_ID = "0A1B2C3D-0000-4000-8000-000000000001"
JSON_TYPES = ("application/json", "application/json; charset=utf-8", "APPLICATION/JSON")
OTHER_TYPES = (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
               "application/jsonx")
KEYS = ("seconds", "speed", "rate_limit", "approval_mode", "unknown_event_ids", "service_lifecycle",
        "service_enable_delay", "service_first_call_delay", "service_idle_disable", "event_type", "resources",
        "notice", "at", "duration", "cancel_at", "status", "event_source", "description", "duration_in_seconds",
        "event_id", "resource_type", "kind", "vm", "count", "delay", "retry_after", "paths", "methods", "location",
        "body", "interval", "size", "fleet", "start_time", "name", "events", "groups", "default_vm", "config")
PATHS = ("state", "events", "events/%s" % KNOWN_ID, "events/%s/cancel" % KNOWN_ID, "events/%s/start" % KNOWN_ID,
         "events/%s/complete" % KNOWN_ID, "events/%s/approve_tenants" % KNOWN_ID, "events/nope/start", "faults",
         "faults/F1", "faults?vm=web_1", "faults?vm=ghost", "time/advance", "config", "reset", "fleet", "scenario",
         "scenarios", "audit", "audit?since=3", "audit?since=%C2%B2", "audit?since=" + "9" * 5000, "nothing",
         "events/%s/%s" % (KNOWN_ID, "x" * 300))

numbers = st.one_of(
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e12, 1e300, -1e300, 10 ** 400, 86400, 3 * 86400, 900, 601]),
)
scalars = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=12),
                    st.sampled_from(["Reboot", "Freeze", "Terminate", "web_0", "web_1", "ghost", "status", "slow",
                                     "drop", "trickle", "oversize", "redirect", "any", "all", "not_before",
                                     "availability_set", "vmss", "2024-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                     "live_migration", "/etc/passwd", "Sat, 01 Jan 2000 00:00:00 GMT"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
                      max_leaves=12)
# What most often breaks a server: non-finite, huge and wrongly typed values, drawn first.
hostile = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 1e12, 10 ** 400, -(10 ** 400),
                     0, -1, 1, 0.5, 900, 86400, 601, True, None, "", "1e300", [], {}]),
    numbers, scalars, values)
json_bodies = st.dictionaries(st.sampled_from(KEYS), values, max_size=5).map(
    lambda doc: json.dumps(doc).encode("utf-8"))  # json.dumps writes NaN and Infinity as bare literals
raw_bodies = st.sampled_from([
    b"", b"   ", b"not json", b"[1, 2]", b"null", b'"text"', b"{", b"[" * 5000 + b"]" * 5000,
    b'{"seconds": NaN}', b'{"seconds": Infinity}', b'{"seconds": -Infinity}', b'{"seconds": 1e400}',
    b'{"seconds": 1e300}', b'{"speed": 1e300}', b'{"speed": NaN}', b'{"event_type": "Reboot", "notice": 1e12}',
    b'{"event_type": "Reboot", "notice": 1e300}', b'{"event_type": "Reboot", "at": 1e308, "duration": 1e308}',
    b'{"seconds": 1' + b"0" * 5000 + b"}", b'{"name": "/etc/passwd"}', b"\xff\xfe", b'{"self": 1}',
    b'{"kind": "redirect", "location": "http://x/\\r\\nX-Evil: 1"}',
    b'{"kind": "status", "status": 429, "retry_after": "1\\r\\nX: y"}',
    b'{"fleet": {"groups": [{"name": "g", "kind": [], "vms": ["a"]}]}}',
    b'{"start_time": 1e300}', b'{"start_time": "99999-01-01"}',
])


def body_of(*parts):
    """A JSON object built from (key, strategy) parts; json.dumps writes NaN and Infinity as the
    bare literals a careless client (or Python's own json module) sends."""
    return st.fixed_dictionaries(dict(parts)).map(lambda doc: json.dumps(doc).encode("utf-8"))


def one_key(keys, strategy):
    return st.sampled_from(keys).flatmap(lambda key: body_of((key, strategy)))


EVENT_KEYS = ("notice", "at", "duration", "cancel_at", "duration_in_seconds", "status", "event_source",
              "description", "event_id", "resource_type", "resources")
FAULT_KINDS = ("status", "slow", "first_call_delay", "drop", "trickle", "oversize", "redirect", "reset",
               "empty_body", "malformed_json", "nope")
# Requests aimed at each route, each with the values most likely to hurt it.
aimed = st.one_of(
    st.tuples(st.just("time/advance"), body_of(("seconds", hostile))),
    st.tuples(st.just("config"), one_key(("speed", "rate_limit", "approval_mode", "unknown_event_ids",
                                          "service_lifecycle", "service_enable_delay", "service_first_call_delay",
                                          "service_idle_disable"), hostile)),
    st.tuples(st.just("events"), st.sampled_from(EVENT_KEYS).flatmap(
        lambda key: body_of(("event_type", st.sampled_from(["Reboot", "Freeze", ""])), (key, hostile)))),
    st.tuples(st.just("faults"), st.sampled_from(FAULT_KINDS).flatmap(
        lambda kind: one_key(("status", "count", "duration", "delay", "retry_after", "paths", "methods", "location",
                              "body", "interval", "size", "vm"), hostile).map(
            lambda raw: json.dumps(dict(json.loads(raw.decode("utf-8"), parse_constant=float),
                                        kind=kind)).encode("utf-8")))),
    st.tuples(st.just("reset"), one_key(("start_time", "fleet"), hostile)),
    st.tuples(st.just("fleet"), body_of(("groups", hostile))),
    st.tuples(st.just("scenario"), one_key(("name", "events", "speed", "start_time", "fleet", "config"), hostile)),
    st.tuples(st.sampled_from(PATHS), st.one_of(json_bodies, raw_bodies)),
)
requests = st.fixed_dictionaries({
    "method": st.sampled_from(["POST", "POST", "POST", "POST", "GET", "DELETE", "PUT"]),
    "aimed": aimed,
    "content_type": st.one_of(st.sampled_from(JSON_TYPES), st.sampled_from(JSON_TYPES), st.sampled_from(OTHER_TYPES)),
    "host": st.sampled_from(["good"] * 8 + ["localhost", "ipv6", "evil.example", "127.0.0.1:1", "", "none"]),
    "origin": st.sampled_from([None] * 8 + ["http://evil.example", "null", "self"]),
}).map(lambda r: dict(r, path=r["aimed"][0], body=r["aimed"][1]))


def fingerprint(mock):
    """Everything a control request could change (the fake clock keeps simulated time still)."""
    return json.dumps({"state": mock.state.snapshot(), "audit": mock.audit()}, sort_keys=True)


def send(conn, mock, request):
    host = {"good": "127.0.0.1:%d" % mock.port, "localhost": "localhost:%d" % mock.port,
            "ipv6": "[::1]:%d" % mock.port}.get(request["host"], request["host"])
    conn.putrequest(request["method"], "/_mock/" + request["path"], skip_host=True, skip_accept_encoding=True)
    if request["host"] != "none":
        conn.putheader("Host", host)
    if request["origin"] is not None:
        conn.putheader("Origin", "http://%s" % host if request["origin"] == "self" else request["origin"])
    if request["content_type"] is not None:
        conn.putheader("Content-Type", request["content_type"])
    conn.putheader("Content-Length", str(len(request["body"])))
    conn.endheaders(request["body"])
    response = conn.getresponse()
    return response.status, response.read()


def must_refuse(request, port):
    """What the mock must refuse whatever the path: a request a web page could have sent."""
    host_ok = request["host"] in ("good", "localhost", "ipv6")
    origin_ok = request["origin"] in (None, "self")
    has_body = bool(request["body"].strip())
    type_ok = request["content_type"] is not None and request["content_type"].split(";")[0].strip().lower() == \
        "application/json"
    assert port
    return not host_ok or not origin_ok or (has_body and not type_ok)


def imds_answers(conn):
    conn.request("GET", SE, headers={"Metadata": "true"})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body
    assert isinstance(json.loads(body.decode("utf-8"))["Events"], list)


def test_random_control_requests_never_corrupt_the_mock():
    mock = mock_imds.MockImds(fleet=FLEET, rate_limit=False, clock=FakeClock(), wallclock=lambda: 1700000000.0,
                              start_time="2024-01-01T00:00:00Z").start()
    conn = http_client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    outcomes = {"refused": 0, "accepted": 0}

    @settings(max_examples=400, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(request=requests)
    def one_request(request):
        before = fingerprint(mock)
        status, raw = send(conn, mock, request)
        answer = json.loads(raw.decode("utf-8"))
        assert status < 500, (request, answer)
        if status >= 400:
            outcomes["refused"] += 1
            assert set(answer) == {"error"} and answer["error"], answer
            assert fingerprint(mock) == before, request
        else:
            outcomes["accepted"] += 1
            assert not must_refuse(request, mock.port), (request, status, answer)
            # Accepted requests may set faults or a rate limit that rightly change IMDS answers:
            # undo those before the IMDS check, leaving the rest of the accepted change in place.
            mock.clear_faults()
            mock.state.configure(rate_limit=False, service_lifecycle=False)
        # The same connection still works, and the IMDS side still answers.
        imds_answers(conn)
        if mock.state.has_vm("web_1"):
            conn.request("GET", "/vm/web_1" + SE, headers={"Metadata": "true"})
            response = conn.getresponse()
            assert (response.status, response.read()[:1]) == (200, b"{")

    try:
        mock.add_event(event_type="Reboot", resources=["web_0"], event_id=KNOWN_ID)
        one_request()  # pylint: disable=no-value-for-parameter
    finally:
        conn.close()
        mock.stop()
    # Both branches were exercised, or the property says little.
    assert outcomes["refused"] > 100 and outcomes["accepted"] > 10, outcomes
