# -*- coding: utf-8 -*-
"""The mock's own HTTP/1.x request parsing and connection handling."""

import socket

from .helpers import SE, raw_exchange


def head_of(data):
    return data.split(b"\r\n\r\n", 1)[0]


def test_http_1_0_closes_by_default(start):
    mock, _client = start()
    data = raw_exchange(mock, b"GET " + SE.encode() + b" HTTP/1.0\r\nMetadata: true\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in head_of(data)


def test_http_1_0_keep_alive_is_honoured(start):
    mock, _client = start()
    request = b"GET " + SE.encode() + b" HTTP/1.0\r\nMetadata: true\r\nConnection: keep-alive\r\n\r\n"
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        for _attempt in range(2):
            sock.sendall(request)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")


def test_pipelined_requests_are_answered_in_order(start):
    mock, _client = start()
    one = b"GET " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\n\r\n"
    last = b"GET /metadata/nothing HTTP/1.1\r\nMetadata: true\r\nConnection: close\r\n\r\n"
    data = raw_exchange(mock, one + one + last)
    assert data.count(b"HTTP/1.1 200 OK") == 2 and data.count(b"HTTP/1.1 404 Not Found") == 1


def test_bad_request_line_is_400(start):
    mock, _client = start()
    assert raw_exchange(mock, b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400 ")


def test_unsupported_http_version_is_505(start):
    mock, _client = start()
    assert raw_exchange(mock, b"GET / HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.1 505 ")


def test_header_without_colon_is_400(start):
    mock, _client = start()
    assert raw_exchange(mock, b"GET / HTTP/1.1\r\nMetadata true\r\n\r\n").startswith(b"HTTP/1.1 400")


def test_too_many_headers_is_431(start):
    mock, _client = start()
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(101))
    assert raw_exchange(mock, b"GET / HTTP/1.1\r\n" + headers + b"\r\n").startswith(b"HTTP/1.1 431")


def test_header_names_ignore_case_and_folded_values_join(start):
    mock, _client = start()
    data = raw_exchange(mock, b"GET " + SE.encode() + b" HTTP/1.1\r\nmETADATA:\r\n true\r\nConnection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK")


def test_first_of_repeated_headers_wins(start):
    mock, _client = start()
    data = raw_exchange(mock, b"GET " + SE.encode() + b" HTTP/1.1\r\nMetadata: false\r\nMetadata: true\r\n"
                              b"Connection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400")


def test_expect_100_continue(start):
    mock, _client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    body = ('{"StartRequests":[{"EventId":"%s"}]}' % event_id).encode()
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(b"POST " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    assert mock.state.event(event_id)["status"] == "Started"


def test_chunked_body_is_refused_with_411(start):
    mock, _client = start()
    data = raw_exchange(mock, b"POST " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\nTransfer-Encoding: chunked"
                              b"\r\n\r\n0\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 411")


def test_body_on_get_is_consumed_and_keep_alive_survives(start):
    mock, _client = start()
    one = b"GET " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\nContent-Length: 5\r\n\r\nhello"
    last = b"GET " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\nConnection: close\r\n\r\n"
    assert raw_exchange(mock, one + last).count(b"HTTP/1.1 200 OK") == 2


def test_bad_content_length_is_400(start):
    mock, _client = start()
    data = raw_exchange(mock, b"POST " + SE.encode() + b" HTTP/1.1\r\nMetadata: true\r\nContent-Length: x\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400")


def test_stop_closes_idle_keep_alive_connections(start):
    mock, client = start()
    assert client.get().status == 200
    mock.stop()
    client.conn.sock.settimeout(2)
    assert client.conn.sock.recv(1) == b""


def test_a_request_line_too_long_is_414_not_a_traceback(start, capfd):
    """Issue 22 item 11: a 70 KB request line used to end in an AttributeError traceback and a
    dropped connection. It is answered 414, and the mock goes on serving."""
    logged = []
    mock, client = start(log=logged.append)
    data = raw_exchange(mock, b"GET /" + b"a" * 70 * 1024 + b" HTTP/1.1\r\nMetadata: true\r\n\r\n")
    assert data != "reset" and data.startswith(b"HTTP/1.1 414 "), data[:200]
    assert b"Connection: close" in head_of(data)
    assert client.get(SE).status == 200
    assert "Traceback" not in capfd.readouterr().err
    assert any(" 414 " in line for line in logged), logged
