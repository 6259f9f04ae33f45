"""The configuration file's checks and the durable state file."""

import glob
import json
import os

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import config as watcher_config
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.config import (
    ConfigError, check_config, load_config)
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.state import (
    StateStore)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------

def test_an_empty_configuration_is_every_default():
    config = check_config({})
    assert config["poll_interval"] == 1.0
    assert config["imds_url"] is None                    # the client then uses $AZURE_IMDS_URL or the real one
    assert config["approval"]["policy"] == "after_drain"
    assert config["approval"]["freeze_max_duration"] == 8
    assert config["handlers"] == []


@pytest.mark.parametrize("doc, words", [
    ({"poll_intervall": 1}, ["poll_intervall", "poll_interval"]),
    ({"poll_interval": 0.1}, ["poll_interval", "0.2"]),
    ({"poll_interval": "1"}, ["poll_interval", "number"]),
    ({"api_version": "2099-01-01"}, ["api_version", "2020-07-01"]),
    ({"imds_url": "169.254.169.254"}, ["imds_url", "http://"]),
    ({"state_dir": "var/lib/x"}, ["state_dir", "absolute"]),
    ({"log_format": "xml"}, ["log_format", "json"]),
    ({"handler_environment": {"A": 1}}, ["handler_environment"]),
    ({"handlers": [{"name": "a b", "phase": "drain"}]}, ["handlers[0].name", "10-health-probe"]),
    ({"handlers": [{"name": "x", "phase": "prepare"}]}, ["handler x.phase", "drain, started, recover"]),
    ({"handlers": [{"name": "x", "phase": "drain", "command": "systemctl stop app"}]}, ["command", "list"]),
    ({"handlers": [{"name": "x", "phase": "drain", "command": ["systemctl", "stop"]}]},
     ["absolute path", "/usr/bin/systemctl"]),
    ({"handlers": [{"name": "x", "phase": "drain"}, {"name": "x", "phase": "drain"}]}, ["listed twice"]),
    ({"handlers": [{"name": "x", "phase": "drain", "script": "echo"}]}, ["unknown key 'script'"]),
    ({"approval": {"policy": "yes"}}, ["approval.policy", "after_drain, immediate, none"]),
    ({"approval": {"rules": [{"event_types": ["Reboot"]}]}}, ["approval.rules[0]", "needs a policy"]),
    ({"approval": {"rules": [{"event_sources": ["Customer"], "policy": "none"}]}}, ["event_sources", "Platform"]),
    ({"approval": {"leader_only": "yes"}}, ["leader_only", "true or false"]),
    ({"approval": {"freeze_max_duration": -1}}, ["freeze_max_duration"]),
    ({"approval": []}, ["approval must be a JSON object"]),
])
def test_bad_values_are_named_with_the_fix(doc, words):
    with pytest.raises(ConfigError) as info:
        check_config(doc)
    for word in words:
        assert word in str(info.value)


def test_handler_entries_are_normalised():
    config = check_config({"handlers": [
        {"name": "10-lb", "phase": "drain", "event_types": ["Reboot"], "timeout": 20},
        {"name": "20-stop", "phase": "drain", "command": ["/usr/bin/systemctl", "stop", "app"]},
    ]})
    assert config["handlers"] == [
        {"name": "10-lb", "phase": "drain", "event_types": ["Reboot"], "timeout": 20.0, "command": None},
        {"name": "20-stop", "phase": "drain", "event_types": None, "timeout": None,
         "command": ["/usr/bin/systemctl", "stop", "app"]},
    ]


def test_a_checked_configuration_checks_again_unchanged():
    config = check_config({"handlers": [{"name": "a", "phase": "recover"}],
                           "approval": {"rules": [{"event_types": ["Freeze"], "policy": "immediate"}]}})
    assert check_config(config) == config


