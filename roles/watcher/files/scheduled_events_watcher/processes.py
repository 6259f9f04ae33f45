# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Handler processes that never outlive their watcher unnoticed.

Every handler runs in a process group (a session) of its own. Its pid, group and start time are
in the state file before the handler may run: the watcher starts a small gate process that waits
on a pipe, writes the record, then opens the gate and the gate execs the handler (same pid, same
group, same start time). Killed before the record is written, the watcher never opens the gate
and the gate exits without running anything; killed after, its successor finds the record and
ends the group (SIGTERM, SIGKILL after kill_grace) before anything else runs.

The start time (field 22 of /proc/PID/stat, clock ticks since boot) and the boot id tell a
leftover from an unrelated process that reuses the pid. Linux only (/proc).
"""

import os
import signal
import subprocess
import sys
import time

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
GATE_OPEN = b"go\n"
GATE_NOT_OPENED = 125

# Runs as `python -I -S -c GATE GO_FD ERR_FD ARGV...`: -I keeps handler_environment's PYTHON*
# variables from changing the gate. It reports a failed exec on ERR_FD (close-on-exec, so a
# successful exec closes it) the way subprocess does, so "cannot start" stays distinct from an exit.
GATE = """import os, sys
go, err = int(sys.argv[1]), int(sys.argv[2])
os.set_inheritable(err, False)
data = b""
while len(data) < 3:
    chunk = os.read(go, 3 - len(data))
    if not chunk:
        break
    data += chunk
if data != b"go\\n":
    os._exit(%d)
os.close(go)
try:
    os.execv(sys.argv[3], sys.argv[3:])
except OSError as exc:
    os.write(err, ("%%s" %% (exc.strerror or exc)).encode("utf-8", "replace"))
    os._exit(127)
""" % GATE_NOT_OPENED


class SpawnError(Exception):
    """The handler could not be started; nothing of it runs."""


def boot_id():
    try:
        with open(BOOT_ID_PATH) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def proc_stat(pid):
    """(state, pgrp, start_ticks) of a live (or zombie) process, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    fields = text[text.rfind(")") + 2:].split()
    try:
        return fields[0], int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def identity(pid):
    """What a state record needs to find this process again, and only this one."""
    stat = proc_stat(pid)
    return {"pid": pid, "pgid": stat[1] if stat else pid, "start_ticks": stat[2] if stat else 0,
            "boot_id": boot_id()}


def group_members(pgid):
    """Pids of the live (not zombie) processes of a process group."""
    members = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return members
    for name in names:
        if not name.isdigit():
            continue
        stat = proc_stat(int(name))
        if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X"):
            members.append(int(name))
    return members


def still_ours(record):
    """True if the group of a recorded handler may still hold its processes. A pid reused by an
    unrelated process (another start time) or a reboot since means the handler is long gone."""
    now_boot = boot_id()
    # Compared only when both are known (a sandbox may hide /proc/sys): the start time still guards.
    if record.get("boot_id") and now_boot and record["boot_id"] != now_boot:
        return False
    stat = proc_stat(record["pid"])
    if stat is None:
        # The leader is gone, but children it left in its group keep the group (and so the pid
        # number, which Linux does not hand out while a group uses it).
        return True
    return stat[2] == record["start_ticks"]


def end_group(record, kill_grace, sleep=time.sleep, clock=time.monotonic, settle=2.0):
    """End what is left of a recorded handler's process group: SIGTERM, then SIGKILL after
    kill_grace. Returns what happened, for the log: "gone", "ended by SIGTERM", "killed" or
    "still running" (a process that even SIGKILL did not end within settle seconds)."""
    if not still_ours(record):
        return "gone"
    pgid = record["pgid"]
    if not group_members(pgid):
        return "gone"
    if not _killpg(pgid, signal.SIGTERM):
        return "gone"
    if _wait_empty(pgid, kill_grace, sleep, clock):
        return "ended by SIGTERM"
    _killpg(pgid, signal.SIGKILL)
    return "killed" if _wait_empty(pgid, settle, sleep, clock) else "still running"


def signal_group(pgid, sig):
    return _killpg(pgid, sig)


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def _wait_empty(pgid, seconds, sleep, clock):
    end = clock() + seconds
    while True:
        if not group_members(pgid):
            return True
        if clock() >= end:
            return False
        sleep(min(0.05, max(0.0, end - clock())))


def spawn_gated(argv, popen, on_spawned, **kwargs):
    """Start argv in a new session through the gate; on_spawned(proc, identity) runs while the
    gate is closed (it writes the state record). If it raises, the gate exits without running
    the handler and the error propagates. Raises SpawnError when argv cannot be executed."""
    go_read, go_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        gate_argv = [sys.executable or "/usr/bin/python3", "-I", "-S", "-c", GATE, str(go_read), str(err_write)] \
            + list(argv)
        proc = popen(gate_argv, pass_fds=(go_read, err_write), start_new_session=True, close_fds=True,
                     shell=False, **kwargs)
    except BaseException:
        for fd in (go_read, go_write, err_read, err_write):
            os.close(fd)
        raise
    os.close(go_read)
    os.close(err_write)
    try:
        try:
            on_spawned(proc, identity(proc.pid))
        except BaseException:
            os.close(go_write)          # the gate reads end-of-file and exits: nothing runs
            go_write = None
            proc.wait()
            raise
        _write_all(go_write, GATE_OPEN)
        os.close(go_write)
        go_write = None
        error = _read_all(err_read)
    finally:
        if go_write is not None:
            os.close(go_write)
        os.close(err_read)
    if error:
        proc.wait()
        raise SpawnError(error.decode("utf-8", "replace"))
    return proc


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def default_popen(argv, **kwargs):
    return subprocess.Popen(argv, **kwargs)
