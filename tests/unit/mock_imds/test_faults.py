# -*- coding: utf-8 -*-
"""Fault injection: every kind, count, duration, filters; the control API is never faulted."""

import json
import socket
import time

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds

from .helpers import SE, raw_exchange

REQUEST = b"GET " + SE.encode() + b" HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n\r\n"


@pytest.mark.parametrize("status", [404, 410, 500, 502, 503, 504])
def test_status_fault_answers_that_status_with_a_json_error(start, status):
    mock, client = start()
    mock.add_fault(kind="status", status=status)
    answer = client.get()
    assert answer.status == status
    assert "error" in answer.json()
    assert answer.headers.getheader("Content-Type") == "application/json; charset=utf-8"


def test_status_429_with_retry_after(start):
    mock, client = start()
    mock.add_fault(kind="status", status=429, retry_after=7)
    answer = client.get()
    assert (answer.status, answer.headers.getheader("Retry-After")) == (429, "7")
    assert answer.json() == {"error": "Too many requests"}


def test_status_fault_with_custom_body(start):
    mock, client = start()
    mock.add_fault(kind="status", status=400, body='{"error":"Fail to directly connect"}')
    assert client.get().body == b'{"error":"Fail to directly connect"}'


def test_count_limits_the_affected_requests(start):
    mock, client = start()
    mock.add_fault(kind="status", status=410, count=2)
    assert [client.get().status for _attempt in range(3)] == [410, 410, 200]
    assert mock.state.faults() == []


def test_duration_is_real_seconds_of_the_injected_clock(start, clock):
    mock, client = start(speed=1000)
    mock.add_fault(kind="status", status=500, duration=70)
    clock.tick(69.9)
    assert client.get().status == 500
    clock.tick(0.1)
    assert client.get().status == 200


def test_first_call_delay_delays_only_the_first_scheduledevents_get_per_vm(start):
    mock, client = start(fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]})
    mock.add_fault(kind="first_call_delay", delay=0.05)
    timings = []
    for vm, path in (("a", "/metadata/versions"), ("a", SE), ("a", SE), ("b", SE)):
        began = time.monotonic()
        assert client.get(path, vm=vm).status == 200
        timings.append(time.monotonic() - began)
    assert timings[0] < 0.04 and timings[1] >= 0.05 and timings[2] < 0.04 and timings[3] >= 0.05


def test_first_call_delay_answers_with_the_state_after_the_delay(start):
    mock, client = start()
    mock.add_fault(kind="first_call_delay", delay=0.02)
    assert client.doc()["DocumentIncarnation"] == 1
    assert mock.audit()["requests"][0]["status"] == 200


def test_slow_delays_every_answer(start):
    mock, client = start()
    mock.add_fault(kind="slow", delay=0.02, count=2)
    for _attempt in range(2):
        began = time.monotonic()
        assert client.get().status == 200
        assert time.monotonic() - began >= 0.02
    # Spent after two answers, so the third is not delayed: the mock's record says so, not a stopwatch
    # (on a busy machine any answer can take 0.02 s).
    assert mock.state.snapshot()["faults"] == []
    assert client.get().status == 200


def test_slow_combines_with_a_status_fault(start):
    mock, client = start()
    mock.add_fault(kind="slow", delay=0.02)
    mock.add_fault(kind="status", status=503)
    began = time.monotonic()
    assert client.get().status == 503
    assert time.monotonic() - began >= 0.02


def test_drop_closes_without_answering(start):
    mock, _client = start()
    mock.add_fault(kind="drop")
    assert raw_exchange(mock, REQUEST) == b""
    assert mock.audit()["requests"][0]["fault"] == "drop"
    assert mock.audit()["requests"][0]["status"] is None


def test_reset_sends_a_tcp_rst(start):
    mock, _client = start()
    mock.add_fault(kind="reset")
    assert raw_exchange(mock, REQUEST) == "reset"


def test_empty_body_is_200_with_nothing(start):
    mock, client = start()
    mock.add_fault(kind="empty_body")
    answer = client.get()
    assert (answer.status, answer.body) == (200, b"")


def test_malformed_json_is_a_truncated_document(start):
    mock, client = start()
    mock.add_event(event_type="Reboot")
    full = client.get().body
    mock.add_fault(kind="malformed_json", count=1)
    answer = client.get()
    assert answer.status == 200
    assert answer.body and full.startswith(answer.body) and len(answer.body) < len(full)
    with pytest.raises(ValueError):
        json.loads(answer.body.decode())


@pytest.mark.parametrize("status", [302, 307])
def test_redirect_points_elsewhere(start, status):
    mock, client = start()
    mock.add_fault(kind="redirect", status=status)
    answer = client.get()
    assert answer.status == status
    location = answer.headers.getheader("Location")
    assert location.startswith(mock.url + "/_mock/redirect-target")
    followed = client.get(location[len(mock.url):])
    assert followed.status == 400 and "never follow redirects" in followed.json()["error"]
    trap = mock.audit()["requests"][-1]
    assert (trap["vm"], trap["status"], trap["path"]) == (None, 400, location[len(mock.url):])


