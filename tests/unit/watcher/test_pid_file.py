# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pid file names a running watcher only when that pid is another watcher process: a stale
file whose pid was given anew to the very command reading it (a `start` or `status`, which is a
watcher by its command line too) must not pass for a running daemon."""

import os
import subprocess
import sys

from .helpers import wait_until, watcher_environment

READ_OWN_PID = """
import os, sys
from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import liveness, pidfile
with open(sys.argv[1], "w") as handle:
    handle.write(str(os.getpid()))
print(pidfile.read_pid(sys.argv[1]), liveness.pid_is_watcher(os.getpid()))
"""


def cmdline_of(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        return handle.read()


def test_a_pid_file_naming_the_reader_itself_is_no_running_watcher(tmp_path):
    pid_file = str(tmp_path / "watcher.pid")
    # The extra argument makes the reader a watcher by its command line, as the installed command is.
    out = subprocess.run([sys.executable, "-c", READ_OWN_PID, pid_file, "scheduled_events_watcher"],
                         env=watcher_environment(), stdout=subprocess.PIPE, check=True).stdout.decode().split()
    assert out == ["None", "False"]


def test_a_pid_file_naming_another_watcher_process_is_a_running_watcher(tmp_path):
    from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import pidfile  # pylint: disable=import-outside-toplevel
    from ansible_collections.azure_imds.scheduled_events.roles.watcher.files.scheduled_events_watcher import liveness as watcher_liveness

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "scheduled_events_watcher"])
    try:
        assert wait_until(lambda: b"scheduled_events_watcher" in cmdline_of(other.pid)), \
            "the stand-in watcher never showed its command line"
        pid_file = tmp_path / "watcher.pid"
        pid_file.write_text(str(other.pid))
        assert pidfile.read_pid(str(pid_file)) == other.pid
        assert watcher_liveness.pid_is_watcher(other.pid)
    finally:
        other.kill()
        other.wait()
    assert pidfile.read_pid(str(pid_file)) is None
    assert os.path.exists(str(pid_file))
