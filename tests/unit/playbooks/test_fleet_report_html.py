# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's HTML page: a week of real mock history (events created, approved from outside, from
inside and not at all, canceled, run to their end by advancing the mock's clock), the report playbook
run against the control-plane face, and the page rendered by headless Chromium (Debian's package):
the screenshot is kept in tests/output/fleet_report.png and what the page shows (data attributes of
each event block, read from Chromium's DOM) is checked against the mock's audit. Chromium missing is
a failure, never a skip."""

import datetime
import html.parser
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import start_mock
from ansible_collections.azure_imds.scheduled_events.plugins.plugin_utils._report_timeline import (
    UNKNOWN_APPROVAL, report_timeline)
from ansible_collections.azure_imds.scheduled_events.tests.support.control_plane import (
    CLIENT, PUBLISH, SECRET, SUB1, TENANT, set_up)
from ansible_collections.azure_imds.scheduled_events.tests.support.playbooks import ROOT
from ansible_collections.azure_imds.scheduled_events.tests.unit.playbooks.test_control_plane import playbook
from ansible_collections.azure_imds.scheduled_events.tests.unit.playbooks.test_report_templates import render

OUTPUT = os.path.join(ROOT, "tests", "output")
# 50 VMs: ten availability sets of five, all publishing to Resource Graph.
FLEET = {"subscription_id": SUB1, "resource_group": "rg-fleet", "scheduled_events_policy": PUBLISH,
         "groups": [{"name": "as%02d" % n, "kind": "availability_set", "vms": ["vm%02d%d" % (n, i) for i in range(5)]}
                    for n in range(10)]}
GRAPH_STATUS = {"Scheduled": "Scheduled", "Started": "Started", "removed": "Completed", "cancelled": "Canceled"}
DAY = 86400


def chromium():
    path = shutil.which("chromium")
    assert path, ("Debian's chromium is not installed: make test's prepare installs it (apt-get install -y "
                  "chromium); this test fails rather than skip without it")
    return path


def run_chromium(tmp_path, url, *args):
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--user-data-dir=%s" % (tmp_path / "chromium-profile")] + list(args) + [url]
    return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, check=False)


class Blocks(html.parser.HTMLParser):
    """Every element carrying data-event-id, as {attribute: value}."""

    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "data-event-id" in attrs:
            self.found.append(dict(attrs, tag=tag))


def acknowledge(handle, event_id):
    """An approval through Resource Manager, as fleet_event_approve sends it (ScheduledEvents_Acknowledge)."""
    from azure.identity import ClientSecretCredential
    cred = ClientSecretCredential(TENANT, CLIENT, SECRET, authority=handle.login_url, disable_instance_discovery=True,
                                  connection_verify=handle.ca_path)
    bearer = cred.get_token(handle.arm_scope).token
    scope = "/subscriptions/%s/resourceGroups/rg-fleet/providers/Microsoft.Compute/availabilitySets/%s" % (
        SUB1, "as" + handle.control("GET", "events/%s" % event_id)["resources"][0][2:4])
    request = urllib.request.Request(
        "%s%s/providers/Microsoft.Maintenance/scheduledevents/%s/acknowledge?api-version=2025-11-01"
        % (handle.arm_url, scope, event_id), data=b"{}", method="POST",
        headers={"Authorization": "Bearer " + bearer, "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(
        context=ssl.create_default_context(cafile=handle.ca_path)), urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        assert answer.status == 200


def approve_inside(handle, vm, event_id):
    request = urllib.request.Request(
        "%s/metadata/scheduledevents?api-version=2020-07-01" % handle.vm_url(vm), method="POST",
        data=json.dumps({"StartRequests": [{"EventId": event_id}]}).encode("utf-8"), headers={"Metadata": "true"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        assert answer.status == 200


def add(handle, vm, event_type, **spec):
    spec.update(event_type=event_type, resources=[vm])
    spec.setdefault("duration_in_seconds", spec.get("duration", 0))
    return handle.control("POST", "events", spec)["event_id"]


def simulate_week(handle):
    """Seven days of maintenance on the mock's clock; returns {event id: how it was approved}."""
    how = {}
    for day in range(7):
        vms = ["vm%02d%d" % ((day + k) % 10, (day + 2 * k) % 5) for k in range(4)]
        outside = add(handle, vms[0], "Reboot", notice=3600, duration=900)
        inside = add(handle, vms[1], "Freeze", notice=900, duration=5)
        unapproved = add(handle, vms[2], "Redeploy", notice=1800, duration=1200)
        how.update({outside: "outside", inside: "inside", unapproved: "none"})
        if day % 2 == 0:
            how[add(handle, vms[3], "Reboot", notice=7200, duration=600, cancel_at=3000)] = "none"
        handle.control("POST", "time/advance", {"seconds": 600 + day * 37})
        acknowledge(handle, outside)
        approve_inside(handle, vms[1], inside)
        handle.control("POST", "time/advance", {"seconds": DAY - 600 - day * 37})
    # Today: one approved from outside and still running, two still to come.
    running = add(handle, "vm001", "Redeploy", notice=600, duration=4 * 3600, description="<script>alert(1)</script>")
    handle.control("POST", "time/advance", {"seconds": 60})
    acknowledge(handle, running)
    how[running] = "outside"
    how[add(handle, "vm012", "Reboot", notice=DAY, duration=900)] = "none"
    how[add(handle, "vm094", "Freeze", notice=6 * 3600, duration=10)] = "none"
    return how


def run_report(handle, workdir):
    """The report playbook on localhost only, from Azure alone, signed in as AWX's Azure credential does it."""
    extra = {"report_hosts": "localhost", "report_imds": False, "report_resource_graph": True,
             "report_subscriptions": [SUB1], "report_dir": str(workdir / "out")}
    localhost = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"hosts": {"localhost": localhost}}}
    return playbook(os.path.join(ROOT, "playbooks", "report.yml"), handle, workdir, extra, inventory=inventory)


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fleet-report")
    # The mock's week ends now, so the controller's clock (the report's "now") and the mock's agree.
    handle = start_mock(arm=True, rate_limit=False, fleet=FLEET, tls_dir=str(workdir / "tls"),
                        start_time=time.time() - 7 * DAY - 120)
    try:
        os.environ["REQUESTS_CA_BUNDLE"] = handle.ca_path
        set_up(handle, subscriptions=(SUB1,))
        how = simulate_week(handle)
        run = run_report(handle, workdir)
        audit = handle.control("GET", "audit")
        yield {"mock": handle, "how": how, "run": run, "audit": audit, "page": workdir / "out" / "scheduled_events.html",
               "tmp": workdir}
    finally:
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
        handle.stop()


