"""Test doubles for the IMDS client: a clock whose sleep only moves time, and a scripted transport."""

import json
import socket


class FakeClock:
    """monotonic() and sleep() in one: sleeping moves time forward at once."""

    def __init__(self, start=1000.0):
        self.now = start
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0, seconds
        self.sleeps.append(seconds)
        self.now += seconds


def answer(status=200, body=b"", headers=None, reason="OK", cost=0.0):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    return ("answer", status, body, headers or [], reason, cost)


def fail(exc, on="request", cost=0.0):
    return ("fail", exc, on, cost)


class FakeSocket:
    def __init__(self, log):
        self.log = log

    def settimeout(self, value):
        self.log.append(("settimeout", value))


class FakeResponse:
    def __init__(self, status, reason, body, headers):
        self.status = status
        self.reason = reason
        self._body = body
        self._headers = headers
        self.will_close = False

    def read(self, amt=None):
        size = len(self._body) if amt is None else amt
        chunk, self._body = self._body[:size], self._body[size:]
        return chunk

    def getheader(self, name, default=None):
        for key, value in self._headers:
            if key.lower() == name.lower():
                return value
        return default

    def getheaders(self):
        return list(self._headers)


class ScriptedTransport:
    """connection_factory for ImdsClient that plays a script, one step per attempt."""

    def __init__(self, clock, steps):
        self.clock = clock
        self.steps = list(steps)
        self.requests = []   # (method, path, body, headers)
        self.log = []        # ("connect_timeout", t), ("settimeout", t), ...
        self.connections = 0

    def __call__(self, timeout):
        self.connections += 1
        self.log.append(("connect_timeout", timeout))
        return _FakeConnection(self)


class _FakeConnection:
    def __init__(self, transport):
        self.t = transport
        self.sock = None
        self._pending = None

    def connect(self):
        step = self.t.steps[0] if self.t.steps else None
        if step is not None and step[0] == "fail" and step[2] == "connect":
            self.t.steps.pop(0)
            self.t.clock.now += step[3]
            raise step[1]
        self.sock = FakeSocket(self.t.log)

    def request(self, method, path, body=None, headers=None):
        self.t.requests.append((method, path, body, dict(headers or {})))
        if not self.t.steps:
            raise AssertionError("transport script exhausted: unexpected request %s %s" % (method, path))
        self._pending = self.t.steps.pop(0)

    def getresponse(self):
        step = self._pending
        if step[0] == "fail":
            self.t.clock.now += step[3]
            raise step[1]
        status, body, headers, reason, cost = step[1:]
        self.t.clock.now += cost
        return FakeResponse(status, reason, body, headers)

    def close(self):
        self.sock = None


EMPTY_DOC = {"DocumentIncarnation": 1, "Events": []}
READ_TIMEOUT = socket.timeout("timed out")


def scripted_client(steps, **kwargs):
    """An ImdsClient on a ScriptedTransport and a FakeClock, with full jitter and a fixed wall clock.

    Returns (client, clock, transport)."""
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _imds

    clock = FakeClock()
    transport = ScriptedTransport(clock, steps)
    kwargs.setdefault("base_url", "http://127.0.0.1:9")
    client = _imds.ImdsClient(clock=clock, sleep=clock.sleep, rng=lambda: 1.0, connection_factory=transport,
                              environ={}, wall_clock=lambda: 1700000000.0, **kwargs)
    return client, clock, transport
