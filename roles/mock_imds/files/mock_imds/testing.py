# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the mock from a test suite (pytest or any other): in-process or as a subprocess, same handle.

    from mock_imds.testing import FakeClock, start_mock, spawn_mock

    with start_mock(scenario="live_migration", rate_limit=False) as mock:
        url = mock.vm_url("WestNO_0")           # http://127.0.0.1:PORT/vm/WestNO_0
        mock.control("POST", "time/advance", {"seconds": 900})

    with spawn_mock(["--scenario", "user_reboot", "--quiet"]) as mock:
        state = mock.control("GET", "state")

Both listen on 127.0.0.1 on a free port. This module ships with the collection, beside the rest of
the mock (roles/mock_imds/files/mock_imds/): import it as mock_imds.testing with roles/mock_imds/files on
the import path, or by the collection's name (ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing).
"""

from __future__ import print_function

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .server import MockImds

# The package directory: `python3 MOCK_PATH ...` runs its __main__.py.
MOCK_PATH = os.path.dirname(os.path.abspath(__file__))


class FakeClock(object):
    """A real-time stand-in to pass as MockImds(clock=...): it moves only when told, so nothing sleeps.
    The mock reads it for simulated time (scaled by speed), the rate limit and fault durations."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def tick(self, seconds):
        self.now += seconds


class MockControlError(Exception):
    """A control call answered with an HTTP error; status and the parsed body are kept."""

    def __init__(self, method, path, status, body):
        super(MockControlError, self).__init__("%s %s -> HTTP %s: %s" % (method, path, status, body))
        self.status = status
        self.body = body


class MockHandle(object):
    """A running mock: url, port, vm_url(name), control(method, path, body), stop()."""

    def __init__(self, host, port, mock=None, process=None, workdir=None, arm_url=None, ca_path=None):
        self.host = host
        self.port = port
        self.arm_url = arm_url    # https://127.0.0.1:PORT, the control-plane face (None without it)
        self.ca_path = ca_path    # the test CA to trust (REQUESTS_CA_BUNDLE / connection_verify)
        self.mock = mock          # the in-process MockImds (start_mock) or None
        self.process = process    # the Popen (spawn_mock) or None
        self.returncode = None
        self.stdout = None
        self.stderr = None
        self._workdir = workdir

    @property
    def url(self):
        return "http://%s:%d" % (self.host, self.port)

    @property
    def login_url(self):
        """The authority for azure-identity (with disable_instance_discovery=True)."""
        return None if self.arm_url is None else self.arm_url + "/login/"

    @property
    def arm_scope(self):
        """The token scope of the mock's Resource Manager."""
        return None if self.arm_url is None else self.arm_url + "/.default"

    def vm_url(self, name):
        return "%s/vm/%s" % (self.url, name)

    def control(self, method, path, body=None, timeout=10):
        """Call the control API (path "state", "events", "/_mock/audit?since=3", ...): parsed JSON back.
        Raises MockControlError for an HTTP error status."""
        if not path.startswith("/"):
            path = "/_mock/" + path
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode("utf-8")
            headers = {} if data is None else {"Content-Type": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        parsed = json.loads(raw.decode("utf-8")) if raw else None
        if response.status >= 400:
            raise MockControlError(method, path, response.status, parsed)
        return parsed

    def add_eventgrid_subscriber(self, url, **options):
        """Register an Event Grid webhook (schema, max_events_per_batch, ca_file, headers, name, ...): returns
        the subscriber's view once its validation handshake passed; raises MockControlError if it failed."""
        return self.control("POST", "eventgrid/subscribers", dict(options, url=url), timeout=60)

    def eventgrid_deliveries(self, since=0, subscriber=None):
        """The Event Grid audit: one record per attempt (handshake or notification) after seq since."""
        query = "?since=%d" % since + ("&subscriber=%s" % subscriber if subscriber else "")
        return self.control("GET", "eventgrid/deliveries" + query)["deliveries"]

    def wait_eventgrid(self, count, subscriber=None, kind="notification", outcome=None, since=0, timeout=30.0):
        """Wait until the Event Grid audit holds count records of kind (and outcome, if given) after seq
        since; returns them. The delivery thread works in the background: this polls its audit log, with
        a generous real timeout that only a broken delivery reaches (then AssertionError shows the log)."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.eventgrid_deliveries(since, subscriber)
            hits = [r for r in records if r.get("kind") == kind and (outcome is None or r.get("outcome") == outcome)]
            if len(hits) >= count:
                return hits
            if time.monotonic() > deadline:
                raise AssertionError("waited %s s for %d Event Grid %s records (outcome %s), got %d: %s"
                                     % (timeout, count, kind, outcome, len(hits), json.dumps(records)[:4000]))
            time.sleep(0.005)

    def stop(self, timeout=10):
        """Stop the mock. For a subprocess: SIGTERM, wait, keep returncode, stdout and stderr."""
        if self.mock is not None:
            self.mock.stop()
            return None
        if self.process is None or self.returncode is not None:
            return self.returncode
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.returncode = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.returncode = self.process.wait(timeout)
        for name in ("stdout", "stderr"):
            with open(os.path.join(self._workdir, name), "rb") as handle:
                setattr(self, name, handle.read().decode("utf-8", "replace"))
        shutil.rmtree(self._workdir, ignore_errors=True)
        return self.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_mock(**kwargs):
    """Start MockImds in this process (background thread) on 127.0.0.1, port 0.

    kwargs go to MockImds: scenario, fleet, default_vm, speed, start_time, rate_limit,
    approval_mode, unknown_event_ids, clock, ... The handle's .mock is the MockImds itself."""
    kwargs.setdefault("bind", "127.0.0.1")
    kwargs.setdefault("port", 0)
    if kwargs.pop("arm", False):
        kwargs.setdefault("arm_port", 0)
    mock = MockImds(**kwargs).start()
    return MockHandle(mock.bind, mock.port, mock=mock, arm_url=mock.arm_url, ca_path=mock.ca_path)


def spawn_mock(args=(), timeout=10, arm=False):
    """Run `python MOCK_PATH ARGS --port 0 --port-file F` and wait until it listens.
    arm=True adds the control-plane face (--arm-port 0, --tls-dir in the handle's work directory)."""
    args = list(args)
    workdir = tempfile.mkdtemp(prefix="mock_imds_")
    port_file = os.path.join(workdir, "port")
    arm_file = os.path.join(workdir, "arm_port")
    command = [sys.executable, MOCK_PATH]
    if "--port" not in args:
        command += ["--port", "0"]
    if arm:
        command += ["--arm-port", "0", "--tls-dir", os.path.join(workdir, "tls"), "--arm-port-file", arm_file]
    command += ["--port-file", port_file] + args
    with open(os.path.join(workdir, "stdout"), "wb") as out, open(os.path.join(workdir, "stderr"), "wb") as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    handle = MockHandle("127.0.0.1", None, process=process, workdir=workdir)
    deadline = time.monotonic() + timeout
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            handle.stop()
            raise RuntimeError("mock_imds did not start (exit %s): %s" % (handle.returncode, handle.stderr.strip()))
        time.sleep(0.01)
    with open(port_file) as handle_file:
        handle.port = int(handle_file.read().strip())
    if arm:
        with open(arm_file) as handle_file:
            handle.arm_url = "https://127.0.0.1:%d" % int(handle_file.read().strip())
        handle.ca_path = os.path.join(workdir, "tls", "ca.pem")
    bind = args[args.index("--bind") + 1] if "--bind" in args else "127.0.0.1"
    handle.host = bind
    return handle