def test_the_page_renders_in_chromium_and_shows_what_the_mock_did(week):
    assert week["run"].rc == 0, week["run"].output[-5000:]
    page = week["page"]
    assert page.exists(), week["run"]
    os.makedirs(OUTPUT, exist_ok=True)
    shot = os.path.join(OUTPUT, "fleet_report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    url = "file://" + str(page)
    done = run_chromium(week["tmp"], url, "--screenshot=%s" % shot, "--window-size=1400,900")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    assert os.path.getsize(shot) > 20000, "the screenshot is almost empty"
    dom = run_chromium(week["tmp"], url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr.decode("utf-8", "replace")[-2000:]
    parser = Blocks()
    parser.feed(dom.stdout.decode("utf-8"))
    shown = {}
    for block in parser.found:
        shown.setdefault(block["data-event-id"], []).append(block)

    # The audit: each event's last transition, and who acknowledged it through Resource Manager, when.
    last = {}
    for step in week["audit"]["transitions"]:
        last[step["event_id"]] = step
    # Approvals through Resource Manager are the ones without a VM (an IMDS POST names its VM); the
    # principal is in arm_requests, the instant in approvals (the one the mock's Activity Log stamps).
    callers = dict((r["path"].split("/")[-2].split("?")[0].upper(), r["principal"]) for r in week["audit"]["arm_requests"]
                   if r["path"].split("?")[0].endswith("/acknowledge") and r["status"] == 200)
    acks = dict((a["event_ids"][0].upper(), (callers[a["event_ids"][0].upper()], a["sim_time"]))
                for a in week["audit"]["approvals"] if a["vm"] is None)
    assert sorted(acks) == sorted(e.upper() for e, how in week["how"].items() if how == "outside")
    assert set(shown) == set(week["how"]), "the page shows other events than the mock made"
    for event_id, how in week["how"].items():
        spec = week["mock"].control("GET", "events/%s" % event_id)
        blocks = shown[event_id]
        assert [b["data-vm"] for b in blocks] == spec["resources"], event_id
        for block in blocks:
            assert block["data-type"] == spec["event_type"]
            assert block["data-status"] == GRAPH_STATUS[last[event_id]["to"]], (event_id, block)
            if how == "outside":
                principal, at = acks[event_id.upper()]
                assert block["data-approver"] == principal == CLIENT
                assert block["data-approved-at"] == at
                assert block["tag"] == "div" and block["data-impact-from"] == at[:19] + "Z"
            else:
                assert block["data-approver"] == "" and event_id.upper() not in acks
                if block["data-status"] in ("Completed", "Canceled", "Started"):
                    # No time in Azure: listed undated, saying what cannot be known.
                    assert block["tag"] == "span" and UNKNOWN_APPROVAL in block["title"], block
    text = dom.stdout.decode("utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>" not in text
    for needle in ("Generated at", "Time range", "Notice left", "Canceled", "vm094"):
        assert needle in text, needle


def test_the_printed_table_and_markdown_list_the_fleet_from_resource_graph(week):
    """From Azure alone no host reads IMDS: the table and the Markdown still show the fleet's events."""
    assert week["run"].rc == 0, week["run"].output[-5000:]
    events = [week["mock"].control("GET", "events/%s" % e) for e in week["how"]]
    current = [e for e in events if e["status"] in ("Scheduled", "Started")]
    assert current, "the week ends with events still pending"
    output = week["run"].output
    assert "Resource Graph (whole fleet): %d current event" % len(current) in output, output[-3000:]
    markdown = (week["page"].parent / "scheduled_events.md").read_text(encoding="utf-8")
    assert "## The fleet in Azure Resource Graph" in markdown
    for event in current:
        assert event["event_id"] in output
        assert "`%s`" % event["event_id"] in markdown


def hostile(text):
    return {"event_id": text, "event_type": text, "event_status": "Completed", "resources": [text],
            "description": text, "event_source": text, "not_before": text, "duration_in_seconds": 60,
            "approvals": [{"approved_by": text, "approved_at": "2026-01-01T09:00:00Z"}]}


def test_every_outside_text_is_escaped_and_cleaned():
    evil = '<script>alert("x")</script>\x00\ud800\'&"'
    events = [hostile(evil), dict(hostile(evil), event_status="Canceled", approvals=[])]
    page = report_timeline(events, [], "2026-01-01T10:00:00Z", 7)
    out = render("report.html.j2", {"report_page": page})
    assert "<script" not in out and "\x00" not in out
    out.encode("utf-8")  # no lone surrogate left
    assert out.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;\ufffd\ufffd&#39;&amp;&#34;") >= 8


def test_fifty_vms_a_week_make_one_row_each_in_time_order():
    base = datetime.datetime(2026, 1, 8, 12, tzinfo=datetime.timezone.utc).timestamp()
    events = []
    for n in range(50):
        at = datetime.datetime.fromtimestamp(base - (n % 7) * DAY - n * 60, datetime.timezone.utc)
        events.append({"event_id": "E%02d" % n, "event_type": "Reboot", "event_status": "Completed",
                       "resources": ["vm%02d" % n], "duration_in_seconds": 900,
                       "approvals": [{"approved_by": "ops", "approved_at": at.strftime("%Y-%m-%dT%H:%M:%SZ")}]})
    page = report_timeline(events, [], "2026-01-08T12:00:00Z", 7)
    assert [row["vm"] for row in page["rows"]] == ["vm%02d" % n for n in range(50)]
    assert all(len(row["blocks"]) == 1 and 0 <= row["blocks"][0]["impact"]["x"] < 100 for row in page["rows"])
    # A tick each midnight from 7 days back to a day ahead (room for what is still to come).
    assert [t["label"] for t in page["ticks"]] == ["%s %02d Jan" % (d, n) for d, n in zip(
        ("Fri", "Sat", "Sun", "Mon", "Tue", "Wed", "Thu", "Fri"), range(2, 10))]
    out = render("report.html.j2", {"report_page": page})
    assert out.count('class="block t-reboot s-completed') == 50
