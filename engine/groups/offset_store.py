"""Committed offsets of one consumer group: ``groups/<group>/offsets.log``, append-only.

Each commit is one frame ``<I length><I crc32c(payload)>`` + a UTF-8 JSON payload
``{"ts": ms, "set": [[topic, partition, offset, metadata], ...], "del": [[topic, partition]]}``,
appended and fdatasynced under ``offsets.lock`` (so a commit survives kill -9 and a machine
crash once ``commit`` returns). Loading replays the frames; the first frame that is short or
fails its CRC ends the file (a commit torn by a crash was never acknowledged) and the next
writer cuts it off before appending. When the file grows well past its live content it is
rewritten as one frame (tmp, fsync, rename): readers see the old file or the new one.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from dataclasses import dataclass

from .. import clock
from ..errors import CorruptRecordError, os_error
from ..format.crc import crc32c
from ..storage import files
from ..storage.locks import DEFAULT_WAIT, LockWait, flocked, open_lock_file

LOG = "offsets.log"
LOCK = "offsets.lock"
FRAME = struct.Struct("<II")
MAX_FRAME = 64 << 20  # a length field above this is damage, not a commit
COMPACT_MIN = 1 << 20  # rewrite only past this size ...
COMPACT_FACTOR = 8  # ... and this many times the live content


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str
    timestamp: int  # commit time, ms since the epoch


class OffsetStore:
    """The committed offsets of one group, kept up to date with other processes' commits."""

    def __init__(self, directory: str, sync: bool = True,
                 lock_wait: LockWait = DEFAULT_WAIT) -> None:
        self.dir = directory
        self.lock_wait = lock_wait
        self.path = os.path.join(directory, LOG)
        self.sync = sync
        self.offsets: dict[tuple[str, int], Committed] = {}
        self._mutex = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None  # (inode, size, mtime) last read
        self._good = 0  # end of the last intact frame
        self._head = b""  # the first frame header of the file read
        self.torn = False
        self._checked = False  # the group's dirs were checked for links

    # ---------------------------------------------------------------- reading
    def refresh(self) -> dict[tuple[str, int], Committed]:
        """Read commits made since the last look (by any process); returns the offsets."""
        with self._mutex:
            self._refresh()
            return self.offsets

    def _refresh(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self.offsets, self._stamp, self._good, self.torn = {}, None, 0, False
            return
        try:
            st = os.fstat(fd)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp == self._stamp:
                return
            head = os.pread(fd, FRAME.size, 0)
            # a rewritten file (its inode number may be reused): read it all. Its first frame
            # header (length + CRC of the first commit) tells it from the one read before.
            if (self._stamp is None or self._stamp[0] != st.st_ino or st.st_size < self._good
                    or head != self._head):
                self.offsets, self._good = {}, 0
            self._apply(os.pread(fd, st.st_size - self._good, self._good))
            self._stamp = stamp
            self._head = head
        finally:
            os.close(fd)

    def _apply(self, data: bytes) -> None:
        pos, n = 0, len(data)
        self.torn = False
        while pos < n:
            if n - pos < FRAME.size:
                self.torn = True
                break
            length, crc = FRAME.unpack_from(data, pos)
            end = pos + FRAME.size + length
            if length > MAX_FRAME or end > n:
                self.torn = True
                break
            payload = data[pos + FRAME.size:end]
            if crc32c(payload) != crc:
                self.torn = True
                break
            try:
                self._merge(json.loads(payload))
            except (ValueError, TypeError, KeyError) as e:
                raise CorruptRecordError(f"{self.path}: commit at byte {self._good + pos} has a "
                                         f"valid CRC but unreadable content ({e})",
                                         self.path, self._good + pos) from None
            pos = end
        self._good += pos

    def _merge(self, frame: dict) -> None:
        ts = int(frame["ts"])
        for t, p, off, meta in frame.get("set", ()):
            self.offsets[(str(t), int(p))] = Committed(int(off), str(meta), ts)
        for t, p in frame.get("del", ()):
            self.offsets.pop((str(t), int(p)), None)

    # ---------------------------------------------------------------- writing
    def commit(self, offsets: dict[tuple[str, int], int], metadata: str = "",
               delete: list[tuple[str, int]] = ()) -> int:
        """Durably record ``offsets`` (and forget ``delete``); returns the commit time (ms)."""
        ts = clock.now_ms()
        frame = {"ts": ts, "set": [[t, p, int(o), metadata] for (t, p), o in offsets.items()]}
        if delete:
            frame["del"] = [[t, p] for t, p in delete]
        payload = json.dumps(frame, separators=(",", ":")).encode()
        with self._mutex:
            lock = os.path.join(self.dir, LOCK)
            if not self._checked:  # (groups/<group> and groups/: never written through a link)
                files.check_own_dir(self.dir, 2)
                self._checked = True
            try:
                lock_fd = open_lock_file(lock)
            except FileNotFoundError:  # a new group (or one deleted meanwhile): its dirs first
                # (the data dir is two levels up: DATA/groups/<group>)
                files.make_dirs(os.path.dirname(os.path.dirname(self.dir)), self.dir)
                lock_fd = open_lock_file(lock)
            try:
                with flocked(lock_fd, lock, self.lock_wait):
                    self._drop_debris()
                    self._refresh()
                    self._append(FRAME.pack(len(payload), crc32c(payload)) + payload)
                    self._merge(frame)
                    if self._good > COMPACT_MIN and self._good > COMPACT_FACTOR * self._live_size():
                        self._rewrite()
            finally:
                os.close(lock_fd)
        return ts

    def _drop_debris(self) -> None:
        """(Lock held.) A rewrite's tmp file left by a crash: nobody else writes one now."""
        for f in os.listdir(self.dir):
            if f.startswith(LOG + ".tmp."):
                os.unlink(os.path.join(self.dir, f))

    def _append(self, frame: bytes) -> None:
        fd = files.open_file(self.path, os.O_WRONLY | os.O_CREAT)
        try:
            created = os.fstat(fd).st_size == 0 and self._stamp is None
            try:
                if self.torn or os.fstat(fd).st_size != self._good:
                    os.ftruncate(fd, self._good)  # cut a commit torn by a crash
                os.pwrite(fd, frame, self._good)
                if self.sync:
                    os.fdatasync(fd)
            except OSError as e:
                try:
                    os.ftruncate(fd, self._good)
                except OSError:
                    pass
                raise os_error(e, "write a commit to", self.path) from None
            if self._good == 0:
                self._head = frame[:FRAME.size]
            self._good += len(frame)
            self.torn = False
            st = os.fstat(fd)
            self._stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        finally:
            os.close(fd)
        if created and self.sync:  # a new file in a (maybe new) group dir: make both durable
            groups = os.path.dirname(self.dir)
            for d in (self.dir, groups, os.path.dirname(groups)):
                files.fsync_dir(d)  # the group dir, groups/, and the data dir

    def _live_size(self) -> int:
        return sum(len(t) + 40 + len(c.metadata) for (t, _), c in self.offsets.items())

    def _rewrite(self) -> None:
        by_ts: dict[int, list] = {}
        for (t, p), c in self.offsets.items():
            by_ts.setdefault(c.timestamp, []).append([t, p, c.offset, c.metadata])
        out = bytearray()
        for ts, rows in sorted(by_ts.items()):  # keep each commit's time
            payload = json.dumps({"ts": ts, "set": rows}, separators=(",", ":")).encode()
            out += FRAME.pack(len(payload), crc32c(payload)) + payload
        files.write_atomic(self.path, bytes(out))
        self._good = len(out)
        st = os.stat(self.path)
        self._stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        self._head = bytes(out[:FRAME.size])
