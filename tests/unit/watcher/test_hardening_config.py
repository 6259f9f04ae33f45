"""Every number and URL of the watcher's configuration is checked where it enters: NaN, infinities,
negatives, huge values, bools and strings are refused with the key, the value and the range, by
check_config, by load_config (JSON's NaN/Infinity literals too) and by `check-config` (exit 2)."""

import json

import pytest

from ansible_collections.azure_imds.scheduled_events.plugins.module_utils import _defaults, _edge
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import __main__ as cli
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config as watcher_config
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.config import (
    ConfigError, check_config, load_config, stop_timeout)

NAN, INF = float("nan"), float("inf")

# (key path as the message names it, a document builder taking the value)
NUMBERS = [
    ("poll_interval", lambda v: {"poll_interval": v}),
    ("request_timeout", lambda v: {"request_timeout": v}),
    ("first_request_timeout", lambda v: {"first_request_timeout": v}),
    ("handler_timeout", lambda v: {"handler_timeout": v}),
    ("kill_grace", lambda v: {"kill_grace": v}),
    ("handlers[0].timeout", lambda v: {"handlers": [{"name": "10-x", "phase": "drain", "timeout": v}]}),
    ("approval.freeze_max_duration", lambda v: {"approval": {"freeze_max_duration": v}}),
    ("notify_timeout", lambda v: {"notify_timeout": v}),
    ("notify_max_attempts", lambda v: {"notify_max_attempts": v}),
    ("notify_outbox_max", lambda v: {"notify_outbox_max": v}),
]
BAD_VALUES = [NAN, INF, -INF, -1, 1e308, True, False, "1", [1], {"a": 1}]


@pytest.mark.parametrize("key, build", NUMBERS, ids=[n[0] for n in NUMBERS])
@pytest.mark.parametrize("value", BAD_VALUES, ids=[repr(v) for v in BAD_VALUES])
def test_every_number_refuses_what_is_not_a_finite_number_in_range(key, build, value):
    with pytest.raises(ConfigError) as info:
        check_config(build(value))
    message = str(info.value)
    assert message.startswith(key + " must be a "), message
    minimum, maximum = watcher_config.RANGES[key.split(".")[-1] if key.startswith("approval") else
                                             "handler_timeout" if key.startswith("handlers") else key]
    assert "from %s to %s" % (_edge.format_number(minimum), _edge.format_number(maximum)) in message
    assert "got " in message


@pytest.mark.parametrize("key, build", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_every_number_accepts_both_ends_of_its_range(key, build):
    name = key.split(".")[-1] if key.startswith("approval") else "handler_timeout" if key.startswith("handlers") \
        else key
    for bound in watcher_config.RANGES[name]:
        check_config(build(bound))


def test_zero_is_refused_where_it_makes_no_sense_and_accepted_for_kill_grace():
    for key in ("poll_interval", "request_timeout", "first_request_timeout", "handler_timeout"):
        with pytest.raises(ConfigError) as info:
            check_config({key: 0})
        assert key in str(info.value) and "got 0" in str(info.value)
    assert check_config({"kill_grace": 0})["kill_grace"] == 0.0
    assert check_config({"approval": {"freeze_max_duration": 0}})["approval"]["freeze_max_duration"] == 0


def test_poll_interval_floor_is_the_shared_one():
    assert watcher_config.RANGES["poll_interval"][0] == _defaults.MIN_POLL_INTERVAL
    check_config({"poll_interval": _defaults.MIN_POLL_INTERVAL})
    with pytest.raises(ConfigError):
        check_config({"poll_interval": _defaults.MIN_POLL_INTERVAL / 2})


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://127.0.0.1:99999", "http://[::1",
                                 "http://127.0.0.1 :80", "http://127.0.0.1/\nx", "ftp://127.0.0.1", 8080,
                                 "http://127.0.0.1:8080/?a=1"])
def test_imds_url_is_parsed_fully(url):
    with pytest.raises(ConfigError) as info:
        check_config({"imds_url": url})
    assert "imds_url" in str(info.value)


