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
below (their Markdown sources in MicrosoftDocs/azure-compute-docs, as rendered: emphasis, code marks
and link targets dropped; Microsoft's typographic apostrophes written as ASCII ones, since sanity's
no-smart-quotes refuses the others); this test cannot fetch them (no network), so a change on
Microsoft's side is caught by whoever next reads the source and updates a row.
"""

import collections
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FACTS_PAGE = "docs/docsite/rst/azure_facts.rst"
CONTROL_PLANE = "docs/docsite/rst/control_plane.rst"
LINUX = "https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events"
TERMINATE = "https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-terminate-notification"
IMDS = "https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service"
INSTANCE_IDS = "https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-instance-ids"
AVAILABILITY_SETS = "https://learn.microsoft.com/azure/virtual-machines/availability-set-overview"
# The control plane (issue 24): the pages on Scheduled Events outside IMDS, the Compute REST reference of
# the policy, and Resource Graph's pages on throttling and paging (their Markdown sources in
# MicrosoftDocs/azure-compute-docs and MicrosoftDocs/azure-docs; the Compute reference as generated from
# Azure/azure-rest-api-specs).
OVERVIEW = "https://learn.microsoft.com/azure/virtual-machines/scheduled-events-overview"
RESOURCE_GRAPH = "https://learn.microsoft.com/azure/virtual-machines/scheduled-events-resource-graph"
EVENT_GRID = "https://learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid"
COMPUTE_VM_REST = "https://learn.microsoft.com/rest/api/compute/virtual-machines/create-or-update"
ARG_OVERVIEW = "https://learn.microsoft.com/azure/governance/resource-graph/overview"
ARG_THROTTLING = "https://learn.microsoft.com/azure/governance/resource-graph/concepts/guidance-for-throttled-requests"
ARG_PAGING = "https://learn.microsoft.com/azure/governance/resource-graph/concepts/paging-results"
ACTIVITY_LOG = "https://learn.microsoft.com/azure/azure-monitor/platform/activity-log"
CONTROL_PLANE_PAGES = (OVERVIEW, RESOURCE_GRAPH, EVENT_GRID, COMPUTE_VM_REST, ARG_OVERVIEW, ARG_THROTTLING, ARG_PAGING,
                       ACTIVITY_LOG)
# A sentence of a page's opening paragraphs, before its first heading, has no anchor of its own.
INTRODUCTION = "introduction"
# What the docs say that Microsoft does not document carries this marker.
OBSERVATION = "(our observation, not documented by Microsoft)"

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
    Fact("Terminate notifications only on 'delete' operations – All delete operations (manual delete or "
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
         "the future.", LINUX + "#event-scheduling", "Event scheduling",
         {"docs/docsite/rst/rolling_maintenance.rst": "a predicted hardware failure can be announced days ahead"}),
    Fact("To minimize risk to your service in case the hardware fails before the system-initiated migration, we "
         "recommend that you self-redeploy your virtual machine as soon as possible.",
         LINUX + "#event-scheduling", "Event scheduling",
         {FACTS_PAGE: "the right response is a redeploy of your own at a time you choose"}),
    # Issue 22: each VM was said to learn of its maintenance "minutes (to days) ahead"; a Preempt gives 30 s and a
    # hardware failure none, and a Reboot's 15 minutes is a minimum, not a most.
    Fact("Each event is scheduled a minimum amount of time in the future based on the event type.",
         LINUX + "#event-scheduling", "Event scheduling",
         {FACTS_PAGE: "It is a minimum, not the time an event takes to come",
          "docs/docsite/rst/awx.rst": "at least 15 minutes after it appeared (the minimum notice)",
          "docs/docsite/rst/rolling_maintenance.rst": "at least 15 minutes of notice for a Reboot, at least 10 for a "
                                                      "Redeploy",
          "roles/rolling_maintenance/meta/argument_specs.yml": "at least 15 minutes ahead for a Reboot, the minimum "
                                                               "notice"}),
    Fact("Time after which this event can start. The event is guaranteed to not start before this time.",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "it is only the earliest start",
          "docs/docsite/rst/approval_policies.rst": "NotBefore is the earliest start"}),
    Fact("However, in rare cases, the operation is canceled by Azure before it starts.",
         LINUX + "#event-scheduling", "Event scheduling",
         {"docs/docsite/rst/approval_policies.rst": "unless Azure cancels it first, which Microsoft documents as rare",
          "roles/rolling_maintenance/meta/argument_specs.yml": "starts it once NotBefore has passed unless it cancels "
                                                               "it"}),
    Fact("Most events have 5 to 15 minutes of advance notice, although in some cases advance notice might be as "
         "little as 30 seconds.", LINUX + "#polling-frequency", "Polling frequency",
         {"docs/docsite/rst/getting_started.rst": "A Spot eviction gets 30 seconds at best",
          "README.md": "learn of most of its maintenance minutes ahead"}),
    Fact("In the case the host node experiences a hardware failure, Azure bypasses the minimum notice period and "
         "immediately begin the recovery process for affected virtual machines. This reduces recovery time in the "
         "case that the affected VMs are unable to respond. During the recovery process, an event is created for all "
         "impacted VMs with EventType = Reboot and EventStatus = Started.",
         LINUX + "#event-scheduling", "Event scheduling",
         {FACTS_PAGE: "a hardware failure gives none, its event appears already Started",
          "README.md": "a hardware failure none",
          "docs/docsite/rst/getting_started.rst": "a hardware failure none (its event appears already started"}),
    # Issue 22: the mock's hardware failure said "Host server is undergoing emergency recovery.".
    Fact("Host server is undergoing an emergency repair.", LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "Our mock's hardware_failure scenario uses that text",
          "docs/docsite/rst/mock_imds.rst": '"Host server is undergoing an emergency repair." (one of Microsoft\'s '
                                            'example Descriptions)',
          "roles/mock_imds/files/mock_imds/scenarios.py": 'EMERGENCY_REPAIR_DESCRIPTION = "Host server is undergoing '
                                                          'an emergency repair."'}),
    # Issue 22: rolling_maintenance spoke of "the fault domains of a host".
    Fact("As part of Azure's availability guarantee, VMs in different fault domains won't be impacted by routine "
         "maintenance operations at the same time. However, they may have operations serialized one after another.",
         LINUX + "#high-level-overview", "High level overview",
         {FACTS_PAGE: "A fault domain belongs to the availability set (or to the scale set) a VM is in, not to a host",
          "roles/rolling_maintenance/meta/argument_specs.yml": "Azure maintains the fault domains of an availability "
                                                               "set or scale set one after another"}),
    Fact("The underlying Azure platform assigns an update domain and a fault domain to each virtual machine in your "
         "availability set.", AVAILABILITY_SETS + "#how-do-availability-sets-work", "How do availability sets work?",
         {FACTS_PAGE: "instance metadata shows it as platformFaultDomain"}),
    # Facts a user needs that the docs did not say (issue 22).
    Fact("The Virtual Machine is scheduled to pause for a few seconds. CPU and network connectivity may be suspended, "
         "but there's no impact on memory or open files.", LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "may cut the network for its duration",
          "docs/docsite/rst/approval_policies.rst": "the network may stop for the pause too",
          "docs/docsite/rst/watcher.rst": "Such a Freeze may still cut the network for its duration"}),
    Fact("There may be secondary impacts of a shorter duration during the impact window.",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "DurationInSeconds is the expected interruption, not the only one",
          "docs/docsite/rst/watcher.rst": "since the VM may be hit again while the event is there"}),
    Fact('While the event is still in EventStatus:"Started" state, there may be another impact of a shorter duration '
         "than what was advertised in the scheduled event.", LINUX + "#high-level-overview", "High level overview",
         {FACTS_PAGE: "until the event has left the document the VM may be interrupted again, more briefly"}),
    Fact("Terminate notifications cannot be enabled on Spot instances.", TERMINATE, INTRODUCTION,
         {FACTS_PAGE: "A Spot VM of a scale set gets no Terminate when it is deleted"}),
    Fact("After enabling scheduledEventsProfile on the scale set model and setting the notBeforeTimeout, update the "
         "individual instances to the latest model to reflect the changes.",
         TERMINATE + "#getting-terminate-event-with-incorrect-notbefore-time",
         "Getting Terminate event with incorrect NotBefore time",
         {FACTS_PAGE: "until each is upgraded to the latest model, its deletion can give no event, or one with the "
                      "old notice"}),
    Fact("Ensure that every VM in the scale set is only approving the EventID relevant for that VM only.",
         TERMINATE + "#respond-to-events", "Respond to events",
         {FACTS_PAGE: "each VM approves only the Terminate that names it",
          "docs/docsite/rst/approval_policies.rst": "A Terminate is approved only by the VM it deletes",
          "docs/docsite/rst/watcher.rst": "The watcher approves only events that name its own VM"}),
    Fact("If there's a pending delete on VM_1 that isn't approved, and you've approved another terminate event on VM_2, "
         "then VM_2 isn't deleted until the terminate event for VM_1 is approved, or its timeout has elapsed.",
         TERMINATE + "#tips-and-best-practices", "Tips and best practices",
         {FACTS_PAGE: "it waits for the other pending deletes of the scale set to be approved or to time out",
          "docs/docsite/rst/approval_policies.rst": "an approved delete waits for the others",
          "docs/docsite/rst/watcher.rst": "an approved Terminate may still wait for the scale set's other pending "
                                          "deletes"}),
    Fact("All operations impacting VM availability create a scheduled event, however not all scheduled events appear "
         "in other Azure surfaces such as Azure Activity Logs or Resource Health.", LINUX + "#high-level-overview",
         "High level overview",
         {FACTS_PAGE: "An event you saw in the document may be missing from the Activity Log and from Resource Health",
          "docs/docsite/rst/monitoring.rst": "not every scheduled event shows in the Activity Log or in Resource "
                                             "Health"}),
    Fact("Azure tries to give 7 days of advance notice when possible. The actual notice time varies and might be "
         "shorter if there's a high chance of the hardware failing imminently.", LINUX + "#event-scheduling",
         "Event scheduling",
         {FACTS_PAGE: "Microsoft documents this one way only",
          "docs/docsite/rst/rolling_maintenance.rst": "Azure aims at seven days of notice"}),
    Fact("IMDS requests must be sent using VM's primary NIC and primary IP, and DHCP must be enabled.",
         IMDS + "#access-azure-instance-metadata-service", "Access Azure Instance Metadata Service",
         {FACTS_PAGE: "a route to 169.254.169.254/32 through the primary NIC, with DHCP on",
          "docs/docsite/rst/troubleshooting.rst": "On an Azure VM, check the route and the NIC"}),
    Fact("Metadata calls must be made from the primary IP address assigned to the primary network card of the VM. "
         "Additionally, if you've changed your routes, there must be a route for the 169.254.169.254/32 address in "
         "your VM's local routing table.", IMDS + "#frequently-asked-questions", "Frequently asked questions",
         {"docs/docsite/rst/troubleshooting.rst": "ip route get 169.254.169.254 must name the primary NIC"}),
    Fact("The Instance Metadata Service is only accessible from within a running virtual machine instance on a "
         "non-routable IP address.", IMDS + "#security-and-authentication", "Security and authentication",
         {FACTS_PAGE: "Microsoft documents no other way to approve (none in the portal)",
          "docs/docsite/rst/approval_policies.rst": "there is no approval from the portal"}),
    Fact("After you learn of an upcoming event and finish your logic for graceful shutdown, you can approve the "
         "outstanding event by making a POST call to Metadata Service with EventId.", LINUX + "#start-an-event",
         "Start an event",
         {FACTS_PAGE: "An approval is a POST to IMDS from inside one of the VMs",
          "docs/docsite/rst/rolling_maintenance.rst": "any other process on one of those VMs: IMDS is open to all of "
                                                      "them"}),
    Fact("The API is unauthenticated and open to all processes on the VM.", IMDS + "#security-and-authentication",
         "Security and authentication",
         {FACTS_PAGE: "any local process, of any user, can approve an event for every VM it names",
          "docs/docsite/rst/approval_policies.rst": "on such a VM any process can",
          "docs/docsite/rst/watcher.rst": "so any local process can approve too"}),
    Fact("If it isn't necessary for every process on the VM to access IMDS endpoint, you can set local firewall rules "
         "to limit the access.", IMDS + "#security-and-authentication", "Security and authentication",
         {FACTS_PAGE: "a local firewall rule",
          "docs/docsite/rst/watcher.rst": "A local firewall rule can keep IMDS to the watcher's account",
          "docs/docsite/rst/troubleshooting.rst": "gives this message to the accounts it leaves out"}),
    # Issue 22: README offered "a proxy of your own" in front of IMDS.
    Fact("IMDS is **not** intended to be used behind a proxy and doing so is unsupported.", IMDS + "#proxies",
         "Proxies",
         {FACTS_PAGE: "points the collection at our mock in tests, not at a proxy in front of IMDS",
          "README.md": "Never a proxy in front of IMDS"}),
    # Issue 22: "early in boot IMDS can answer 404" was ours, not Microsoft's.
    Fact("The requested element doesn't exist", IMDS + "#errors-and-debugging", "Errors and debugging",
         {FACTS_PAGE: "Microsoft documents no passing 404",
          "docs/docsite/rst/troubleshooting.rst": "it documents no passing 404"}),
    # Issue 22: "a minute of 410 during a host update is normal" was ours, not Microsoft's.
    Fact("Retry after some time for a max of 70 seconds", IMDS + "#errors-and-debugging", "Errors and debugging",
         {FACTS_PAGE: "not because a minute of 410 is known to be normal",
          "docs/docsite/rst/troubleshooting.rst": "It does not say when or how often a 410 comes",
          "docs/docsite/rst/watcher.rst": "a minute of failures is our threshold, not a documented normal",
          "plugins/module_utils/_imds.py": "Microsoft documents retrying a 410 for up to 70 s"}),
    Fact("In general, requests to IMDS are limited to 5 requests per second (on a per VM basis). Requests exceeding "
         "this threshold will be rejected with 429 responses.", IMDS + "#rate-limiting", "Rate limiting",
         {FACTS_PAGE: "A Retry-After header on that 429 is not documented",
          "docs/docsite/rst/troubleshooting.rst": "Microsoft does not document a Retry-After header on a 429",
          "plugins/doc_fragments/imds.py": "Microsoft does not document a Retry-After header on IMDS answers",
          "plugins/modules/scheduled_event_info.py": "allows five requests per second per VM for all callers together",
          "roles/mock_imds/meta/argument_specs.yml": "Enforce 5 requests per second per VM (HTTP 429 beyond), as IMDS "
                                                     "does."}),
    # Issue 22: mock_imds.rst said a non-leaf read with format=text is documented as 400.
    Fact("When filtering to a leaf node, format=json doesn't work. For these queries format=text needs to be "
         "explicitly specified since the default format is json.", IMDS + "#route-parameters", "Route parameters",
         {FACTS_PAGE: "What a non-leaf read with format=text answers is not",
          "docs/docsite/rst/mock_imds.rst": "A non-leaf with format=text is 400 too, our mock's own choice"}),
    # Issue 22: troubleshooting gave {scaleset}_{instanceid} as the only form of a scale set VM's name.
    Fact("Flexible orchestration mode instance name: {scale-set-name}_{8-char-guid}", INSTANCE_IDS + "#scale-set-vm-names",
         "Scale set VM names", {"docs/docsite/rst/troubleshooting.rst": "so myvmss_1a2b3c4d"}),
    Fact("Uniform orchestration mode instance name: {scale-set-name}_{instance-id}", INSTANCE_IDS + "#scale-set-vm-names",
         "Scale set VM names", {"docs/docsite/rst/troubleshooting.rst": "so myvmss_3"}),
    Fact("Starting November 2023, VM scale sets created using PowerShell and Azure CLI will default to Flexible "
         "Orchestration Mode if no orchestration mode is specified.", TERMINATE + "#azure-powershell",
         "Azure PowerShell",
         {"docs/docsite/rst/troubleshooting.rst": "Flexible is what the CLI and PowerShell create since November 2023"}),
    # Issue 22: "real scheduled events cannot be ordered on demand" - a user's reboot and redeploy can be.
    Fact("You can manually trigger redeploy and reboot events through the Azure Portal or Azure CLI by selecting the "
         "'reboot' or 'redeploy' VM option from the VM blade.", LINUX + "#testing-scheduled-events",
         "Testing Scheduled Events",
         {"docs/docsite/rst/testing_with_the_mock.rst": "Of real scheduled events only a user's restart or redeploy "
                                                        "can be ordered (from the portal or the CLI)"}),
    Fact("Operations that impact multiple VMs, such as host updates, cannot be triggered on demand so you can use a "
         "mock server instead.", LINUX + "#testing-scheduled-events", "Testing Scheduled Events",
         {FACTS_PAGE: "events for a whole group, cannot be ordered"}),
    # Issue 22: the mock's docs called its per-VM service, which hides earlier events, documented behaviour.
    Fact("Scheduled Events is enabled for your service the first time you make a request for events.",
         LINUX + "#enabling-and-disabling-scheduled-events", "Enabling and disabling Scheduled Events",
         {FACTS_PAGE: "whether one VM's request switches it on for the others of its group is not documented",
          "docs/docsite/rst/mock_imds.rst": "that the service is per VM, and that events from before it was on are "
                                            "left out, is our mock's own model",
          "docs/docsite/rst/testing_with_the_mock.rst": "the mock leaves out events that appeared before it was on, "
                                                        "its own model"}),
    Fact("Scheduled Events is enabled for your scale set the first time you make a request for events.",
         TERMINATE + "#get-terminate-notifications", "Get Terminate notifications",
         {FACTS_PAGE: 'Microsoft speaks of "your service" and "your scale set", not of a VM'}),
    Fact('EventStatus:"Started" to Completed (event removed from Events array): 10 minutes',
         LINUX + "#high-level-overview", "High level overview",
         {"docs/docsite/rst/troubleshooting.rst": "Microsoft gives 10 minutes from Started to the event's removal as a "
                                                  "rough guideline"}),
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
    # Issue 22, round 3: the other claims about the service in the pages, each tied to Microsoft's words.
    Fact("Scheduled events are delivered to and can be acknowledged by", LINUX + "#scope", "Scope",
         {FACTS_PAGE: "any VM of the group may approve an event, also one that the event does not name",
          "docs/docsite/rst/mock_imds.rst": "the documentation's Scope section says events are delivered to"}),
    Fact("Reboot: The Virtual Machine is scheduled for reboot (non-persistent memory is lost).",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "a reboot loses memory",
          "README.md": "before the platform reboots, freezes, redeploys, evicts or deletes your VMs"}),
    Fact("Redeploy: The Virtual Machine is scheduled to move to another node (ephemeral disks are lost).",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "a redeploy or a Spot eviction (Preempt) loses the ephemeral disks",
          "docs/docsite/rst/getting_started.rst": "redeploy it to another host",
          "docs/docsite/rst/watcher_handlers.rst": "the ephemeral disks, the temporary disk among them, are lost on "
                                                   "the last two"}),
    Fact("Preempt: The Spot Virtual Machine is being deleted (ephemeral disks are lost).",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "a redeploy or a Spot eviction (Preempt) loses the ephemeral disks",
          "docs/docsite/rst/getting_started.rst": "evict it (Spot)"}),
    Fact("Terminate: The virtual machine is scheduled to be deleted.", LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "a Terminate deletes the VM",
          "docs/docsite/rst/getting_started.rst": "Terminate (a scale set VM being deleted)",
          "docs/docsite/rst/watcher_handlers.rst": "After a Terminate the VM is gone"}),
    Fact("-1: The default value used if the impact duration is either unknown or not applicable.",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "DurationInSeconds -1 means unknown or not applicable",
          "docs/docsite/rst/approval_policies.rst": "duration_in_seconds is -1 when Azure does not know the impact"}),
    Fact("It doesn't work for G, M, N, and H series.", LINUX + "#user-initiated-maintenance",
         "User-initiated maintenance", {FACTS_PAGE: "only for general purpose sizes (not the G, M, N and H series)"}),
    Fact("Scheduled Events is disabled for your service if it doesn't make a request to the endpoint for 24 hours.",
         LINUX + "#enabling-and-disabling-scheduled-events", "Enabling and disabling Scheduled Events",
         {FACTS_PAGE: "off after 24 hours without one",
          "docs/docsite/rst/awx.rst": "Scheduled Events switches itself off after 24 hours without requests",
          "docs/docsite/rst/troubleshooting.rst": "it switches itself off after 24 hours without requests"}),
    Fact("Otherwise, the event is automatically approved when the NotBefore time is reached.",
         LINUX + "#high-level-overview", "High level overview",
         {FACTS_PAGE: "approving never prevents maintenance",
          "docs/docsite/rst/approval_policies.rst": "Approval never prevents maintenance",
          "docs/docsite/rst/watcher.rst": "an event that starts at NotBefore without approval is the documented, "
                                          "safe default",
          "docs/docsite/rst/monitoring.rst": "the event starts at NotBefore instead"}),
    Fact("This call indicates to Azure that it can shorten the minimum notification time (when possible).",
         LINUX + "#start-an-event", "Start an event",
         {FACTS_PAGE: "it only lets Azure start it sooner, and not always",
          "docs/docsite/rst/approval_policies.rst": "tells Azure it may start it early, before its NotBefore, when "
                                                    "possible",
          "docs/docsite/rst/event_driven.rst": "An approval lets the event start early",
          "docs/docsite/rst/getting_started.rst": "approve them (let them start early, once you are ready)",
          "docs/docsite/rst/rolling_maintenance.rst": "so the platform may start them before NotBefore"}),
    Fact("The service always returns a 200 success code if it's passed a valid event ID, even if another VM already "
         "approved the event.", LINUX + "#start-an-event", "Start an event",
         {FACTS_PAGE: "An approval is idempotent",
          "docs/docsite/rst/approval_policies.rst": "It is idempotent: IMDS answers 200 to a second approval, even from "
                                                    "another VM of the group"}),
    Fact("Typically events with a user event source can be immediately approved to avoid a delay on user-initiated "
         "actions.", LINUX + "#user-initiated-maintenance", "User-initiated maintenance",
         {"docs/docsite/rst/getting_started.rst": "Approves at once every Scheduled event whose source is User",
          "docs/docsite/rst/approval_policies.rst": "approve_user_events playbook (Microsoft recommends it)"}),
    Fact("Therefore, you can choose to elect a leader to coordinate the acknowledgment, which might be as simple as "
         "the first machine in the Resources field.", LINUX + "#start-an-event", "Start an event",
         {FACTS_PAGE: "leader_only (modules, playbooks and the watcher) is that rule",
          "docs/docsite/rst/approval_policies.rst": "Microsoft's suggestion is to let the first VM named in Resources "
                                                    "act for the event"}),
    Fact("No Completed or similar status is ever provided. The event is no longer returned when the event is finished.",
         LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "A finished event and a cancelled one both just leave the document",
          "docs/docsite/rst/event_driven.rst": 'IMDS has no "completed" or "cancelled" status',
          "docs/docsite/rst/watcher.rst": "the event leaves the document (finished or cancelled)"}),
    Fact("Integer that increases when the events array changes.", LINUX + "#event-properties", "Event properties",
         {FACTS_PAGE: "Microsoft documents that DocumentIncarnation increases, not by how much",
          "docs/docsite/rst/mock_imds.rst": "Microsoft documents only that the incarnation increases when the events "
                                            "array changes"}),
    Fact("For VNET enabled VMs, Metadata Service is available from a static nonroutable IP, 169.254.169.254.",
         LINUX + "#endpoint-discovery", "Endpoint discovery",
         {FACTS_PAGE: "a VM outside a virtual network (classic VMs, cloud services) needs other logic",
          "README.md": "Microsoft documents IMDS at 169.254.169.254 for VMs in a virtual network",
          "docs/docsite/rst/getting_started.rst": "inside every VM of a virtual network",
          "docs/docsite/rst/troubleshooting.rst": "IMDS exists only inside an Azure VM, on the link-local address "
                                                  "169.254.169.254"}),
    Fact("It's available for all Azure Virtual Machines types, including PaaS and IaaS on both Windows and Linux.",
         LINUX, INTRODUCTION,
         {FACTS_PAGE: "Windows VMs get Scheduled Events too",
          CONTROL_PLANE: "nothing: Windows VMs and VMs you cannot log in to work the same",
          "README.md": "Windows VMs receive Scheduled Events too"}),
    Fact('Failure to include the header in the request results in a "Bad Request" response from Metadata Service.',
         LINUX + "#headers", "Headers",
         {FACTS_PAGE: "Every request carries Metadata: true",
          "docs/docsite/rst/testing_with_the_mock.rst": "The mock enforces the real request rules (the Metadata: true "
                                                        "header"}),
    Fact("I'm getting the error 400 Bad Request, Required metadata header not specified. What does this mean?",
         IMDS + "#frequently-asked-questions", "Frequently asked questions",
         {"docs/docsite/rst/mock_imds.rst": '400 {"error":"Bad request. Required metadata header not specified"}'}),
    Fact("Metadata header requirement enforced for all requests", LINUX + "#version-and-region-availability",
         "Version and region availability",
         {FACTS_PAGE: "The header is enforced from api-version 2017-08-01 on",
          "docs/docsite/rst/mock_imds.rst": "the release notes enforce the header from 2017-08-01 on"}),
    Fact("Requests with duplicate query parameter names will be rejected.", IMDS + "#query-parameters",
         "Query parameters",
         {"docs/docsite/rst/mock_imds.rst": "Microsoft documents that such a request is rejected, not the status"}),
    Fact("IMDS is versioned and specifying the API version in the HTTP request is mandatory. The only exception to "
         "this requirement is the versions endpoint, which can be used to dynamically retrieve the available API "
         "versions.", IMDS + "#versioning", "Versioning",
         {"docs/docsite/rst/mock_imds.rst": "the 35 documented versions, oldest first"}),
    Fact("When you don't specify a version, you get an error with a list of the newest supported versions:",
         IMDS + "#versioning", "Versioning",
         {FACTS_PAGE: "our mock answers with that body and serves those versions",
          "docs/docsite/rst/mock_imds.rst": "400 with the real body"}),
    Fact("The HTTP method (verb) isn't supported on the endpoint.", IMDS + "#errors-and-debugging",
         "Errors and debugging", {"docs/docsite/rst/mock_imds.rst": "method not allowed on that path"}),
    Fact("In json responses, all primitives will be of type string, and missing or inapplicable values are always "
         "included but will be set to an empty string.", IMDS + "#data-format", "Data format",
         {FACTS_PAGE: "So platformFaultDomain is \"0\", not 0",
          "docs/docsite/rst/mock_imds.rst": "Every primitive is a string, as in IMDS."}),
    Fact("Uniform orchestration mode: {computer-name-prefix}{base-36-instance-id}",
         INSTANCE_IDS + "#scale-set-vm-computer-name", "Scale set VM computer name",
         {FACTS_PAGE: "Neither is the computer name (the hostname)",
          "docs/docsite/rst/troubleshooting.rst": "in a Uniform scale set, the computer name prefix and the instance id "
                                                  "in base 36"}),
    # The control plane (issue 24): what scheduled_events_policy, fleet_event_info, fleet_event_approve and the
    # mock's control-plane face rely on.
    Fact("Scheduled events from Event Grid and Azure Resource Graph are in preview.", OVERVIEW, INTRODUCTION,
         {CONTROL_PLANE: "Both are in preview"}),
    Fact("During the preview, you need to explicitly enable access to event delivery to Azure Resource Graph via a "
         "feature flag. During the preview we don't recommend using this delivery method for production workloads.",
         RESOURCE_GRAPH + "#accessing-scheduled-events-in-azure-resource-graph-preview",
         "Accessing Scheduled Events in Azure Resource Graph Preview",
         {FACTS_PAGE: "The feature flag both pages register is SendScheduledEventsPolicy",
          CONTROL_PLANE: "az feature register --namespace Microsoft.Compute --name SendScheduledEventsPolicy"}),
    Fact("By default, scheduled events aren't delivered to Azure Resource Graph for virtual machines on Azure.",
         RESOURCE_GRAPH + "#opting-in-to-scheduled-events-in-azure-resource-graph",
         "Opting-In to Scheduled Events in Azure Resource Graph",
         {FACTS_PAGE: "Resource Graph and Event Grid see a VM's events only once its policy's",
          CONTROL_PLANE: "A VM whose policy does not publish is invisible to the control plane"}),
    Fact("Enabling delivery to the Event Grid System Topic also delivers the events to Azure Resource Graph.",
         EVENT_GRID + "#opting-in-to-receive-scheduled-events", "Opting-In to Receive Scheduled Events",
         {FACTS_PAGE: "one switch turns on both"}),
    Fact("Specifies the api-version to determine which Scheduled Events configuration schema version will be "
         "delivered.", COMPUTE_VM_REST + "#eventgridandresourcegraph", "EventGridAndResourceGraph",
         {FACTS_PAGE: "Microsoft's examples set scheduledEventsApiVersion to 2020-07-01 with it"}),
    Fact("If your VM is part of an availability set or a Virtual Machine Scale Set then you can't set the schedule "
         "events profile for each VM individually. All VMs in the same Virtual Machine Scale Set or availability set "
         "are required to have the same scheduled events policy.",
         RESOURCE_GRAPH + "#opting-in-to-scheduled-events-in-azure-resource-graph",
         "Opting-In to Scheduled Events in Azure Resource Graph",
         {FACTS_PAGE: "So scheduled_events_policy refuses a VM that is in a set and names the set to change instead",
          CONTROL_PLANE: "policy of a VM in an availability set or a scale set is the set's"}),
    Fact("Azure automatically approves user-initiated operations if the automaticallyApprove property is set to true "
         "in either the Virtual Machine Scale Set, VM, or Availability Set profile depending on how your VM was "
         "deployed. If automaticallyApprove is set to true then events proceed immediately to the "
         "EventStatus:Started state, skipping the scheduled state.",
         OVERVIEW + "#scheduled-events-for-user-initiated-maintenance",
         "Scheduled Events for User Initiated Maintenance",
         {FACTS_PAGE: "a drain that waits for Scheduled never runs for it",
          CONTROL_PLANE: "a drain that waits for Scheduled never runs",
          "docs/docsite/rst/approval_policies.rst": "Azure approves a user's reboot or redeploy itself and the event appears already Started"}),
    Fact("Specifies if Scheduled Events should be auto-approved when all instances are down.",
         COMPUTE_VM_REST + "#allinstancesdown", "AllInstancesDown",
         {FACTS_PAGE: "which events count as taking all instances down is not documented",
          CONTROL_PLANE: "Microsoft does not document which events count as taking all instances down"}),
    Fact("Scheduled events are written to the maintenanceresources table with type "
         "microsoft.maintenance/scheduledevents. Every time a scheduled event changes state it creates an update its "
         "entry in the table with the same information as would be available in Event Grid or the IMDS endpoint.",
         RESOURCE_GRAPH + "#querying-azure-resource-graph-to-view-vm-events",
         "Querying Azure Resource Graph to View VM Events",
         {CONTROL_PLANE: "rows of type microsoft.maintenance/scheduledevents in the table maintenanceresources"}),
    Fact("The Azure Resource Manager (ARM) ID of the scheduled event. The final GUID is the same as the event ID in "
         "scheduled event specific fields and as the event in the VM.",
         RESOURCE_GRAPH + "#azure-resource-graph-payload-fields", "Azure Resource Graph Payload Fields",
         {FACTS_PAGE: "fleet_event_info and fleet_event_approve compare ids without case"}),
    Fact("If you're using a Virtual Machine Scale Sets, then the scheduled event ID includes the ID of the entire "
         "Virtual Machine Scale Set, not just the impacted VMs.",
         EVENT_GRID + "#finding-the-virtual-machine-id-for-a-virtual-machine-in-a-virtual-machine-scale-set",
         "Finding the Virtual Machine ID for a Virtual Machine in a Virtual Machine Scale Set",
         {FACTS_PAGE: "that is how fleet_event_info fills virtual_machine_ids",
          CONTROL_PLANE: "An event of a scale set has the scale set's id, not a VM's"}),
    Fact("Array of resources this event affects, identified by VM instance names. Approving this event approves it to "
         "proceed for all resources listed in this array.",
         RESOURCE_GRAPH + "#scheduled-events-specific-fields", "Scheduled Events Specific Fields",
         {CONTROL_PLANE: "approve an event only when every VM it names is drained"}),
    Fact("Completed: (Event Grid and ARG only) The event was completed successfully after the maintenance operations "
         "was performed.", RESOURCE_GRAPH + "#scheduled-events-specific-fields", "Scheduled Events Specific Fields",
         {FACTS_PAGE: "An event that leaves IMDS stays in Resource Graph as Completed or Canceled"}),
    Fact("Canceled: (Event Grid and ARG only) The scheduled impact won't proceed as scheduled and the VM won't be "
         "impacted at the scheduled time.", RESOURCE_GRAPH + "#scheduled-events-specific-fields",
         "Scheduled Events Specific Fields",
         {FACTS_PAGE: "An event that leaves IMDS stays in Resource Graph as Completed or Canceled"}),
    Fact('Finally when the operation is done either an event with EventStatus:"Completed" (Event Grid, ARG) or an '
         "empty event array (IMDS) is sent to indicate that you can safely restore sensitive workloads to the VM.",
         OVERVIEW + "#timeline-of-a-scheduled-event-for-a-vm-interruption",
         "Timeline of a Scheduled Event for a VM Interruption",
         {CONTROL_PLANE: "Completed and Canceled give the history"}),
    Fact("By querying this table, you can understand patterns about past scheduled events, root cause outages, and "
         "create reports about past interruptions.", RESOURCE_GRAPH, INTRODUCTION,
         {FACTS_PAGE: "lists Scheduled and Started by default and the history with event_statuses"}),
    Fact("Is blank if the event is in the started state.", RESOURCE_GRAPH + "#scheduled-events-specific-fields",
         "Scheduled Events Specific Fields", {FACTS_PAGE: "not_before is null then, as in scheduled_event_info"}),
    Fact("As a free service, queries to Resource Graph are throttled to provide the best experience and response time "
         "for all customers.", ARG_OVERVIEW + "#throttling", "Throttling",
         {CONTROL_PLANE: "Resource Graph costs nothing"}),
    Fact("For example, a user can send at most 15 queries within every 5-second window without being throttled. The "
         "quota value is determined by many factors and is subject to change.",
         ARG_THROTTLING + "#understand-throttling-headers", "Understand throttling headers",
         {FACTS_PAGE: "The quota is per user (per signed-in principal), in queries, and every page is a query",
          CONTROL_PLANE: "15 queries in every 5 seconds per principal"}),
    Fact("x-ms-user-quota-resets-after (hh:mm:ss): The time duration until a user's quota consumption is reset.",
         ARG_THROTTLING + "#understand-throttling-headers", "Understand throttling headers",
         {FACTS_PAGE: "else for x-ms-user-quota-resets-after, else backs off, never past retry_timeout"}),
    Fact("In this case, each paginated query you send takes one query quota.", ARG_THROTTLING + "#pagination",
         "Pagination", {CONTROL_PLANE: "each page of 1,000 rows is one query of that quota"}),
    Fact("When resultTruncated is true, the $skipToken property isn't set.", ARG_PAGING, INTRODUCTION,
         {FACTS_PAGE: "The modules project id (a string column) either way"}),
    Fact("All output columns are either dynamic or null type.", ARG_PAGING, INTRODUCTION,
         {FACTS_PAGE: "That is one of the two cases Microsoft now lists in which a response has no $skipToken"}),
    Fact("The acknowledgment can be sent either to the IMDS endpoint within any VM or via the Maintenance Resource "
         "Provider (MRP) REST API endpoint. Azure treats an approval request from either endpoint as meaning that the "
         "event can start. It's possible to receive the event from the IMDS endpoint and approve via the MRP REST "
         "endpoint.", OVERVIEW + "#acknowledging-scheduled-events", "Acknowledging Scheduled Events",
         {FACTS_PAGE: "is the same approval as a POST to IMDS from a VM of the event",
          CONTROL_PLANE: "the same approval as scheduled_event_approve's POST to IMDS"}),
    Fact("A user must have the ScheduledEventContributor role to read or acknowledge the scheduled events from a VM.",
         RESOURCE_GRAPH + "#role-based-access-control-to-view-scheduled-events",
         "Role Based Access Control to View Scheduled Events",
         {FACTS_PAGE: "fleet_event_approve's message names ScheduledEventContributor",
          CONTROL_PLANE: "--role ScheduledEventContributor"}),
    Fact("It's important to note that all connections in this diagram are unidirectional, an event will never move "
         "backwards from started to scheduled or restart after being marked completed.",
         OVERVIEW + "#scheduled-events-states", "Scheduled Events States",
         {FACTS_PAGE: "reports such an event in already without acknowledging it"}),
    Fact("This works well for centralized control systems where failover decisions need to be made by a single "
         "controller.", OVERVIEW + "#event-grid-system-topic", "Event Grid System Topic",
         {FACTS_PAGE: "the event source ``event_grid`` is the webhook of a subscription to it"}),
    Fact("ARG is helpful when you want to do large-scale queries about events across the history of all the VMs in "
         "your subscription or for its integration with other tools.", OVERVIEW + "#azure-resource-graph",
         "Azure Resource Graph", {CONTROL_PLANE: "one query sees a whole fleet"}),
    Fact("Activity log events are retained in Azure for 90 days and then deleted.", ACTIVITY_LOG + "#retention-period",
         "Retention period", {FACTS_PAGE: "who acknowledged an event through Resource Manager, and when",
                              "plugins/module_utils/_activity.py": "ACTIVITY_RETENTION_DAYS = 90"}),
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
        assert fact.url.split("#")[0] in (LINUX, TERMINATE, IMDS, INSTANCE_IDS, AVAILABILITY_SETS) + CONTROL_PLANE_PAGES
        # A section's sentence is cited by its anchor; only the opening paragraphs have none.
        assert ("#" in fact.url) != (fact.section == INTRODUCTION), fact.quote


# What the collection says about the service without Microsoft's words for it: each file says it as
# its own observation, with the marker.
OBSERVATIONS = [
    ("plugins/doc_fragments/imds.py", "far larger than any Scheduled Events document we have seen " + OBSERVATION),
    ("docs/docsite/rst/troubleshooting.rst", "every Scheduled Events document we have seen is far smaller "
                                             + OBSERVATION),
    ("docs/docsite/rst/troubleshooting.rst", "A Redeploy can take longer " + OBSERVATION),
    ("plugins/modules/scheduled_event_info.py", "It can be empty " + OBSERVATION),
    (FACTS_PAGE, "far above any we have seen " + OBSERVATION),
    (FACTS_PAGE, "Description can be an empty string " + OBSERVATION),
    (FACTS_PAGE, "for a typical maintenance " + OBSERVATION),
    (FACTS_PAGE, "is what the collection relies on to match them " + OBSERVATION),
    ("docs/docsite/rst/watcher.rst", "be how Resources spells the VM, also in scale sets: " + OBSERVATION[1:-1]),
    ("docs/docsite/rst/watcher_handlers.rst", "in AKS it is the scale-set instance's computer name " + OBSERVATION),
    # The control plane (issue 24): what Microsoft's pages leave open, said as such, and what our mock chooses.
    (FACTS_PAGE, "on none of Microsoft's pages we read: it is not documented by Microsoft"),
    (FACTS_PAGE, "our mock's error names the flag, its own wording (not documented by Microsoft)"),
    (FACTS_PAGE, "is not documented by Microsoft: our mock answers 409 Conflict naming the event's status, its own "
                 "choice"),
    (FACTS_PAGE, "how soon a change reaches Resource Graph after IMDS shows it, are not documented by Microsoft"),
    (FACTS_PAGE, "our mock gives a $skipToken only to queries that project id, its own rule"),
    (CONTROL_PLANE, "how soon a change reaches it is not documented by Microsoft"),
    (CONTROL_PLANE, "we found it on none of Microsoft's pages (not documented by Microsoft)"),
]


@pytest.mark.parametrize("relative, words", OBSERVATIONS, ids=["%s: %s" % (o[0], o[1][:30]) for o in OBSERVATIONS])
def test_an_undocumented_claim_is_marked_as_our_observation(relative, words):
    assert plain(words) in plain(read(relative)), "%s no longer says %r" % (relative, words)


# Claims issue 22 found wrong, overstated or invented (Microsoft says otherwise, or nothing), in the
# words the collection used: none may come back, in the docs, the plugins, the roles or the mock.
WITHDRAWN = [
    "a non-leaf with format=text, or a leaf without it, is 400 as the IMDS documentation describes",
    "or a proxy of your own",
    "fault domains of a host",
    "Host server is undergoing emergency recovery.",
    "minutes to days ahead",
    "a Reboot lasts up to 15 minutes",
    "up to 15 minutes for a Reboot",
    "the user waits up to 15 minutes",
    "An event whose NotBefore is days ahead is a predicted hardware failure",
    "scale set instances appear as {scaleset}_{instanceid}",
    "Real scheduled events cannot be ordered on demand",
    "Early in boot IMDS can answer 404",
    "Early in boot this is transient",
    "host update is normal",
    "a person in the portal",
    "events that appeared before are not delivered",
    "timeouts, 429 with Retry-After, 410",
    "A Retry-After asked by IMDS",
    "A Scheduled Events document is a few KiB",
    "a redeploy can take longer)",
    "paths are case-sensitive; no trailing slash",
    "may be empty.",
    "IMDS answers 410 for up to 70 s while it recovers",
    # Round 3 of the audit: an approval was said to start an event now; Microsoft says it may not.
    "An approval starts the event at once",
    "so the platform starts them now instead of at NotBefore",
    "so it starts now instead of at NotBefore",
    "start them now, once you are ready",
    "switches itself off on a VM after 24 hours",
    "minutes before it happens",
    "410 Gone bursts",
    "Such a document does not come from Azure",
    "as with the real service.",
    "Azure has retired classic VMs",
    "a scale set can have several placement groups",
]
SEARCHED = MARKED_IN + ("roles/*/files/*.py", "roles/*/files/*/*.py", "plugins/*/*.py", "extensions/*/*.yml",
                        "docs/docsite/rst/reference/*.rst")


def searched_files():
    found = set()
    for pattern in SEARCHED:
        found.update(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))
    return sorted(found)


@pytest.mark.parametrize("claim", WITHDRAWN)
def test_a_withdrawn_claim_does_not_come_back(claim):
    said = [relative for relative in searched_files() if plain(claim) in plain(read(relative))]
    assert not said, "%r is not what Microsoft documents (issue 22), yet %s say it" % (claim, ", ".join(said))
