"""The IMDS client over real HTTP against the mock on loopback: proxies, redirects, timeouts, schemas."""

import socket
import time
import threading

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _event, _imds
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock


@pytest.fixture(name="mock")
def fixture_mock():
    with start_mock(fleet={"groups": [{"name": "avset1", "kind": "availability_set", "vms": ["web_1", "web_10"]}]},
                    rate_limit=False) as handle:
        yield handle


def client_for(url, **kwargs):
    clock = FakeClock()
    kwargs.setdefault("retry_timeout", 30)
    return _imds.ImdsClient(base_url=url, clock=clock, sleep=clock.sleep, environ={}, **kwargs)


def requests_seen(mock, vm=None):
    audit = mock.control("GET", "audit" + ("?vm=%s" % vm if vm else ""))
    return [r for r in audit["requests"] if r["path"].startswith("/metadata")
            or "/metadata/" in r["path"]]


class TrapProxy:
    """A loopback listener that counts every connection: the client must never come here."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _addr = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def test_proxy_variables_are_ignored_and_the_trap_proxy_receives_nothing(mock, monkeypatch):
    trap = TrapProxy()
    try:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, trap.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = _imds.ImdsClient(base_url=mock.url)
        assert client.get_scheduled_events().incarnation >= 1
        assert client.get_vm_name() == "vm0"
        client.approve(["C7061BAC-AFDC-4513-B24B-AA5F13A16123"])
    finally:
        trap.close()
    assert trap.connections == 0
    assert len(requests_seen(mock)) == 3


def test_redirect_from_a_misconfigured_proxy_is_refused_not_followed(mock):
    mock.control("POST", "faults", {"kind": "redirect", "status": 302})
    client = client_for(mock.url)
    with pytest.raises(_edge.ImdsRedirectError) as info:
        client.get_scheduled_events()
    assert "HTTP 302" in str(info.value) and "proxy or redirect is in the way" in str(info.value)
    assert len(requests_seen(mock)) == 1


def test_read_timeout_is_the_request_timeout_not_the_connect_timeout(mock):
    mock.control("POST", "faults", {"kind": "slow", "delay": 2.0})
    client = client_for(mock.url, request_timeout=0.3, retry_timeout=0)
    with pytest.raises(_edge.ImdsTimeoutError) as info:
        client.get_scheduled_events()
    assert "no complete answer within 0.3s" in str(info.value)
    assert "2 minutes" in str(info.value)  # the hint about the slow first call


def test_nothing_listening_fails_fast_as_not_an_azure_vm():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this loopback port now
    client = client_for("http://127.0.0.1:%d" % port)
    with pytest.raises(_edge.ImdsUnavailableError) as info:
        client.get_scheduled_events()
    assert "no Instance Metadata Service at http://127.0.0.1:%d: is this an Azure VM?" % port in str(info.value)
    assert client._clock() - 1000.0 <= _defaults.CONNECT_RETRY_WINDOW + 1  # pylint: disable=protected-access


def test_410_burst_from_the_service_is_retried_through(mock):
    mock.control("POST", "faults", {"kind": "status", "status": 410, "count": 3})
    client = client_for(mock.url)
    assert client.get_scheduled_events().incarnation >= 1
    assert [r["status"] for r in requests_seen(mock)] == [410, 410, 410, 200]


def test_429_with_retry_after_from_the_service_is_honoured(mock):
    mock.control("POST", "faults", {"kind": "status", "status": 429, "count": 1, "retry_after": 3})
    clock = FakeClock()
    client = _imds.ImdsClient(base_url=mock.url, clock=clock, sleep=clock.sleep, environ={})
    client.get_scheduled_events()
    assert clock.sleeps == [3.0]


@pytest.mark.parametrize("kind", ["empty_body", "malformed_json", "drop", "reset"])
def test_broken_answers_are_retried(mock, kind):
    mock.control("POST", "faults", {"kind": kind, "count": 1})
    client = client_for(mock.url)
    assert client.get_scheduled_events().incarnation >= 1
    assert client.last_failures[0].kind in ("bad_body", "dropped")


@pytest.mark.parametrize("api_version", _defaults.API_VERSIONS)
def test_every_api_version_reads_the_same_event(mock, api_version):
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["web_1"], "notice": 900,
                                    "description": "live migration", "duration_in_seconds": 5})
    client = client_for(mock.vm_url("web_10"), api_version=api_version)
    document = client.get_scheduled_events()
    event = document.events[0]
    assert event["resources"] == ["web_1"]  # no 2017-03-01 underscore left
    assert event["event_type"] == "Freeze" and event["event_status"] == "Scheduled"
    assert event["not_before"].endswith("Z")
    assert event["description"] == ("live migration" if api_version >= "2019-04-01" else None)
    assert event["event_source"] == ("Platform" if api_version >= "2019-08-01" else None)
    assert event["duration_in_seconds"] == (5 if api_version >= "2020-07-01" else None)
    assert not _event.affects(event, "web_10") and _event.affects(event, "web_1")


def test_approval_is_one_post_naming_every_id(mock):
    ids = [mock.control("POST", "events", {"event_type": t, "resources": ["web_1"]})["event_id"]
           for t in ("Reboot", "Freeze")]
    client = client_for(mock.vm_url("web_1"))
    client.approve([i.lower() for i in ids])
    approvals = mock.control("GET", "audit")["approvals"]
    assert len(approvals) == 1 and approvals[0]["vm"] == "web_1"
    assert sorted(e.upper() for e in approvals[0]["event_ids"]) == sorted(ids)
    statuses = set(e["event_status"] for e in client.get_scheduled_events().events)
    assert statuses == {"Started"}


def test_vm_name_comes_from_the_vm_url(mock):
    assert client_for(mock.vm_url("web_10")).get_vm_name() == "web_10"


def test_keep_alive_connection_is_reused(mock):
    client = client_for(mock.url)
    for _index in range(5):
        client.get_scheduled_events()
    assert client._connection is not None  # pylint: disable=protected-access
    assert len(requests_seen(mock)) == 5


# -- one deadline per request, a size cap, malformed documents (issue 10) ------------------------

def test_a_trickling_server_is_given_up_within_the_request_deadline_not_per_read(mock):
    # One byte every 0.3 s: each read is quick, the whole answer would take minutes. The client's
    # clock is the real one here, since the deadline is what is tested.
    mock.control("POST", "faults", {"kind": "trickle", "interval": 0.3, "count": 1})
    client = _imds.ImdsClient(base_url=mock.url, request_timeout=1.0, retry_timeout=0, environ={})
    started = time.monotonic()
    with pytest.raises(_edge.ImdsTimeoutError) as info:
        client.get_scheduled_events()
    elapsed = time.monotonic() - started
    assert "no complete answer within 1.0s" in str(info.value)
    assert elapsed < 15.0, "a per-read timeout would have waited for the whole trickle"
    assert len(requests_seen(mock)) == 1


def test_a_trickle_is_bounded_by_the_caller_deadline_and_a_retry_then_succeeds(mock):
    mock.control("POST", "faults", {"kind": "trickle", "interval": 0.3, "count": 1})
    client = _imds.ImdsClient(base_url=mock.url, request_timeout=1.0, retry_timeout=20, environ={})
    deadline = _edge.Deadline(20.0)
    assert client.get_scheduled_events(deadline=deadline).incarnation >= 1
    assert [f.kind for f in client.last_failures] == ["read_timeout"]
    assert len(requests_seen(mock)) == 2


def test_an_oversize_answer_is_a_clear_error_and_not_retried(mock):
    mock.control("POST", "faults", {"kind": "oversize", "size": 3 * 1024 * 1024})
    client = client_for(mock.url)
    with pytest.raises(_edge.ImdsTooLargeError) as info:
        client.get_scheduled_events()
    assert "cap is 1048576 bytes" in str(info.value)
    assert len(requests_seen(mock)) == 1


@pytest.mark.parametrize("body, field", [
    ('{"DocumentIncarnation": 2, "Events": [{"EventId": 12345, "EventStatus": "Scheduled", "Resources": ["vm0"]}]}',
     "EventId"),
    ('{"DocumentIncarnation": 2, "Events": [{"EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "Resources": 5}]}',
     "Resources"),
    ('{"DocumentIncarnation": 2, "Events": [{"EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", '
     '"NotBefore": "soon"}]}', "NotBefore"),
])
def test_a_malformed_document_over_http_is_read_with_a_warning(mock, body, field):
    mock.control("POST", "faults", {"kind": "status", "status": 200, "body": body, "count": 1})
    scheduled = client_for(mock.url).get_scheduled_events()
    assert scheduled.incarnation == 2 and len(scheduled.events) == 1
    assert len(scheduled.warnings) == 1 and (": %s " % field) in scheduled.warnings[0]
