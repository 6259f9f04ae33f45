"""The client's edges: numbers, deadlines, URLs, Retry-After and the body cap (scripted transport, fake clock)."""

import math

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _imds, _retry

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import EMPTY_DOC, READ_TIMEOUT, FakeClock, answer, fail, scripted_client

DOC = answer(200, EMPTY_DOC)


make = scripted_client


# -- check_number ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e308, -1, -0.5, True, False, "5",
                                   "abc", None, [], {}, "\u0665"])
def test_check_number_refuses_what_is_not_a_finite_number_in_range(value):
    with pytest.raises(_edge.ImdsInputError) as info:
        _edge.check_number(value, "request_timeout", 0.1, 86400)
    assert str(info.value) == ("request_timeout must be a number from 0.1 to 86400 (seconds), got %r." % (value,))


@pytest.mark.parametrize("value, expected", [(0.1, 0.1), (5, 5.0), (86400, 86400.0), (86400.0, 86400.0)])
def test_check_number_returns_a_float_within_the_range(value, expected):
    result = _edge.check_number(value, "request_timeout", 0.1, 86400)
    assert result == expected and isinstance(result, float)


def test_check_number_for_whole_numbers():
    assert _edge.check_number(3.0, "changed_since", 0, 10, integer=True, unit=None) == 3
    assert isinstance(_edge.check_number(3.0, "changed_since", 0, 10, integer=True), int)
    with pytest.raises(_edge.ImdsInputError, match=r"^changed_since must be a whole number from 0 to 10, got 2.5\.$"):
        _edge.check_number(2.5, "changed_since", 0, 10, integer=True, unit=None)


def test_check_number_none_only_when_allowed():
    assert _edge.check_number(None, "changed_since", 0, 10, allow_none=True) is None
    with pytest.raises(_edge.ImdsInputError, match="got None"):
        _edge.check_number(None, "changed_since", 0, 10)


# -- Deadline -------------------------------------------------------------------------------------

def test_deadline_counts_down_and_never_below_zero():
    clock = FakeClock()
    deadline = _edge.Deadline(10, clock)
    assert deadline.remaining() == 10.0 and not deadline.expired()
    clock.now += 4
    assert deadline.remaining() == 6.0
    clock.now += 100
    assert deadline.remaining() == 0.0 and deadline.expired()


def test_deadline_sooner_is_the_earlier_of_the_two():
    clock = FakeClock()
    deadline = _edge.Deadline(10, clock, name="max_wait")
    assert deadline.sooner(3).remaining() == 3.0
    assert deadline.sooner(30).remaining() == 10.0
    assert deadline.sooner(30).name == "max_wait"


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1, "10"])
def test_deadline_refuses_what_is_not_a_finite_time(seconds):
    with pytest.raises(_edge.ImdsInputError, match="max_wait must be a number"):
        _edge.Deadline(seconds, FakeClock(), name="max_wait")


# -- URLs -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:abc", "not a valid URL"),
    ("http://127.0.0.1:99999", "not a valid URL"),
    ("http://127.0.0.1:0", "port outside 1-65535"),
    ("http://127.0.0.1:", "port outside 1-65535"),
    ("http://[::1", "not a valid URL"),
    ("http://127.0.0.1 :8080", "whitespace"),
    ("http://127.0.0.1:8080/vm/web 0", "whitespace"),
    ("http://127.0.0.1\x00:8080", "control"),
    ("http://127.0.0.1:8080\n", "control"),
    ("http://", "not an http:// URL with a host"),
    ("http://:8080", "not an http:// URL with a host"),
    ("", "empty"),
    ("http://h\u00e9te:8080", "non-ASCII"),
    ("http://user:secret@127.0.0.1", "user name or password"),
    ("http://127.0.0.1/?a=1", "query or fragment"),
    ("http://127.0.0.1/#x", "query or fragment"),
    ("ftp://127.0.0.1", "not an http:// URL"),
    (8080, "must be a string"),
])
def test_bad_url_is_an_input_error_naming_imds_url_never_a_crash(url, problem):
    with pytest.raises(_edge.ImdsInputError) as info:
        _edge.check_base_url(url)
    message = str(info.value)
    assert message.startswith("imds_url ") and problem in message, message
    assert "http://169.254.169.254" in message  # the form to use


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://127.0.0.1:8080/", "https://imds.test:443/vm/a",
                                 "http://[::1]:8080/vm/web_0", "http://169.254.169.254"])
