# -*- coding: utf-8 -*-
"""The control API refuses, whole and with JSON, what used to break it: non-finite and huge
numbers, bodies a web page can send, foreign Host and Origin; internal errors keep the
connection and the IMDS side alive."""

import json

import pytest

from .helpers import SE

try:
    import http.client as http_client
except ImportError:  # pragma: no cover
    http_client = None


def raw_control(mock, method, path, body=b"", content_type="application/json", host=None, origin=None, conn=None):
    own = conn is None
    conn = conn or http_client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.putrequest(method, "/_mock/" + path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", "127.0.0.1:%d" % mock.port if host is None else host)
        if content_type:
            conn.putheader("Content-Type", content_type)
        if origin:
            conn.putheader("Origin", origin)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read().decode("utf-8"))
    finally:
        if own:
            conn.close()


def unchanged(mock, before):
    assert json.dumps(mock.state.snapshot(), sort_keys=True) == before


@pytest.mark.parametrize("body", [b'{"event_type": "Reboot", "notice": 1e12}',
                                  b'{"event_type": "Reboot", "notice": 1e300}',
                                  b'{"event_type": "Reboot", "notice": NaN}',
                                  b'{"event_type": "Reboot", "at": Infinity}',
                                  b'{"event_type": "Reboot", "duration": 1e400}',
                                  b'{"event_type": "Reboot", "at": 315360001}',
                                  b'{"event_type": "Reboot", "duration_in_seconds": 1e30}'])
def test_an_event_with_a_hostile_number_is_refused_whole(start, body):
    mock, client = start()
    before = json.dumps(mock.state.snapshot(), sort_keys=True)
    status, answer = raw_control(mock, "POST", "events", body)
    assert status == 400 and answer["error"]
    unchanged(mock, before)
    assert mock.state.events() == []
    assert client.doc() == {"DocumentIncarnation": 1, "Events": []}


@pytest.mark.parametrize("path, body, names", [
    ("time/advance", b'{"seconds": NaN}', "NaN"),
    ("time/advance", b'{"seconds": Infinity}', "Infinity"),
    ("time/advance", b'{"seconds": 1e300}', "seconds"),
    ("time/advance", b'{"seconds": 1e400}', "1e400"),
    ("time/advance", b'{"seconds": "60"}', "seconds"),
    ("config", b'{"speed": 1e300}', "speed"),
    ("config", b'{"speed": -Infinity}', "Infinity"),
    ("config", b'{"rate_limit": 1e300}', "rate_limit"),
    ("config", b'{"self": 1}', "self"),
    ("reset", b'{"start_time": 1e300}', "start_time"),
    ("reset", b'{"start_time": "9999-12-31T23:59:59Z"}', "start_time"),
    ("reset", b'{"fleet": {"groups": [{"name": "g", "kind": [], "vms": ["a"]}]}}', "kind"),
    ("faults", b'{"kind": "status", "status": 503, "count": 1e300}', "count"),
    ("faults", b'{"kind": "redirect", "location": "http://x/\\r\\nX-Evil: 1"}', "location"),
    ("faults", b'{"kind": "status", "status": 429, "retry_after": "1\\r\\nX: y"}', "retry_after"),
    ("faults", b'{"kind": "drop", "vm": ["web_0"]}', "vm"),
    ("scenario", b'{"config": 1e300}', "config"),
    ("scenario", b'{"name": "/etc/hostname"}', "unknown scenario"),
])
def test_hostile_values_are_refused_and_change_nothing(start, path, body, names):
    mock, client = start(start_time="2024-01-01T00:00:00Z")
    mock.add_event(event_type="Reboot")
    before = json.dumps(mock.state.snapshot(), sort_keys=True)
    status, answer = raw_control(mock, "POST", path, body)
    assert status in (400, 404) and names in answer["error"], answer
    unchanged(mock, before)
    assert client.doc()["DocumentIncarnation"] == 2
    # A plain reset still works afterwards.
    assert raw_control(mock, "POST", "reset", b"{}")[0] == 200


def test_the_clock_stays_printable_after_the_largest_advances(start):
    mock, client = start(start_time="2024-01-01T00:00:00Z")
    refused = 0
    for _attempt in range(1000):
        status, _answer = raw_control(mock, "POST", "time/advance", b'{"seconds": 315360000}')
        refused += status == 400
    assert refused > 0
    assert raw_control(mock, "GET", "state", content_type=None)[1]["now"].startswith("8")
    assert client.doc()["Events"] == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None, "application/jsonx"])
def test_a_body_that_is_not_declared_json_is_refused(start, content_type):
    # A web page may send these cross-origin without a CORS preflight.
    mock, _client = start()
    status, answer = raw_control(mock, "POST", "events", b'{"event_type": "Reboot"}', content_type=content_type)
    assert status == 400 and "Content-Type: application/json" in answer["error"]
    assert mock.state.events() == []


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"])
def test_json_content_types_are_accepted(start, content_type):
    mock, _client = start()
    status, _answer = raw_control(mock, "POST", "events", b'{"event_type": "Reboot"}', content_type=content_type)
    assert status == 201


def test_host_must_name_an_address_the_mock_listens_on(start):
    mock, _client = start()
    for host in ("evil.example:%d" % mock.port, "127.0.0.1:1", "", "localhost", "127.0.0.2:%d" % mock.port):
        status, answer = raw_control(mock, "POST", "reset", b"{}", host=host)
        assert status == 400 and "Host" in answer["error"], host
    for host in ("127.0.0.1:%d" % mock.port, "localhost:%d" % mock.port, "[::1]:%d" % mock.port,
                 "LOCALHOST:%d" % mock.port):
        assert raw_control(mock, "POST", "reset", b"{}", host=host)[0] == 200, host


def test_a_foreign_origin_is_refused_even_without_a_body(start):
    mock, _client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    status, answer = raw_control(mock, "POST", "events/%s/start" % event_id, content_type=None,
                                 origin="http://evil.example")
    assert status == 400 and "Origin" in answer["error"]
    assert mock.state.event(event_id)["status"] == "Scheduled"
    own = "http://127.0.0.1:%d" % mock.port
    assert raw_control(mock, "POST", "events/%s/start" % event_id, content_type=None, origin=own)[0] == 200


def test_the_imds_side_ignores_host_and_content_type(start):
    # Clients of the real service send Host: 169.254.169.254; approvals need no Content-Type.
    mock, client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    assert client.get(headers={"Host": "169.254.169.254"}).status == 200
    body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
    assert client.post(body=body, headers={"Content-Type": "text/plain", "Host": "169.254.169.254"}).status == 200
    assert mock.state.event(event_id)["status"] == "Started"


def test_an_internal_error_is_json_and_keeps_the_connection(start, monkeypatch):
    mock, _client = start()

    def broken():
        raise KeyError("boom")

    monkeypatch.setattr(mock.state, "snapshot", broken)
    conn = http_client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        status, answer = raw_control(mock, "GET", "state", content_type=None, conn=conn)
        assert status == 500 and "boom" in answer["error"]
        conn.request("GET", SE, headers={"Metadata": "true"})
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["Events"]) == (200, [])
    finally:
        conn.close()


def test_an_internal_error_on_the_imds_side_is_answered(start, monkeypatch):
    mock, client = start()

    def broken(*_args):
        raise RuntimeError("imds boom")

    monkeypatch.setattr(mock.state, "respond", broken)
    answer = client.get()
    assert answer.status == 500 and "imds boom" in answer.json()["error"]
    monkeypatch.undo()
    assert client.get().status == 200
