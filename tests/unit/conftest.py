"""The one conftest that sets up imports: every test imports collection code, and the helpers of
tests/support/, by the collection's name, ansible_collections.azure_imds.scheduled_events.<path>.

Under `ansible-test units` (what `make test` runs) ansible-test has already put the collection's
loader in place. Plain pytest gets the collections directory from tests/harness/loopback-only (on
PYTHONPATH and ANSIBLE_COLLECTIONS_PATH), and this file installs ansible-core's collection loader
on it before any test module is imported, as ansible-test does: a test that starts Ansible's plugin
loader later then finds the collection already loaded the same way.
"""
import os
import sys
import uuid

import pytest

NOT_IMPORTABLE = ("the collection is not importable: run the tests through tests/harness/loopback-only, which puts "
                  "this checkout on the import path, e.g. tests/harness/loopback-only .venv/bin/pytest tests/unit")


def _collection_loader_installed():
    return any(type(finder).__name__ == "_AnsibleCollectionFinder" for finder in sys.meta_path)


if not _collection_loader_installed() and os.environ.get("ANSIBLE_COLLECTIONS_PATH"):
    from ansible.plugins.loader import init_plugin_loader  # pylint: disable=wrong-import-position
    init_plugin_loader()

try:
    from ansible_collections.azure_imds.scheduled_events.tests.harness import collection_path, isolation
except ImportError:
    isolation = None
else:
    # What a test starts (ansible-galaxy, ansible-playbook) finds the collection where the test says,
    # as under ansible-test, not through the checkout that loopback-only put on PYTHONPATH.
    _PYTHON_PATH = collection_path.python_path_without_collections(os.environ)
    if _PYTHON_PATH is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = _PYTHON_PATH


def pytest_configure():
    """Refuse to run outside tests/harness/loopback-only: a test that reached for the real IMDS
    address (a default URL, an empty variable) must fail there, not leave the machine."""
    if isolation is None:
        pytest.exit(NOT_IMPORTABLE, returncode=4)
    if isolation.mode() not in isolation.MODES:
        pytest.exit("not isolated: %s. For example: tests/harness/loopback-only .venv/bin/pytest tests/unit"
                    % isolation.HOW, returncode=4)
    # The name of this test run for tests/support/once_per_run.py, set before any forked test starts
    # (it inherits the environment); xdist workers have their run's PYTEST_XDIST_TESTRUNUID instead.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["AZURE_IMDS_TEST_RUN"] = uuid.uuid4().hex
