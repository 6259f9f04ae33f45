# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The argspec of the shared options, paired with plugins/doc_fragments/imds.py (a unit test
# keeps the two equal), and the steps every module takes with them.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _imds


def imds_argument_spec():
    """Options of plugins/doc_fragments/imds.py DOCUMENTATION."""
    return dict(
        imds_url=dict(type="str"),
        api_version=dict(type="str", default=_imds.DEFAULT_API_VERSION, choices=list(_imds.API_VERSIONS)),
        request_timeout=dict(type="float", default=_imds.DEFAULT_REQUEST_TIMEOUT),
        retry_timeout=dict(type="float", default=_imds.DEFAULT_RETRY_TIMEOUT),
        resource_name=dict(type="str"),
    )


def filter_argument_spec():
    """Options of plugins/doc_fragments/imds.py FILTERS."""
    return dict(
        event_ids=dict(type="list", elements="str"),
        event_types=dict(type="list", elements="str"),
        event_statuses=dict(type="list", elements="str", choices=list(_imds.EVENT_STATUSES)),
        event_sources=dict(type="list", elements="str", choices=list(_imds.EVENT_SOURCES)),
    )


FILTER_NAMES = tuple(filter_argument_spec())


def check_filters(params):
    """Validate filter values. Returns warnings; raises _imds.ImdsInputError on bad values."""
    warnings = []
    for name in FILTER_NAMES:
        value = params.get(name)
        if value is not None and len(value) == 0:
            raise _imds.ImdsInputError(
                "%s is an empty list, which would match no event. Leave %s out to not filter on it."
                % (name, name))
    if params.get("event_ids") is not None:
        _imds.validate_event_ids(params["event_ids"])
    for event_type in params.get("event_types") or []:
        if event_type not in _imds.KNOWN_EVENT_TYPES:
            warnings.append(
                "event_types: %r is not a Scheduled Events type this collection knows (%s); it is kept "
                "in the filter since Azure may add types. Check its spelling (types are case-sensitive)."
                % (event_type, ", ".join(_imds.KNOWN_EVENT_TYPES)))
    return warnings


def filter_kwargs(params):
    """The filter options as keyword arguments of _imds.select_events()."""
    return dict((name, params.get(name)) for name in FILTER_NAMES)


def client_from_params(params, **overrides):
    return _imds.client_from_options(params, **overrides)


def resolve_resource_name(client, params):
    """The name of this VM as Resources spells it: the option, or IMDS compute/name."""
    return params.get("resource_name") or client.get_vm_name()
