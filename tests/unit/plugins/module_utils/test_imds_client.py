"""The shared IMDS client with a scripted transport and a fake clock: no network, no real sleeps."""

import http.client
import json
import socket

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _imds, _retry

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import (
    EMPTY_DOC, READ_TIMEOUT, FakeClock, ScriptedTransport, answer, fail, scripted_client)

GONE = answer(410, {"error": "Gone"}, reason="Gone")
DOC = answer(200, EMPTY_DOC)


make = scripted_client


# -- URL resolution ----------------------------------------------------------------------------

def test_default_url_is_the_real_service():
    assert _imds.resolve_base_url(None, environ={}) == "http://169.254.169.254"


def test_environment_variable_replaces_the_default():
    assert _imds.resolve_base_url(None, {"AZURE_IMDS_URL": "http://127.0.0.1:8080/"}) == "http://127.0.0.1:8080"


def test_explicit_url_wins_over_environment():
    env = {"AZURE_IMDS_URL": "http://127.0.0.1:8080"}
    assert _imds.resolve_base_url("http://127.0.0.1:9/vm/a", env) == "http://127.0.0.1:9/vm/a"


@pytest.mark.parametrize("bad", ["", "169.254.169.254", "ftp://x", "http://127.0.0.1/?a=1", "http://"])
def test_bad_url_is_refused_with_the_fix(bad):
    with pytest.raises(_edge.ImdsInputError, match="imds_url"):
        _imds.resolve_base_url(bad, environ={})


def test_unknown_api_version_names_the_valid_ones():
    with pytest.raises(_edge.ImdsInputError, match="2017-03-01, .*2020-07-01"):
        _imds.ImdsClient(base_url="http://127.0.0.1:9", api_version="2021-01-01")


# -- request shape -----------------------------------------------------------------------------

def test_get_sends_metadata_header_and_no_forwarded_for():
    client, transport = make([DOC])[::2]
    result = client.get_scheduled_events()
    method, path, body, headers = transport.requests[0]
    assert (method, path, body) == ("GET", "/metadata/scheduledevents?api-version=2020-07-01", None)
    assert headers["Metadata"] == "true"
    assert not any(h.lower() == "x-forwarded-for" for h in headers)
    assert result.incarnation == 1 and result.events == []


def test_path_prefix_of_base_url_is_kept():
    client, transport = make([DOC], base_url="http://127.0.0.1:9/vm/web_1")[::2]
    client.get_scheduled_events()
    assert transport.requests[0][1] == "/vm/web_1/metadata/scheduledevents?api-version=2020-07-01"


def test_approve_posts_every_id_in_one_request_exactly_as_given():
    client, transport = make([answer(200, b"")])[::2]
    ids = ["c7061bac-afdc-4513-b24b-aa5f13a16123", "A123BC45-1234-5678-AB90-ABCDEF123456"]
    client.approve(ids)
    assert len(transport.requests) == 1
    method, body, headers = [transport.requests[0][i] for i in (0, 2, 3)]
    assert method == "POST" and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"StartRequests": [{"EventId": ids[0]}, {"EventId": ids[1]}]}


def test_approve_refuses_malformed_ids_before_sending():
    client, transport = make([])[::2]
    with pytest.raises(_edge.ImdsInputError, match="'not-a-guid'"):
        client.approve(["not-a-guid"])
    assert transport.requests == []


def test_vm_name_from_compute_name_as_text():
    client, transport = make([answer(200, b"web_1\n")])[::2]
    assert client.get_vm_name() == "web_1"
    assert transport.requests[0][1] == "/metadata/instance/compute/name?api-version=2021-02-01&format=text"


# -- the retry table: one test per row ---------------------------------------------------------

@pytest.mark.parametrize("status", [410, 429, 500, 502, 503, 504])
def test_retryable_status_is_retried_then_succeeds(status):
    client, clock, transport = make([answer(status, {"error": "x"}), answer(status, {"error": "x"}), DOC])
    assert client.get_scheduled_events().incarnation == 1
    assert len(transport.requests) == 3
    assert len(clock.sleeps) == 2


