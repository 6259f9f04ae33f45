# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the mock IMDS server from any test suite of this repository: in-process or as a subprocess.

The helpers ship with the collection as mock_imds.testing (roles/mock_imds/files/mock_imds/testing.py),
so that users of the installed collection have them too; this module puts that package on sys.path
and re-exports them for the suites, benchmarks and scripts that import mock_imds_helpers.

    from mock_imds_helpers import start_mock, spawn_mock
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MOCK_DIR = os.path.join(ROOT, "roles", "mock_imds", "files")
if MOCK_DIR not in sys.path:
    sys.path.insert(0, MOCK_DIR)

from mock_imds.testing import (  # noqa: E402,F401  pylint: disable=wrong-import-position,import-error,unused-import
    MOCK_PATH, FakeClock, MockControlError, MockHandle, spawn_mock, start_mock)
