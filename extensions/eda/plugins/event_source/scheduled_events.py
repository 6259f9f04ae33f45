# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event-Driven Ansible event source: one event per transition of an Azure scheduled event."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: scheduled_events
short_description: Azure Scheduled Events of this VM as Event-Driven Ansible events
version_added: 0.1.0
description:
  - An ansible-rulebook event source that polls the Scheduled Events document of the Azure Instance
    Metadata Service (IMDS) on the VM it runs on, and puts one event on the rulebook's queue for
    each transition of a scheduled event, with the same client, retry rules and normalised fields
    as M(azure_imds.scheduled_events.scheduled_event_info).
  - "Transitions: V(scheduled) (an event seen for the first time, not yet Started), V(started) (seen
    Started for the first time; an event first seen Started, such as the Reboot Azure creates already
    Started after a host hardware failure, emits only V(started) and its C(seen_scheduled) is V(false)), V(ended) (an event that was
    seen Started left the document) and V(cancelled) (an event that was never seen Started left the
    document)."
  - The service never says an event was cancelled; V(cancelled) is inferred. An event that went
    from Scheduled to Started and away between two polls looks the same.
  - An event has left the document when a document with a higher C(DocumentIncarnation) lacks it,
    or when two documents in a row lack it. The watcher role decides it the same way (one shared
    rule in the collection).
  - "Each event put on the queue has: C(type) (one of the transitions), C(scheduled_event) (the
    event as M(azure_imds.scheduled_events.scheduled_event_info) returns it in RV(events); for
    V(ended) and V(cancelled) as it was last seen), C(document_incarnation), C(resource_name) (this
    VM's name), C(affects_this_host), C(seen_scheduled), C(auto_approved) and C(started_before_seen)."
  - "C(auto_approved) is V(true) for an event with C(EventSource) V(User) that this source saw first as
    C(Started): approved automatically by the Scheduled Events Policy (C(userInitiatedReboot) or
    C(userInitiatedRedeploy) C(automaticallyApprove)), so no drain was possible.
    M(azure_imds.scheduled_events.scheduled_events_policy) shows and changes that policy.
    C(started_before_seen) is V(true) for any other event first seen C(Started) (a platform event whose
    C(NotBefore) passed between two polls, a Preempt, a host failure). Both stay V(false) for an event
    seen C(Scheduled) first, and both are carried on its V(ended) too. After a restart of ansible-rulebook
    an event already C(Started) is seen for the first time again."
  - Each type is emitted at most once per event. A restart of ansible-rulebook starts afresh; set
    O(emit_existing=false) so that events already present then are not announced again.
  - IMDS answers only from inside the VM, so the rulebook runs on the VM. For a fleet, let the
    watcher role notify a central rulebook's webhook instead.
  - Faults of IMDS (errors, timeouts, throttling) are logged and polled through with the client's
    backoff; the source never stops for them. A bad option stops it at start with a message naming
    the option.
author:
  - azure_imds.scheduled_events contributors
options:
  imds_url:
    description:
      - Base URL of the Instance Metadata Service, without C(/metadata).
      - When omitted, the environment variable E(AZURE_IMDS_URL) of ansible-rulebook is used, and when
        that is unset, the real service at V(http://169.254.169.254).
      - Point it at the mock (for example V(http://127.0.0.1:8080/vm/web_0)) to test rulebooks.
    type: str
  api_version:
    description:
      - Scheduled Events api-version to request.
    type: str
    default: '2020-07-01'
    choices: ['2017-03-01', '2017-08-01', '2017-11-01', '2019-01-01', '2019-04-01', '2019-08-01', '2020-07-01']
  request_timeout:
    description:
      - Seconds one request to IMDS may take in all. The first request after a quiet day can take
        up to two minutes while the service switches itself on.
      - A number of seconds from 0.1 to 86400.
    type: float
    default: 120
  resource_name:
    description:
      - The name of this VM as it appears in the C(Resources) of events.
      - When omitted, it is read from IMDS (C(/metadata/instance/compute/name)) at start, retried
        with the same backoff until IMDS answers.
    type: str
  event_ids:
    description:
      - Emit only transitions of events with these EventIds (compared without regard to case).
    type: list
    elements: str
  event_types:
    description:
      - Emit only transitions of events of these types, for example V(Freeze), V(Reboot),
        V(Redeploy), V(Preempt), V(Terminate). A type the collection does not know is kept with a
        warning in the log.
    type: list
    elements: str
  event_statuses:
    description:
      - Emit only transitions of events in these statuses (as last seen).
    type: list
    elements: str
    choices: [Scheduled, Started]
  event_sources:
    description:
      - Emit only transitions of events from these sources.
    type: list
    elements: str
    choices: [Platform, User]
  this_host_only:
    description:
      - Emit only transitions of events whose C(Resources) name this VM (O(resource_name)).
      - Events of the other VMs of an availability set or scale set placement group are still
        tracked, so their transitions are right when this option changes.
    type: bool
    default: false
  poll_interval:
    description:
      - Seconds between two reads of the document. Microsoft suggests once a second.
      - IMDS allows 5 requests a second per VM, shared by every program on it, so values below 0.2
        are refused. After a failure the next read waits the client's backoff instead, up to 10 seconds.
      - A number of seconds from 0.2 to 86400.
    type: float
    default: 1
  emit_existing:
    description:
      - Whether events already in the first document read are announced.
      - V(false) remembers them without an event; their later transitions (V(started), V(ended))
        are still emitted.
    type: bool
    default: true
  max_pending_events:
    description:
      - "How many events the source holds while the rulebook is busy. Polling never waits for the
        rulebook: each transition goes into this buffer, and the buffer feeds the rulebook's queue
        as fast as the rulebook takes events, oldest first."
      - When the buffer is full, the oldest event in it is dropped to make room, with a warning in
        the log naming it and the count of events dropped since start. Transitions are never
        merged or guessed, so an event the poller saw Started is reported V(ended), never
        V(cancelled), however long the rulebook took.
      - A whole number from 1 to 100000.
    type: int
    default: 1000
notes:
  - Python 3 standard library only (besides ansible-rulebook itself); the blocking IMDS client runs
    in a worker thread.
  - Polling goes on at O(poll_interval) while the rulebook is busy with earlier events (ansible-rulebook
    may take one event at a time); what it has not taken yet waits in a buffer of O(max_pending_events).
seealso:
  - module: azure_imds.scheduled_events.scheduled_event_info
"""

EXAMPLES = r"""
---
- name: Maintenance starts itself on this VM
  hosts: all
  sources:
    - azure_imds.scheduled_events.scheduled_events:
        this_host_only: true
        poll_interval: 1
  rules:
    - name: Drain, approve, wait and recover for a scheduled event
      condition: event.type == "scheduled"
      action:
        run_playbook:
          name: azure_imds.scheduled_events.rolling_maintenance
"""

import asyncio
import collections
import logging
import os
import sys
import time

# ansible-rulebook runs a source by its file path, with no collection importable: when this file
# sits in a collections tree (.../ansible_collections/azure_imds/scheduled_events/, seven levels up),
# that tree goes first on the import path, so that the module_utils beside this copy are the ones
# imported. A checkout run directly is made importable by tests/harness/loopback-only instead.
_COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 7))
if os.path.isdir(os.path.join(_COLLECTIONS, "ansible_collections", "azure_imds", "scheduled_events")):
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import (
    _defaults, _edge, _event, _imds, _retry, _source_args, _transitions)
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils._source_args import SourceConfigError

# A failing IMDS is read again after the client's backoff, never later than this.
MAX_BACKOFF = 10.0
FAILURE_REMINDER_SECONDS = 60.0
DEFAULT_MAX_PENDING_EVENTS = 1000
MAX_PENDING_EVENTS = 100000
OPTIONS = ("imds_url", "api_version", "request_timeout", "resource_name", "event_ids", "event_types", "event_statuses",
           "event_sources", "this_host_only", "poll_interval", "emit_existing", "max_pending_events")
FILTERS = ("event_ids", "event_types", "event_statuses", "event_sources")

LOG = logging.getLogger("azure_imds.scheduled_events.scheduled_events")


_flag = _source_args.flag
_number = _source_args.number


def _name_list(args, name, choices=None):
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SourceConfigError("%s must be a list of strings, got %r." % (name, value))
    if not value:
        raise SourceConfigError("%s is an empty list, which would match no event. Leave %s out to not filter on it."
                                % (name, name))
    for item in value:
        if choices is not None and item not in choices:
            raise SourceConfigError("%s: %r is not one of %s." % (name, item, ", ".join(choices)))
    return value


def check_args(args):
    """The source's options, each checked once: a dict of clean values, and warnings for the log.
    Raises SourceConfigError naming the option."""
    if not isinstance(args, dict):
        raise SourceConfigError("the source's arguments must be a mapping of options, got %r." % (args,))
    # ansible-rulebook adds its own keys (eda_feedback_queue, ...) beside the rulebook's.
    unknown = sorted(k for k in args if k not in OPTIONS and not str(k).startswith("eda_"))
    if unknown:
        raise SourceConfigError("unknown option%s %s; the options are %s." % (
            "s" if len(unknown) > 1 else "", ", ".join(map(str, unknown)), ", ".join(OPTIONS)))
    warnings = []
    try:
        clean = {
            "imds_url": args.get("imds_url"),
            "api_version": _edge.validate_api_version(args.get("api_version") or _defaults.DEFAULT_API_VERSION),
            "request_timeout": _number(args, "request_timeout", _defaults.DEFAULT_REQUEST_TIMEOUT,
                                       _defaults.MIN_REQUEST_TIMEOUT, _defaults.MAX_TIMEOUT),
            "poll_interval": _number(args, "poll_interval", _defaults.DEFAULT_POLL_INTERVAL, _defaults.MIN_POLL_INTERVAL,
                                     _defaults.MAX_TIMEOUT),
            "this_host_only": _flag(args, "this_host_only", False),
            "emit_existing": _flag(args, "emit_existing", True),
            "max_pending_events": _number(args, "max_pending_events", DEFAULT_MAX_PENDING_EVENTS, 1,
                                          MAX_PENDING_EVENTS, integer=True, unit="events"),
            "event_ids": _name_list(args, "event_ids"),
            "event_types": _name_list(args, "event_types"),
            "event_statuses": _name_list(args, "event_statuses", _defaults.EVENT_STATUSES),
            "event_sources": _name_list(args, "event_sources", _defaults.EVENT_SOURCES),
        }
        if clean["imds_url"] is not None:
            _edge.check_base_url(clean["imds_url"])
        if clean["event_ids"] is not None:
            _event.validate_event_ids(clean["event_ids"])
    except _edge.ImdsInputError as exc:
        raise SourceConfigError(str(exc))
    name = args.get("resource_name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise SourceConfigError("resource_name must be this VM's name as events spell it, got %r. Leave it out to "
                                "read it from IMDS." % (name,))
    clean["resource_name"] = name
    for event_type in clean["event_types"] or []:
        if event_type not in _defaults.KNOWN_EVENT_TYPES:
            warnings.append("event_types: %r is not a Scheduled Events type this collection knows (%s); it is kept "
                            "in the filter since Azure may add types." % (event_type, ", ".join(_defaults.KNOWN_EVENT_TYPES)))
    return clean, warnings


def wanted(transition, options):
    """Whether a transition passes the filters."""
    return bool(_event.select_events([transition["scheduled_event"]], resource_name=transition["resource_name"],
                                     this_host_only=options["this_host_only"],
                                     **dict((name, options[name]) for name in FILTERS)))


class Poller(object):
    """The blocking half: one client, one GET per call, backoff by the client's retry table.
    Runs in a worker thread; the event loop only awaits it."""

    not_retried = _retry.RetryRule("an error the client does not retry", base=1.0, cap=MAX_BACKOFF)

    def __init__(self, options, client=None, clock=None, wall_clock=None, rng=None):
        self.options = options
        # retry_timeout 0: one attempt per call. The loop paces every retry itself, so no burst
        # of retries inside the client can pass the service's 5 requests a second.
        self.client = client or _imds.client_from_options(dict(options, retry_timeout=0))
        self.client.resend_on_stale_connection = False
        self._clock = clock or time.monotonic
        self._wall_clock = wall_clock or time.time
        self._policy = _retry.RetryPolicy(rng)
        self.attempts = {}
        self.failing_since = None
        self.last_logged = None
        self.tracker = None

    def _failed(self, exc, what):
        """The delay before the next try, logging the first failure of a streak and a reminder a minute."""
        now = self._clock()
        failure = self.client.last_failures[-1] if self.client.last_failures else None
        rule = (_retry.retry_rule_for(failure) if failure is not None else None) or self.not_retried
        key = (failure.kind, failure.status) if failure is not None else ("error", None)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        delay = min(MAX_BACKOFF, self._policy.delay(rule, self.attempts[key],
                                                    failure.retry_after if failure is not None else None))
        if self.failing_since is None or now - self.last_logged >= FAILURE_REMINDER_SECONDS:
            if self.failing_since is None:
                self.failing_since = now
            self.last_logged = now
            LOG.warning("scheduled_events: %s failed (%s); trying again in %.1f s, and on until it works", what,
                        exc, delay)
        return delay

    def _succeeded(self):
        if self.failing_since is not None:
            LOG.warning("scheduled_events: IMDS answers again after %.1f s of failures", self._clock() - self.failing_since)
        self.failing_since = None
        self.attempts = {}

    def start(self):
        """Learn this VM's name. Returns the delay before the next call: 0 when done."""
        if self.options["resource_name"] is None:
            try:
                self.options["resource_name"] = self.client.get_vm_name()
            except _edge.ImdsError as exc:
                return self._failed(exc, "reading this VM's name (set resource_name to skip it)")
            self._succeeded()
        self.tracker = _transitions.TransitionTracker(self.options["resource_name"],
                                                      emit_existing=self.options["emit_existing"])
        LOG.info("scheduled_events: watching %s as %s every %s s", self.client.scheduled_events_url(),
                 self.options["resource_name"], _edge.format_number(self.options["poll_interval"]))
        return 0.0

    def poll(self):
        """One read of the document: (transitions wanted, delay before the next read)."""
        started = self._clock()
        try:
            document = self.client.get_scheduled_events()
        except _edge.ImdsError as exc:
            return [], max(self.options["poll_interval"], self._failed(exc, "reading the Scheduled Events document"))
        self._succeeded()
        for warning in document.warnings:
            LOG.warning("scheduled_events: %s", warning)
        events = _event.annotate_events(document.events, self.options["resource_name"], now_epoch=self._wall_clock())
        transitions = self.tracker.observe({"incarnation": document.incarnation, "events": events})
        delay = max(0.0, started + self.options["poll_interval"] - self._clock())
        return [t for t in transitions if wanted(t, self.options)], delay

    def close(self):
        self.client.close()


class PendingEvents(object):
    """Transitions polled but not yet taken by the rulebook, oldest first. Bounded: when full, the
    oldest is dropped, counted and logged. Polling only ever adds here, so a busy rulebook never
    holds up a poll (a poll held up can miss a Started phase and turn an ended event into a
    cancelled one)."""

    def __init__(self, size):
        self.size = size
        self.items = collections.deque()
        self.dropped = 0
        self._ready = asyncio.Event()

    def add(self, transition):
        if len(self.items) >= self.size:
            oldest = self.items.popleft()
            self.dropped += 1
            LOG.warning("scheduled_events: the rulebook has not taken the last %d events (max_pending_events); "
                        "dropped the oldest, %s %s (%s); %d dropped since start", self.size, oldest["type"],
                        oldest["scheduled_event"].get("event_id"), oldest["scheduled_event"].get("event_type"),
                        self.dropped)
        self.items.append(transition)
        self._ready.set()

    async def take(self):
        while not self.items:
            self._ready.clear()
            await self._ready.wait()
        return self.items.popleft()


async def _feed(queue, pending):
    """Hand the pending events to the rulebook's queue, one at a time, as it takes them."""
    while True:
        transition = await pending.take()
        await queue.put(transition)


async def run(queue, options, poller=None, sleep=None):
    """Poll until cancelled, putting each wanted transition on the queue through a bounded buffer
    of options["max_pending_events"], so that a busy rulebook never delays a poll."""
    sleep = sleep or asyncio.sleep
    loop = asyncio.get_event_loop()
    poller = poller or Poller(options)
    pending = PendingEvents(options["max_pending_events"])
    feeder = asyncio.ensure_future(_feed(queue, pending))
    try:
        delay = await loop.run_in_executor(None, poller.start)
        while delay:
            await sleep(delay)
            delay = await loop.run_in_executor(None, poller.start)
        while True:
            transitions, delay = await loop.run_in_executor(None, poller.poll)
            for transition in transitions:
                LOG.info("scheduled_events: %s %s (%s)", transition["type"],
                         transition["scheduled_event"].get("event_id"),
                         transition["scheduled_event"].get("event_type"))
                pending.add(transition)
            if feeder.done():
                # The queue refused an event: that is the engine's error, not one to poll through.
                feeder.result()
            await sleep(delay)
    finally:
        feeder.cancel()
        poller.close()
        # wait() never raises the feeder's CancelledError; a second cancel of run() still ends it.
        await asyncio.wait([feeder])


async def main(queue, args):
    """ansible-rulebook's entry point."""
    try:
        options, warnings = check_args(args)
    except SourceConfigError as exc:
        LOG.error("azure_imds.scheduled_events.scheduled_events: %s", exc)
        raise
    for warning in warnings:
        LOG.warning("scheduled_events: %s", warning)
    await run(queue, options)


if __name__ == "__main__":
    # Run directly: print each event (for a look at what a rulebook would get).

    class PrintQueue(object):
        async def put(self, event):
            print(event)  # noqa: T201

    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(PrintQueue(), {"imds_url": os.environ.get("AZURE_IMDS_URL")}))
