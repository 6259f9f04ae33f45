# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The event_grid source without the engine: loaded the way ansible-rulebook loads it (run by path),
its coroutine serving on 127.0.0.1 (a free port), real HTTP and HTTPS requests sent to it as Event Grid
sends them (Microsoft's documented sample and handshakes). The dedup memory's clock is injected;
nothing waits for real seconds (queue_wait 0 where the buffer is full)."""

import asyncio
import contextlib
import copy
import json
import logging
import os
import ssl
import uuid

import aiohttp
import pytest
import yaml

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _event_grid_seen
from ansible_collections.azure_imds.scheduled_events.roles.mock_imds.files.mock_imds import tls
from ansible_collections.azure_imds.scheduled_events.tests.support.rulebook_engine import ROOT
from .test_event_source import run_path

SOURCE = run_path(os.path.join(ROOT, "extensions", "eda", "plugins", "event_source", "event_grid.py"))
check_args = SOURCE["check_args"]
SourceConfigError = SOURCE["SourceConfigError"]
SAMPLE_PATH = os.path.join(ROOT, "tests", "fixtures", "event_grid", "scheduled_event_emitted.json")
SECRET = "s3cret-0123456789abcdef-rotated-A"
SECOND_SECRET = "s3cret-0123456789abcdef-rotated-B"
SUB = "0f3c2a54-6f0e-4b7a-9d55-4f1a0c7e2b10"
LIMIT = 60  # seconds: a bound on a hung test only, never waited in a passing one


def sample():
    with open(SAMPLE_PATH, encoding="utf-8") as handle:
        return json.load(handle)["event"]


def notification(status="Scheduled", event_id=None, eg_id=None, scope="virtualMachineScaleSets/web",
                 resources=("web_0", "web_1"), not_before="Mon, 19 Sep 2025 18:29:47 GMT", **properties):
    """An Event Grid schema notification shaped as Microsoft's sample, with real ids."""
    event_id = event_id or str(uuid.uuid4()).upper()
    arm_id = ("/subscriptions/%s/resourceGroups/rg1/providers/Microsoft.Compute/%s/providers/"
              "microsoft.maintenance/scheduledevents/%s" % (SUB, scope, event_id))
    event = sample()
    event.update(id=eg_id or str(uuid.uuid4()), topic="/subscriptions/%s" % SUB, subject=arm_id)
    info = event["data"]["resourceInfo"]
    info.update(id=arm_id, name=event_id)
    info["properties"].update(EventId=event_id, EventStatus=status, EventType="Reboot", NotBefore=not_before,
                              Resources=list(resources), **properties)
    return event


def cloud_event(event):
    """The same notification in the CloudEvents 1.0 schema (Event Grid's mapping of the keys)."""
    return {"specversion": "1.0", "id": event["id"], "source": event["topic"], "subject": event["subject"],
            "type": event["eventType"], "time": event["eventTime"], "datacontenttype": "application/json",
            "data": event["data"]}


def validation_event(code="512d38b6-c7b8-40c8-89fe-f46f9e9622b6"):
    return {"id": str(uuid.uuid4()), "topic": "/subscriptions/%s" % SUB, "subject": "",
            "data": {"validationCode": code, "validationUrl": "https://rp-eastus2.eventgrid.azure.net/x"},
            "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent", "eventTime": "2025-09-19T18:00:00Z",
            "metadataVersion": "1", "dataVersion": "1"}


class Clock(object):
    def __init__(self):
        self.now = 1700000000.0

    def __call__(self):
        return self.now


class Source(object):
    """A running source: its URL, the rulebook's queue, and requests as Event Grid makes them."""

    def __init__(self, url, queue, session, task):
        self.url = url
        self.queue = queue
        self.session = session
        self.task = task

    async def request(self, method="POST", body=None, code=SECRET, path="/eventgrid", headers=None,
                      content_type="application/json", data=None):
        params = {} if code is None else {"code": code}
        sent = dict({"Content-Type": content_type, "aeg-event-type": "Notification", "aeg-delivery-count": "0"},
                    **(headers or {}))
        if data is None and body is not None:
            data = json.dumps(body).encode("utf-8")
        async with self.session.request(method, self.url + path, params=params, data=data, headers=sent) as answer:
            text = await answer.text()
            return answer.status, (json.loads(text) if text else None), answer.headers

    def taken(self):
        """Every event the rulebook's queue holds now."""
        events = []
        while not self.queue.empty():
            events.append(self.queue.get_nowait())
        return events

    async def settle(self, count):
        """The next count events off the rulebook's queue (the feeder hands them over)."""
        return [await asyncio.wait_for(self.queue.get(), LIMIT) for _index in range(count)]


@contextlib.asynccontextmanager
async def serving(seen=None, queue=None, ca=None, **given):
    args = dict({"port": 8080, "path": "/eventgrid", "secret": [SECRET, SECOND_SECRET]}, **given)
    options, _warnings = check_args(args)
    options["port"] = 0  # a free port (0 is refused in a rulebook)
    queue = queue if queue is not None else asyncio.Queue()
    bound = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(SOURCE["run"](queue, options, seen=seen, started=bound.set_result))
    await asyncio.wait([task, bound], timeout=LIMIT, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    scheme = "https" if options["certfile"] else "http"
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=ca) if ca else False)
    async with aiohttp.ClientSession(connector=connector) as session:
        try:
            yield Source("%s://127.0.0.1:%d" % (scheme, bound.result()[1]), queue, session, task)
        finally:
            task.cancel()
            await asyncio.wait([task])


