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

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _event, _imds


def imds_argument_spec():
    """Options of plugins/doc_fragments/imds.py DOCUMENTATION."""
    return dict(
        imds_url=dict(type="str"),
        api_version=dict(type="str", default=_defaults.DEFAULT_API_VERSION, choices=list(_defaults.API_VERSIONS)),
        request_timeout=dict(type="float", default=_defaults.DEFAULT_REQUEST_TIMEOUT),
        retry_timeout=dict(type="float", default=_defaults.DEFAULT_RETRY_TIMEOUT),
        resource_name=dict(type="str"),
        imds_transport=dict(type="str", default=_defaults.DEFAULT_IMDS_TRANSPORT,
                            choices=list(_defaults.IMDS_TRANSPORTS)),
    )


def filter_argument_spec():
    """Options of plugins/doc_fragments/imds.py FILTERS."""
    return dict(
        event_ids=dict(type="list", elements="str"),
        event_types=dict(type="list", elements="str"),
        event_statuses=dict(type="list", elements="str", choices=list(_defaults.EVENT_STATUSES)),
        event_sources=dict(type="list", elements="str", choices=list(_defaults.EVENT_SOURCES)),
    )


FILTER_NAMES = tuple(filter_argument_spec())


# The range of every numeric option of the modules and of scheduled_event_wait: (minimum, maximum,
# whole number?). The documentation states each range; a unit test keeps the two equal.
NUMBER_RANGES = {
    "request_timeout": (_defaults.MIN_REQUEST_TIMEOUT, _defaults.MAX_TIMEOUT, False),
    "retry_timeout": (0.0, _defaults.MAX_TIMEOUT, False),
    "max_wait": (0.0, _defaults.MAX_TIMEOUT, False),
    "poll_interval": (_defaults.MIN_POLL_INTERVAL, _defaults.MAX_TIMEOUT, False),
    "changed_since": (0, _defaults.MAX_INCARNATION, True),
    "timeout": (0.0, _defaults.MAX_TIMEOUT, False),
    "delay": (0.0, _defaults.MAX_TIMEOUT, False),
    "sleep": (_defaults.MIN_POLL_INTERVAL, _defaults.MAX_TIMEOUT, False),
    "since_incarnation": (0, _defaults.MAX_INCARNATION, True),
}


def check_numbers(params, raw=None):
    """Check every numeric option in params once, where it enters; params gets the checked values.

    raw holds the options as the user gave them, before Ansible's type conversion, which turns
    true into 1.0: a bool or a non-ASCII string given for a number is refused from there.
    """
    raw = raw or {}
    for name, (minimum, maximum, integer) in NUMBER_RANGES.items():
        if name not in params:
            continue
        given = raw.get(name, params[name])
        unit = None if integer else "seconds"
        if isinstance(given, bool) or (isinstance(given, str) and not _edge.is_number_text(given)):
            _edge.check_number(given, name, minimum, maximum, integer=integer, unit=unit)
        params[name] = _edge.check_number(_number_from_text(params[name]), name, minimum, maximum,
                                          integer=integer, allow_none=True, unit=unit)


def _number_from_text(value):
    """The number an option declared raw (so that Ansible's int conversion cannot fail on infinity
    without naming it) was given as ASCII text, such as a templated "{{ incarnation }}"; anything
    else unchanged, for check_number to judge."""
    if not isinstance(value, str) or not value.strip() or not _edge.is_number_text(value):
        return value
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            continue
    return value


def range_text(name):
    """How the documentation states the range of a numeric option (a unit test compares)."""
    minimum, maximum, integer = NUMBER_RANGES[name]
    return "A %s from %s to %s." % ("whole number" if integer else "number of seconds",
                                    _edge.format_number(minimum), _edge.format_number(maximum))


def check_filters(params):
    """Validate filter values. Returns warnings; raises _edge.ImdsInputError on bad values."""
    warnings = []
    for name in FILTER_NAMES:
        value = params.get(name)
        if value is not None and len(value) == 0:
            raise _edge.ImdsInputError(
                "%s is an empty list, which would match no event. Leave %s out to not filter on it."
                % (name, name))
    if params.get("event_ids") is not None:
        _event.validate_event_ids(params["event_ids"])
    for event_type in params.get("event_types") or []:
        if event_type not in _defaults.KNOWN_EVENT_TYPES:
            warnings.append(
                "event_types: %r is not a Scheduled Events type this collection knows (%s); it is kept "
                "in the filter since Azure may add types. Check its spelling (types are case-sensitive)."
                % (event_type, ", ".join(_defaults.KNOWN_EVENT_TYPES)))
    return warnings


def filter_kwargs(params):
    """The filter options as keyword arguments of _event.select_events()."""
    return dict((name, params.get(name)) for name in FILTER_NAMES)


def raw_module_args():
    """The module's options as the controller sent them, before type conversion ({} when unknown)."""
    try:
        from ansible.module_utils.basic import _load_params  # pylint: disable=import-outside-toplevel
        return dict(_load_params())
    except Exception:  # pylint: disable=broad-exception-caught
        # Only the refusal of a bool given for a number depends on it; the range checks do not.
        return {}


def client_from_params(params, **overrides):
    return _imds.client_from_options(params, **overrides)


def resolve_resource_name(client, params):
    """The name of this VM as Resources spells it: the option, or IMDS compute/name."""
    return params.get("resource_name") or client.get_vm_name()
