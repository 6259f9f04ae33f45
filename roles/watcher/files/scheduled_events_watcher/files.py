# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files the watcher writes outside its state file (the pid file, the status file, the metrics
textfile, the background log): written atomically, never through a symbolic link, only in
directories that only root or the watcher's user can change."""

import errno
import os
import tempfile

from . import handlers


class UnsafeDirectory(OSError):
    """A directory the watcher would write in, or one on the way to it, can be changed by someone
    other than root or the watcher's user; strerror says which and how to fix it."""


def refuse_unsafe_directory(path):
    """Raise UnsafeDirectory unless every directory on the way to path passes
    handlers.directories_problem (FileNotFoundError if path's directory does not exist)."""
    problem = handlers.directories_problem(path)
    if problem:
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), directory)
        raise UnsafeDirectory(errno.EPERM, "refused to write there: %s" % problem, path)


def open_private_log(path):
    """A log that keeps handler output (which may carry secrets), opened for appending: created
    0600 and an older one made 0600, never through a symbolic link, in a directory that passes
    refuse_unsafe_directory."""
    refuse_unsafe_directory(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def replace_file(path, data, mode, durable=False):
    """Replace path with data atomically: a temporary file in the same directory renamed over it,
    so a reader (node_exporter, `status`) sees the old or the new file, never half of one.
    durable: fsync the file and the directory too, so the rename survives a power cut.

    The watcher runs as root and some of these directories belong to other services (node_exporter's
    textfile directory): every directory on the way must pass handlers.directories_problem,
    the rule handler directories pass (UnsafeDirectory otherwise), and the temporary file is created
    as mkstemp does, with a name nobody can guess, O_EXCL and O_NOFOLLOW, so that no symbolic link
    or file planted there is ever followed, truncated or made readable."""
    directory = os.path.dirname(path) or "."
    refuse_unsafe_directory(path)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        try:
            os.fchmod(fd, mode)          # mkstemp's 0600, whatever the umask
            while data:
                written = os.write(fd, data)
                data = data[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        # A full disk or a read-only directory leaves no litter (a kill may: load() sweeps it).
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    if durable:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