def run(scenario):
    return asyncio.run(asyncio.wait_for(scenario(), LIMIT))


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


# -- Microsoft's sample, what reaches the rulebook -----------------------------------------------

def test_microsoft_s_sample_is_queued_as_fleet_event_info_reads_it(logs):
    async def scenario():
        async with serving() as source:
            answer = await source.request(body=[sample()], headers={"aeg-delivery-count": "2"})
            return answer, await source.settle(1)

    (status, body, _headers), (event,) = run(scenario)
    assert status == 200 and body == {"queued": 1, "duplicates": 0, "skipped": 0}
    assert event["type"] == "started"
    scheduled = event["scheduled_event"]
    assert scheduled["event_id"] == "3da1b9aa-5204-4335-8c33-c54e315dcffe"
    assert scheduled["event_status"] == "Started" and scheduled["event_type"] == "Freeze"
    # The weekday is wrong in Microsoft's sample (19 Sep 2025 was a Friday): read all the same.
    assert scheduled["not_before"] == "2025-09-19T18:29:47Z"
    assert scheduled["resources"] == ["myvmss_1", "myvmss_2"] and scheduled["duration_in_seconds"] == 5
    assert scheduled["location"] == "eastus"
    # The sample's placeholder id ({subscription-id}) is no ARM id: kept, with no scope.
    assert scheduled["id"].endswith("/scheduledevents/{event-id}") and scheduled["scope_id"] is None
    assert event["event_grid"] == {
        "id": "3da1b9aa-5204-4335-8c33-c54e315dcffe", "topic": "/subscriptions/{subscription-id}",
        "subject": scheduled["id"], "eventType": "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted",
        "dataVersion": "3.0", "metadataVersion": "1", "eventTime": "2017-06-26T18:41:00.9584103Z",
        "data_api_version": "2024-07-01", "delivery_count": 2, "schema": "EventGridSchema"}
    assert "(element #1, data.resourceInfo): id '/subscriptions/{subscription-id}/" in logs.text
    assert "is not a scheduled event's id" in logs.text


def test_the_scheduled_event_is_the_dict_fleet_event_info_returns():
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _fleet

    event = notification(status="Scheduled", scope="virtualMachineScaleSets/web", resources=["web_0", "web_3"])

    async def scenario():
        async with serving() as source:
            await source.request(body=[event])
            return await source.settle(1)

    (queued,) = run(scenario)
    row = dict(event["data"]["resourceInfo"])
    assert queued["scheduled_event"] == _fleet.event_from_row(row, 1, [])
    scheduled = queued["scheduled_event"]
    assert queued["type"] == "scheduled"
    assert scheduled["subscription_id"] == SUB and scheduled["resource_group"] == "rg1"
    prefix = "/subscriptions/%s/resourceGroups/rg1/providers/Microsoft.Compute/" % SUB
    assert scheduled["scope_id"] == prefix + "virtualMachineScaleSets/web"
    # A scale set's event names its instances <set>_<n>: each becomes the instance's id.
    assert scheduled["virtual_machine_ids"] == [prefix + "virtualMachineScaleSets/web/virtualMachines/0",
                                                prefix + "virtualMachineScaleSets/web/virtualMachines/3"]


