# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection for the watcher_systemd molecule scenario: tasks run in a local podman container
through `podman exec`. The containers.podman collection (whose connection does this) cannot be
installed on these offline machines, and ansible-core has no container connection of its own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: watcher_podman
short_description: Run tasks in a local podman container with podman exec
description:
  - Runs commands with C(podman exec -i CONTAINER /bin/sh -c ...) and copies files through standard
    input and output of C(podman exec); used by the C(watcher_systemd) molecule scenario only.
author:
  - azure_imds.scheduled_events maintainers
options:
  remote_addr:
    description: Name of the running container.
    type: str
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
  podman_executable:
    description: The podman program.
    type: str
    default: podman
    vars:
      - name: ansible_podman_executable
"""

import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import ConnectionBase


class Connection(ConnectionBase):
    transport = "watcher_podman"
    has_pipelining = True

    def _podman(self, *args):
        return [self.get_option("podman_executable")] + list(args)

    def _connect(self):
        if not self._connected:
            container = self.get_option("remote_addr")
            proc = subprocess.run(self._podman("container", "inspect", "--format", "{{.State.Running}}", container),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
            if proc.returncode != 0 or to_text(proc.stdout).strip() != "true":
                reason = to_text(proc.stderr).strip()
                raise AnsibleConnectionFailure("container %s is not running: %s" % (container, reason))
            self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=False):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        argv = self._podman("exec", "-i", self.get_option("remote_addr"), "/bin/sh", "-c", to_text(cmd))
        self._display.vvv("EXEC %s" % argv, host=self.get_option("remote_addr"))
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = proc.communicate(to_bytes(in_data) if in_data else b"")
        return proc.returncode, stdout, stderr

    def put_file(self, in_path, out_path):
        super(Connection, self).put_file(in_path, out_path)
        with open(in_path, "rb") as source:
            proc = subprocess.run(self._podman("exec", "-i", self.get_option("remote_addr"), "/bin/sh", "-c",
                                               'cat > "$1"', "sh", out_path),
                                  stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if proc.returncode != 0:
            reason = to_text(proc.stderr).strip()
            raise AnsibleError("cannot copy %s to %s in the container: %s" % (in_path, out_path, reason))

    def fetch_file(self, in_path, out_path):
        super(Connection, self).fetch_file(in_path, out_path)
        with open(out_path, "wb") as target:
            proc = subprocess.run(self._podman("exec", self.get_option("remote_addr"), "cat", in_path),
                                  stdout=target, stderr=subprocess.PIPE, check=False)
        if proc.returncode != 0:
            raise AnsibleError("cannot fetch %s from the container: %s" % (in_path, to_text(proc.stderr).strip()))

    def close(self):
        self._connected = False
