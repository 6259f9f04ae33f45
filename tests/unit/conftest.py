"""Make the collection importable as ansible_collections.azure_imds.scheduled_events.

Under `ansible-test units` (what `make test` runs) the tree already sits at
.../ansible_collections/azure_imds/scheduled_events (tests/harness/collection_path.py builds it)
and nothing here is needed. Plain `pytest tests/unit` from a checkout gets the same path as a
symlink farm from that one module, so edits show without a copy.
"""
import os
import sys
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import collection_path  # noqa: E402  pylint: disable=wrong-import-position

collection_path.importable(ROOT)
for extra in (os.path.join(ROOT, "tests"), os.path.join(ROOT, "roles", "mock_imds", "files")):
    if extra not in sys.path:
        sys.path.insert(0, extra)


def pytest_configure():
    """Refuse to run outside tests/harness/loopback-only: a test that reached for the real IMDS
    address (a default URL, an empty variable) must fail there, not leave the machine."""
    import isolation  # pylint: disable=import-outside-toplevel,import-error
    if isolation.mode() not in isolation.MODES:
        import pytest  # pylint: disable=import-outside-toplevel
        pytest.exit("not isolated: %s. For example: tests/harness/loopback-only .venv/bin/pytest tests/unit"
                    % isolation.HOW, returncode=4)
    # The name of this test run for tests/once_per_run.py, set before any forked test starts (it
    # inherits the environment); xdist workers have their run's PYTEST_XDIST_TESTRUNUID instead.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["AZURE_IMDS_TEST_RUN"] = uuid.uuid4().hex
