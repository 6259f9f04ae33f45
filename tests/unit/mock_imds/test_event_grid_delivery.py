# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mock delivers scheduled events like Event Grid: handshakes of both schemas, notifications in
Microsoft's shape, batches, retries on the mock's clock, drops, duplicates, audit, refused input.

One mock (fake clock, control-plane face for its test CA) serves the module; each test resets it and
registers receivers of its own: tiny HTTP(S) servers on 127.0.0.1 that record what they get."""

import datetime
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.testing import (
    FakeClock,
    MockControlError,
    start_mock,
)
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds.tls import server_context

from .armhelpers import PUBLISH, SUB1, graph_query, set_up_principal, token

EVENT_TYPE = "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted"
FLEET = {
    "subscription_id": SUB1, "resource_group": "rg-fleet", "location": "eastus", "scheduled_events_policy": PUBLISH,
    "groups": [
        {"name": "web-ss", "kind": "scale_set", "vms": ["web0", "web1", "web2"]},
        {"name": "quiet-as", "kind": "availability_set", "vms": ["q0", "q1"], "scheduled_events_policy": None},
        {"name": "solo", "kind": "zonal", "vms": ["z0", "z1"]},
    ],
}


class Receiver(object):
    """A webhook on 127.0.0.1: answers handshakes as told, notification POSTs with the statuses in
    answers (then 200), and keeps every request (method, query, lower-case headers, parsed body)."""

    def __init__(self, tls_dir=None, handshake="echo", answers=()):
        self.handshake = handshake
        self.answers = list(answers)
        self.requests = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, body=b"", headers=()):
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_OPTIONS(self):
                receiver.keep(self, b"")
                origin = () if receiver.handshake == "refuse" else (("WebHook-Allowed-Origin", "eventgrid.azure.net"),
                                                                    ("WebHook-Allowed-Rate", "*"))
                self._answer(200, headers=origin)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                doc = receiver.keep(self, body)
                if self.headers.get("aeg-event-type") == "SubscriptionValidation":
                    code = doc[0]["data"]["validationCode"]
                    reply = {"echo": code, "202": code, "wrong": "not-the-code"}[receiver.handshake]
                    self._answer(202 if receiver.handshake == "202" else 200,
                                 json.dumps({"validationResponse": reply}).encode(), (("Content-Type", "application/json"),))
                    return
                with receiver.lock:
                    status = receiver.answers.pop(0) if receiver.answers else 200
                self._answer(status)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if tls_dir:
            self.server.socket = server_context(tls_dir).wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def keep(self, handler, body):
        parts = urlsplit(handler.path)
        doc = json.loads(body.decode("utf-8")) if body else None
        with self.lock:
            self.requests.append({"method": handler.command, "path": parts.path, "query": parse_qs(parts.query),
                                  "headers": dict((k.lower(), v) for k, v in handler.headers.items()), "body": doc})
        return doc

    def url(self, path="/hook", secret="s3cret"):
        return "%s://127.0.0.1:%d%s?code=%s" % (self.scheme, self.server.server_address[1], path, secret)

    def notifications(self):
        with self.lock:
            return [r for r in self.requests if r["headers"].get("aeg-event-type") == "Notification"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    handle = start_mock(arm=True, clock=FakeClock(), rate_limit=False, fleet=FLEET,
                        tls_dir=str(tmp_path_factory.mktemp("tls")), start_time="2026-03-02T10:00:00Z")
    yield handle
    handle.stop()


@pytest.fixture
def eg(mock):
    """The module's mock, reset, without subscribers; receivers made through eg.receiver(...) are closed after."""
    mock.control("DELETE", "eventgrid/subscribers")
    mock.control("POST", "reset", {})
    receivers = []

    class Eg(object):
        handle = mock

        @staticmethod
        def receiver(tls=False, **kwargs):
            made = Receiver(mock.mock.tls_dir if tls else None, **kwargs)
            receivers.append(made)
            return made

    yield Eg
    mock.control("DELETE", "eventgrid/subscribers")
    mock.control("POST", "eventgrid/duplicate", {"count": 0})
    for made in receivers:
        made.close()


