"""The watcher daemon's files import each other and _imds by plain name, as on a VM where the role
installs them into one directory. Here they come from the checkout."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WATCHER_FILES = os.path.join(ROOT, "roles", "watcher", "files")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
DAEMON = os.path.join(WATCHER_FILES, "scheduled_events_watcher.py")

for path in (MODULE_UTILS, WATCHER_FILES):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture
def receiver():
    """A stand-in notification receiver on 127.0.0.1 (notify_receiver.Receiver), not yet started."""
    from .notify_receiver import Receiver  # pylint: disable=import-outside-toplevel

    handle = Receiver()
    yield handle
    handle.stop()


@pytest.fixture
def fleet_mock():
    """The mock IMDS on 127.0.0.1 with web_0, web_1 and web_10 in one availability set, no rate limit."""
    from mock_imds_helpers import start_mock  # pylint: disable=import-outside-toplevel,import-error
    from .test_e2e_mock import FLEET  # pylint: disable=import-outside-toplevel

    with start_mock(fleet=FLEET, rate_limit=False) as handle:
        yield handle
