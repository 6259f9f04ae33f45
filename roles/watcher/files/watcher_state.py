# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watcher's durable state: one JSON file replaced atomically.

A write goes to a temporary file in the same directory, is flushed and fsynced, renamed over the
old file, and the directory is fsynced so the rename itself survives a power cut. Whatever
instant the process or the machine dies, the file holds either the old or the new state, never
a mix: that is what lets a restart neither repeat a drain nor forget a recover.
"""

import glob
import json
import os
import time

STATE_VERSION = 1
STATE_FILE = "state.json"


class StateError(Exception):
    """The state directory or file cannot be used; the message says what to fix."""


class StateStore(object):

    def __init__(self, directory, filename=STATE_FILE, wall_clock=None):
        self.directory = directory
        self.path = os.path.join(directory, filename)
        self._wall_clock = wall_clock or time.time
        self._last_written = None

    def ensure_directory(self):
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StateError("cannot create the state directory %s (%s); create it or set state_dir to a "
                             "writable directory (under systemd it must be in ReadWritePaths)."
                             % (self.directory, exc.strerror or exc))

    def load(self, read_only=False):
        """(records, note). A missing file is an empty state; an unreadable one is set aside as
        state.json.corrupt-<time> (left in place when read_only) and reported in note, so the
        watcher can still start."""
        if not read_only:
            # Left by a kill between creating the temporary file and renaming it: never read.
            for stale in glob.glob(glob.escape(self.path) + ".tmp-*"):
                try:
                    os.remove(stale)
                except OSError:
                    pass
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return {}, None
        except OSError as exc:
            raise StateError("cannot read the state file %s (%s)." % (self.path, exc.strerror or exc))
        try:
            document = json.loads(raw.decode("utf-8"))
            records = document["records"]
            if not isinstance(records, dict) or document.get("version") != STATE_VERSION:
                raise ValueError("not a version %d watcher state" % STATE_VERSION)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            if read_only:
                return {}, "the state file %s could not be read (%s)" % (self.path, exc)
            aside = "%s.corrupt-%d" % (self.path, int(self._wall_clock()))
            os.replace(self.path, aside)
            return {}, ("the state file %s could not be read (%s); it was moved to %s and the watcher starts "
                        "with an empty state" % (self.path, exc, aside))
        self._last_written = self._serialise(records, document.get("resource_name"))
        return records, None

    def _serialise(self, records, resource_name):
        return json.dumps({"version": STATE_VERSION, "resource_name": resource_name, "records": records},
                          sort_keys=True, indent=1)

    def save(self, records, resource_name):
        """Write the records if they changed since the last write. Returns True if it wrote."""
        text = self._serialise(records, resource_name)
        if text == self._last_written:
            return False
        tmp = "%s.tmp-%d" % (self.path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            data = text.encode("utf-8") + b"\n"
            while data:
                written = os.write(fd, data)
                data = data[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._last_written = text
        return True
