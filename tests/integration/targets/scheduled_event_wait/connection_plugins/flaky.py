# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Test-only connection for the scheduled_event_wait target: the local connection, except that the
# "host" goes away for a while, the way a VM does during a Reboot or Redeploy. A command running
# when the host goes away is killed and reported as a lost connection, as SSH reports it.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: flaky
short_description: Local connection whose host goes away for a while (integration tests only)
description:
  - Runs commands on the controller like P(ansible.builtin.local#connection).
  - Reads O(state_file), a JSON object with the keys C(down_after) and C(down_for) (seconds). From
    C(down_after) to C(down_after + down_for) seconds after the file was last written, every command,
    transfer and fetch fails with C(AnsibleConnectionFailure), and a command already running is killed.
  - Each failure and each reset() is logged as a line in C(<state_file>.log).
author:
  - azure_imds.scheduled_events maintainers
options:
  state_file:
    description: Path of the JSON file that says when the host is away.
    type: str
    required: true
    vars:
      - name: flaky_state_file
  become_success_timeout:
    description: As for the local connection.
    type: int
    default: 10
    vars:
      - name: ansible_local_become_success_timeout
  become_strip_preamble:
    description: As for the local connection.
    type: bool
    default: true
    vars:
      - name: ansible_local_become_strip_preamble
extends_documentation_fragment:
  - connection_pipelining
"""

import json
import os
import signal
import subprocess
import time

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.connection.local import Connection as LocalConnection


class Connection(LocalConnection):

    transport = "flaky"

    def _window(self):
        path = self.get_option("state_file")
        with open(path) as handle:
            spec = json.load(handle)
        start = os.stat(path).st_mtime + float(spec["down_after"])
        return start, start + float(spec["down_for"])

    def _log(self, what):
        with open(self.get_option("state_file") + ".log", "a") as handle:
            handle.write("%.3f %s\n" % (time.time(), what))

    def _fail_if_away(self, doing):
        start, end = self._window()
        if start <= time.time() < end:
            self._log("refused " + doing)
            raise AnsibleConnectionFailure("flaky: the host is away (test window ends in %.1fs)" % (end - time.time()))
        return start

    def exec_command(self, cmd, in_data=None, sudoable=True):
        start = self._fail_if_away("exec")
        if self.become or time.time() >= start:
            return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        # The host goes away while this command may still run: run it in its own process group so
        # that the whole module, not only the shell, dies with the "connection".
        self._connect()
        process = subprocess.Popen(to_text(cmd), shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
        try:
            stdout, stderr = process.communicate(in_data, timeout=max(0.0, start - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            self._log("killed exec")
            raise AnsibleConnectionFailure("flaky: lost the connection to the host while a command ran (test)")
        return process.returncode, stdout, stderr

    def put_file(self, in_path, out_path):
        self._fail_if_away("put")
        super(Connection, self).put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._fail_if_away("fetch")
        super(Connection, self).fetch_file(in_path, out_path)

    def reset(self):
        self._log("reset")
        super(Connection, self).reset()
