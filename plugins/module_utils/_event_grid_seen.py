# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# This module_utils is PRIVATE to this collection: its API may change in any release.
#
# The Event Grid ids the EDA source `event_grid` has queued, remembered across Event Grid's retry
# horizon (24 hours) so that a duplicate notification (the same id, documented by Microsoft) or a
# retry of a delivery already queued is dropped. Bounded in memory; optionally kept in a journal
# file so that a restart remembers them too.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import json
import os
import tempfile
import time

FORMAT = "azure_imds.scheduled_events event_grid seen ids"
VERSION = 1


class SeenFileError(ValueError):
    """The journal cannot be used; the message names the file, the problem and the fix."""


class SeenIds(object):
    """Ids with the wall-clock time they were queued, oldest first.

    An id is forgotten horizon seconds after it was queued, or when more than max_ids newer ones
    are remembered (the oldest goes first). With a path, every id added is appended to a journal
    there (one line, flushed and fsynced per delivery), which load() reads back at start; the
    journal is rewritten (to a temporary file, then renamed over it) when it holds twice as many
    lines as ids remembered. A line torn by a crash is skipped when read."""

    def __init__(self, path=None, horizon=86400.0, max_ids=100000, clock=None):
        self.path = path
        self.horizon = float(horizon)
        self.max_ids = int(max_ids)
        self._clock = clock or time.time
        self._ids = collections.OrderedDict()
        self._journal_lines = 0
        self._journal = None
        self._pending = []

    def __len__(self):
        self._forget_old()
        return len(self._ids)

    def __contains__(self, event_grid_id):
        self._forget_old()
        return event_grid_id in self._ids

    def _forget_old(self):
        oldest = self._clock() - self.horizon
        while self._ids:
            first = next(iter(self._ids))
            if self._ids[first] > oldest and len(self._ids) <= self.max_ids:
                break
            del self._ids[first]

    def add(self, event_grid_id):
        """Remember one id in memory now; write() puts what was added into the journal."""
        self._ids.pop(event_grid_id, None)
        self._ids[event_grid_id] = self._clock()
        self._pending.append(event_grid_id)
        self._forget_old()

    def write(self):
        """Append the ids added since the last write to the journal (one fsync). Raises OSError."""
        pending, self._pending = self._pending, []
        if self.path is None or not pending:
            return
        lines = "".join(json.dumps([i, self._ids[i]]) + "\n" for i in pending if i in self._ids)
        self._journal.write(lines)
        self._journal.flush()
        os.fsync(self._journal.fileno())
        self._journal_lines += len(pending)
        if self._journal_lines > 2 * len(self._ids) + 1000:
            self._rewrite()

    def load(self):
        """Read the journal (when there is a path) and open it for appending. Returns how many lines
        could not be read. Raises SeenFileError when the file cannot be used."""
        if self.path is None:
            return 0
        unreadable = 0
        try:
            with open(self.path, "r", encoding="utf-8", errors="replace") as handle:
                header = handle.readline()
                try:
                    ok = json.loads(header) == {"format": FORMAT, "version": VERSION}
                except ValueError:
                    ok = False
                if not ok:
                    raise SeenFileError("dedup_file %s is not a journal of this source (its first line is %r); give "
                                        "another path, or delete the file" % (self.path, header[:80]))
                for line in handle:
                    try:
                        event_grid_id, when = json.loads(line)
                        if not isinstance(event_grid_id, str) or not isinstance(when, (int, float)):
                            raise ValueError(line)
                    except (ValueError, TypeError):
                        unreadable += 1
                        continue
                    self._ids.pop(event_grid_id, None)
                    self._ids[event_grid_id] = float(when)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeError) as exc:
            raise SeenFileError("dedup_file %s cannot be read (%s); give a file the source may read and write"
                                % (self.path, exc))
        # Times come back in the order they were written: sort in case the clock went back.
        self._ids = collections.OrderedDict(sorted(self._ids.items(), key=lambda item: item[1]))
        self._forget_old()
        self._rewrite()
        return unreadable

    def _rewrite(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, temporary = tempfile.mkstemp(prefix=".event_grid_seen.", dir=directory)
        except OSError as exc:
            raise SeenFileError("dedup_file %s cannot be written (%s); give a path in a directory the source may "
                                "write to" % (self.path, exc))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(json.dumps({"format": FORMAT, "version": VERSION}) + "\n")
                for event_grid_id, when in self._ids.items():
                    handle.write(json.dumps([event_grid_id, when]) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except OSError as exc:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise SeenFileError("dedup_file %s cannot be written (%s); give a path in a directory the source may "
                                "write to" % (self.path, exc))
        self._sync_directory(directory)
        if self._journal is not None:
            self._journal.close()
        self._journal = open(self.path, "a", encoding="utf-8")
        self._journal_lines = len(self._ids)

    @staticmethod
    def _sync_directory(directory):
        # The rename is durable once the directory is synced (not possible everywhere: best effort).
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def close(self):
        if self._journal is not None:
            self._journal.close()
            self._journal = None