@pytest.mark.parametrize("status, transition", [("Scheduled", "scheduled"), ("Started", "started"),
                                                ("Completed", "ended"), ("Canceled", "cancelled"),
                                                ("completed", "ended")])
def test_each_status_is_named_as_the_imds_source_names_its_transitions(status, transition):
    from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _transitions

    async def scenario():
        async with serving() as source:
            await source.request(body=[notification(status=status, not_before="")])
            return await source.settle(1)

    (queued,) = run(scenario)
    assert queued["type"] == transition and transition in _transitions.TRANSITIONS
    assert queued["scheduled_event"]["event_status"] == status and queued["scheduled_event"]["not_before"] is None


def test_the_id_comes_from_the_subject_without_resource_info_id_and_ids_are_read_without_case():
    event = notification(status="Started", scope="virtualMachines/vm1", resources=["vm1"])
    subject = event["subject"].upper().replace("SUBSCRIPTIONS", "subscriptions")
    event["subject"] = subject
    del event["data"]["resourceInfo"]["id"]
    event["data"]["resourceInfo"]["type"] = "MICROSOFT.MAINTENANCE/SCHEDULEDEVENTS"

    async def scenario():
        async with serving() as source:
            await source.request(body=[event])
            return await source.settle(1)

    (queued,) = run(scenario)
    scheduled = queued["scheduled_event"]
    assert scheduled["id"] == subject
    assert scheduled["scope_id"].endswith("/providers/Microsoft.Compute/virtualMachines/VM1")
    assert scheduled["resource_group"] == "RG1" and scheduled["subscription_id"] == SUB


# -- handshakes ------------------------------------------------------------------------------------

def test_the_event_grid_schema_handshake_is_answered_with_its_validation_code(logs):
    async def scenario():
        async with serving() as source:
            ok = await source.request(body=[validation_event("ABC-123")],
                                      headers={"aeg-event-type": "SubscriptionValidation"})
            refused = await source.request(body=[validation_event("ABC-123")], code=None)
            return ok, refused, source.taken()

    (status, body, _h), (refused, refused_body, _h2), taken = run(scenario)
    assert (status, body) == (200, {"validationResponse": "ABC-123"})
    assert refused == 401 and "validationResponse" not in json.dumps(refused_body) and taken == []


def test_the_cloud_events_handshake_echoes_the_origin_and_allows_a_rate():
    async def scenario():
        async with serving(allowed_rate="120") as source:
            ok = await source.request("OPTIONS", headers={"WebHook-Request-Origin": "eventgrid.azure.net",
                                                          "WebHook-Request-Rate": "10"})
            refused = await source.request("OPTIONS", code="wrong",
                                           headers={"WebHook-Request-Origin": "eventgrid.azure.net"})
            return ok, refused

    (status, _body, headers), (refused, _b, refused_headers) = run(scenario)
    assert status == 200
    assert headers["WebHook-Allowed-Origin"] == "eventgrid.azure.net" and headers["WebHook-Allowed-Rate"] == "120"
    assert refused == 401 and "WebHook-Allowed-Origin" not in refused_headers


def test_cloud_events_one_event_and_a_batch_are_queued():
    first, second, third = (notification(status=s) for s in ("Scheduled", "Started", "Completed"))

    async def scenario():
        async with serving() as source:
            one = await source.request(body=cloud_event(first), content_type="application/cloudevents+json; charset=utf-8")
            batch = await source.request(body=[cloud_event(second), cloud_event(third)],
                                         content_type="application/cloudevents-batch+json; charset=utf-8")
            return one[0], batch[0], await source.settle(3)

    one, batch, events = run(scenario)
    assert (one, batch) == (200, 200)
    assert [e["type"] for e in events] == ["scheduled", "started", "ended"]
    envelope = events[0]["event_grid"]
    assert envelope["schema"] == "CloudEventSchemaV1_0" and envelope["specversion"] == "1.0"
    assert envelope["topic"] == envelope["source"] == first["topic"] and envelope["eventType"] == first["eventType"]
    assert events[0]["scheduled_event"]["event_id"] == first["data"]["resourceInfo"]["properties"]["EventId"]


# -- the secret -----------------------------------------------------------------------------------

