# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containers.podman's podman connection, with pipelining (for the watcher_systemd scenario only).

containers.podman.podman runs every command as `podman exec` without `-i`, so nothing can reach the
command's stdin and it declares no pipelining: each module run is then a mkdir, a chmod and an
exec with a rm, every one of them a `podman exec` (plus the `podman mount` of each task). With
`-i` for a command given input, ansible pipelines the module into python3 over stdin: one
`podman exec` per module run. On this machine that halves the CPU of a task on the container (20
stat tasks: 2.6 s user+sys against 5.7-6.1 s). Everything else (mount, put_file, fetch_file,
close) is containers.podman's own, loaded from the collection; this file adds only the `-i`.
The scenario's molecule.yml selects it (ansible_connection) and puts this directory on
ANSIBLE_CONNECTION_PLUGINS.
"""

DOCUMENTATION = """
name: podman_pipelined
short_description: containers.podman.podman, with pipelining through podman exec -i
description:
  - Runs tasks in a podman container as C(containers.podman.podman) does, and passes a command's
    input on its stdin (C(podman exec -i)), so that ansible can pipeline modules.
  - For the collection's watcher_systemd molecule scenario; needs the containers.podman collection.
options:
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  podman_extra_args:
    description: Extra arguments for every podman call, before its subcommand.
    default: ""
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
"""

import shlex

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.loader import connection_loader

_PODMAN = connection_loader.get("containers.podman.podman", class_only=True)
if _PODMAN is None:
    raise AnsibleError("the podman_pipelined connection needs the containers.podman collection on "
                       "ANSIBLE_COLLECTIONS_PATH (tests/harness/prepare.d/25-podman-collection.sh puts it in "
                       ".cache/molecule-collections)")


class Connection(_PODMAN):
    transport = "podman_pipelined"
    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if in_data is None:
            return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if not self._connected:
            self._connect()
        exec_args = ["exec", "-i"] + (["--user", self.user] if self.user else [])
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
