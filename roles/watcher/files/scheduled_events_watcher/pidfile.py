# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start and stop without systemd: `start` runs `run` in the background with a pid file, `stop`
ends it (and, after a SIGKILL, the handlers it left running)."""

import os
import signal
import subprocess
import sys
import time

from . import EXIT_FAILED, EXIT_OK, EXIT_USAGE, PROGRAM, liveness, processes
from .config import ConfigError, load_config
from .files import open_private_log, replace_file
from .state import StateError, StateStore


def read_pid(pid_file):
    """The pid in pid_file if that process is alive and is another watcher, else None.

    liveness.pid_is_watcher decides, by the one rule `status` uses too: a stale pid file's pid
    may have been given anew to this very command, which is a watcher by its command line but no
    running daemon."""
    try:
        with open(pid_file) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return None
    if not liveness.pid_is_watcher(pid):
        return None
    return pid


def write_pid(pid_file):
    replace_file(pid_file, ("%d\n" % os.getpid()).encode("ascii"), 0o644)


def _environment_to_import_this():
    """os.environ with PYTHONPATH starting at the directory that holds this package's top-level
    name, so that `python3 -m` finds this very copy of the program however it was started."""
    directory = os.path.dirname(os.path.abspath(__file__))
    for _level in __package__.split("."):
        directory = os.path.dirname(directory)
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([directory] + [p for p in [environ.get("PYTHONPATH")] if p])
    return environ


def start_background(args, out):
    pid = read_pid(args.pid_file)
    if pid is not None:
        out.write("running: %s already runs as pid %d\n" % (PROGRAM, pid))
        return EXIT_OK
    if args.check:
        out.write("started: would start %s (check mode)\n" % PROGRAM)
        return EXIT_OK
    command = [sys.executable, "-m", __package__, "run", "--config", args.config, "--pid-file", args.pid_file]
    if args.dry_run:
        command.append("--dry-run")
    log_dir = os.path.dirname(os.path.abspath(args.log_file))
    if not os.path.isdir(log_dir):
        out.write("error: the directory of --log-file %s does not exist; create it first\n" % args.log_file)
        return EXIT_USAGE
    try:
        log_handle = open_private_log(args.log_file)
    except OSError as exc:
        out.write("error: cannot open --log-file %s: %s\n" % (args.log_file, exc.strerror or exc))
        return EXIT_USAGE
    with log_handle, open(os.devnull, "rb") as null:
        proc = subprocess.Popen(command, stdin=null, stdout=log_handle, stderr=subprocess.STDOUT,
                                close_fds=True, start_new_session=True, cwd="/", env=_environment_to_import_this())
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if read_pid(args.pid_file) == proc.pid:
            out.write("started: %s runs as pid %d, logging to %s\n" % (PROGRAM, proc.pid, args.log_file))
            return EXIT_OK
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    out.write("error: %s did not start (exit %s); see %s\n" % (PROGRAM, proc.poll(), args.log_file))
    return EXIT_FAILED


def end_handlers_left_by(config_path):
    """End the handlers a killed watcher left running (as its next start would). Lines to print."""
    try:
        config = load_config(config_path if os.path.exists(config_path) else None)
        loaded = StateStore(config["state_dir"]).load(read_only=True)
    except (ConfigError, StateError) as exc:
        return ["could not look for handlers it left running: %s" % exc]
    lines = []
    for entry in loaded.running_handlers:           # each one checked by load()
        outcome = processes.end_group(entry, config["kill_grace"])
        lines.append("handler %s/%s (pid %d) it left running: %s" % (entry["phase"], entry["handler"],
                                                                     entry["pid"], outcome))
    return lines


def stop_background(args, out):
    pid = read_pid(args.pid_file)
    if pid is None:
        if os.path.exists(args.pid_file):
            if not args.check:
                os.remove(args.pid_file)
            out.write("stopped: removed the stale pid file %s\n" % args.pid_file)
        else:
            out.write("not running: no %s process in %s\n" % (PROGRAM, args.pid_file))
        return EXIT_OK
    if args.check:
        out.write("stopped: would stop pid %d (check mode)\n" % pid)
        return EXIT_OK
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and read_pid(args.pid_file) == pid:
        time.sleep(0.05)
    if read_pid(args.pid_file) == pid:
        os.kill(pid, signal.SIGKILL)
        out.write("stopped: pid %d did not stop within %gs and was killed\n" % (pid, args.timeout))
        # Without systemd nothing else ends the handler it was waiting for.
        for line in end_handlers_left_by(args.config):
            out.write("stopped: %s\n" % line)
    else:
        out.write("stopped: pid %d\n" % pid)
    try:
        os.remove(args.pid_file)
    except FileNotFoundError:
        pass
    return EXIT_OK