def test_a_delivery_without_a_valid_secret_is_401_and_nothing_is_queued_and_a_rotated_secret_works(logs):
    async def scenario():
        async with serving() as source:
            answers = [(await source.request(body=[notification()], code=code))[0]
                       for code in (None, "wrong", SECRET + "x", "")]
            rotated = (await source.request(body=[notification()], code=SECOND_SECRET))[0]
            return answers, rotated, await source.settle(1), source.taken()

    answers, rotated, settled, rest = run(scenario)
    assert answers == [401, 401, 401, 401] and rotated == 200 and len(settled) == 1 and rest == []


def test_the_authorization_header_is_checked_when_configured():
    async def scenario():
        async with serving(secret=None, authorization=["Bearer old-token-0123456789", "Bearer new-token-0123456789"]) as source:
            wrong = await source.request(body=[notification()], code=None, headers={"Authorization": "Bearer nope"})
            missing = await source.request(body=[notification()], code=None)
            good = await source.request(body=[notification()], code=None,
                                        headers={"Authorization": "Bearer new-token-0123456789"})
            return wrong[0], missing[0], good[0], await source.settle(1)

    wrong, missing, good, _events = run(scenario)
    assert (wrong, missing, good) == (401, 401, 200)


def test_the_query_string_never_reaches_the_log(logs):
    async def scenario():
        async with serving() as source:
            await source.request(body=[notification()])
            await source.request(body=[notification()], code="a-wrong-guess-of-the-secret")
            await source.request(data=b"{not json")
            await source.request(data=b"[" * 100)
            await source.request("OPTIONS", headers={"WebHook-Request-Origin": "eventgrid.azure.net"})
            await source.request("GET")
            # A request line aiohttp cannot parse, with the secret in it.
            host, port = source.url.split("//")[1].split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"POST /eventgrid?code=" + SECRET.encode() + b" HTTP/9.x\r\n\x00\r\n\r\n")
            await writer.drain()
            await reader.read()
            writer.close()
            return await source.settle(1)

    run(scenario)
    assert "/eventgrid" in logs.text
    for secret in (SECRET, "a-wrong-guess-of-the-secret", "code="):
        assert secret not in logs.text


# -- answers to what cannot be read, or must not be queued -------------------------------------------

@pytest.mark.parametrize("data, content_type", [
    (b"{not json", "application/json"),
    (b"", "application/json"),
    (b"\xff\xfe[]", "application/json"),
    (json.dumps({"id": "x", "eventType": "y"}).encode(), "application/json"),   # Event Grid schema: always an array
    (b"42", "application/json"),
    (b"[]", "application/cloudevents+json"),
    (b"[" * 40 + b"]" * 40, "application/json"),
], ids=["not-json", "empty", "not-utf8", "object", "number", "cloud-event-not-object", "too-deep"])
def test_a_body_that_cannot_be_parsed_is_400_and_the_source_goes_on(data, content_type):
    async def scenario():
        async with serving() as source:
            refused = await source.request(data=data, content_type=content_type)
            after = await source.request(body=[notification()])
            return refused, after[0], await source.settle(1)

    (status, body, _headers), after, _events = run(scenario)
    assert status == 400 and body["status"] == 400 and after == 200


def test_an_oversize_body_is_413_by_length_and_by_count(logs):
    async def scenario():
        async with serving(max_body_size=65536) as source:
            big = await source.request(data=b"[" + b" " * 70000 + b"]")

            async def chunks():
                yield b"["
                for _index in range(20):
                    yield b" " * 4096
                yield b"]"
            chunked = await source.request(data=chunks())
            many = await source.request(data=json.dumps([{}] * 5001).encode())
            return big[0], chunked[0], many[0], source.taken()

    big, chunked, many, taken = run(scenario)
    assert (big, chunked, many, taken) == (413, 413, 413, [])


def test_other_types_subscription_deleted_and_malformed_elements_are_skipped_with_200(logs):
    other = notification()
    other["data"]["resourceInfo"]["type"] = "Microsoft.Compute/virtualMachines"
    aks = notification()
    aks["data"]["resourceInfo"]["type"] = "microsoft.containerservice/scheduledevents"
    deleted = {"id": str(uuid.uuid4()), "eventType": "Microsoft.EventGrid.SubscriptionDeletedEvent",
               "data": {"eventSubscriptionId": "/subscriptions/x"}, "subject": "", "dataVersion": "1"}
    no_id = notification()
    del no_id["id"]
    unknown_status = notification(status="Paused")
    kept = notification()

    async def scenario():
        async with serving() as source:
            answer = await source.request(body=[other, aks, deleted, 42, no_id, unknown_status, kept])
            return answer, await source.settle(1), source.taken()

    (status, body, _headers), (event,), rest = run(scenario)
    assert status == 200 and body == {"queued": 1, "duplicates": 0, "skipped": 6} and rest == []
    assert event["event_grid"]["id"] == kept["id"]
    assert "SubscriptionDeletedEvent" in logs.text and "Microsoft.Compute/virtualMachines" in logs.text
    assert "EventStatus 'Paused' is none of" in logs.text and "not a JSON object" in logs.text


