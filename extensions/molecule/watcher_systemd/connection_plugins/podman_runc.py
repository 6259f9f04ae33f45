# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containers.podman's podman connection, running commands with `runc exec` (for the watcher_systemd
scenario only).

A `podman exec` starts four programs: the podman client, conmon, runc exec, then a second podman
(`podman container cleanup --exec`, conmon's exit command); podman's own are Go programs that open
its database and storage each time. That cost about 0.14 s of wall time per module run on this
machine, most of the CPU that the scenario's hundreds of module runs on the container spent outside
Ansible itself. The command runs the same way through runc alone, which podman exec calls in the end
(0.05 s): in the container's namespaces and cgroup, with its capabilities, seccomp filter,
environment and working directory, all from the container's OCI spec, as the container's runtime
(molecule.yml's containers.conf: runc, whose state podman keeps under runc's default root). Its
input reaches the command's stdin, so ansible pipelines modules into python3 over it: one runc
exec per module run.

The connection asks podman for the container's full id and its init's pid (one `podman container
inspect`, in place of the `podman mount` that containers.podman.podman runs for each task) once per
ansible-playbook run, and keeps them in the run's local temporary directory for its later tasks,
while that pid is still the container's init. Files go through /proc/<pid>/root, the container's
root as its own processes see it (tmpfs mounts included), with containers.podman's put_file and
fetch_file. A task with a remote user falls back to containers.podman's `podman exec --user` (runc
wants numeric ids). The scenario's molecule.yml selects this connection (ansible_connection) and
puts this directory on ANSIBLE_CONNECTION_PLUGINS.
"""

DOCUMENTATION = """
name: podman_runc
short_description: containers.podman.podman, with commands run by runc exec and pipelining
description:
  - Runs tasks in a podman container as C(containers.podman.podman) does, but starts each command
    with C(runc exec) on the container podman created with the runc runtime, and passes a command's
    input on its stdin, so that ansible can pipeline modules.
  - For the collection's watcher_systemd molecule scenario; needs the containers.podman collection
    and runc as the container's runtime.
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

import hashlib
import os
import shlex
import subprocess
import tempfile

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.process import get_bin_path
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.plugins.loader import connection_loader

_PODMAN = connection_loader.get("containers.podman.podman", class_only=True)
if _PODMAN is None:
    raise AnsibleError("the podman_runc connection needs the containers.podman collection on "
                       "ANSIBLE_COLLECTIONS_PATH (tests/harness/prepare.d/25-podman-collection.sh puts it in "
                       ".cache/molecule-collections)")


class Connection(_PODMAN):
    transport = "podman_runc"
    has_pipelining = True

    def _connect(self):
        # ConnectionBase's, not containers.podman's: that one runs `podman mount`.
        ConnectionBase._connect(self)
        self._runc_id, pid = self._cached_container() or self._inspect_container()
        self._mount_point = to_bytes("/proc/%s/root" % pid)
        self._connected = True

    def _cache_file(self):
        # The local temporary directory of this ansible-playbook run, which its task processes share
        # and which it removes when it ends.
        name = hashlib.sha256(to_bytes(self._container_id, errors="surrogate_or_strict")).hexdigest()[:16]
        return os.path.join(C.DEFAULT_LOCAL_TMP, "podman_runc-%s" % name)

    def _cached_container(self):
        """(id, pid) an earlier task of this run found, while that pid is still the container's init
        (its cgroup names the id: a container created again has another id, a pid used again
        another cgroup); else None."""
        try:
            with open(self._cache_file()) as handle:
                container_id, pid = handle.read().split()
            with open("/proc/%s/cgroup" % pid) as handle:
                return (container_id, pid) if container_id in handle.read() else None
        except (OSError, ValueError):
            return None

    def _inspect_container(self):
        rc, out, err = self._podman(["container", "inspect", "--format", "{{.Id}} {{.State.Pid}} {{.OCIRuntime}}"])
        fields = to_native(out, errors="surrogate_or_strict").split()
        if rc != 0 or len(fields) != 3 or not fields[1].isdigit() or fields[1] == "0":
            raise AnsibleConnectionFailure("podman_runc: container %s is not running (podman container inspect: "
                                           "rc=%s, %s %s)" % (self._container_id, rc, to_native(out).strip(),
                                                              to_native(err).strip()))
        if fields[2] != "runc":
            raise AnsibleConnectionFailure("podman_runc: container %s runs with the %s runtime, not runc: set "
                                           "[engine] runtime = \"runc\" in the CONTAINERS_CONF podman uses"
                                           % (self._container_id, fields[2]))
        try:
            descriptor, temporary = tempfile.mkstemp(dir=C.DEFAULT_LOCAL_TMP)
            with os.fdopen(descriptor, "w") as handle:
                handle.write("%s %s\n" % (fields[0], fields[1]))
            os.replace(temporary, self._cache_file())
        except OSError:
            pass  # no cache: the next task asks podman again
        return fields[0], fields[1]

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if self.user:
            return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if not self._connected:
            self._connect()
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = [get_bin_path("runc"), "exec", self._runc_id] + shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        proc = subprocess.Popen([to_bytes(arg, errors="surrogate_or_strict") for arg in argv],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = proc.communicate(input=in_data)
        return proc.returncode, stdout, stderr