def _seconds(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def _view(mock, sid):
    return mock.control("GET", "eventgrid/subscribers/" + sid)


def _imds_entry(mock, vm, event_id):
    request = urllib.request.Request(mock.vm_url(vm) + "/metadata/scheduledevents?api-version=2020-07-01",
                                     headers={"Metadata": "true"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        events = json.loads(answer.read().decode("utf-8"))["Events"]
    return [e for e in events if e["EventId"] == event_id][0]


def test_event_grid_schema_reboot_of_a_scale_set_of_three(eg, monkeypatch):
    """Handshake over HTTPS with the mock's CA, then one notification per state change in Microsoft's
    shape; resourceInfo agrees with the IMDS and Resource Graph faces."""
    mock, receiver = eg.handle, eg.receiver(tls=True)
    sub = mock.add_eventgrid_subscriber(receiver.url(), ca_file=mock.ca_path, name="fleet-hook",
                                        headers={"Authorization": "Bearer abc"})
    assert sub["provisioning_state"] == "Succeeded" and sub["query_keys"] == ["code"]
    handshake = receiver.requests[0]
    assert handshake["method"] == "POST" and handshake["query"] == {"code": ["s3cret"]}
    assert handshake["headers"]["aeg-event-type"] == "SubscriptionValidation"
    assert handshake["headers"]["authorization"] == "Bearer abc"
    assert handshake["body"][0]["eventType"] == "Microsoft.EventGrid.SubscriptionValidationEvent"
    assert set(handshake["body"][0]["data"]) == {"validationCode", "validationUrl"}

    event = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["web0", "web1", "web2"],
                                            "notice": 600, "duration": 300})
    eid = event["event_id"]
    mock.wait_eventgrid(1, sub["id"], outcome="delivered")
    scheduled_entry = _imds_entry(mock, "web1", eid)
    mock.control("POST", "time/advance", {"seconds": 600})
    mock.wait_eventgrid(2, sub["id"], outcome="delivered")
    mock.control("POST", "time/advance", {"seconds": 300})
    records = mock.wait_eventgrid(3, sub["id"], outcome="delivered")
    assert [r["statuses"] for r in records] == [["Scheduled"], ["Started"], ["Completed"]]
    assert all(r["event_ids"] == [eid] and r["attempt"] == 1 for r in records)

    posts = receiver.notifications()
    assert len(posts) == 3
    ids = set()
    for post in posts:
        headers = post["headers"]
        assert post["query"] == {"code": ["s3cret"]} and headers["authorization"] == "Bearer abc"
        assert headers["content-type"] == "application/json; charset=utf-8"
        assert (headers["aeg-subscription-name"], headers["aeg-delivery-count"], headers["aeg-data-version"],
                headers["aeg-metadata-version"]) == ("fleet-hook", "0", "3.0", "1")
        assert isinstance(post["body"], list) and len(post["body"]) == 1
        note = post["body"][0]
        ids.add(note["id"])
        scope = "/subscriptions/%s/resourceGroups/rg-fleet/providers/Microsoft.Compute/virtualMachineScaleSets/web-ss" % SUB1
        assert note["subject"] == scope + "/providers/Microsoft.Maintenance/scheduledevents/" + eid
        assert note["topic"] == "/subscriptions/" + SUB1
        assert (note["eventType"], note["dataVersion"], note["metadataVersion"]) == (EVENT_TYPE, "3.0", "1")
        info = note["data"]["resourceInfo"]
        assert info["id"] == note["subject"] and info["name"] == eid and info["location"] == "eastus"
        assert info["type"].lower() == "microsoft.maintenance/scheduledevents"
        assert info["properties"]["Resources"] == ["web0", "web1", "web2"]
        assert note["data"]["apiVersion"] == "2024-07-01"
    assert len(ids) == 3, "a new Event Grid id for every notification"
    first = posts[0]["body"][0]
    props = first["data"]["resourceInfo"]["properties"]
    for key in ("EventId", "EventType", "ResourceType", "Resources", "EventStatus", "NotBefore", "Description",
                "EventSource", "DurationInSeconds"):
        assert props[key] == scheduled_entry[key], key
    assert _seconds(first["eventTime"]) == _seconds(mock.control("GET", "state")["now"]) - 900

    # Resource Graph shows the same event with the same properties as the last notification.
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    set_up_principal(mock, role="Reader")
    _status, _headers, answer = graph_query(mock, token(mock), subscriptions=(SUB1,))
    row = [r for r in answer["data"] if r["name"] == eid][0]
    last = posts[2]["body"][0]["data"]["resourceInfo"]
    assert row["id"] == last["id"] and row["properties"] == last["properties"]
    assert mock.control("GET", "audit")["eventgrid"][-1]["outcome"] == "delivered"
    assert _view(mock, sub["id"])["counters"] == {"delivered": 3, "retried": 0, "dropped": 0, "duplicated": 0,
                                                  "overflowed": 0}


def test_cloud_events_handshake_batch_and_single(eg):
    mock, receiver = eg.handle, eg.receiver()
    sub = mock.add_eventgrid_subscriber(receiver.url(secret="k2"), schema="cloudeventschemav1_0",
                                        max_events_per_batch=10)
    assert sub["schema"] == "CloudEventSchemaV1_0"
    options = receiver.requests[0]
    assert options["method"] == "OPTIONS" and options["query"] == {"code": ["k2"]}
    assert options["headers"]["webhook-request-origin"] == "eventgrid.azure.net"
    # Three events appear at the same simulated instant: their notifications go out as one batch.
    for vm, notice in (("z0", 100), ("z1", 200), ("web0", 300)):
        mock.control("POST", "events", {"at": 60, "event_type": "Freeze", "resources": [vm], "notice": notice})
    mock.control("POST", "time/advance", {"seconds": 60})
    batch = mock.wait_eventgrid(1, sub["id"], outcome="delivered")[0]
    assert batch["statuses"] == ["Scheduled"] * 3 and len(set(batch["ids"])) == 3
    post = receiver.notifications()[0]
    assert post["headers"]["content-type"] == "application/cloudevents-batch+json; charset=utf-8"
    assert post["headers"]["aeg-metadata-version"] == "1.0"
    assert [e["id"] for e in post["body"]] == batch["ids"]
    for event in post["body"]:
        assert set(event) == {"specversion", "id", "source", "subject", "type", "time", "datacontenttype", "data"}
        assert (event["specversion"], event["type"], event["source"]) == ("1.0", EVENT_TYPE, "/subscriptions/" + SUB1)
        assert event["subject"] == event["data"]["resourceInfo"]["id"]
    mock.control("POST", "time/advance", {"seconds": 100})
    single = mock.wait_eventgrid(2, sub["id"], outcome="delivered")[1]
    assert single["statuses"] == ["Started"]
    post = receiver.notifications()[1]
    assert post["headers"]["content-type"] == "application/cloudevents+json; charset=utf-8"
    assert isinstance(post["body"], dict) and post["body"]["id"] == single["ids"][0]


def test_retries_follow_event_grids_schedule_on_the_mocks_clock(eg):
    """503, 503, 408, then 200: retried after max(schedule step, the code's floor): 30, 30, 120 s."""
    mock, receiver = eg.handle, eg.receiver(answers=[503, 503, 408])
    sid = mock.add_eventgrid_subscriber(receiver.url())["id"]
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["z0"], "notice": 3600})
    expected = [30, 30, 120]
    for number, delay in enumerate(expected, 1):
        retry = mock.wait_eventgrid(number, sid, outcome="retry")[-1]
        assert retry["attempt"] == number and retry["reason"] in ("Busy", "TimedOut")
        assert _seconds(retry["next_attempt"]) - _seconds(retry["sim_time"]) == delay
        mock.control("POST", "time/advance", {"seconds": delay - 1})
        assert _view(mock, sid)["attempts"] == number
        mock.control("POST", "time/advance", {"seconds": 1})
    done = mock.wait_eventgrid(1, sid, outcome="delivered")[0]
    records = mock.eventgrid_deliveries(subscriber=sid)
    times = [_seconds(r["sim_time"]) for r in records if r["kind"] == "notification"]
    assert [b - a for a, b in zip(times, times[1:])] == expected
    assert done["attempt"] == 4 and len(set(r["ids"][0] for r in records if r["ids"])) == 1
    assert [p["headers"]["aeg-delivery-count"] for p in receiver.notifications()] == ["0", "1", "2", "3"]
    counters = _view(mock, sid)["counters"]
    assert (counters["delivered"], counters["retried"], counters["dropped"]) == (1, 3, 0)