def test_untrusted_text_is_safe_in_the_log_and_on_the_queue(logs):
    event = notification(Description="drain\x00now \ud800 " + "x" * 900000, resources=["web_\x00", "\udfff"])
    event["eventType"] = "evil\x00type"
    too_big = notification(Description="y" * (1024 * 1024 + 10))

    async def scenario():
        async with serving(max_body_size=8 * 1024 * 1024) as source:
            body = json.dumps([event, too_big]).encode("utf-8")   # \ud800 travels escaped, as JSON allows
            answer = await source.request(data=body)
            return answer[0], await source.settle(1), source.taken()

    status, (queued,), rest = run(scenario)
    assert status == 200 and rest == []
    scheduled = queued["scheduled_event"]
    assert scheduled["description"].startswith("drain\x00now \ufffd ") and len(scheduled["description"]) > 900000
    assert scheduled["resources"] == ["web_\x00", "\ufffd"]
    json.dumps(queued).encode("utf-8")    # no lone surrogate left anywhere: it encodes
    assert "\x00" not in logs.text and "\ud800" not in logs.text
    assert max(len(record.getMessage()) for record in logs.records) < 4000
    assert "is %d bytes; Event Grid's events are at most" % 0 not in logs.text and "Event Grid's events are at most" in logs.text


# -- the buffer, duplicates, batches ---------------------------------------------------------------

def test_duplicates_are_dropped_by_event_grid_id_never_by_event_id():
    scheduled = notification(status="Scheduled")
    event_id = scheduled["data"]["resourceInfo"]["properties"]["EventId"]
    again = copy.deepcopy(scheduled)
    started = notification(status="Started", event_id=event_id)
    scheduled_new_id = notification(status="Scheduled", event_id=event_id)

    async def scenario():
        async with serving() as source:
            answers = [await source.request(body=[scheduled]), await source.request(body=[again]),
                       await source.request(body=[scheduled, again, started, scheduled_new_id])]
            return [a[1] for a in answers], await source.settle(3), source.taken()

    bodies, events, rest = run(scenario)
    assert bodies == [{"queued": 1, "duplicates": 0, "skipped": 0}, {"queued": 0, "duplicates": 1, "skipped": 0},
                      {"queued": 2, "duplicates": 2, "skipped": 0}]
    assert [(e["type"], e["event_grid"]["id"]) for e in events] == [
        ("scheduled", scheduled["id"]), ("started", started["id"]), ("scheduled", scheduled_new_id["id"])]
    assert all(e["scheduled_event"]["event_id"] == event_id for e in events) and rest == []


def test_a_full_buffer_is_503_and_a_retry_queues_only_the_rest():
    batch = [notification(status="Scheduled") for _index in range(3)]

    async def scenario():
        rulebook = asyncio.Queue(1)    # ansible-rulebook's own queue holds one event
        async with serving(queue=rulebook, queue_size=1, queue_wait=0) as source:
            first = await source.request(body=batch)
            await asyncio.sleep(0)    # the feeder hands the first event to the rulebook's queue
            second = await source.request(body=batch, headers={"aeg-delivery-count": "1"})
            taken = [rulebook.get_nowait()]
            third = await source.request(body=batch, headers={"aeg-delivery-count": "2"})
            taken += await source.settle(2)
            return first, second, third, taken

    first, second, third, taken = run(scenario)
    assert first[0] == 503 and first[2]["Retry-After"] == "10"
    assert "1 queued" in first[1]["message"] and "queue_size 1" in first[1]["message"]
    assert second[0] == 503 and "1 queued, 1 duplicate dropped" in second[1]["message"]
    assert third[0] == 200 and third[1] == {"queued": 1, "duplicates": 2, "skipped": 0}
    assert [e["event_grid"]["id"] for e in taken] == [e["id"] for e in batch]
    assert [e["event_grid"]["delivery_count"] for e in taken] == [0, 1, 2]