def test_read_timeout_is_retried():
    client, transport = make([fail(READ_TIMEOUT), DOC])[::2]
    assert client.get_scheduled_events().incarnation == 1
    assert [f.kind for f in client.last_failures] == ["read_timeout"]


@pytest.mark.parametrize("exc", [ConnectionResetError("reset"), http.client.RemoteDisconnected("closed"),
                                 http.client.IncompleteRead(b"{")])
def test_connection_dropped_mid_request_is_retried(exc):
    client = make([fail(exc), DOC])[0]
    assert client.get_scheduled_events().incarnation == 1
    assert client.last_failures[0].kind == "dropped"


@pytest.mark.parametrize("body", [b"", b"   ", b"{\"DocumentIncarnation\": 3, \"Eve", b"<html>proxy</html>",
                                  b"[]", b"{\"DocumentIncarnation\": 1}"])
def test_200_with_empty_or_unreadable_body_is_retried_never_taken_as_no_events(body):
    client = make([answer(200, body), DOC])[0]
    assert client.get_scheduled_events().incarnation == 1
    assert client.last_failures[0].kind == "bad_body"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 418])
def test_other_4xx_are_never_retried(status):
    client, clock, transport = make([answer(status, {"error": "Bad request. something"})])
    with pytest.raises(_edge.ImdsHttpError) as info:
        client.get_scheduled_events()
    assert len(transport.requests) == 1 and clock.sleeps == []
    assert info.value.status == status
    assert "HTTP %d" % status in str(info.value)
    assert "http://127.0.0.1:9/metadata/scheduledevents?api-version=2020-07-01" in str(info.value)


def test_400_message_names_url_status_imds_text_and_next_step():
    body = {"error": "Bad request. api-version is invalid or was not specified in the request. "
                     "For more information refer to aka.ms/azureimds", "newest-versions": ["2025-04-07"]}
    client = make([answer(400, body)])[0]
    with pytest.raises(_edge.ImdsHttpError) as info:
        client.get_scheduled_events()
    message = str(info.value)
    assert "HTTP 400" in message and "api-version is invalid" in message
    assert "Choose an api_version" in message
    assert info.value.imds_error.startswith("Bad request. api-version")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_is_refused_and_blames_a_proxy(status):
    client, transport = make([answer(status, b"", headers=[("Location", "http://proxy.example/")])])[::2]
    with pytest.raises(_edge.ImdsRedirectError) as info:
        client.get_scheduled_events()
    assert len(transport.requests) == 1
    assert "proxy or redirect is in the way" in str(info.value)
    assert "http://proxy.example/" in str(info.value)


def test_connect_failure_retried_only_a_few_seconds_then_not_an_azure_vm():
    refused = fail(ConnectionRefusedError(111, "Connection refused"), on="connect", cost=0.01)
    client, clock, transport = make([refused] * 100)
    with pytest.raises(_edge.ImdsUnavailableError) as info:
        client.get_scheduled_events()
    elapsed = clock.now - 1000.0
    assert _defaults.CONNECT_RETRY_WINDOW - 1 <= elapsed <= _defaults.CONNECT_RETRY_WINDOW + 0.5
    assert transport.requests == []
    assert "no Instance Metadata Service at http://127.0.0.1:9: is this an Azure VM?" in str(info.value)


def test_connect_timeout_is_short_and_read_timeout_long():
    client, transport = make([DOC])[::2]
    client.get_scheduled_events()
    assert ("connect_timeout", 5.0) in transport.log
    assert ("settimeout", 120.0) in transport.log


def test_connect_timeout_counts_as_not_an_azure_vm():
    timeout = fail(socket.timeout("timed out"), on="connect", cost=5.0)
    client, clock = make([timeout, timeout, timeout])[:2]
    with pytest.raises(_edge.ImdsUnavailableError, match="connect timed out after 5.0s"):
        client.get_scheduled_events()
    assert clock.now - 1000.0 <= 5.0 + 5.0 + 1.0