def test_a_connection_error_is_retried(eg):
    """The receiver is gone after the handshake: a SocketError, retried after 10 s, then again."""
    mock, receiver = eg.handle, eg.receiver()
    sid = mock.add_eventgrid_subscriber(receiver.url())["id"]
    receiver.close()
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["z0"], "notice": 3600})
    first = mock.wait_eventgrid(1, sid, outcome="retry")[0]
    assert (first["error"], first["reason"], first["status"]) == ("SocketError", "SocketError", None)
    assert _seconds(first["next_attempt"]) - _seconds(first["sim_time"]) == 10
    mock.control("POST", "time/advance", {"seconds": 10})
    second = mock.wait_eventgrid(2, sid, outcome="retry")[1]
    assert second["attempt"] == 2 and second["ids"] == first["ids"]
    assert _seconds(second["next_attempt"]) - _seconds(second["sim_time"]) == 30


def test_a_failing_endpoint_is_retried_for_24_hours_then_dropped(eg):
    """Always 500: the whole documented schedule (10 s ... 6 h, then 12 h) until the 24-hour time to live."""
    mock, receiver = eg.handle, eg.receiver(answers=[500] * 40)
    sid = mock.add_eventgrid_subscriber(receiver.url())["id"]
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["z1"], "notice": 200000})
    delays = []
    for number in range(1, 12):
        retry = mock.wait_eventgrid(number, sid, outcome="retry")[-1]
        delays.append(_seconds(retry["next_attempt"]) - _seconds(retry["sim_time"]))
        mock.control("POST", "time/advance", {"seconds": delays[-1]})
    assert delays == [10, 30, 60, 300, 600, 1800, 3600, 10800, 21600, 43200, 43200]
    dropped = mock.wait_eventgrid(1, sid, outcome="dropped")[0]
    assert dropped["reason"] == "TimeToLiveExceeded" and dropped["attempt"] is None
    assert len(receiver.notifications()) == 11
    counters = _view(mock, sid)["counters"]
    assert (counters["retried"], counters["dropped"], counters["delivered"]) == (11, 1, 0)


