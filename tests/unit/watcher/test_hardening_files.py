"""Issue 22, items 8 and 9: the files the watcher (root) writes.

Whoever can write in a directory the watcher writes to (node_exporter's account, for the metrics
textfile) must not be able to make root truncate, fill or expose another file: the temporary file is
created with a name nobody can guess, O_EXCL and O_NOFOLLOW, and a directory that others can change
is refused by the rule handler directories follow. The background daemon's log keeps handler output
and is 0600."""

import os
import subprocess

import pytest

from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import metrics as watcher_metrics
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import handlers as watcher_handlers
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.state import (
    StateError, StateStore)
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher.files import (
    UnsafeDirectory, replace_file)

from .test_e2e_mock import Vm, mock  # noqa: F401  pylint: disable=unused-import

NOBODY = 65534
SECRET = b"root:$6$secret:19000:0:99999:7:::\n"


def victim_file(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_bytes(SECRET)
    os.chmod(str(victim), 0o600)
    return victim


def textfile_dir(tmp_path, mode=0o755, uid=0):
    directory = tmp_path / "textfile_collector"
    directory.mkdir()
    os.chmod(str(directory), mode)
    os.chown(str(directory), uid, 0)
    return directory


def unchanged(victim):
    return victim.read_bytes() == SECRET and (os.stat(str(victim)).st_mode & 0o777) == 0o600


def test_a_symlink_planted_at_the_temporary_name_is_never_followed(tmp_path):
    victim = victim_file(tmp_path)
    textfile = textfile_dir(tmp_path) / "azure_imds_watcher.prom"
    # The name the watcher used to write through: <path>.tmp-<pid>.
    planted = "%s.tmp-%d" % (textfile, os.getpid())
    os.symlink(str(victim), planted)
    watcher_metrics.write_textfile(watcher_metrics.WatcherMetrics("test", 0.0), str(textfile))
    assert unchanged(victim), "root wrote through the symbolic link %s" % planted
    assert textfile.read_text().startswith("# HELP ") and not textfile.is_symlink()
    assert os.stat(str(textfile)).st_mode & 0o777 == 0o644
    assert os.path.islink(planted)          # left as it was, never opened


def test_a_textfile_that_is_a_symlink_is_replaced_not_followed(tmp_path):
    victim = victim_file(tmp_path)
    textfile = textfile_dir(tmp_path) / "azure_imds_watcher.prom"
    os.symlink(str(victim), str(textfile))
    watcher_metrics.write_textfile(watcher_metrics.WatcherMetrics("test", 0.0), str(textfile))
    assert unchanged(victim)
    assert not textfile.is_symlink() and textfile.read_text().startswith("# HELP ")


def test_the_temporary_file_is_created_exclusively_without_following_links(tmp_path, monkeypatch):
    """Whatever the name: a file that appears there first makes the create fail, never opens it."""
    victim = victim_file(tmp_path)
    directory = textfile_dir(tmp_path)
    textfile = directory / "azure_imds_watcher.prom"
    opened = []
    real_open = os.open

    def recording_open(path, flags, mode=0o777, **kwargs):
        opened.append((str(path), flags))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    replace_file(str(textfile), b"x 1\n", 0o644)
    monkeypatch.undo()
    creates = [(path, flags) for path, flags in opened if flags & os.O_CREAT]
    assert len(creates) == 1
    path, flags = creates[0]
    assert os.path.dirname(path) == str(directory) and path != "%s.tmp-%d" % (textfile, os.getpid())
    assert flags & os.O_EXCL and flags & os.O_NOFOLLOW and not flags & os.O_TRUNC
    assert unchanged(victim) and textfile.read_bytes() == b"x 1\n"


@pytest.mark.parametrize("mode, uid, fix", [
    (0o775, 0, "chmod go-w"),          # node_exporter's group may write
    (0o757, 0, "chmod go-w"),          # anyone may write
    (0o755, NOBODY, "chown root"),     # owned by node_exporter's account
])
def test_a_textfile_directory_others_can_change_is_refused(tmp_path, mode, uid, fix):
    victim = victim_file(tmp_path)
    directory = textfile_dir(tmp_path, mode, uid)
    textfile = directory / "azure_imds_watcher.prom"
    os.symlink(str(victim), "%s.tmp-%d" % (textfile, os.getpid()))
    with pytest.raises(UnsafeDirectory) as info:
        watcher_metrics.write_textfile(watcher_metrics.WatcherMetrics("test", 0.0), str(textfile))
    assert str(directory) in info.value.strerror and fix in info.value.strerror
    assert unchanged(victim)
    assert sorted(os.listdir(str(directory))) == ["azure_imds_watcher.prom.tmp-%d" % os.getpid()]


def test_a_sticky_directory_is_accepted_as_for_handlers(tmp_path):
    textfile = textfile_dir(tmp_path, 0o1777) / "azure_imds_watcher.prom"
    replace_file(str(textfile), b"x 1\n", 0o644)
    assert textfile.read_bytes() == b"x 1\n"


def test_the_rule_is_the_handlers_rule(tmp_path, monkeypatch):
    """One rule, handlers.directories_problem, for handlers and for every file written."""
    asked = []
    monkeypatch.setattr(watcher_handlers, "directories_problem",
                        lambda path, euid=None: asked.append(path) or "the directory X is not safe")
    with pytest.raises(UnsafeDirectory):
        replace_file(str(tmp_path / "f"), b"", 0o600)
    assert asked == [str(tmp_path / "f")]


def test_a_state_directory_others_can_write_is_refused_at_start(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    os.chmod(str(state_dir), 0o770)
    with pytest.raises(StateError) as info:
        StateStore(str(state_dir)).ensure_directory()
    assert "refused to use the state directory %s" % state_dir in str(info.value)
    assert "chmod go-w %s" % state_dir in str(info.value)


def test_the_daemon_refuses_an_unsafe_textfile_directory_once_and_does_its_job(tmp_path, mock):  # noqa: F811
    victim = victim_file(tmp_path)
    directory = textfile_dir(tmp_path, 0o755, NOBODY)
    textfile = directory / "azure_imds_watcher.prom"
    vm = Vm(tmp_path, mock, metrics_textfile=str(textfile))
    eid = vm.event(event_type="Reboot", resources=["web_0"])
    out = vm.once()
    assert out.count("cannot write the metrics textfile %s: refused to write there: the directory %s is owned by uid "
                     "%d" % (textfile, directory, NOBODY)) == 1, out
    assert "Traceback" not in out
    assert not textfile.exists() and unchanged(victim)
    assert vm.lines() == ["drain %s Reboot" % eid] and len(vm.approvals()) == 1


def test_the_background_daemon_log_is_private(tmp_path, mock):  # noqa: F811
    vm = Vm(tmp_path, mock)
    pid_file, log_file = tmp_path / "watcher.pid", tmp_path / "watcher.log"
    log_file.write_bytes(b"an older log\n")
    os.chmod(str(log_file), 0o644)
    argv, env = vm.command("start", "--pid-file", str(pid_file), "--log-file", str(log_file))
    started = subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=False)
    try:
        assert started.returncode == 0 and b"started:" in started.stdout, started.stdout
        assert os.stat(str(log_file)).st_mode & 0o777 == 0o600
        assert log_file.read_bytes().startswith(b"an older log\n")
    finally:
        argv, env = vm.command("stop", "--pid-file", str(pid_file))
        subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=120, check=False)
    fresh = tmp_path / "fresh.log"
    argv, env = vm.command("start", "--pid-file", str(pid_file), "--log-file", str(fresh))
    started = subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=False)
    try:
        assert started.returncode == 0, started.stdout
        assert os.stat(str(fresh)).st_mode & 0o777 == 0o600
    finally:
        argv, env = vm.command("stop", "--pid-file", str(pid_file))
        subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=120, check=False)


def test_the_background_daemon_log_is_never_opened_through_a_symlink(tmp_path, mock):  # noqa: F811
    victim = victim_file(tmp_path)
    vm = Vm(tmp_path, mock)
    log_file = tmp_path / "watcher.log"
    os.symlink(str(victim), str(log_file))
    argv, env = vm.command("start", "--pid-file", str(tmp_path / "watcher.pid"), "--log-file", str(log_file))
    started = subprocess.run(argv, env=env, stdout=subprocess.PIPE, timeout=60, check=False)
    assert started.returncode == 2, started.stdout
    assert b"error: cannot open --log-file %s" % str(log_file).encode() in started.stdout
    assert unchanged(victim)