def test_a_batch_of_many_events_waits_for_room_and_is_answered_once_all_are_queued():
    batch = [notification(status="Scheduled") for _index in range(300)]

    async def scenario():
        rulebook = asyncio.Queue(1)
        async with serving(queue=rulebook, queue_size=50, queue_wait=20) as source:
            taken = []

            async def rulebook_takes():
                while len(taken) < len(batch):
                    taken.append(await rulebook.get())
            consumer = asyncio.ensure_future(rulebook_takes())
            answer = await source.request(body=batch)
            await asyncio.wait_for(consumer, LIMIT)
            return answer, taken

    (status, body, _headers), taken = run(scenario)
    assert status == 200 and body == {"queued": 300, "duplicates": 0, "skipped": 0}
    assert [e["event_grid"]["id"] for e in taken] == [e["id"] for e in batch]


def test_the_dedup_memory_is_kept_across_a_restart_in_dedup_file_and_forgets_after_the_horizon(tmp_path):
    path = str(tmp_path / "seen.jsonl")
    clock = Clock()
    event = notification()

    async def deliver(seen):
        async with serving(seen=seen, dedup_file=path) as source:
            answer = await source.request(body=[event])
            return answer[1], source.taken() if answer[1]["queued"] == 0 else await source.settle(1)

    def restart():
        seen = _event_grid_seen.SeenIds(path, horizon=24 * 3600.0, max_ids=1000, clock=clock)
        seen.load()
        return seen

    first = run(lambda: deliver(restart()))
    clock.now += 23 * 3600
    second = run(lambda: deliver(restart()))
    clock.now += 2 * 3600
    third = run(lambda: deliver(restart()))
    assert [r[0]["queued"] for r in (first, second, third)] == [1, 0, 1]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_the_dedup_journal_survives_a_torn_line_and_is_compacted(tmp_path):
    path = str(tmp_path / "seen.jsonl")
    clock = Clock()
    seen = _event_grid_seen.SeenIds(path, horizon=100.0, max_ids=3, clock=clock)
    assert seen.load() == 0
    for name in "abcde":
        seen.add(name)
        clock.now += 1
    seen.write()
    seen.close()
    with open(path, "a") as handle:
        handle.write('["f", 17000')    # a write cut short by a crash
    again = _event_grid_seen.SeenIds(path, horizon=100.0, max_ids=3, clock=clock)
    assert again.load() == 1
    # Bounded: only the newest max_ids are remembered.
    assert [name in again for name in "abcde"] == [False, False, True, True, True]
    with open(path) as handle:
        assert len(handle.read().splitlines()) == 4    # header + 3: rewritten at load
    clock.now += 200
    assert len(again) == 0