def test_410_is_retried_for_at_least_70_seconds_with_defaults():
    client, clock, transport = make([GONE] * 200)
    with pytest.raises(_edge.ImdsTimeoutError) as info:
        client.get_scheduled_events()
    assert clock.now - 1000.0 >= 70.0
    assert "410" in str(info.value) and "at least 70" in str(info.value)


def test_410_burst_shorter_than_70s_is_survived():
    client = make([GONE] * 40 + [DOC])[0]
    assert client.get_scheduled_events().incarnation == 1


def test_429_backs_off_exponentially_with_jitter_and_a_cap():
    clock = FakeClock()
    throttle = answer(429, {"error": "Too many requests"})
    transport = ScriptedTransport(clock, [throttle] * 7 + [DOC])
    jitter = iter([0.0, 1.0] * 10)
    client = _imds.ImdsClient(base_url="http://127.0.0.1:9", clock=clock, sleep=clock.sleep,
                              rng=lambda: next(jitter), connection_factory=transport, environ={},
                              retry_timeout=300)
    client.get_scheduled_events()
    assert clock.sleeps == [0.5, 2.0, 2.0, 8.0, 8.0, 16.0, 8.0]


def test_429_honours_retry_after_seconds():
    client, clock = make([answer(429, b"", headers=[("Retry-After", "7")]), DOC])[:2]
    client.get_scheduled_events()
    assert clock.sleeps == [7.0]


def test_429_honours_retry_after_http_date():
    date = "Tue, 14 Nov 2023 22:13:27 GMT"  # 7 s after the fake wall clock (1700000000 = 22:13:20)
    client, clock = make([answer(429, b"", headers=[("Retry-After", date)]), DOC])[:2]
    client.get_scheduled_events()
    assert clock.sleeps == [7.0]


def test_retry_after_beyond_the_deadline_fails_at_once_with_the_429_hint():
    client, clock = make([answer(429, b"", headers=[("Retry-After", "60")])], retry_timeout=10)[:2]
    with pytest.raises(_edge.ImdsTimeoutError, match="5 requests per second"):
        client.get_scheduled_events()
    assert clock.sleeps == []


def test_one_overall_deadline_bounds_all_retries():
    client, clock = make([answer(503, b"")] * 500, retry_timeout=30)[:2]
    with pytest.raises(_edge.ImdsTimeoutError) as info:
        client.get_scheduled_events()
    assert clock.now - 1000.0 <= 30.0
    assert "retry_timeout" in str(info.value) and "HTTP 503" in str(info.value)


def test_retried_request_timeouts_are_clamped_to_the_time_left():
    client, transport = make([answer(500, b""), answer(500, b""), DOC], retry_timeout=2.0)[::2]
    client.get_scheduled_events()
    read_timeouts = [t for what, t in transport.log if what == "settimeout"]
    assert read_timeouts[0] == 120.0  # the first attempt may take the whole two minutes
    assert all(t <= 2.0 for t in read_timeouts[2:])


def test_zero_retry_timeout_means_one_attempt():
    client, transport = make([answer(503, b""), DOC], retry_timeout=0)[::2]
    with pytest.raises(_edge.ImdsTimeoutError):
        client.get_scheduled_events()
    assert len(transport.requests) == 1


def test_policy_delay_table_is_jittered_between_half_and_full():
    policy = _retry.RetryPolicy(rng=lambda: 0.5)
    rule = _retry.RETRY_TABLE[("http", 429)]
    assert policy.delay(rule, 1) == pytest.approx(0.75)
    assert policy.delay(rule, 10) == pytest.approx(12.0)


def test_every_row_of_the_table_is_covered_by_a_test_above():
    rows = set(_retry.RETRY_TABLE)
    assert rows == {("http", 410), ("http", 429), ("http", 500), ("http", 502), ("http", 503), ("http", 504),
                    ("read_timeout", None), ("dropped", None), ("bad_body", None), ("connect", None)}
