# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point: `python3 -m mock_imds ...`, or `python3 PATH/TO/mock_imds ...` (the directory)."""

import os
import sys

if not __package__:  # run as a directory: import the package from its parent, not its modules by bare name
    sys.path[0] = os.path.dirname(os.path.abspath(sys.path[0]))

from mock_imds.cli import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(main())