@pytest.mark.parametrize("doc, words", [
    ({"resource_name": "web_0\nERROR: forged"}, ["resource_name", "control characters"]),
    ({"state_dir": "/var/lib/x\x00y"}, ["state_dir", "control characters"]),
    ({"handler_environment": {"A B": "x"}}, ["handler_environment", "'A B'", "variable name"]),
    ({"handler_environment": {"A": "x\x00"}}, ["handler_environment.A", "NUL"]),
    ({"handlers": [{"name": "x", "phase": "drain", "command": ["/bin/echo", "a\x00b"]}]}, ["command[1]", "NUL"]),
])
def test_strings_that_cannot_be_used_are_refused(doc, words):
    with pytest.raises(ConfigError) as info:
        check_config(doc)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("text, key, constant", [
    ('{"poll_interval": NaN}', "poll_interval", "NaN"),
    ('{"poll_interval": Infinity}', "poll_interval", "Infinity"),
    ('{"handler_timeout": -Infinity}', "handler_timeout", "-Infinity"),
    ('{"handlers": [{"name": "a", "phase": "drain", "timeout": NaN}]}', "handlers[0].timeout", "NaN"),
    ('{"approval": {"freeze_max_duration": NaN}}', "approval.freeze_max_duration", "NaN"),
])
def test_json_nan_and_infinity_literals_are_refused_naming_the_key(tmp_path, text, key, constant):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert "%s must be a " % key in str(info.value) and str(info.value).endswith("got %s." % constant)
    assert " from " in str(info.value)                   # the range


def test_a_json_literal_where_no_number_is_checked_is_refused_too(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    # Were a key ever left unchecked, the literal would still not pass.
    monkeypatch.setattr(watcher_config, "check_config", lambda doc: doc)
    path.write_text('{"extra": [1, NaN]}')
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert "extra[1] holds NaN, which is not a number JSON allows" in str(info.value)


@pytest.mark.parametrize("text", [
    '{"poll_interval": NaN}', '{"poll_interval": Infinity}', '{"handler_timeout": NaN}',
    '{"poll_interval": 1e400}', '{"kill_grace": -1}', '{"request_timeout": 0}', '{"imds_url": "http://x:99999"}',
    '{"handlers": [{"name": "a", "phase": "drain", "timeout": 1e308}]}',
])
def test_check_config_refuses_them_with_exit_2_and_no_traceback(tmp_path, capsys, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    assert cli.main(["check-config", "--config", str(path)]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert "configuration error" in captured.err and "Traceback" not in captured.err + captured.out
    assert "is valid" not in captured.out


def test_run_refuses_a_bad_configuration_before_anything_starts(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"state_dir": str(tmp_path / "state"), "handler_timeout": 1e308}))
    assert cli.main(["run", "--once", "--config", str(path)]) == cli.EXIT_USAGE
    assert "handler_timeout must be a number from 1 to 86400" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_stop_timeout_is_the_longest_handler_limit_plus_kill_grace_request_timeout_and_margin():
    config = check_config({"handler_timeout": 300, "kill_grace": 5, "request_timeout": 10})
    assert stop_timeout(config) == 300 + 5 + 10 + watcher_config.STOP_MARGIN_SECONDS
    config = check_config({"handler_timeout": 60, "kill_grace": 7.5, "request_timeout": 10, "handlers": [
        {"name": "30-kubectl", "phase": "drain", "timeout": 900}, {"name": "10-lb", "phase": "drain", "timeout": 20}]})
    assert stop_timeout(config) == int(900 + 7.5 + 10 + watcher_config.STOP_MARGIN_SECONDS + 0.5)


def test_check_config_prints_the_stop_timeout_the_unit_needs(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{"handler_timeout": 600, "kill_grace": 10}')
    assert cli.main(["check-config", "--config", str(path)]) == cli.EXIT_OK
    assert "a stop may take up to %ds" % (600 + 10 + 10 + 15) in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# Nesting: bounded where the file is read
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000,
    '{"a": ' * 100000 + "1" + "}" * 100000,
    '{"handler_environment": {"A": ' + "[" * 900 + "]" * 900 + "}}",       # under json's own limit
    '{"extra": ' + "[" * 100000,                                            # and never closed
], ids=["array_100000", "object_100000", "value_900", "unclosed_100000"])
def test_a_deeply_nested_configuration_is_a_configuration_error_naming_the_file(tmp_path, capsys, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert str(path) in str(info.value) and "more than %d deep" % watcher_config.MAX_CONFIG_DEPTH in str(info.value)
    for command in (["check-config"], ["run", "--once"]):
        assert cli.main(command + ["--config", str(path)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert "configuration error: the configuration %s nests arrays and objects" % path in err
        assert "internal error" not in err and "RecursionError" not in err


def test_brackets_inside_strings_do_not_count_and_the_deepest_valid_configuration_loads(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "handler_environment": {"DEEP": "[" * 5000 + '\\"{' * 100},
        "approval": {"rules": [{"event_types": ["Reboot"], "policy": "immediate"}]},
    }))
    config = load_config(str(path))
    assert config["handler_environment"]["DEEP"].startswith("[[[")
    assert config["approval"]["rules"][0]["event_types"] == ["Reboot"]
