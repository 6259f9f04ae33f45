#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What rolling_maintenance did to each host, from the mock's audit log and the marks file.

The demo's drain, recover and health tasks (extensions/demo/*.yml) append one JSON line per step
to a marks file; the mock IMDS records every approval and every event transition. Merged, they
give one timeline per host:

    drain -> approval -> Started -> completed -> recover -> health

`check()` lists what is out of that order, and with serial 1 any overlap of two hosts'
maintenance. The demo prints the timelines; the molecule scenario fails on the problems.

    timeline.py --mock-url http://127.0.0.1:PORT --marks FILE [--hosts web_0,web_1,web_2] [--check]

Standard library only.
"""

import argparse
import datetime
import json
import sys
import urllib.request

ORDER = ("drain", "approval", "Started", "completed", "recover", "health")
# The steps a host reaches whatever its events: a started event (hardware failure) needs no
# approval, and a health check is optional.
REQUIRED = ("drain", "Started", "completed", "recover")


class Step:
    def __init__(self, when, name, detail=""):
        self.when = when
        self.name = name
        self.detail = detail

    def __repr__(self):
        return "Step(%s, %s)" % (self.when.isoformat(), self.name)


def parse_time(text):
    """ISO 8601 in UTC as the mock and the marks write it (2026-01-02T03:04:05.678Z)."""
    text = text.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(text)


def read_marks(path):
    """The marks file: one JSON object per line with time, host, vm and step."""
    marks = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                mark = json.loads(line)
                mark["when"] = parse_time(mark["time"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError("%s line %d is not a mark (%s): %r" % (path, number, exc, line.strip()))
            marks.append(mark)
    return marks


# The mock is on loopback: a proxy from the environment must not be asked for it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(mock_url, path):
    """One GET of the mock's control API, parsed."""
    with _OPENER.open(mock_url.rstrip("/") + "/_mock/" + path, timeout=10) as response:
        return json.loads(response.read().decode("utf-8"))


def build(audit, events, marks, hosts=None):
    """{host: {"vm": name, "events": [event views], "steps": [Step, ...] sorted by time}}."""
    vm_of = dict((m["host"], m.get("vm") or m["host"]) for m in marks)
    for host in hosts or []:
        vm_of.setdefault(host, host)
    timelines = {}
    for host, vm in vm_of.items():
        mine = [e for e in events if vm in (e.get("resources") or [])]
        ids = set(e["event_id"].upper() for e in mine)
        steps = [Step(m["when"], m["step"], m.get("detail", "")) for m in marks if m["host"] == host]
        for approval in audit.get("approvals", []):
            approved = [i for i in approval.get("event_ids", []) if i.upper() in ids]
            if approval.get("vm") == vm and approved:
                steps.append(Step(parse_time(approval["time"]), "approval", ", ".join(approved)))
        for change in audit.get("transitions", []):
            if change["event_id"].upper() not in ids:
                continue
            if change["to"] == "Started":
                steps.append(Step(parse_time(change["time"]), "Started", "%s (%s)" % (change["event_id"],
                                                                                      change.get("cause", ""))))
            elif change["from"] == "Started" and change["to"] in ("removed", "cancelled"):
                steps.append(Step(parse_time(change["time"]), "completed", change["event_id"]))
        steps.sort(key=lambda s: (s.when, ORDER.index(s.name) if s.name in ORDER else len(ORDER)))
        timelines[host] = {"vm": vm, "events": mine, "steps": steps}
    return timelines


def _first(steps, name):
    for step in steps:
        if step.name == name:
            return step
    return None


def check(timelines, serial=1):
    """Problems with the order of steps per host and, with serial 1, overlapping maintenance."""
    problems = []
    windows = []
    for host in sorted(timelines):
        timeline = timelines[host]
        steps = timeline["steps"]
        if not timeline["events"]:
            if steps:
                problems.append("%s had no event but went through %s" % (host, ", ".join(s.name for s in steps)))
            continue
        seen = [s.name for s in steps if s.name in ORDER]
        missing = [name for name in REQUIRED if name not in seen]
        if missing:
            problems.append("%s never reached %s (saw: %s)" % (host, ", ".join(missing), ", ".join(seen) or "nothing"))
            continue
        firsts = [(name, _first(steps, name)) for name in ORDER if _first(steps, name) is not None]
        for (name_a, a), (name_b, b) in zip(firsts, firsts[1:]):
            if a.when > b.when:
                problems.append("%s: %s at %s came after %s at %s" % (
                    host, name_a, _clock(a.when), name_b, _clock(b.when)))
        windows.append((steps[0].when, steps[-1].when, host))
    if serial == 1:
        windows.sort()
        for (start_a, end_a, host_a), (start_b, end_b, host_b) in zip(windows, windows[1:]):
            if start_b < end_a:
                problems.append("%s and %s were in maintenance at once (%s began at %s, before %s ended at %s)" % (
                    host_a, host_b, host_b, _clock(start_b), host_a, _clock(end_a)))
    return problems


def _clock(when):
    return when.strftime("%H:%M:%S.%f")[:-3]


def render(timelines):
    lines = []
    for host in sorted(timelines):
        timeline = timelines[host]
        if not timeline["events"]:
            lines.append("%s (VM %s): no scheduled event, left alone" % (host, timeline["vm"]))
            continue
        described = ", ".join("%s %s from %s" % (e["event_type"], e["event_id"], e.get("event_source") or "?")
                              for e in timeline["events"])
        lines.append("%s (VM %s): %s" % (host, timeline["vm"], described))
        start = timeline["steps"][0].when if timeline["steps"] else None
        for step in timeline["steps"]:
            offset = (step.when - start).total_seconds()
            lines.append(("  %s  +%6.2fs  %-9s  %s" % (_clock(step.when), offset, step.name, step.detail)).rstrip())
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mock-url", required=True, help="base URL of the mock IMDS (http://127.0.0.1:PORT)")
    parser.add_argument("--marks", required=True, help="marks file written by the drain/recover/health tasks")
    parser.add_argument("--hosts", default="", help="comma-separated hosts to show even without marks")
    parser.add_argument("--serial", type=int, default=1, help="batch size of the run (overlaps checked for 1)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the order is wrong or hosts overlap")
    args = parser.parse_args(argv)
    try:
        marks = read_marks(args.marks)
        audit = fetch(args.mock_url, "audit")
        events = fetch(args.mock_url, "events")
    except (OSError, ValueError) as exc:
        print("timeline: %s" % exc, file=sys.stderr)
        return 2
    timelines = build(audit, events, marks, [h for h in args.hosts.split(",") if h])
    print("\n".join(render(timelines)))
    if not args.check:
        return 0
    problems = check(timelines, args.serial)
    for problem in problems:
        print("timeline: PROBLEM: %s" % problem)
    handled = sum(1 for t in timelines.values() if t["events"])
    if not problems:
        print("timeline: order drain < approval < Started < completed < recover < health holds for %d host%s%s"
              % (handled, "" if handled == 1 else "s", "; no two hosts in maintenance at once" if args.serial == 1 else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