def test_max_delivery_attempts_and_short_time_to_live(eg):
    mock = eg.handle
    short = mock.add_eventgrid_subscriber(eg.receiver(answers=[503] * 5).url(), max_delivery_attempts=2)["id"]
    ttl = mock.add_eventgrid_subscriber(eg.receiver(answers=[503] * 5).url(), event_ttl=1)["id"]
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["z0"], "notice": 3600})
    mock.wait_eventgrid(1, short, outcome="retry")
    mock.wait_eventgrid(1, ttl, outcome="retry")
    mock.control("POST", "time/advance", {"seconds": 30})
    assert mock.wait_eventgrid(1, short, outcome="dropped")[0]["reason"] == "MaxDeliveryAttemptsExceeded"
    mock.wait_eventgrid(2, ttl, outcome="retry")
    mock.control("POST", "time/advance", {"seconds": 30})
    assert mock.wait_eventgrid(1, ttl, outcome="dropped")[0]["reason"] == "TimeToLiveExceeded"


@pytest.mark.parametrize("status, reason", [(400, "BadRequest"), (401, "Unauthorized"), (413, "PayloadTooLarge")])
def test_never_retried_codes_drop_the_delivery_and_count_it(eg, status, reason):
    mock, receiver = eg.handle, eg.receiver(answers=[status])
    sid = mock.add_eventgrid_subscriber(receiver.url())["id"]
    mock.control("POST", "events", {"event_type": "Reboot", "resources": ["z0"], "notice": 60})
    dropped = mock.wait_eventgrid(1, sid, outcome="dropped")[0]
    assert (dropped["status"], dropped["reason"], dropped["attempt"]) == (status, reason, 1)
    mock.control("POST", "time/advance", {"seconds": 600})
    mock.wait_eventgrid(1, sid, outcome="delivered")  # the next notification still goes out
    records = [r for r in mock.eventgrid_deliveries(subscriber=sid) if r["kind"] == "notification"]
    assert [r["outcome"] for r in records] == ["dropped", "delivered"]
    assert _view(mock, sid)["counters"]["dropped"] == 1 and _view(mock, sid)["counters"]["retried"] == 0