def test_a_dedup_file_that_is_not_a_journal_is_refused_naming_it(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")

    async def scenario():
        await SOURCE["main"](asyncio.Queue(), {"port": 1, "secret": SECRET, "dedup_file": str(path)})

    with pytest.raises(SourceConfigError, match=r"dedup_file .*notes.txt is not a journal of this source"):
        run(scenario)
    assert path.read_text() == "my notes\n"

    async def no_directory():
        await SOURCE["main"](asyncio.Queue(), {"port": 1, "secret": SECRET, "dedup_file": str(tmp_path / "no" / "seen")})

    with pytest.raises(SourceConfigError, match=r"dedup_file .*/no/seen cannot be written .*give a path in a directory"):
        run(no_directory)


def test_https_with_a_test_ca(tmp_path):
    ca = tls.make_test_ca(str(tmp_path / "tls"))
    options = {"certfile": str(tmp_path / "tls" / tls.CERT_FILE), "keyfile": str(tmp_path / "tls" / tls.KEY_FILE)}

    async def scenario():
        async with serving(ca=ca, **options) as source:
            assert source.url.startswith("https://")
            handshake = await source.request(body=[validation_event("TLS-CODE")])
            delivery = await source.request(body=[notification()])
            return handshake[1], delivery[0], await source.settle(1)

    handshake, delivery, _events = run(scenario)
    assert handshake == {"validationResponse": "TLS-CODE"} and delivery == 200


def test_another_path_is_404_and_another_method_405():
    async def scenario():
        async with serving() as source:
            return ((await source.request(body=[notification()], path="/other"))[0],
                    (await source.request("GET"))[0], (await source.request("PUT", body=[]))[0], source.taken())

    assert run(scenario) == (404, 405, 405, [])


# -- options, checked once at start ------------------------------------------------------------

def test_the_documented_options_are_the_accepted_options():
    documented = yaml.safe_load(SOURCE["DOCUMENTATION"])
    assert sorted(documented["options"]) == sorted(SOURCE["OPTIONS"])
    defaults, _warnings = check_args({"port": 8443, "secret": SECRET})
    for name, spec in documented["options"].items():
        if "default" in spec:
            expected = float(spec["default"]) if spec["type"] == "float" else spec["default"]
            assert defaults[name] == expected, name
    assert yaml.safe_load(SOURCE["EXAMPLES"])[0]["sources"][0]["azure_imds.scheduled_events.event_grid"]


@pytest.mark.parametrize("args, message", [
    ({"secret": SECRET}, r"port is required"),
    ({"port": 0, "secret": SECRET}, r"port must be a whole number from 1 to 65535"),
    ({"port": "http", "secret": SECRET}, r"port must be a whole number"),
    ({"port": 8443}, r"secret \(or authorization\) is required.*insecure_no_secret: true"),
    ({"port": 8443, "secret": ""}, r"secret: entry 1 is empty"),
    ({"port": 8443, "secret": []}, r"secret must be a string or a non-empty list"),
    ({"port": 8443, "secret": [SECRET, 5]}, r"secret must be a string or a non-empty list"),
    ({"port": 8443, "authorization": "Bearer\nx"}, r"authorization: entry 1 .*control characters"),
    ({"port": 8443, "secret": SECRET, "path": "eventgrid"}, r"path must be a URL path starting with /"),
    ({"port": 8443, "secret": SECRET, "path": "/eg?code=x"}, r"path must be .* without a query string"),
    ({"port": 8443, "secret": SECRET, "keyfile": "/k.pem"}, r"keyfile needs certfile"),
    ({"port": 8443, "secret": SECRET, "queue_size": 0}, r"queue_size must be a whole number from 1 to 1000000"),
    ({"port": 8443, "secret": SECRET, "queue_wait": 30}, r"queue_wait must be a number from 0 to 20"),
    ({"port": 8443, "secret": SECRET, "max_body_size": 10}, r"max_body_size must be a whole number from 65536"),
    ({"port": 8443, "secret": SECRET, "dedup_hours": 0.5}, r"dedup_hours must be a number from 1 to 168"),
    ({"port": 8443, "secret": SECRET, "dedup_max_ids": 10}, r"dedup_max_ids must be a whole number from 1000"),
    ({"port": 8443, "secret": SECRET, "insecure_no_secret": "yes"}, r"insecure_no_secret must be true or false"),
    ({"port": 8443, "secret": SECRET, "allowed_rate": "fast"}, r"allowed_rate must be a whole number"),
    ({"port": 8443, "secret": SECRET, "porte": 1}, r"unknown option porte; the options are host, port"),
    ("port=8443", r"the source's arguments must be a mapping"),
])
def test_bad_options_are_refused_with_a_message_naming_them(args, message):
    with pytest.raises(SourceConfigError, match=message):
        check_args(args)


def test_no_secret_needs_the_explicit_insecure_option_and_warns():
    clean, warnings = check_args({"port": "8443", "insecure_no_secret": "true", "eda_feedback_queue": None})
    assert clean["port"] == 8443 and clean["secret"] is None
    assert warnings == ["insecure_no_secret: the source accepts requests without a secret."]
    assert "shorter than 16" in check_args({"port": 1, "secret": "short"})[1][0]


def test_main_refuses_a_bad_certificate_and_a_busy_port_naming_them(tmp_path, logs):
    bad = tmp_path / "cert.pem"
    bad.write_text("not a certificate")

    async def certificate():
        await SOURCE["main"](asyncio.Queue(), {"port": 1, "secret": SECRET, "certfile": str(bad)})

    with pytest.raises(SourceConfigError, match=r"certfile .*cert.pem cannot be loaded"):
        run(certificate)

    async def busy_port():
        async with serving() as source:
            port = int(source.url.rsplit(":", 1)[1])
            await SOURCE["main"](asyncio.Queue(), {"port": port, "host": "127.0.0.1", "secret": SECRET})

    with pytest.raises(SourceConfigError, match=r"port \d+ on host 127.0.0.1 cannot be listened on"):
        run(busy_port)
    assert "Traceback" not in logs.text
