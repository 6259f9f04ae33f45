# -*- coding: utf-8 -*-
"""The IMDS request rules of IMDS.md, one test each."""

import socket

import pytest

from .helpers import SE, raw_exchange

NO_HEADER = b'{"error":"Bad request. Required metadata header not specified"}'
BAD_VERSION = (b'{"error":"Bad request. api-version is invalid or was not specified in the request. For more '
               b'information refer to aka.ms/azureimds","newest-versions":["2025-04-07","2024-07-17","2024-03-15"]}')


def test_valid_request_is_answered_with_json(start):
    _mock, client = start()
    answer = client.get()
    assert answer.status == 200
    assert answer.headers.getheader("Content-Type") == "application/json; charset=utf-8"
    assert answer.json() == {"DocumentIncarnation": 1, "Events": []}


def test_missing_metadata_header_is_400_with_exact_body(start):
    _mock, client = start()
    answer = client.get(metadata=False)
    assert (answer.status, answer.body) == (400, NO_HEADER)


@pytest.mark.parametrize("value", ["True", "TRUE", " true "])
def test_metadata_header_value_is_case_insensitive(start, value):
    _mock, client = start()
    assert client.get(metadata=False, headers={"metadata": value}).status == 200


@pytest.mark.parametrize("value", ["false", "1", "yes", ""])
def test_metadata_header_other_values_are_rejected(start, value):
    _mock, client = start()
    answer = client.get(metadata=False, headers={"Metadata": value})
    assert (answer.status, answer.body) == (400, NO_HEADER)


def test_x_forwarded_for_is_rejected(start):
    _mock, client = start()
    answer = client.get(headers={"X-Forwarded-For": "10.0.0.1"})
    assert answer.status == 400
    assert "X-Forwarded-For" in answer.json()["error"]


@pytest.mark.parametrize("query", ["", "?api-version=", "?api-version=2020-07-02", "?api-version=latest",
                                   "?API-VERSION=2020-07-01", "?Api-Version=2020-07-01"])
def test_missing_unknown_or_miscased_api_version_is_400_with_real_body(start, query):
    _mock, client = start()
    answer = client.get("/metadata/scheduledevents" + query)
    assert (answer.status, answer.body) == (400, BAD_VERSION)


def test_duplicate_query_parameters_are_rejected(start):
    _mock, client = start()
    answer = client.get("/metadata/scheduledevents?api-version=2020-07-01&api-version=2020-07-01")
    assert answer.status == 400
    assert "Duplicate" in answer.json()["error"]


@pytest.mark.parametrize("path", ["/metadata/ScheduledEvents?api-version=2020-07-01", "/Metadata/instance",
                                  "/metadata/nothing?api-version=2020-07-01", "/",
                                  "/metadata/scheduledevents/x?api-version=2020-07-01"])
def test_unknown_or_miscased_path_is_404(start, path):
    _mock, client = start()
    assert client.get(path).status == 404


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_405(start, method):
    _mock, client = start()
    answer = client.request(method, SE)
    assert answer.status == 405
    assert answer.headers.getheader("Allow") == "GET, POST"


def test_post_is_only_allowed_on_scheduledevents(start):
    _mock, client = start()
    answer = client.post("/metadata/instance?api-version=2021-02-01", body=b"{}")
    assert answer.status == 405
    assert answer.headers.getheader("Allow") == "GET"


def test_versions_needs_no_api_version(start):
    _mock, client = start()
    versions = client.get("/metadata/versions").json()["apiVersions"]
    assert versions[:2] == ["2017-03-01", "2017-04-02"]
    assert versions[-1] == "2025-04-07"
    assert versions == sorted(versions)


def test_versions_still_needs_the_metadata_header(start):
    _mock, client = start()
    assert client.get("/metadata/versions", metadata=False).body == NO_HEADER


@pytest.mark.parametrize("version", ["2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01",
                                     "2019-08-01", "2020-07-01", "2021-02-01", "2025-04-07"])
def test_every_known_version_is_served_by_scheduledevents(start, version):
    _mock, client = start()
    assert client.get("/metadata/scheduledevents?api-version=" + version).status == 200


def test_scheduled_events_only_version_is_not_an_instance_version(start):
    _mock, client = start()
    assert client.get("/metadata/instance?api-version=2020-07-01").body == BAD_VERSION
    assert client.get("/metadata/instance?api-version=2020-07-15").status == 200


def test_keep_alive_serves_many_requests_on_one_connection(start):
    _mock, client = start()
    sockets = set()
    for _attempt in range(20):
        assert client.get().status == 200
        sockets.add(id(client.conn.sock))
    assert len(sockets) == 1


def test_response_is_written_in_one_send_with_nodelay(start):
    """Headers and body arrive together: the first recv holds the whole answer."""
    mock, _client = start()
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(b"GET " + SE.encode() + b" HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n\r\n")
        data = sock.recv(65536)
    head, _sep, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert body == b'{"DocumentIncarnation":1,"Events":[]}'


def test_absolute_form_request_target_is_served(start):
    mock, _client = start()
    data = raw_exchange(mock, b"GET http://169.254.169.254" + SE.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                              b"Metadata: true\r\nConnection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in data
