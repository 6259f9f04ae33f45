# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change the mock IMDS in the middle of a wait, when the wait has got that far (run as a
background task started just before the wait).

usage: mock_control_later.py CONTROL_URL STEPS_JSON [DEADLINE_SECONDS [SINCE_SEQ]]

STEPS_JSON is a list of steps, each {"when": CONDITION, "do": [ACTION, ...]}, run in order.
A step's condition counts only what the audit recorded after the previous step's condition held
(after SINCE_SEQ for the first step: the audit's last_seq read when the task was templated, before
it started; without it, the last_seq when this script started), so that a request answered while
the previous step acted still counts; all its keys must hold:
  "requests": N        at least N IMDS requests were answered (or dropped) ...
  "vm": NAME           ... by this VM (default: any VM) ...
  "path": TEXT         ... to a path containing TEXT, such as "scheduledevents" (a wait with
                       this_host_only reads the VM's name from another path first) ...
  "status": S          ... with this status (null: dropped or reset without an answer)
  "approvals": N       at least N approvals were posted (by "vm", if given)
  "file_has": [[PATH, REGEX], ...]   each file exists and matches its regular expression
ACTION is ["GET"|"POST"|"DELETE", CONTROL_PATH, BODY] (a control API call, which must answer
below 400) or ["write", PATH, TEXT] (replaces the file's content).

Nothing here waits for a number of seconds: each step waits for what the mock's audit log (or a
file) shows, so a slow machine only makes the run slower. DEADLINE_SECONDS (default 600) only
bounds a run whose wait never gets there; the script then exits 1 naming the step.
Prints one line per action.
"""

import json
import os
import re
import sys
import time

try:
    import http.client as http_client
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover
    http_client = urlsplit = None

AUDIT_POLL_SECONDS = 0.05


def call(control_url, method, path, body=None):
    parts = urlsplit(control_url)
    conn = http_client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, parts.path.rstrip("/") + "/" + path, body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def audit_since(control_url, seq):
    status, text = call(control_url, "GET", "audit?since=%d" % seq)
    if status != 200:
        raise RuntimeError("GET audit answered %s: %s" % (status, text))
    return json.loads(text)


def file_matches(path, pattern):
    if not os.path.exists(path):
        return False
    with open(path) as handle:
        return re.search(pattern, handle.read(), re.M) is not None


def holds(when, audit):
    wanted = when.get("requests", 0)
    requests = [r for r in audit["requests"]
                if ("vm" not in when or r["vm"] == when["vm"]) and when.get("path", "") in r["path"]
                and ("status" not in when or r["status"] == when["status"])]
    approvals = [a for a in audit["approvals"] if "vm" not in when or a["vm"] == when["vm"]]
    files = when.get("file_has", [])
    return (len(requests) >= wanted and len(approvals) >= when.get("approvals", 0)
            and all(file_matches(path, pattern) for path, pattern in files))


def act(control_url, action):
    if action[0] == "write":
        with open(action[1], "w") as handle:
            handle.write(action[2])
        return "write %s" % action[1], True
    method, path, body = action
    status, text = call(control_url, method, path, body)
    return "%s %s -> %s %s" % (method, path, status, text.strip()[:300]), status < 400


def main(argv):
    control_url, steps = argv[1], json.loads(argv[2])
    deadline = time.monotonic() + (float(argv[3]) if len(argv) > 3 else 600.0)
    seq = int(argv[4]) if len(argv) > 4 else audit_since(control_url, 0)["last_seq"]
    for number, step in enumerate(steps, 1):
        while True:
            audit = audit_since(control_url, seq)
            if holds(step["when"], audit):
                break
            if time.monotonic() > deadline:
                print("step %d never came: waited for %s; the audit since seq %d shows %d requests"
                      % (number, json.dumps(step["when"]), seq, len(audit["requests"])))
                return 1
            time.sleep(AUDIT_POLL_SECONDS)
        seq = audit["last_seq"]
        for action in step["do"]:
            line, ok = act(control_url, action)
            print("step %d: %s" % (number, line), flush=True)
            if not ok:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
