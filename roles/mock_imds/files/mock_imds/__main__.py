# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point: `python3 -m mock_imds ...`, or `python3 PATH/TO/mock_imds ...` (the directory)."""

import os
import sys

if not __package__:
    # Run as a directory: Python put the package directory itself first on sys.path, where its
    # modules would shadow others by name; the package's parent is what must be importable.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.path.insert(0, os.path.dirname(_HERE))

from mock_imds.cli import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(main())
