"""The suites run where nothing but loopback can be reached (tests/harness/loopback-only)."""

import errno
import socket

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _imds
from ansible_collections.azure_imds.scheduled_events.tests.harness import isolation
from ansible_collections.azure_imds.scheduled_events.tests.support.fakes import FakeClock


ISOLATION = isolation.mode()


def require_isolation():
    # Checked before any attempt, so that a run outside the harness fails here instead of
    # sending a packet towards the real metadata address.
    assert ISOLATION in isolation.MODES, "%s; AZURE_IMDS_TEST_ISOLATION=%r" % (isolation.HOW, ISOLATION)


def test_only_loopback_interfaces_exist_in_a_namespace():
    require_isolation()
    if ISOLATION == "guard":
        pytest.fail("no network namespace on this machine: the guard is in use; CI runs as root and must get one")
    names = [pair[1] for pair in socket.if_nameindex()]
    assert names == ["lo"]


def test_a_socket_to_the_real_imds_address_fails():
    require_isolation()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        with pytest.raises(OSError) as info:
            sock.connect(("169.254.169.254", 80))
    finally:
        sock.close()
    assert info.value.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EPERM, errno.EACCES, None)


def test_the_client_with_its_default_url_fails_as_not_an_azure_vm():
    require_isolation()
    clock = FakeClock()
    client = _imds.ImdsClient(environ={}, clock=clock, sleep=clock.sleep)
    assert client.base_url == "http://169.254.169.254"
    with pytest.raises(_edge.ImdsUnavailableError, match="is this an Azure VM"):
        client.get_scheduled_events()
