# -*- coding: utf-8 -*-
"""mock_imds.testing (roles/mock_imds/files/mock_imds/testing.py): the handle every suite uses."""

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import FakeClock, MockControlError, spawn_mock, start_mock


def test_start_mock_in_process_handle():
    with start_mock(scenario="user_reboot", rate_limit=False, clock=FakeClock()) as handle:
        assert handle.url == "http://127.0.0.1:%d" % handle.port
        assert handle.vm_url("vm0") == handle.url + "/vm/vm0"
        state = handle.control("GET", "state")
        assert state["scenario"] == "user_reboot"
        assert handle.control("POST", "/_mock/time/advance", {"seconds": 900})["advanced"] == 900
        assert handle.mock.state.events()[0]["status"] == "Started"
        with pytest.raises(MockControlError) as info:
            handle.control("POST", "events", {"event_type": "Reboot", "resources": ["ghost"]})
        assert info.value.status == 400 and "ghost" in info.value.body["error"]


def test_spawn_mock_subprocess_handle():
    handle = spawn_mock(["--scenario", "spot_preempt", "--quiet"])
    with handle:
        assert handle.process.poll() is None
        events = handle.control("GET", "events")
        assert events[0]["event_type"] == "Preempt" and events[0]["notice"] == 30
    assert handle.returncode == 0
    assert "mock_imds: vm myspotvm at %s/vm/myspotvm" % handle.url in handle.stdout


def test_spawn_mock_reports_a_failed_start():
    with pytest.raises(RuntimeError, match="unknown scenario"):
        spawn_mock(["--scenario", "nope"])
