# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer of a role's program files on the host, in one Python run: the watcher role's
daemon (tasks/present.yml) and the mock_imds role's package (roles/mock_imds/tasks/install.yml) both
run this one file. `python3 -c <bootstrap> [--check]` reads {"program": <this file>, "role": <the
role's name, for messages>, "mode": "0644", "files": {path: text}} as JSON on stdin, runs this file
and calls main() (a short command line, for the messages of a failed run).

One Python run for the whole package, instead of a stat and a copy (or file) module run per file,
which made the file copies two thirds of the role's work on a host. What ansible.builtin.copy did
for these files, it does: a file whose content or mode differs (or that is missing, or is not a
regular file) is written to a temporary file in its own directory and renamed over the path, so a
reader never sees half a file and a symbolic link at the path is replaced, never followed; a file
already as wanted is left alone. It prints "changed PATH" for each file it changed (with --check:
would change, writing nothing), and a clear message naming the role and the path when a write fails."""

import os
import stat
import sys
import tempfile


def differs(path, content, mode):
    """Whether path is not a regular file holding content with mode (missing counts as different)."""
    try:
        status = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    if not stat.S_ISREG(status.st_mode) or stat.S_IMODE(status.st_mode) != mode:
        return True
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read() != content


def write(path, content, mode):
    """content in path with mode, atomically; a symbolic link at path is replaced, not followed."""
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def main(argv, wanted):
    """Installs wanted["files"]; the exit status."""
    check = "--check" in argv[1:]
    mode = int(wanted["mode"], 8)
    for path in sorted(wanted["files"]):
        content = wanted["files"][path].encode("utf-8")
        try:
            if not differs(path, content, mode):
                continue
            if not check:
                write(path, content, mode)
        except OSError as error:
            sys.stderr.write("%s role: cannot install %s: %s. The files after it (in sorted order) were not "
                             "installed; fix what is at that path and run the role again.\n"
                             % (wanted["role"], path, error.strerror or error))
            return 1
        sys.stdout.write("changed %s\n" % path)
    return 0