def test_good_urls_pass_without_a_trailing_slash(url):
    assert _edge.check_base_url(url) == url.rstrip("/")


def test_the_environment_variable_is_checked_the_same_way_and_named():
    with pytest.raises(_edge.ImdsInputError, match=r"^\$AZURE_IMDS_URL \(environment of the managed host\) "):
        _imds.ImdsClient(environ={"AZURE_IMDS_URL": "http://127.0.0.1:99999"})


def test_a_bad_url_fails_before_any_request():
    with pytest.raises(_edge.ImdsInputError):
        make([DOC], base_url="http://127.0.0.1:port")


# -- the constructor and client_from_options ----------------------------------------------------

@pytest.mark.parametrize("name, value", [("request_timeout", 0), ("request_timeout", float("nan")),
                                         ("request_timeout", 1e308), ("retry_timeout", float("nan")),
                                         ("retry_timeout", -1), ("retry_timeout", float("inf"))])
def test_constructor_refuses_timeouts_out_of_range(name, value):
    with pytest.raises(_edge.ImdsInputError, match="^%s must be a number from" % name):
        _imds.ImdsClient(base_url="http://127.0.0.1:9", **{name: value})


def test_request_timeout_zero_is_refused_not_replaced_by_the_default():
    with pytest.raises(_edge.ImdsInputError, match=r"request_timeout must be a number from 0.1 to 86400 .*got 0\."):
        _imds.client_from_options({"imds_url": "http://127.0.0.1:9", "request_timeout": 0})


def test_options_left_out_take_the_defaults():
    client = _imds.client_from_options({"imds_url": "http://127.0.0.1:9"})
    assert (client.request_timeout, client.retry_timeout, client.api_version) == (
        _defaults.DEFAULT_REQUEST_TIMEOUT, _defaults.DEFAULT_RETRY_TIMEOUT, _defaults.DEFAULT_API_VERSION)


# -- one deadline per operation -----------------------------------------------------------------

def test_a_caller_deadline_bounds_the_first_attempt_and_every_retry():
    client, clock, transport = make([answer(503, b"")] * 100, retry_timeout=90)
    deadline = _edge.Deadline(4.0, clock, name="max_wait")
    with pytest.raises(_edge.ImdsTimeoutError, match="did not succeed within max_wait"):
        client.get_scheduled_events(deadline=deadline)
    assert clock.now - 1000.0 <= 4.0
    timeouts = [t for what, t in transport.log if what == "settimeout"]
    assert timeouts[0] == 4.0 and max(timeouts) <= 4.0


def test_the_client_s_own_retry_timeout_still_applies_within_a_longer_deadline():
    client, clock = make([answer(503, b"")] * 100, retry_timeout=3)[:2]
    with pytest.raises(_edge.ImdsTimeoutError, match="did not succeed within retry_timeout"):
        client.get_scheduled_events(deadline=_edge.Deadline(60.0, clock))
    assert clock.now - 1000.0 <= 3.0


def test_an_expired_deadline_makes_no_request():
    client, clock, transport = make([DOC])
    deadline = _edge.Deadline(0, clock)
    with pytest.raises(_edge.ImdsTimeoutError):
        client.get_scheduled_events(deadline=deadline)
    assert transport.requests == []


def test_every_operation_takes_a_deadline():
    client, clock, transport = make([answer(200, b"web_1"), answer(200, b""), DOC])
    deadline = _edge.Deadline(7.0, clock)
    assert client.get_vm_name(deadline=deadline) == "web_1"
    client.approve(["C7061BAC-AFDC-4513-B24B-AA5F13A16123"], deadline=deadline)
    assert client.get_scheduled_events(deadline=deadline).incarnation == 1
    assert [t for what, t in transport.log if what == "settimeout"][:2] == [7.0, 7.0]