def test_load_config_reports_unreadable_files_without_a_traceback(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(str(tmp_path / "missing.json"))
    assert "cannot read the configuration" in str(info.value) and "--config" in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text("{poll_interval: 1}")
    with pytest.raises(ConfigError) as info:
        load_config(str(bad))
    assert "not valid JSON" in str(info.value)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"poll_interval": -1}')
    with pytest.raises(ConfigError) as info:
        load_config(str(wrong))
    assert str(wrong) in str(info.value) and "poll_interval" in str(info.value)


def test_load_config_reads_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"resource_name": "web_0", "approval": {"leader_only": True}}))
    config = load_config(str(path))
    assert config["resource_name"] == "web_0" and config["approval"]["leader_only"] is True
    assert config["approval"]["policy"] == watcher_config.DEFAULTS["approval"]["policy"]


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------

RECORDS = {"c7061bac-afdc-4513-b24b-aa5f13a16123": {"drain": "running", "event": {"event_id": "C7061BAC"}}}


def loaded(store, **kwargs):
    """(records, note) of a load."""
    result = store.load(**kwargs)
    return result.records, result.note


def test_state_round_trip(tmp_path):
    store = StateStore(str(tmp_path))
    assert loaded(store) == ({}, None)
    assert store.save(RECORDS, "web_0") is True
    assert loaded(StateStore(str(tmp_path))) == (RECORDS, None)
    assert oct(os.stat(store.path).st_mode & 0o777) == "0o600"


def test_state_is_written_atomically_temp_fsync_rename_fsync_dir(tmp_path, monkeypatch):
    store = StateStore(str(tmp_path))
    calls = []
    real_fsync, real_replace, real_open = os.fsync, os.replace, os.open
    paths = {}

    def fake_open(path, flags, mode=0o777):
        fd = real_open(path, flags, mode)
        paths[fd] = path
        return fd

    def fake_fsync(fd):
        calls.append(("fsync", paths.get(fd)))
        real_fsync(fd)

    def fake_replace(src, dst):
        calls.append(("replace", src, dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "fsync", fake_fsync)
    monkeypatch.setattr(os, "replace", fake_replace)
    store.save(RECORDS, "web_0")
    # The temporary file's name is mkstemp's, which nobody can guess (issue 22, item 8).
    tmp = calls[0][1]
    assert tmp.startswith(store.path + ".tmp-") and tmp != "%s.tmp-%d" % (store.path, os.getpid())
    assert calls == [("fsync", tmp), ("replace", tmp, store.path), ("fsync", str(tmp_path))]
    assert not os.path.exists(tmp)


def test_state_is_not_rewritten_when_nothing_changed(tmp_path):
    store = StateStore(str(tmp_path))
    assert store.save(RECORDS, "web_0") is True
    assert store.save(json.loads(json.dumps(RECORDS)), "web_0") is False
    reloaded = StateStore(str(tmp_path))
    reloaded.load()
    assert reloaded.save(RECORDS, "web_0") is False


def test_a_kill_during_a_write_leaves_the_old_state(tmp_path, monkeypatch):
    store = StateStore(str(tmp_path))
    store.save(RECORDS, "web_0")

    def killed(src, dst):
        raise KeyboardInterrupt("killed between fsync and rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.save({}, "web_0")
    monkeypatch.undo()
    leftovers = glob.glob(glob.escape(store.path) + ".tmp-*")
    assert len(leftovers) == 1
    leftover = leftovers[0]
    restarted = StateStore(str(tmp_path))
    restarted.lock()            # as a starting watcher does: only the holder of the lock sweeps
    assert loaded(restarted) == (RECORDS, None)
    assert not os.path.exists(leftover)
    restarted.unlock()


def test_unreadable_state_is_set_aside_and_reported(tmp_path):
    store = StateStore(str(tmp_path), wall_clock=lambda: 1700000000)
    with open(store.path, "w") as handle:
        handle.write('{"version": 1, "records": {"a": ')
    records, note = loaded(store, read_only=True)
    assert records == {} and "could not be read" in note and os.path.exists(store.path)
    records, note = loaded(store)
    assert records == {} and "moved to" in note
    assert not os.path.exists(store.path)
    assert os.path.exists(store.path + ".corrupt-1700000000")
