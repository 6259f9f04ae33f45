# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mock_imds: a local mock of the Azure Instance Metadata Service (IMDS).

It serves /metadata/scheduledevents, /metadata/instance and /metadata/versions for a fleet of
simulated VMs, follows the request rules and the per-api-version schemas of the real service,
drives the event lifecycle from a simulated clock, injects faults on demand and is steered
through a JSON control API under /_mock/.

Python standard library only (3.8+). The mock_imds role copies this package to a host as it is.
Run `python3 -m mock_imds --help` (with this package's parent directory on PYTHONPATH) or
`python3 PATH/TO/mock_imds --help`; the user documentation is docs/docsite/rst/mock_imds.rst.
"""

from .checks import MockError
from .cli import main
from .fleet import Fleet, parse_fleet_spec
from .scenarios import BUILTIN_SCENARIOS
from .server import MockImds
from .state import MockState

__all__ = ["MockImds", "MockState", "MockError", "BUILTIN_SCENARIOS", "Fleet", "parse_fleet_spec", "main"]
