"""Fixtures of the watcher tests. The daemon is the package
ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher, imported
by that name as modules import module_utils; helpers.watcher_command() runs it as a program."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture
def receiver():
    """A stand-in notification receiver on 127.0.0.1 (notify_receiver.Receiver), not yet started."""
    from ansible_collections.azure_imds.scheduled_events.devtools.notify_receiver import Receiver

    handle = Receiver()
    yield handle
    handle.stop()


@pytest.fixture
def fleet_mock():
    """The mock IMDS on 127.0.0.1 with web_0, web_1 and web_10 in one availability set, no rate limit."""
    from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
    from .test_e2e_mock import FLEET  # pylint: disable=import-outside-toplevel

    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle
