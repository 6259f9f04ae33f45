"""Which isolation tests/harness/loopback-only put this process in, or None outside of it.

ansible-test units passes the tests only the environment variables it knows, so under it the
namespace shows itself instead: a network namespace made by loopback-only has no interface but lo.
"""

import os
import socket

MODES = ("netns", "userns", "guard")
HOW = "run the tests through tests/harness/loopback-only (make test does), so that nothing can leave the machine"


def mode():
    found = os.environ.get("AZURE_IMDS_TEST_ISOLATION")
    if found is None and [pair[1] for pair in socket.if_nameindex()] == ["lo"]:
        found = "netns"
    return found
