# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `status` command: the events IMDS shows, what the state file remembers of them, and whether
the daemon is alive (from the status file liveness.py keeps)."""

import json
import sys
import time

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _edge, _event

from . import EXIT_FAILED, PROGRAM, liveness, notify
from .decisions import approval_policy, describe
from .log import escape_text
from .records import check_record, event_key
from .state import StateError


def status_report(config, client, store):
    """What the watcher sees and remembers, as a JSON-able dict. Raises ImdsError."""
    name = config["resource_name"] or client.get_vm_name(deadline=_edge.Deadline(config["first_request_timeout"]))
    document = client.get_scheduled_events(deadline=_edge.Deadline(config["first_request_timeout"]))
    notify_section = None
    try:
        loaded = store.load(read_only=True, check_record=check_record)
        records, note, notify_section = loaded.records, loaded.note, loaded.notify
    except StateError as exc:
        # Reading the state takes root under the service's defaults; the events are still worth showing.
        records, note = {}, str(exc)
    events = []
    for event in _event.annotate_events(document.events, name):
        record = records.get(event_key(event.get("event_id"))) if isinstance(event.get("event_id"), str) else None
        entry = dict(event)
        entry["leader"] = _event.is_leader(event, name)
        if event["affects_this_host"] and event.get("event_status") == "Scheduled":
            entry["policy"], entry["policy_reason"] = approval_policy(event, name, config["approval"])
        entry["watcher"] = None if record is None else dict(
            (k, record[k]) for k in ("drain", "approval", "started", "recover", "policy"))
        events.append(entry)
    present = set(event_key(e["event_id"]) for e in document.events if isinstance(e.get("event_id"), str))
    remembered = dict((k, r) for k, r in records.items() if k not in present)
    return {"resource_name": name, "imds_url": client.scheduled_events_url(),
            "document_incarnation": document.incarnation, "document_warnings": list(document.warnings),
            "events": events, "state_file": store.path, "state_note": note, "remembered": remembered,
            "notify": notify_status(config, notify_section)}


def notify_status(config, section):
    """The notify action as the state file has it: receivers and what waits for each."""
    outbox = section.get("outbox") if isinstance(section, dict) else None
    outbox = outbox if isinstance(outbox, list) else []
    receivers = []
    for target in config["notify"]:
        waiting = sum(1 for entry in outbox if isinstance(entry, dict) and target["url"] in (entry.get("pending") or ()))
        receivers.append({"url": notify.safe_url(target["url"]), "unsent": waiting})
    return {"receivers": receivers, "unsent": len(outbox)}


def print_status(report, out):
    write = out.write
    write("this VM:   %s\n" % report["resource_name"])
    write("IMDS:      %s\n" % report["imds_url"])
    write("document:  incarnation %s, %d event%s\n" % (report["document_incarnation"], len(report["events"]),
                                                       "" if len(report["events"]) == 1 else "s"))
    for warning in report.get("document_warnings") or []:
        write("  warning: %s\n" % escape_text(warning))
    for event in report["events"]:
        write("  %s  %s\n" % (escape_text("%s" % (event["event_id"],)), escape_text(describe(event))))
        if not event["affects_this_host"]:
            write("      does not name this VM: not acted on\n")
            continue
        if event.get("policy"):
            leader = ", leader" if event["leader"] else ""
            write("      policy %s (%s)%s\n" % (event["policy"], event["policy_reason"], leader))
        watcher = event["watcher"]
        write("      watcher: %s\n" % ("not seen yet" if watcher is None else ", ".join(
            "%s %s" % (k, watcher[k] or "-") for k in ("drain", "approval", "started", "recover"))))
    write("state:     %s%s\n" % (report["state_file"], " (%s)" % report["state_note"] if report["state_note"] else ""))
    for receiver in report["notify"]["receivers"]:
        write("notify:    %s, %d unsent\n" % (escape_text(receiver["url"]), receiver["unsent"]))
    for key, record in sorted(report["remembered"].items()):
        write("  %s  no longer in the document: drain %s, started %s, recover %s\n"
              % (escape_text(record["event"].get("event_id") or key), record["drain"] or "-", record["started"] or "-",
                 record["recover"] or "-"))


def daemon_report(config, now):
    """Is the daemon alive and polling? From the status file it keeps in its state directory."""
    status = liveness.read_status_file(config["state_dir"])
    exit_status, word, reason = liveness.health(status, config, now)
    return {"health": word, "reason": reason, "exit_status": exit_status, "status_file": status}


def status_command(args, config, client, store, out):
    """Exit status: 0 healthy, 1 degraded (polls failing for a minute, or IMDS does not answer
    `status` itself), 3 down (not running, or its status file stopped moving)."""
    now = time.time()
    daemon = daemon_report(config, now)
    try:
        report = status_report(config, client, store)
    except (_edge.ImdsError, StateError) as exc:
        if args.json:
            out.write(json.dumps({"daemon": daemon, "error": str(exc)}, indent=2, sort_keys=True, default=str) + "\n")
        else:
            out.write("".join(escape_text(line) + "\n" for line in liveness.describe_daemon(daemon, now)))
        sys.stderr.write("%s: status: %s\n" % (PROGRAM, escape_text(str(exc))))
        return max(EXIT_FAILED, daemon["exit_status"])
    finally:
        client.close()
    report["daemon"] = daemon
    if args.json:
        out.write(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        print_status(report, out)
        out.write("".join(escape_text(line) + "\n" for line in liveness.describe_daemon(daemon, now)))
    return daemon["exit_status"]
