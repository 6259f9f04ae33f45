# -*- coding: utf-8 -*-
"""The command line: port file, printed URLs, clean stop on signals, one-line errors (exit 2)."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import MOCK_PATH, spawn_mock

from .helpers import SE

try:
    import http.client as http_client
except ImportError:  # pragma: no cover
    http_client = None


def imds_get(handle, path, vm=None):
    conn = http_client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    try:
        conn.request("GET", ("/vm/" + vm if vm else "") + path, headers={"Metadata": "true"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def run_cli(*args):
    return subprocess.run([sys.executable, MOCK_PATH] + list(args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20, check=False)


def test_start_prints_urls_and_sigterm_exits_0():
    handle = spawn_mock(["--scenario", "live_migration", "--quiet"])
    status, body = imds_get(handle, SE, vm="WestNO_1")
    assert status == 200 and json.loads(body)["DocumentIncarnation"] == 1
    assert handle.stop() == 0
    base = "http://127.0.0.1:%d" % handle.port
    assert handle.stdout.splitlines() == [
        "mock_imds: listening on " + base,
        "mock_imds: vm WestNO_0 at %s/vm/WestNO_0" % base,
        "mock_imds: vm WestNO_1 at %s/vm/WestNO_1" % base,
        "mock_imds: control at %s/_mock/" % base,
    ]
    assert handle.stderr == ""


def test_sigint_exits_0_without_traceback():
    handle = spawn_mock(["--quiet"])
    handle.process.send_signal(signal.SIGINT)
    assert handle.process.wait(10) == 0
    handle.stop()
    assert "Traceback" not in handle.stderr


def test_one_log_line_per_request_on_stderr():
    handle = spawn_mock([])
    imds_get(handle, SE)
    imds_get(handle, "/metadata/nothing")
    handle.control("GET", "state")
    assert handle.stop() == 0
    lines = handle.stderr.splitlines()
    assert len(lines) == 3
    assert " vm0 \"GET /metadata/scheduledevents?api-version=2020-07-01\" 200 " in lines[0]
    assert " 404 " in lines[1] and "/_mock/state" in lines[2]


def test_fleet_speed_start_time_and_no_rate_limit():
    handle = spawn_mock(["--fleet", "avset:web_0,web_1", "--fleet", "zonal:z:z1", "--default-vm", "web_1",
                         "--start-time", "2022-04-11T22:11:58Z", "--speed", "1", "--no-rate-limit",
                         "--approval-mode", "all", "--quiet"])
    try:
        state = handle.control("GET", "state")
        assert list(state["vms"]) == ["web_0", "web_1", "z1"]
        assert state["config"]["approval_mode"] == "all" and state["config"]["rate_limit"] is False
        assert state["now"].startswith("2022-04-11T22:1")
        assert all(imds_get(handle, SE)[0] == 200 for _attempt in range(8))
        assert imds_get(handle, "/metadata/instance/compute/name?api-version=2021-02-01&format=text") == (
            200, b"web_1")
    finally:
        assert handle.stop() == 0


def test_rate_limit_is_on_by_default_in_the_cli():
    handle = spawn_mock(["--quiet"])
    try:
        statuses = [imds_get(handle, SE)[0] for _attempt in range(6)]
        assert 429 in statuses
    finally:
        handle.stop()


def test_scenario_from_a_file(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"description": "x", "fleet": {"default_vm": "solo"},
                                "events": [{"event_type": "Freeze", "resources": ["solo"]}]}))
    handle = spawn_mock(["--scenario", str(path), "--quiet"])
    try:
        status, body = imds_get(handle, SE)
        assert status == 200 and json.loads(body)["Events"][0]["Resources"] == ["solo"]
    finally:
        handle.stop()


def test_list_scenarios():
    result = run_cli("--list-scenarios")
    assert result.returncode == 0
    assert "live_migration" in result.stdout.decode() and "empty" in result.stdout.decode()


def test_port_in_use_is_one_line_exit_1():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        result = run_cli("--port", str(taken.getsockname()[1]))
    assert result.returncode == 1
    assert len(result.stderr.decode().splitlines()) == 1
    assert "--port" in result.stderr.decode()


BAD_FILE = '{"events": [{"event_type": "Reboot", "resources": ["ghost"]}]}'


@pytest.mark.parametrize("args,needle", [
    (["--port", "abc"], "--port"),
    (["--port", "70000"], "--port"),
    (["--bogus"], "--bogus"),
    (["--scenario", "nope"], "unknown scenario"),
    (["--bind", "0.0.0.0"], "--allow-remote"),
    (["--bind", "somehost"], "numeric"),
    (["--fleet", "rack:a,b"], "KIND"),
    (["--start-time", "yesterday"], "ISO 8601"),
    (["--speed", "0"], "speed"),
    (["--approval-mode", "some"], "--approval-mode"),
    (["--scenario", "@BAD_FILE"], "ghost"),
    (["--scenario", "@NOT_JSON"], "not readable JSON"),
    (["--fleet", "@NOT_JSON"], "not readable JSON"),
])
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, args, needle):
    files = {"@BAD_FILE": BAD_FILE, "@NOT_JSON": "{nope"}
    resolved = []
    for arg in args:
        if arg in files:
            path = os.path.join(str(tmp_path), "f.json")
            with open(path, "w") as handle:
                handle.write(files[arg])
            arg = path
        resolved.append(arg)
    result = run_cli(*resolved)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("mock_imds: error: ")
    assert needle in err
    assert result.stdout == b""
