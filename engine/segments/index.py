"""Sparse indexes of a segment: one fixed-width sorted entry file, two kinds of entry.

Shared mechanics (load, search, append, trim) live in ``Index``; ``OffsetIndex`` and
``TimeIndex`` only define their entry. Index files are not checksummed and are fsynced only at
checkpoints and rolls: a writer opening a partition trusts entries only up to the checkpoint's
position and rebuilds the rest from the log; a torn trailing entry is ignored, and an index that
fails ``Segment._indexes_ok`` is rebuilt (``Segment.rebuild_indexes``).

An index is read a chunk at a time, and one with more entries than its log has batches
(``max_entries``, from the log's size) is not read at all (``oversized``): a crafted or damaged
file never costs more memory than a real index of that log. Entries are only hints: the segment
checks an entry against the batch it points at before using it (``Segment.position_for``).
"""

from __future__ import annotations

import copy
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import TypeVar

from ..errors import os_error
from ..format.records import HEADER_SIZE
from ..fs import guard

READ_CHUNK = 1 << 20  # index bytes parsed at a time
SLACK = 1024  # entries a writer may add between a reader's look at the log and at its index


def max_entries(log_size: int) -> int:
    """The most entries an index of a ``log_size``-byte log can have: one per batch (each at
    least a header long) after the first, and a little slack for a log growing meanwhile."""
    return max(log_size, 0) // HEADER_SIZE + SLACK


_I = TypeVar("_I", bound="Index")


class Index:
    """Entries ``(key, value)`` with strictly increasing keys, stored little-endian."""

    ENTRY: struct.Struct

    def __init__(self, path: str, writable: bool, max_entries: int | None = None) -> None:
        self.path = path
        self.writable = writable
        self.keys = array("q")
        self.values = array("q")
        self.fd = -1
        self.loaded = 0  # bytes of the file already parsed
        self.max_entries = max_entries  # more than this: not an index of the log (None: any)
        self.oversized = False  # the file holds more than max_entries entries: none are used
        self._open()
        self.reload()

    def _open(self) -> None:
        if self.writable:
            self.fd = guard.open_file(self.path, os.O_RDWR | os.O_CREAT)
        else:
            try:
                self.fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self.fd = -1

    def detached(self: _I) -> _I:
        """A copy without the descriptor (the entries are shared: only the copy grows)."""
        idx = copy.copy(self)
        idx.fd = -1
        return idx

    def reopen(self) -> None:
        """Open the file again after ``close`` (the entries read stay; ``refresh`` reads on)."""
        if self.fd < 0:
            self._open()
            self.refresh()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def __len__(self) -> int:
        return len(self.keys)

    def reload(self) -> None:
        self.keys = array("q")
        self.values = array("q")
        self.loaded = 0
        self.refresh()

    def refresh(self) -> None:
        """Parse entries appended by another process since the last look."""
        if self.fd < 0:
            return
        size = os.fstat(self.fd).st_size
        width = self.ENTRY.size
        if size < self.loaded:
            self.keys = array("q")
            self.values = array("q")
            self.loaded = 0
        end = size - size % width  # a torn trailing entry is not an entry
        if end <= self.loaded:
            return
        if self.max_entries is not None and end // width > self.max_entries:
            self.forget()
            self.loaded = 0
            self.oversized = True
            return
        self.oversized = False
        step = READ_CHUNK - READ_CHUNK % width
        while self.loaded < end:
            data = os.pread(self.fd, min(step, end - self.loaded), self.loaded)
            n = len(data) - len(data) % width
            if n == 0:
                break  # (the file shrank under us)
            for k, v in self.ENTRY.iter_unpack(memoryview(data)[:n]):
                self.keys.append(k)
                self.values.append(v)
            self.loaded += n

    def append(self, key: int, value: int) -> None:
        if self.keys and key <= self.keys[-1]:
            return
        entry = self.ENTRY.pack(key, value)
        try:
            if os.pwrite(self.fd, entry, self.loaded) != len(entry):
                return
        except OSError:
            # (a full disk, say) the batch is in the log already; a sparse index may miss an
            # entry (a lookup scans a little further), and the next append tries this spot
            return
        self.loaded += len(entry)
        self.keys.append(key)
        self.values.append(value)

    def floor(self, key: int) -> int:
        """Position of the last entry with entry key <= ``key``, or -1."""
        return bisect_right(self.keys, key) - 1

    def lower(self, key: int) -> int:
        """Position of the last entry with entry key < ``key``, or -1."""
        return bisect_left(self.keys, key) - 1

    def forget(self) -> None:
        """Drop the entries from memory only (the file is left for a writer to rebuild)."""
        self.keys = array("q")
        self.values = array("q")

    def truncate_entries(self, count: int) -> None:
        """Keep only the first ``count`` entries (all of them when there are fewer)."""
        count = min(count, len(self.keys))
        if count == len(self.keys) and self.loaded == count * self.ENTRY.size:
            return
        del self.keys[count:]
        del self.values[count:]
        self.loaded = count * self.ENTRY.size
        if self.writable:
            os.ftruncate(self.fd, self.loaded)

    def write_all(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole file with ``entries`` (used by rebuilds)."""
        data = b"".join(self.ENTRY.pack(k, v) for k, v in entries)
        try:
            os.ftruncate(self.fd, 0)
            if os.pwrite(self.fd, data, 0) != len(data):
                raise OSError(28, "short write")
        except OSError as e:
            raise os_error(e, "write", self.path) from e
        self.keys = array("q", [k for k, _ in entries])
        self.values = array("q", [v for _, v in entries])
        self.loaded = len(data)
        self.oversized = False

    def sync(self) -> None:
        if self.fd >= 0:
            try:
                os.fsync(self.fd)
            except OSError as e:
                raise os_error(e, "fsync", self.path) from e


class OffsetIndex(Index):
    """Entry: ``relative_offset int32, position int32`` (8 bytes).

    Maps the base offset of a batch (relative to the segment's base offset) to the byte position
    of that batch in the ``.log``. One entry per ``index.interval.bytes`` of log; positions and
    offsets strictly increase.
    """

    ENTRY = struct.Struct("<ii")


class TimeIndex(Index):
    """Entry: ``timestamp int64, relative_offset int32`` (12 bytes).

    ``timestamp`` is the largest record timestamp *before* the batch at ``relative_offset``, so
    every record that precedes that batch has a timestamp <= the entry's. A search for the first
    record at or after time T starts from the last entry whose timestamp is < T. Entries are
    written at the same points as offset index entries, only when the timestamp grows.
    """

    ENTRY = struct.Struct("<qi")
