# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The facts about Azure that the docs rely on, each tied to where Microsoft states it.

FACTS is the table: a sentence quoted from Microsoft (word for word, as published), its page and
section, and, for each file that relies on the fact, the words in which that file says it.

- Every quote of the table stands in the docs as a marked quote, under its page and section.
- Every sentence the docs or the plugins mark as Microsoft's is a quote of the table: a block quote
  whose attribution line starts with "-- Microsoft," (docs/docsite/rst/azure_facts.rst), or an
  inline 'Microsoft: "..."'.
- Every file named in a row still says the fact in the words given.

A quote changed by hand, a quote added without a source, or a page that stops saying what the
rest of the collection relies on fails here. The quotes themselves were copied from the pages
below; this test cannot fetch them (no network), so a change on Microsoft's side is caught by
whoever next reads the source and updates a row.
"""

import collections
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FACTS_PAGE = "docs/docsite/rst/azure_facts.rst"
LINUX = "https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events"
TERMINATE = "https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-terminate-notification"
IMDS = "https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service"

Fact = collections.namedtuple("Fact", "quote url section stated_in")

FACTS = [
    Fact("Scheduled Events for all virtual machines (VMs) in an entire Availability Set or a Placement Group for a "
         "Virtual Machine Scale Set are delivered to all other VMs in the same group or set regardless of Availability "
         "Zone usage.", LINUX + "#scope", "Scope",
         {"docs/docsite/rst/approval_policies.rst": "(or of a scale set's placement group, not the whole scale set)",
          "docs/docsite/rst/testing_with_the_mock.rst": "of a scale set's placement group see every event of the group",
          "plugins/modules/scheduled_event_wait.py": "availability set or of a scale set placement group",
          "plugins/modules/scheduled_event_info.py": "availability set or scale set placement group"}),
    Fact("GPU accelerated Virtual Machines in a scale set using one fault domain (FD = 1) only receive scheduled events "
         "for the impacted resource.", LINUX + "#scope", "Scope",
         {"docs/docsite/rst/approval_policies.rst": "GPU scale sets with one fault domain are the exception"}),
    Fact("Terminate notifications only on 'delete' operations - All delete operations (manual delete or "
         "Autoscale-initiated scale-in) will generate Terminate events if your scale set has scheduledEventsProfile "
         "enabled.", TERMINATE + "#tips-and-best-practices", "Tips and best practices",
         {"docs/docsite/rst/getting_started.rst": "delete it (a scale set VM, when the scale set has terminate "
                                                  "notifications on)",
          "plugins/modules/scheduled_event_info.py": "deletions of scale set VMs when the scale set has terminate "
                                                     "notifications enabled",
          "docs/docsite/rst/event_driven.rst": "A Terminate gives the 5 to 15 minutes the scale set's terminate "
                                               "notification is set to",
          # Microsoft names no EventSource for a Terminate: the mock's value is the mock's choice.
          "docs/docsite/rst/mock_imds.rst": "EventSource User, our mock's choice (Microsoft does not document the "
                                            "EventSource of a Terminate)"}),
    Fact("Scheduled events for Virtual Machine Scale Sets Guest OS upgrades and reimages are disabled by default.",
         LINUX + "#user-initiated-maintenance", "User-initiated maintenance",
         {FACTS_PAGE: "They are switched on with OSImageNotificationProfile"}),
    Fact("This event is made available on a best effort basis", LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "A Spot eviction (Preempt) is announced 30 seconds ahead when it is announced at all",
          "docs/docsite/rst/event_driven.rst": "A Preempt gives 30 seconds, and only on a best effort basis"}),
    Fact('In rare cases a VM scheduled for EventType:"Reboot" may experience a freeze event instead of a reboot.',
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "A recover step must not assume that a Reboot rebooted"}),
    Fact("0: The event won't interrupt the VM or impact its availability (for example, update to the network)",
         LINUX + "#event-properties", "Event properties",
         {"docs/docsite/rst/rolling_maintenance.rst": "Microsoft documents DurationInSeconds 0 as an event that does "
                                                      "not interrupt the VM"}),
    Fact("For this application, freeze events less that 9 seconds are considered no impact.",
         LINUX + "#python-sample", "Python Sample",
         {"docs/docsite/rst/approval_policies.rst": "Freeze with 0 <= DurationInSeconds < 9, the rule of Microsoft's "
                                                    "sample",
          "docs/docsite/rst/watcher.rst": "Microsoft's sample approves 0 <= DurationInSeconds < 9",
          "docs/docsite/rst/watcher_handlers.rst": "Microsoft's rule 0 <= DurationInSeconds < 9",
          "roles/watcher/meta/argument_specs.yml": "Microsoft's sample rule C(0 <= DurationInSeconds < 9)",
          "plugins/modules/scheduled_event_approve.py": "Microsoft's sample approves a Freeze at once when "
                                                        "0 <= DurationInSeconds < 9"}),
    Fact("You should expect a delayed response in your first call of up to two minutes and you'll start receiving "
         "events within 5 minutes.", LINUX + "#enabling-and-disabling-scheduled-events",
         "Enabling and disabling Scheduled Events",
         {"docs/docsite/rst/troubleshooting.rst": "an empty first document on a VM that was quiet does not mean that "
                                                  "nothing is planned",
          "plugins/doc_fragments/imds.py": "The first request to Scheduled Events after a quiet day can take up to "
                                           "two minutes"}),
    Fact("If the VM is on shared infrastructure, the system will then wait for all other tenants on the same hardware "
         "to also approve the job or timeout.", LINUX + "#high-level-overview", "High level overview",
         {"docs/docsite/rst/approval_policies.rst": "On a physical host shared with other tenants Azure may wait for "
                                                    "NotBefore (or for the other tenants) even after your approval",
          "plugins/modules/scheduled_event_wait.py": "on a host shared with other tenants Azure waits for"}),
    Fact("The event may not start immediately upon approval.", LINUX + "#start-an-event", "Start an event",
         {"plugins/modules/scheduled_event_wait.py": "An approval is a request, not a start",
          "docs/docsite/rst/rolling_maintenance.rst": "Approving is a request, not a start."}),
    Fact("Events won't proceed unless they are either approved via a POST message or the NotBefore time elapses. "
         "This includes user triggered events such as VM restarts from the Azure portal.",
         LINUX + "#start-an-event", "Start an event",
         {"docs/docsite/rst/approval_policies.rst": "a user's restart waits for an approval or for NotBefore",
          "docs/docsite/rst/rolling_maintenance.rst": "user events are held until an approval or NotBefore"}),
    Fact("We advise having a primary and secondary VM communicating and approving user generated scheduled events in "
         "case the primary VM becomes unresponsive.", LINUX + "#user-initiated-maintenance",
         "User-initiated maintenance",
         {"docs/docsite/rst/approval_policies.rst": "Microsoft advises a second approver for user events"}),
    Fact("Acknowledging an event allows the event to proceed for all Resources in the event, not just the VM that "
         "acknowledges the event.", LINUX + "#start-an-event", "Start an event",
         {"docs/docsite/rst/approval_policies.rst": "Any VM the event names can approve it, for all of them",
          "docs/docsite/rst/watcher.rst": "a drain never runs past NotBefore. It can still overlap the maintenance",
          "docs/docsite/rst/rolling_maintenance.rst": "any VM the event names may approve it first"}),
    Fact('VMs in one fault domain can receive scheduled events with EventStatus:"Scheduled" shortly after another '
         "fault domain's maintenance is completed. Regardless of what architecture you chose, always keep "
         "checking for new events pending against your VMs.", LINUX + "#high-level-overview", "High level overview",
         {FACTS_PAGE: "A VM can get a new event right after one ends.",
          "docs/docsite/rst/rolling_maintenance.rst": "so a VM can get a new event right after one ends, and "
                                                      "Microsoft's advice is to keep checking",
          "docs/docsite/rst/getting_started.rst": "a VM can get a new event right after one ends"}),
    Fact("Affected virtual machines will receive a scheduled event with a NotBefore that is typically a few days in "
         "the future.", LINUX + "#event-scheduling", "Event scheduling", {}),
    Fact("To minimize risk to your service in case the hardware fails before the system-initiated migration, we "
         "recommend that you self-redeploy your virtual machine as soon as possible.",
         LINUX + "#event-scheduling", "Event scheduling",
         {FACTS_PAGE: "the right response is a redeploy of your own at a time you choose"}),
    Fact("The API is HTTP only and never leaves the host.", IMDS + "#security-and-authentication",
         "Security and authentication",
         {"docs/docsite/rst/watcher.rst": "The daemon speaks plain HTTP"}),
    Fact("Must not contain an X-Forwarded-For header", IMDS + "#security-and-authentication",
         "Security and authentication",
         # Microsoft documents the rejection, not its status or body: those are the mock's.
         {"docs/docsite/rst/troubleshooting.rst": "the status and body below are what our mock sends",
          "docs/docsite/rst/mock_imds.rst": "the 400 and the text are our mock's"}),
    Fact("The Scheduled Events service is versioned. Versions are mandatory; the current version is 2020-07-01.",
         LINUX + "#version-and-region-availability", "Version and region availability",
         {"docs/docsite/rst/mock_imds.rst": "Our mock's Scheduled Events path accepts every instance-metadata "
                                            "api-version"}),
]

# Where a sentence may be marked as Microsoft's.
MARKED_IN = ("docs/docsite/rst/*.rst", "docs/*.md", "README.md", "plugins/*/*.py", "roles/*/meta/argument_specs.yml")
ATTRIBUTION = re.compile(r"^(?P<indent>\s+)-- Microsoft, `(?P<page>[^<`]+) <(?P<url>[^>]+)>`__, \"(?P<section>[^\"]+)\"")
INLINE = re.compile(r"Microsoft: \"(?P<quote>[^\"]+)\"")


def plain(text):
    """Text as read: RST inline markup, Ansible's C() and line breaks do not change what is said."""
    text = re.sub(r"\b[CVOI]\(([^)]*)\)", r"\1", text)
    text = text.replace("``", "").replace("**", "").replace("`", "")
    return " ".join(text.split())