def test_redirect_to_a_given_location(start):
    mock, client = start()
    mock.add_fault(kind="redirect", location="http://proxy.invalid:3128/")
    assert client.get().headers.getheader("Location") == "http://proxy.invalid:3128/"


def test_per_vm_fault_leaves_other_vms_alone(start):
    mock, client = start(fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]})
    mock.add_fault(kind="status", status=500, vm="a")
    assert (client.get(vm="a").status, client.get(vm="b").status) == (500, 200)


def test_paths_filter(start):
    mock, client = start()
    mock.add_fault(kind="status", status=500, paths=["scheduledevents"])
    assert client.get().status == 500
    assert client.get("/metadata/instance/compute/name?api-version=2021-02-01&format=text").status == 200


def test_paths_filter_covers_sub_paths(start):
    mock, client = start()
    mock.add_fault(kind="status", status=404, paths=["/metadata/instance"])
    assert client.get("/metadata/instance/compute/name?api-version=2021-02-01&format=text").status == 404
    assert client.get().status == 200


def test_methods_filter(start):
    mock, client = start()
    event_id = mock.add_event(event_type="Reboot")["event_id"]
    mock.add_fault(kind="status", status=500, methods=["POST"])
    assert client.get().status == 200
    assert client.approve("vm0", event_id).status == 500
    assert client.doc()["Events"][0]["EventStatus"] == "Scheduled"


def test_control_api_is_never_faulted(start):
    mock, client = start()
    mock.add_fault(kind="status", status=500)
    assert client.get("/_mock/state", metadata=False).status == 200


def test_clear_one_all_and_per_vm(start):
    mock, client = start(fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]})
    first = mock.add_fault(kind="status", status=500, vm="a")
    mock.add_fault(kind="status", status=500, vm="b")
    mock.add_fault(kind="slow", delay=0.001)
    assert mock.state.clear_faults(fault_id=first) == {"removed": 1}
    assert mock.clear_faults(vm="b") == {"removed": 1}
    assert [f["kind"] for f in mock.state.faults()] == ["slow"]
    assert mock.clear_faults() == {"removed": 1}
    assert client.get(vm="a").status == 200


@pytest.mark.parametrize("spec,message", [
    ({"kind": "explode"}, "fault kind"),
    ({"kind": "status"}, "needs status"),
    ({"kind": "slow"}, "needs delay"),
    ({"kind": "slow", "delay": 121}, "<= 120"),
    ({"kind": "drop", "status": 500}, "only applies"),
    ({"kind": "redirect", "status": 200}, "redirect status"),
    ({"kind": "drop", "count": 0}, ">= 1"),
    ({"kind": "drop", "vm": "nobody"}, "not in the fleet"),
    ({"kind": "drop", "paths": "scheduledevents"}, "paths"),
    ({"kind": "drop", "colour": "red"}, "unknown key"),
])
def test_bad_fault_specs_are_named(start, spec, message):
    mock, _client = start()
    with pytest.raises(mock_imds.MockError, match=message):
        mock.add_fault(spec)


def test_trickle_sends_the_real_answer_one_byte_at_a_time(start):
    mock, _client = start()
    mock.add_fault(kind="trickle", interval=0.001, count=1)
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(REQUEST)
        reads = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reads.append(chunk)
    answer = b"".join(reads)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["Events"] == []
    # Byte by byte: far more reads than a normal answer's one or two.
    assert len(reads) > 50
    assert mock.state.audit()["requests"][-1]["fault"] == "trickle"


def test_oversize_pads_a_valid_document_to_size_bytes(start):
    mock, client = start()
    mock.add_fault(kind="oversize", size=3 * 1024 * 1024, count=1)
    answer = client.get()
    assert answer.status == 200
    assert len(answer.body) == 3 * 1024 * 1024
    assert answer.json()["Events"] == []
    assert len(client.get().body) < 1024


@pytest.mark.parametrize("spec, named", [
    ({"kind": "trickle"}, "interval"),
    ({"kind": "trickle", "interval": 0}, "interval"),
    ({"kind": "trickle", "interval": 31}, "interval"),
    ({"kind": "status", "status": 500, "interval": 1}, "interval"),
    ({"kind": "oversize", "size": 0}, "size"),
    ({"kind": "oversize", "size": 2 ** 40}, "size"),
    ({"kind": "drop", "size": 10}, "size"),
])
def test_trickle_and_oversize_options_are_checked(start, spec, named):
    mock, _client = start()
    with pytest.raises(mock_imds.MockError) as caught:
        mock.add_fault(**spec)
    assert named in str(caught.value)