def test_duplicates_on_demand_repeat_the_same_event_grid_id(eg):
    mock, receiver = eg.handle, eg.receiver()
    sid = mock.add_eventgrid_subscriber(receiver.url(), max_events_per_batch=50)["id"]
    assert mock.control("POST", "eventgrid/duplicate", {"count": 2}) == {"count": 2}
    mock.control("POST", "events", {"event_type": "Reboot", "resources": ["z0"], "notice": 60, "duration": 60})
    mock.wait_eventgrid(2, sid, outcome="delivered")
    mock.control("POST", "time/advance", {"seconds": 60})
    mock.wait_eventgrid(4, sid, outcome="delivered")
    mock.control("POST", "time/advance", {"seconds": 60})
    records = mock.wait_eventgrid(5, sid, outcome="delivered")
    ids = [r["ids"] for r in records]
    assert all(len(batch) == 1 for batch in ids), "a duplicate comes in a delivery of its own"
    assert ids[0] == ids[1] and ids[2] == ids[3] and len(set(i[0] for i in ids)) == 3
    assert [r["duplicates"] for r in records] == [[False], [True], [False], [True], [False]]
    bodies = [p["body"][0] for p in receiver.notifications()]
    assert bodies[0] == bodies[1]
    assert _view(mock, sid)["counters"]["duplicated"] == 2
    assert mock.control("GET", "eventgrid")["duplicates_pending"] == 0


def test_nothing_is_delivered_for_a_scope_whose_policy_does_not_publish(eg):
    mock, receiver = eg.handle, eg.receiver()
    sid = mock.add_eventgrid_subscriber(receiver.url())["id"]
    quiet = mock.control("POST", "events", {"event_type": "Reboot", "resources": ["q0"], "notice": 60})["event_id"]
    marker = mock.control("POST", "events", {"at": 1, "event_type": "Reboot", "resources": ["z0"], "notice": 60})
    mock.control("POST", "time/advance", {"seconds": 120})
    mock.wait_eventgrid(2, sid, outcome="delivered")
    seen = [eid for r in mock.eventgrid_deliveries(subscriber=sid) for eid in r["event_ids"]]
    assert quiet not in seen and seen == [marker["event_id"]] * 2
    assert mock.control("GET", "events/" + quiet)["status"] == "Started"


def test_queue_overflow_is_counted(eg):
    mock, receiver = eg.handle, eg.receiver(answers=[503] * 5)
    sid = mock.add_eventgrid_subscriber(receiver.url(), queue_limit=1)["id"]
    for vm in ("z0", "z1", "web0"):
        mock.control("POST", "events", {"at": 5, "event_type": "Freeze", "resources": [vm], "notice": 600})
    mock.control("POST", "time/advance", {"seconds": 5})
    mock.wait_eventgrid(1, sid, outcome="retry")
    overflow = mock.wait_eventgrid(2, sid, outcome="dropped")
    assert [r["error"] for r in overflow] == ["QueueFull", "QueueFull"]
    assert _view(mock, sid)["counters"]["overflowed"] == 2


@pytest.mark.parametrize("handshake, schema, needle", [
    ("202", "EventGridSchema", "HTTP 202"),
    ("wrong", "EventGridSchema", "validationCode"),
    ("refuse", "CloudEventSchemaV1_0", "WebHook-Allowed-Origin"),
])
def test_a_failed_handshake_leaves_the_subscriber_failed_and_unfed(eg, handshake, schema, needle):
    mock, receiver = eg.handle, eg.receiver(handshake=handshake)
    with pytest.raises(MockControlError) as info:
        mock.add_eventgrid_subscriber(receiver.url(), schema=schema)
    assert info.value.status == 400 and "validation handshake failed" in info.value.body["error"]
    assert needle in info.value.body["error"]
    [sub] = mock.control("GET", "eventgrid/subscribers")
    assert sub["provisioning_state"] == "Failed"
    mock.control("POST", "events", {"event_type": "Reboot", "resources": ["z0"], "notice": 0})
    other = mock.add_eventgrid_subscriber(eg.receiver().url())["id"]  # a witness that delivery runs
    mock.control("POST", "events", {"event_type": "Freeze", "resources": ["z1"]})
    mock.wait_eventgrid(1, other, outcome="delivered")
    assert receiver.notifications() == []
    assert [r["outcome"] for r in mock.eventgrid_deliveries(subscriber=sub["id"])] == ["failed"]


def test_an_unreachable_endpoint_fails_the_handshake(eg):
    probe = eg.receiver()
    url = probe.url()
    probe.close()
    with pytest.raises(MockControlError) as info:
        eg.handle.add_eventgrid_subscriber(url)
    assert "SocketError" in info.value.body["error"] and "Traceback" not in info.value.body["error"]


