"""The doc fragment and the argspec builder describe the same options."""

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.doc_fragments.imds import ModuleDocFragment
from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge, _options
from ansible_collections.azure_imds.scheduled_events.tests.support.module_harness import compare_options


def test_connection_fragment_matches_argspec():
    compare_options(ModuleDocFragment.DOCUMENTATION, _options.imds_argument_spec())


def test_filter_fragment_matches_argspec():
    compare_options(ModuleDocFragment.FILTERS, _options.filter_argument_spec())


def test_api_version_choices_are_the_clients():
    assert _options.imds_argument_spec()["api_version"]["choices"] == list(_defaults.API_VERSIONS)


def test_empty_filter_list_is_refused_with_the_fix():
    with pytest.raises(_edge.ImdsInputError, match="event_types is an empty list.*Leave event_types out"):
        _options.check_filters({"event_types": []})


def test_malformed_event_id_filter_is_refused():
    with pytest.raises(_edge.ImdsInputError, match="'1234'"):
        _options.check_filters({"event_ids": ["1234"]})


def test_unknown_event_type_is_kept_with_a_warning():
    warnings = _options.check_filters({"event_types": ["Freeze", "Hibernate"]})
    assert len(warnings) == 1 and "'Hibernate'" in warnings[0]


def test_fragment_defaults_are_the_client_constants():
    spec = _options.imds_argument_spec()
    assert spec["request_timeout"]["default"] == _defaults.DEFAULT_REQUEST_TIMEOUT
    assert spec["retry_timeout"]["default"] == _defaults.DEFAULT_RETRY_TIMEOUT
    assert spec["api_version"]["default"] == _defaults.DEFAULT_API_VERSION


def test_client_from_params_uses_the_options():
    client = _options.client_from_params({"imds_url": "http://127.0.0.1:1/vm/a", "api_version": "2019-08-01",
                                          "request_timeout": 3.0, "retry_timeout": 0.0})
    assert (client.base_url, client.api_version, client.request_timeout, client.retry_timeout) == (
        "http://127.0.0.1:1/vm/a", "2019-08-01", 3.0, 0.0)


@pytest.mark.parametrize("given, expected", [(7, 7), ("7", 7), (" 12 ", 12), ("1e3", 1000), (7.0, 7)])
def test_incarnation_options_declared_raw_take_numbers_and_their_ascii_text(given, expected):
    for name in ("changed_since", "since_incarnation"):
        params = {name: given}
        _options.check_numbers(params, {name: given})
        assert params[name] == expected and isinstance(params[name], int)


@pytest.mark.parametrize("given", [float("inf"), float("-inf"), float("nan"), "inf", "５", "", True, 1.5, -1, 2 ** 63])
def test_incarnation_options_refuse_what_is_no_whole_number_naming_the_option(given):
    for name in ("changed_since", "since_incarnation"):
        with pytest.raises(_edge.ImdsInputError) as caught:
            _options.check_numbers({name: given}, {name: given})
        assert str(caught.value).startswith(name + " must be a whole number from 0 to 9223372036854775807")