def test_the_first_attempt_keeps_request_timeout_without_a_caller_deadline():
    client, transport = make([fail(READ_TIMEOUT), DOC], retry_timeout=2.0)[::2]
    client.get_scheduled_events()
    timeouts = [t for what, t in transport.log if what == "settimeout"]
    assert timeouts[0] == 120.0 and timeouts[-1] <= 2.0


# -- Retry-After ----------------------------------------------------------------------------------

def test_retry_after_is_capped():
    client, clock = make([answer(429, b"", headers=[("Retry-After", "3600")]), DOC], retry_timeout=300)[:2]
    client.get_scheduled_events()
    assert clock.sleeps == [_defaults.RETRY_AFTER_CAP]


def test_retry_after_past_the_deadline_says_so_plainly():
    client = make([answer(429, b"", headers=[("Retry-After", "3600")])], retry_timeout=10)[0]
    with pytest.raises(_edge.ImdsTimeoutError) as info:
        client.get_scheduled_events()
    message = str(info.value)
    assert "IMDS asked to retry after 3600s (capped at 60s) but only 10.0s of retry_timeout were left" in message
    assert "elapsed" not in message


def test_retry_after_below_the_cap_past_the_deadline_names_the_deadline():
    client, clock = make([answer(429, b"", headers=[("Retry-After", "30")])])[:2]
    with pytest.raises(_edge.ImdsTimeoutError, match=r"asked to retry after 30s but only 5.0s of max_wait were left"):
        client.get_scheduled_events(deadline=_edge.Deadline(5, clock, name="max_wait"))


@pytest.mark.parametrize("header, expected", [("nan", None), ("inf", math.inf), ("-5", 0.0), ("", None),
                                              ("Fri, 31 Dec 99999 23:59:59 GMT", None), ("soon", None)])
def test_retry_after_values_that_are_no_instruction(header, expected):
    assert _retry.parse_retry_after(header, 1700000000.0) == expected


def test_a_retry_after_of_zero_or_in_the_past_is_no_busy_loop():
    past = "Tue, 14 Nov 2023 22:00:00 GMT"  # before the fake wall clock
    steps = [answer(429, b"", headers=[("Retry-After", "0")]), answer(429, b"", headers=[("Retry-After", past)]), DOC]
    client, clock = make(steps)[:2]
    client.get_scheduled_events()
    assert clock.sleeps == [0.5, 0.5]


def test_policy_never_sleeps_past_the_cap():
    policy = _retry.RetryPolicy(rng=lambda: 1.0)
    assert policy.delay(_retry.RETRY_TABLE[("http", 429)], 1, retry_after=math.inf) == _defaults.RETRY_AFTER_CAP


# -- the body cap ---------------------------------------------------------------------------------

def test_an_announced_body_past_the_cap_is_refused_unread_and_not_retried():
    huge = answer(200, b"{}", headers=[("Content-Length", str(_defaults.MAX_BODY_BYTES + 1))])
    client, clock, transport = make([huge, DOC])
    with pytest.raises(_edge.ImdsTooLargeError) as info:
        client.get_scheduled_events()
    assert isinstance(info.value, _edge.ImdsResponseError)
    assert "%d bytes" % (_defaults.MAX_BODY_BYTES + 1) in str(info.value)
    assert "cap is %d bytes" % _defaults.MAX_BODY_BYTES in str(info.value)
    assert len(transport.requests) == 1 and clock.sleeps == []


def test_a_streamed_body_past_the_cap_is_refused():
    padded = b'{"DocumentIncarnation": 1, "Events": []}' + b" " * _defaults.MAX_BODY_BYTES
    client, transport = make([answer(200, padded), DOC])[::2]
    with pytest.raises(_edge.ImdsTooLargeError, match="sent more than 1048576 bytes"):
        client.get_scheduled_events()
    assert len(transport.requests) == 1


def test_a_body_just_under_the_cap_is_read():
    body = b'{"DocumentIncarnation": 4, "Events": []}'
    padded = body + b" " * (_defaults.MAX_BODY_BYTES - len(body))
    client = make([answer(200, padded)])[0]
    assert client.get_scheduled_events().incarnation == 4