@pytest.mark.parametrize("body, needle", [
    ({}, '"url"'),
    ({"url": 5}, "url must be"),
    ({"url": "ftp://127.0.0.1/x"}, "https://"),
    ({"url": "https://user:pw@127.0.0.1/x"}, "user:password"),
    ({"url": "https:///x"}, "names no host"),
    ({"url": "https://127.0.0.1:99999/x"}, "is not a URL"),
    ({"url": "https://127.0.0.1/x#frag"}, "fragment"),
    ({"url": "http://127.0.0.1/x", "schema": "CustomInputSchema"}, "schema must be"),
    ({"url": "http://127.0.0.1/x", "max_events_per_batch": 0}, "max_events_per_batch (1 to 5000) must be >= 1"),
    ({"url": "http://127.0.0.1/x", "max_events_per_batch": 5001}, "max_events_per_batch (1 to 5000) must be <= 5000"),
    ({"url": "http://127.0.0.1/x", "max_events_per_batch": "10"}, "max_events_per_batch (1 to 5000) must be a number"),
    ({"url": "http://127.0.0.1/x", "max_events_per_batch": True}, "max_events_per_batch (1 to 5000) must be a number"),
    ({"url": "http://127.0.0.1/x", "max_delivery_attempts": 31}, "max_delivery_attempts (1 to 30)"),
    ({"url": "http://127.0.0.1/x", "event_ttl": 1441}, "event_ttl (minutes, 1 to 1440)"),
    ({"url": "http://127.0.0.1/x", "headers": ["Authorization"]}, "headers must be an object"),
    ({"url": "http://127.0.0.1/x", "headers": {"aeg-event-type": "x"}}, "set by Event Grid itself"),
    ({"url": "http://127.0.0.1/x", "headers": {"X-A": "a\r\nB: b"}}, "without line breaks"),
    ({"url": "http://127.0.0.1/x", "headers": {"Bad Name": "v"}}, "not an HTTP header name"),
    ({"url": "http://127.0.0.1/x", "headers": dict(("H%d" % i, "v") for i in range(11))}, "at most 10"),
    ({"url": "http://127.0.0.1/x", "headers": {"X-A": "v" * 4097}}, "at most 4096 bytes"),
    ({"url": "http://127.0.0.1/x", "ca_file": "/etc/hostname"}, "ca_file only applies to an https"),
    ({"url": "https://127.0.0.1/x", "ca_file": "/nonexistent/ca.pem"}, "is not a file"),
    ({"url": "https://127.0.0.1/x", "ca_file": "/etc/hostname"}, "is not a PEM CA certificate"),
    ({"url": "http://127.0.0.1/x", "name": "a b"}, "name must be 3 to 64"),
    ({"url": "http://127.0.0.1/x", "secret": "x"}, "unknown key 'secret'"),
])
def test_bad_subscriber_input_is_refused_with_the_field_named(eg, body, needle):
    with pytest.raises(MockControlError) as info:
        eg.handle.control("POST", "eventgrid/subscribers", body)
    assert info.value.status == 400 and needle in info.value.body["error"], info.value.body
    assert eg.handle.control("GET", "eventgrid/subscribers") == []


@pytest.mark.parametrize("method, path, body, status, needle", [
    ("POST", "eventgrid/duplicate", {}, 400, '{"count": N}'),
    ("POST", "eventgrid/duplicate", {"count": -1}, 400, "count must be >= 0"),
    ("POST", "eventgrid/duplicate", {"count": 1, "n": 2}, 400, "unknown key 'n'"),
    ("GET", "eventgrid/deliveries?since=abc", None, 400, "since must be a sequence number"),
    ("DELETE", "eventgrid/subscribers/S999", None, 404, "no Event Grid subscriber"),
    ("PUT", "eventgrid/subscribers", {}, 404, "no control call PUT /_mock/eventgrid/subscribers"),
])
def test_bad_control_calls_are_refused(eg, method, path, body, status, needle):
    with pytest.raises(MockControlError) as info:
        eg.handle.control(method, path, body)
    assert info.value.status == status and needle in info.value.body["error"]


def test_the_delivery_thread_stops_with_the_mock():
    receiver = Receiver()
    handle = start_mock(clock=FakeClock(), rate_limit=False, fleet=FLEET)
    try:
        handle.add_eventgrid_subscriber(receiver.url())
        worker = handle.mock.state._eg_worker
        assert worker.alive and handle.control("GET", "eventgrid")["delivering"] is True
    finally:
        handle.stop()
        receiver.close()
    assert not worker.alive
