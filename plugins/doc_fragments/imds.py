# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # The connection options of every module and of the scheduled_event_wait action plugin.
    # plugins/module_utils/_options.py builds the matching argspec; a unit test keeps them equal.
    DOCUMENTATION = r"""
options:
  imds_url:
    description:
      - Base URL of the Instance Metadata Service, without C(/metadata).
      - When omitted, the environment variable E(AZURE_IMDS_URL) on the managed host is used, and
        when that is unset, the real service at V(http://169.254.169.254).
      - Point it at the mock (for example V(http://127.0.0.1:8080/vm/web_0)) to test playbooks.
      - The service is always reached directly; proxy settings in the environment are ignored and
        redirects are refused.
      - It must be an V(http://) or V(https://) URL with a host, a port from 1 to 65535 when one is
        given, and no whitespace, control or non-ASCII characters, query, fragment or credentials.
        E(AZURE_IMDS_URL) is checked the same way. A URL that is not (an empty string included) is
        refused before any request.
    type: str
  api_version:
    description:
      - Scheduled Events api-version to request. Older versions lack later fields (they are
        returned as V(null)) and later event types.
    type: str
    default: '2020-07-01'
    choices: ['2017-03-01', '2017-08-01', '2017-11-01', '2019-01-01', '2019-04-01', '2019-08-01', '2020-07-01']
  request_timeout:
    description:
      - Seconds one request to IMDS may take in all, from connecting to the last byte of the answer;
        an answer that trickles in slowly does not extend it. Answers larger than 1 MiB are refused,
        far larger than any Scheduled Events document we have seen (our observation, not documented
        by Microsoft).
      - The first request to Scheduled Events after a quiet day can take up to two minutes while
        the service switches itself on, hence the long default. Connecting has its own short
        timeout of 5 seconds, so a machine that is not an Azure VM fails fast.
      - A number of seconds from 0.1 to 86400.
    type: float
    default: 120
  retry_timeout:
    description:
      - Overall deadline in seconds for retrying one IMDS operation through retryable failures
        (410, which Microsoft documents as lasting up to 70 seconds, 429 with backoff, 5xx, timeouts,
        dropped connections, empty or non-JSON answers). Other 4xx answers are never retried.
      - Failing to connect at all is retried for 5 seconds only, then reported as "no Instance
        Metadata Service".
      - Microsoft does not document a C(Retry-After) header on IMDS answers; when an answer carries
        one, it is honoured up to 60 seconds and never past this deadline, and when it would pass
        it, the module fails at once saying so.
      - V(0) disables retries.
      - A number of seconds from 0 to 86400.
    type: float
    default: 90
  resource_name:
    description:
      - The name of this VM as it appears in the C(Resources) of events.
      - When omitted, it is read from IMDS (C(/metadata/instance/compute/name)), which is right for
        scale set instances whose computer name differs from the VM name.
    type: str
  imds_transport:
    description:
      - How the requests to IMDS are made on the managed host.
      - V(module) runs this collection's Python module on the host, which sends the requests
        itself (Linux hosts; the host needs Python 3).
      - V(win_uri) is for Windows hosts, which run no Python. Each request is one run of
        M(ansible.windows.win_uri) on the host (without a proxy, following no redirect, with
        the header C(Metadata) set to C(true), the request's own timeout and every status returned to the controller);
        everything else (retries, C(Retry-After), the deadlines, reading the document, the filters,
        the leader rule, approving, waiting) runs on the controller with the same code as V(module).
        It needs the C(ansible.windows) collection on the controller. E(AZURE_IMDS_URL) is then read
        from the task's C(environment), not from the host.
      - V(auto) takes V(win_uri) for a host whose shell is PowerShell, V(module) for any other.
    type: str
    default: auto
    choices: [auto, module, win_uri]
"""

    # The event filters shared by scheduled_event_info, scheduled_event_approve and
    # scheduled_event_wait. Each filter left unset does not filter.
    FILTERS = r"""
options:
  event_ids:
    description:
      - Keep only events with these EventIds (GUIDs, compared without regard to case).
    type: list
    elements: str
  event_types:
    description:
      - Keep only events of these types, for example V(Freeze), V(Reboot), V(Redeploy),
        V(Preempt), V(Terminate). A type this collection does not know is accepted with a warning,
        since Azure may add types.
    type: list
    elements: str
  event_statuses:
    description:
      - Keep only events in these statuses.
    type: list
    elements: str
    choices: [Scheduled, Started]
  event_sources:
    description:
      - Keep only events from these sources (api-version 2019-08-01 and later report it).
    type: list
    elements: str
    choices: [Platform, User]
"""
