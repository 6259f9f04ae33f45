# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the mock IMDS tests: an in-process server on 127.0.0.1:0 with a fake clock."""

import json

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files import mock_imds
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import FakeClock

from .helpers import SAMPLES, Client


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def start(clock):
    """start(**MockImds kwargs) -> (mock, client); fake clock, rate limit off unless asked."""
    running = []

    def _start(**kwargs):
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("rate_limit", False)
        mock = mock_imds.MockImds(**kwargs).start()
        client = Client(mock)
        running.append((mock, client))
        return mock, client

    yield _start
    for mock, client in running:
        client.close()
        mock.stop()


@pytest.fixture
def samples():
    with open(SAMPLES) as handle:
        return dict((s["id"], s) for s in json.load(handle)["samples"])


@pytest.fixture
def arm_mock(clock, tmp_path, monkeypatch):
    """The mock with its control-plane face (fake clock, the fleet of armhelpers); the SDKs trust its CA."""
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock

    from .armhelpers import FLEET
    handle = start_mock(arm=True, clock=clock, rate_limit=False, fleet=FLEET, tls_dir=str(tmp_path / "tls"))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", handle.ca_path)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield handle
    handle.stop()
