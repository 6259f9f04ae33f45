# -*- coding: utf-8 -*-
"""5 requests per second per VM, sliding window, on by default."""


def test_sixth_request_within_a_second_is_429(start, clock):
    _mock, client = start(rate_limit=True)
    assert [client.get().status for _attempt in range(6)] == [200] * 5 + [429]
    clock.tick(0.999)
    assert client.get().status == 429
    clock.tick(0.002)
    assert client.get().status == 200


def test_window_slides(start, clock):
    _mock, client = start(rate_limit=True)
    for _attempt in range(3):
        assert client.get().status == 200
    clock.tick(0.5)
    assert [client.get().status for _attempt in range(3)] == [200, 200, 429]
    clock.tick(0.5)  # the first three left the window
    assert [client.get().status for _attempt in range(4)] == [200, 200, 200, 429]


def test_limit_is_per_vm_across_all_paths(start):
    _mock, client = start(rate_limit=True, fleet={"groups": [{"name": "z", "kind": "zonal", "vms": ["a", "b"]}]})
    for path in ("/metadata/scheduledevents?api-version=2020-07-01", "/metadata/versions",
                 "/metadata/instance?api-version=2021-02-01", "/metadata/nothing", "/metadata/versions"):
        assert client.get(path, vm="a").status != 429
    assert client.get(vm="a").status == 429
    assert client.get(vm="b").status == 200


def test_rate_limit_is_on_by_default(clock):
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds

    assert mock_imds.MockState(clock=clock).config()["rate_limit"] is True


def test_rate_limit_switched_off_and_on_at_run_time(start):
    mock, client = start(rate_limit=True)
    mock.state.configure(rate_limit=False)
    assert all(client.get().status == 200 for _attempt in range(20))
    mock.state.configure(rate_limit=True)
    assert [client.get().status for _attempt in range(6)][-1] == 429


def test_429_body_and_audit(start):
    mock, client = start(rate_limit=True)
    answers = [client.get() for _attempt in range(6)]
    assert answers[-1].json() == {"error": "Too many requests"}
    assert [r["status"] for r in mock.audit()["requests"]] == [200] * 5 + [429]


def test_control_api_is_never_rate_limited(start):
    _mock, client = start(rate_limit=True)
    for _attempt in range(10):
        assert client.get("/_mock/state", metadata=False).status == 200
    assert client.get().status == 200
