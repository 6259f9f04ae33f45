# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make control API calls to the mock IMDS at given times, so that a wait running meanwhile sees
a change in the middle of it (run as a background task).

usage: mock_control_later.py CONTROL_URL STEPS_JSON
  STEPS_JSON: [[seconds_from_start, "POST", "faults", {...}], ...]
Prints one line per call; exits 1 when a call fails.
"""

import json
import sys
import time

try:
    import http.client as http_client
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover
    http_client = urlsplit = None


def call(control_url, method, path, body):
    parts = urlsplit(control_url)
    conn = http_client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, parts.path.rstrip("/") + "/" + path, body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def main(argv):
    control_url, steps = argv[1], json.loads(argv[2])
    start = time.monotonic()
    failed = False
    for at, method, path, body in steps:
        time.sleep(max(0.0, start + float(at) - time.monotonic()))
        status, text = call(control_url, method, path, body)
        print("%.2f %s %s -> %s %s" % (time.monotonic() - start, method, path, status, text))
        failed = failed or status >= 400
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
