# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# Every default and bound of the collection's IMDS side, in one place: the modules' argspecs and
# doc fragment, the wait plugin, the EDA source, the watcher's configuration and the roles' defaults
# take theirs from here, and tests/unit/test_defaults.py checks every public surface against it.
# Standard library only (nothing at all, in fact): the watcher carries it onto the VM.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_BASE_URL = "http://169.254.169.254"
URL_ENV_VAR = "AZURE_IMDS_URL"

SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
VM_NAME_PATH = "/metadata/instance/compute/name"
VM_NAME_API_VERSION = "2021-02-01"

API_VERSIONS = (
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
)
DEFAULT_API_VERSION = "2020-07-01"

KNOWN_EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
EVENT_STATUSES = ("Scheduled", "Started")
EVENT_SOURCES = ("Platform", "User")

# The one place for defaults and bounds: the doc fragment, the argspecs, the wait plugin and the
# watcher's configuration all take theirs from here (a unit test keeps the documentation equal).
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_RETRY_TIMEOUT = 90.0
# Upper bound of every timeout, wait and interval option (seconds): a day is longer than any
# maintenance event, and a bound keeps absurd values (1e308) from overflowing time arithmetic.
MAX_TIMEOUT = 86400.0
# A request needs some time to be answered at all; below this a timeout is a typo.
MIN_REQUEST_TIMEOUT = 0.1
# IMDS allows 5 requests per second per VM across every caller: one floor for scheduled_event_info's
# poll_interval, scheduled_event_wait's sleep and the watcher's poll_interval.
MIN_POLL_INTERVAL = 0.2
# Retry-After is honoured up to this many seconds (a Preempt gives 30 s of notice), and never past
# the deadline of the operation.
RETRY_AFTER_CAP = 60.0
# Microsoft documents no size for a Scheduled Events document; every one we have seen is far below
# this cap (our observation), and reading an answer whole without a cap would cost memory without
# bound.
MAX_BODY_BYTES = 1024 * 1024
# DocumentIncarnation and the options that carry one (changed_since, since_incarnation).
MAX_INCARNATION = 2 ** 63 - 1
# A document nests four levels deep (the document, Events, an event, Resources). Only an extra field
# can nest deeper; past this bound it is left out with a warning, so that nothing downstream (a
# copy, a module's JSON result, the watcher's state file) recurses without bound.
MAX_NESTING = 32
# Refused connections, unreachable networks and connect timeouts mean "no IMDS here" far more
# often than "IMDS is restarting": give up on them quickly.
CONNECT_RETRY_WINDOW = 5.0

USER_AGENT = "azure_imds.scheduled_events"
# imds_transport: how requests reach IMDS. auto: win_uri on a host whose shell is PowerShell, else
# module (this collection's Python module on the host).
IMDS_TRANSPORTS = ("auto", "module", "win_uri")
DEFAULT_IMDS_TRANSPORT = "auto"
# IMDS documents that 410 may go on for up to 70 s; the default retry_timeout covers that and a
# shorter one is the caller's explicit choice.
GONE_RETRY_SECONDS = 70.0
# Everything that polls Scheduled Events (scheduled_event_info's changed_since watch, the wait, the
# EDA source, the watcher, rolling_maintenance) polls once a second unless told otherwise: well
# within IMDS' 5 requests per second, and soon enough for a Preempt's 30 s of notice.
DEFAULT_POLL_INTERVAL = 1.0
# Options given as text (a templated "{{ value }}") are read as numbers only when every character
# is one of these (ASCII digits, sign, point, exponent, Python's digit separator, blanks): float()
# would also take "nan", "inf" and digits of other scripts.
NUMBER_TEXT_CHARACTERS = frozenset("0123456789+-.eE_ ")
