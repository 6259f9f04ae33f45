# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This plugin_utils is PRIVATE to this collection: its API may change in any release.
"""The report role's page model: each VM's events placed on one time axis, for report.html.j2.

Only what Azure says is drawn. Resource Graph's rows carry no time but NotBefore, and that only while
an event is Scheduled (Microsoft: "Is blank if the event is in the started state"); the Activity Log
gives the time of an approval sent through Resource Manager. So: a Scheduled event shows its notice
left (the report's time to NotBefore) and its expected impact (NotBefore plus DurationInSeconds); an
event approved through Resource Manager shows its impact from the approval on; any other event that
has started or ended has no time Azure keeps, and is listed beside its VM's axis, undated."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

KNOWN_TYPES = ("Reboot", "Redeploy", "Freeze", "Preempt", "Terminate")
STATUSES = ("Scheduled", "Started", "Completed", "Canceled")
# A block of unknown or zero length is drawn this wide (a fraction of the axis) so it can be seen.
MIN_WIDTH = 0.004
UNKNOWN_APPROVAL = "approved inside the VM or not approved (started at NotBefore)"


def clean(text):
    """Text from outside as HTML may carry it: no NUL or other control character, no lone surrogate."""
    if text is None:
        return ""
    text = str(text)
    return "".join("\ufffd" if (ord(ch) < 32 and ch not in "\t\n\r") or 0xD800 <= ord(ch) <= 0xDFFF or ord(ch) == 0x7F
                   else ch for ch in text)


def parse_time(text):
    """ISO 8601 (Z or offset; Resource Graph and the Activity Log) -> epoch seconds, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    if "." in value:  # the Activity Log writes 7 decimals, more than fromisoformat takes before 3.11
        head, _dot, tail = value.partition(".")
        digits = "".join(ch for ch in tail if ch.isdigit())
        value = head + "." + (digits[:6] or "0") + tail[len(digits):]
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def iso(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _label(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%a %d %b %H:%M")


def _ticks(start, end):
    """One tick a day at 00:00 UTC (every few days on a long range)."""
    step = 86400 * max(1, int((end - start) / 86400 / 14) + 1)
    first = (int(start) // 86400 + 1) * 86400
    return [{"at": iso(t), "x": round((t - start) / (end - start) * 100, 3),
             "label": datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%a %d %b")}
            for t in range(first, int(end), step)]


def _merge(fleet_events, imds_events):
    """One entry per EventId (without regard to case): Resource Graph first, IMDS for the rest."""
    merged, order = {}, []
    for source, events in (("resource_graph", fleet_events or []), ("imds", imds_events or [])):
        for event in events:
            key = str(event.get("event_id") or "").upper()
            if not key or key in merged:
                continue
            merged[key] = dict(event, seen_in=source)
            order.append(key)
    return [merged[key] for key in order]


def report_timeline(fleet_events, imds_events=None, now=None, history_days=7, vms=None):
    """The page model: range, ticks, and a row per VM with dated blocks and undated entries."""
    now_epoch = parse_time(now) if now else None
    if now_epoch is None:
        raise ValueError("report_timeline needs now as an ISO 8601 time, got %r" % (now,))
    start = now_epoch - float(history_days) * 86400
    events = _merge(fleet_events, imds_events)
    placed, latest = [], now_epoch + 86400
    for event in events:
        status = event.get("event_status") or ""
        duration = event.get("duration_in_seconds")
        duration = float(duration) if isinstance(duration, (int, float)) and duration > 0 else None
        approvals = event.get("approvals") or []
        approval = approvals[-1] if approvals else None
        approved_at = parse_time(approval.get("approved_at")) if approval else None
        not_before = parse_time(event.get("not_before"))
        notice = impact = None
        estimated = True
        if status == "Scheduled" and not_before is not None:
            notice = (now_epoch, not_before)
            impact = (not_before, not_before + duration if duration else None)
        elif approved_at is not None:
            impact = (approved_at, approved_at + duration if duration else None)
            estimated = duration is None or status != "Completed"
        if approval:
            who = "approved by %s at %s (Activity Log)" % (clean(approval.get("approved_by")) or "an unnamed caller",
                                                           clean(approval.get("approved_at")))
        elif status == "Scheduled":
            who = "not approved yet"
        else:
            who = UNKNOWN_APPROVAL
        if impact is not None and impact[0] < start and (impact[1] or impact[0]) < start:
            continue  # older than the report's history
        if impact is not None:
            latest = max(latest, impact[1] or impact[0])
        placed.append((event, status, notice, impact, estimated, approval, who, duration))
    end = latest + (latest - start) * 0.02
    span = end - start

    def box(window):
        if window is None:
            return None
        left = max(window[0], start)
        right = window[1] if window[1] is not None else window[0]
        width = max((right - left) / span, MIN_WIDTH)
        return {"x": round((left - start) / span * 100, 3), "w": round(width * 100, 3),
                "from": iso(window[0]), "to": iso(window[1]) if window[1] is not None else None}

    rows = {}
    for vm in vms or []:
        rows.setdefault(clean(vm), {"vm": clean(vm), "blocks": [], "undated": []})
    for event, status, notice, impact, estimated, approval, who, duration in placed:
        event_type = clean(event.get("event_type")) or "unknown"
        entry = {
            "event_id": clean(event.get("event_id")),
            "event_type": event_type,
            "type_class": event_type.lower() if event_type in KNOWN_TYPES else "other",
            "event_status": clean(status) or "unknown",
            "status_class": status.lower() if status in STATUSES else "other",
            "event_source": clean(event.get("event_source")),
            "description": clean(event.get("description")),
            "not_before": clean(event.get("not_before")),
            "duration": int(duration) if duration else None,
            "approver": clean(approval.get("approved_by")) if approval else "",
            "approved_at": clean(approval.get("approved_at")) if approval else "",
            "approval_text": who,
            "notice": box(notice),
            "impact": box(impact),
            "estimated": estimated,
            "seen_in": event.get("seen_in"),
        }
        for vm in event.get("resources") or ["(no VM named)"]:
            row = rows.setdefault(clean(vm), {"vm": clean(vm), "blocks": [], "undated": []})
            (row["blocks"] if impact is not None else row["undated"]).append(entry)
    ordered = [rows[name] for name in sorted(rows)]
    for row in ordered:
        row["blocks"].sort(key=lambda e: (e["impact"]["x"], e["event_id"]))
    return {
        "generated_at": iso(now_epoch),
        "range_start": iso(start),
        "range_end": iso(end),
        "now_x": round((now_epoch - start) / span * 100, 3),
        "ticks": _ticks(start, end),
        "rows": ordered,
        "types": list(KNOWN_TYPES) + ["other"],
        "event_count": len(placed),
        "unknown_approval": UNKNOWN_APPROVAL,
    }
