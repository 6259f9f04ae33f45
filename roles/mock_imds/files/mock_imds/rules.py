# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the real service accepts and answers: api-versions, paths, schemas, error bodies."""

from __future__ import print_function

import json
import re
import uuid
from urllib.parse import parse_qsl


SCHEDULED_EVENTS_VERSIONS = (
    "2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01", "2019-08-01", "2020-07-01",
)
# The instance metadata versions, as the IMDS documentation lists them (oldest first); this is
# also what /metadata/versions answers.
INSTANCE_VERSIONS = (
    "2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01", "2018-02-01",
    "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11", "2019-04-30", "2019-06-01",
    "2019-06-04", "2019-08-01", "2019-08-15", "2019-11-01", "2020-06-01", "2020-07-15",
    "2020-09-01", "2020-10-01", "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01",
    "2021-05-01", "2021-08-01", "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13",
    "2023-07-01", "2023-11-15", "2024-03-15", "2024-07-17", "2025-04-07",
)
NEWEST_VERSIONS = ("2025-04-07", "2024-07-17", "2024-03-15")
SCHEDULED_EVENTS_ACCEPTS = frozenset(SCHEDULED_EVENTS_VERSIONS + INSTANCE_VERSIONS)
INSTANCE_ACCEPTS = frozenset(INSTANCE_VERSIONS)
# Any accepted api-version is served with the schema of the newest Scheduled Events version
# that is not newer than it (2025-04-07 -> 2020-07-01, 2018-02-01 -> 2017-11-01).
SCHEMA_FOR_VERSION = dict(
    (v, max(s for s in SCHEDULED_EVENTS_VERSIONS if s <= v)) for v in SCHEDULED_EVENTS_ACCEPTS
)
FIELDS_SINCE = (("Description", "2019-04-01"), ("EventSource", "2019-08-01"), ("DurationInSeconds", "2020-07-01"))
EVENT_TYPES_SINCE = {"Preempt": "2017-11-01", "Terminate": "2019-01-01"}
# Versions older than 2017-08-01, when the Metadata header became mandatory.
HEADERLESS_VERSIONS = frozenset(v for v in INSTANCE_VERSIONS + SCHEDULED_EVENTS_VERSIONS if v < "2017-08-01")
UNDERSCORE_BEFORE = "2017-08-01"  # 2017-03-01 prefixes VM names in Resources with "_"

EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
DEFAULT_NOTICE = {"Freeze": 900, "Reboot": 900, "Redeploy": 600, "Preempt": 30, "Terminate": 300}
DEFAULT_NOTICE_OTHER = 900
DEFAULT_DURATION = 600
MAX_FAULT_DELAY = 120.0
RATE_LIMIT_PER_SECOND = 5

PATH_SCHEDULED_EVENTS = "/metadata/scheduledevents"
PATH_INSTANCE = "/metadata/instance"
PATH_VERSIONS = "/metadata/versions"
CONTROL_PREFIX = "/_mock/"
REDIRECT_TRAP = CONTROL_PREFIX + "redirect-target"

# Lifecycle states. Scheduled and Started are what IMDS shows; the others are the mock's own.
PENDING, SCHEDULED, STARTED, REMOVED, CANCELLED = "pending", "Scheduled", "Started", "removed", "cancelled"
VISIBLE_STATES = (SCHEDULED, STARTED)

APPROVAL_MODES = ("any", "all", "not_before")
UNKNOWN_ID_POLICIES = ("accept", "reject")

KIND_ALIASES = {
    "availability_set": "availability_set", "avset": "availability_set",
    "scale_set": "scale_set", "vmss": "scale_set",
    "zonal": "zonal",
}
BROADCAST_KINDS = ("availability_set", "scale_set")
STANDALONE = "standalone"
DEFAULT_VM_NAME = "vm0"
_VM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_NAMESPACE = uuid.UUID("6f0e2c2a-8f5e-4b7e-9d7a-3c1d2b4a5e60")


def _json_bytes(obj):
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _error_bytes(message):
    return _json_bytes({"error": message})


BODY_NO_METADATA = _error_bytes("Bad request. Required metadata header not specified")
BODY_BAD_API_VERSION = _json_bytes({
    "error": "Bad request. api-version is invalid or was not specified in the request. "
             "For more information refer to aka.ms/azureimds",
    "newest-versions": list(NEWEST_VERSIONS),
})
BODY_FORWARDED = _error_bytes("Bad request. Requests containing an X-Forwarded-For header are not allowed")
BODY_NOT_FOUND = _error_bytes("Not found")
BODY_METHOD = _error_bytes("Method not allowed")
BODY_TOO_MANY = _error_bytes("Too many requests")
BODY_TEXT_NON_LEAF = _error_bytes("Bad request. format=text is only supported for leaf nodes")
BODY_JSON_LEAF = _error_bytes("Bad request. A leaf node needs format=text")
BODY_BAD_FORMAT = _error_bytes("Bad request. format must be json or text")
BODY_BAD_APPROVAL = _error_bytes('Bad request. Expected a body like {"StartRequests":[{"EventId":"..."}]}')
BODY_VERSIONS = _json_bytes({"apiVersions": list(INSTANCE_VERSIONS)})
OWN_BODIES = {404: BODY_NOT_FOUND, 405: BODY_METHOD, 429: BODY_TOO_MANY}

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
_QUERY_CACHE = {}


def _parse_query(query):
    """Query string -> dict, None if a parameter repeats. Cached: clients repeat the same few."""
    try:
        return _QUERY_CACHE[query]
    except KeyError:
        pass
    pairs = parse_qsl(query, keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs):
        params = None
    if len(_QUERY_CACHE) > 1024:
        _QUERY_CACHE.clear()
    _QUERY_CACHE[query] = params
    return params