def read(relative):
    with open(os.path.join(ROOT, relative), encoding="utf-8") as handle:
        return handle.read()


def marked_files():
    found = set()
    for pattern in MARKED_IN:
        found.update(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
    return sorted(found)


def block_quotes(text):
    """[(quote, url, section, line number)] of the block quotes attributed to Microsoft."""
    lines = text.splitlines()
    quotes = []
    for number, line in enumerate(lines):
        match = ATTRIBUTION.match(line)
        if not match:
            continue
        indent = match.group("indent")
        body = []
        cursor = number - 1
        assert cursor > 0 and not lines[cursor].strip(), "line %d: a blank line must separate quote and attribution" \
            % (number + 1)
        cursor -= 1
        while cursor >= 0 and lines[cursor].startswith(indent) and lines[cursor].strip():
            body.insert(0, lines[cursor])
            cursor -= 1
        quote = plain(" ".join(body))
        assert quote.startswith('"') and quote.endswith('"'), "line %d: a quote stands in double quotes" % (number + 1)
        quotes.append((quote[1:-1], match.group("url"), match.group("section"), number + 1))
    return quotes


def all_marked_quotes():
    marked = []
    for relative in marked_files():
        text = read(relative)
        for quote, url, section, line in block_quotes(text):
            marked.append((relative, line, quote, url, section))
        for match in INLINE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            marked.append((relative, line, plain(match.group("quote")), None, None))
    return marked


def test_the_marker_is_found_where_it_is_used():
    # The facts page is where the block quotes live: a parser that found none there would make the
    # other tests pass on nothing.
    quotes = block_quotes(read(FACTS_PAGE))
    assert len(quotes) >= len(FACTS) - 1
    assert any(quote[0].endswith("watcher.rst") and quote[3] is None for quote in all_marked_quotes())


@pytest.mark.parametrize("fact", FACTS, ids=[f.quote[:40] for f in FACTS])
def test_each_quote_of_the_table_is_in_the_docs_under_its_source(fact):
    sources = [(marked[3], marked[4]) for marked in all_marked_quotes() if marked[2] == plain(fact.quote)]
    assert (fact.url, fact.section) in sources, \
        "%s does not quote %r as Microsoft's with %s, %r" % (FACTS_PAGE, fact.quote, fact.url, fact.section)


def test_every_sentence_marked_as_microsofts_is_a_quote_of_the_table():
    table = dict((plain(f.quote), f) for f in FACTS)
    unknown = []
    for relative, line, quote, url, section in all_marked_quotes():
        if url is None:
            # An inline quote is a part of a sentence of the table.
            if not any(quote in known for known in table):
                unknown.append("%s:%d: %r" % (relative, line, quote))
        elif quote not in table or (table[quote].url, table[quote].section) != (url, section):
            unknown.append("%s:%d: %r (%s, %r)" % (relative, line, quote, url, section))
    assert not unknown, "quoted as Microsoft's but not in FACTS (add the row with its source, or fix the " \
                        "quote):\n" + "\n".join(unknown)


STATED = [(relative, words, fact.quote) for fact in FACTS for relative, words in sorted(fact.stated_in.items())]


@pytest.mark.parametrize("relative, words, quote", STATED, ids=["%s: %s" % (s[0], s[1][:30]) for s in STATED])
def test_each_file_that_relies_on_a_fact_still_says_it(relative, words, quote):
    assert plain(words) in plain(read(relative)), "%s no longer says %r (the fact: %r)" % (relative, words, quote)


def test_the_sources_are_microsofts_pages():
    for fact in FACTS:
        assert fact.url.split("#")[0] in (LINUX, TERMINATE, IMDS)
        assert "#" in fact.url and fact.section
