"""Committed offsets of one consumer group: ``groups/<group>/offsets.log``, append-only.

Each commit is one frame (engine.fs.framelog: ``<I length><I crc32c(payload)>``) + a
UTF-8 JSON payload ``{"ts": ms, "set": [[topic, partition, offset, metadata], ...], "del":
[[topic, partition]]}``, appended and fdatasynced under ``offsets.lock`` (so a commit
survives kill -9 and a machine crash once ``commit`` returns). When the file grows well
past its live content, and when a re-encryption seals its metadata anew (``reseal``: no frame
may keep an encrypted topic's metadata as text), it is rewritten with the live commits only
(tmp, fsync, rename): readers see the old file or the new one.

Loading streams the file frame by frame (a chunk or one frame of at most ``MAX_FRAME`` bytes
in memory, whatever the file's size) and checks every frame before using it. An unfinished
append (a short header, a frame that runs past the end of the file, a last frame that fails
its CRC, a zero-filled tail) ends the file: a commit torn by a crash was never acknowledged,
and the next writer cuts it off before appending. Any other bad frame (a CRC failure with
more data after it, a length no commit writes, a CRC-valid payload that is not a well-formed
commit) is damage: ``DamagedMetadata`` naming the file and the byte, and nothing is written
to or cut from the file.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from .. import clock
from ..errors import DamagedMetadata, InvalidArgument
from ..fs import durable, framelog, guard, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, flocked, open_lock_file

LOG = "offsets.log"
LOCK = "offsets.lock"
FRAME = framelog.FRAME
MAX_FRAME = 16 << 20  # the largest payload a commit may write; a length above it is damage
COMPACT_MIN = 1 << 20  # rewrite only past this size ...
COMPACT_FACTOR = 8  # ... and this many times the live content
MAX_PARTITION = 99_999  # partitions of a topic: 0 .. 99999 (the catalog's limit)
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str | dict  # a dict: sealed (an encrypted topic's: engine.crypto.topic)
    timestamp: int  # commit time, ms since the epoch


# seal(topic, partition, offset, text) -> what the log keeps of a commit's metadata: the text,
# or for an encrypted topic the text sealed (engine.crypto.topic.OffsetMetadata)
SealMetadata = Callable[[str, int, int, str], "str | dict"]


class OffsetStore:
    """The committed offsets of one group, kept up to date with other processes' commits."""

    def __init__(self, directory: str, sync: bool = True,
                 lock_wait: LockWait = DEFAULT_WAIT, seal: SealMetadata | None = None) -> None:
        self.dir = directory
        self.seal = seal
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
            self._scan(fd, st.st_size)
            self._stamp = stamp
            self._head = head
        finally:
            os.close(fd)

    def _scan(self, fd: int, size: int) -> None:
        """Apply the frames in ``[_good, size)``; ``_good`` follows each one."""
        def apply(payload: bytes, pos: int, end: int) -> None:
            self._merge(self._decode(payload, pos))
            self._good = end

        self.torn = False
        self.torn = framelog.scan(fd, self._good, size, MAX_FRAME, apply, self._damage,
                                  "commit")

    def _damage(self, pos: int, reason: str) -> DamagedMetadata:
        group = unquote(os.path.basename(self.dir))
        e = jsondoc.damaged(self.path, f"commit at byte {pos} of offsets log", reason,
                            f"restore the file from a backup, or delete the group (rivven "
                            f"group delete {group!r}) and commit its offsets again")
        e.position = pos
        return e

    def _decode(self, payload: bytes, pos: int) -> dict:
        """A CRC-valid frame's commit, every field checked (DamagedMetadata otherwise)."""
        try:
            doc = jsondoc.loads(payload, self.path, f"commit at byte {pos} of offsets log")
        except DamagedMetadata as e:
            e.position = pos
            raise
        if not isinstance(doc, dict):
            raise self._damage(pos, f"a JSON {type(doc).__name__} where a commit belongs")
        ts = doc.get("ts")
        if not _is_int(ts, jsondoc.MAX_INT):
            raise self._damage(pos, f"ts is {jsondoc.shown(ts)}, not a time in ms")
        rows, gone = doc.get("set", []), doc.get("del", [])
        if type(rows) is not list or type(gone) is not list:
            raise self._damage(pos, "set and del must be lists")
        for row in rows:  # (a tight loop: a reader may replay many frames)
            if (type(row) is not list or len(row) != 4 or type(row[2]) is not int
                    or not 0 <= row[2] <= jsondoc.MAX_INT
                    or (type(row[3]) is not str and not _sealed(row[3]))
                    or not is_tp(row[0], row[1])):
                raise self._damage(pos, f"set has {jsondoc.shown(row)}, not [topic, partition, "
                                   "offset, metadata]")
        for row in gone:
            if type(row) is not list or len(row) != 2 or not is_tp(row[0], row[1]):
                raise self._damage(pos, f"del has {jsondoc.shown(row)}, not [topic, partition]")
        return doc

    def _merge(self, frame: dict) -> None:
        """Apply one commit (checked by ``_decode``, or made by ``commit``)."""
        ts = frame["ts"]
        offsets = self.offsets
        for t, p, off, meta in frame.get("set", ()):
            offsets[(t, p)] = Committed(off, meta, ts)
        for t, p in frame.get("del", ()):
            offsets.pop((t, p), None)

    # ---------------------------------------------------------------- writing
    def commit(self, offsets: dict[tuple[str, int], int],
               metadata: str | Mapping[tuple[str, int], str] = "",
               delete: Sequence[tuple[str, int]] = ()) -> int:
        """Durably record ``offsets`` (and forget ``delete``); returns the commit time (ms).
        ``metadata``: one text for every partition, or a text per partition (missing: "")."""
        ts = clock.now_ms()
        check_commit(offsets, metadata, delete)
        seal = self.seal
        if isinstance(metadata, str):
            if seal is not None and metadata:
                rows = [[t, p, int(o), seal(t, p, int(o), metadata)]
                        for (t, p), o in offsets.items()]
            else:
                rows = [[t, p, int(o), metadata] for (t, p), o in offsets.items()]
        else:
            rows = []
            for (t, p), o in offsets.items():
                text = metadata.get((t, p), "")
                rows.append([t, p, int(o), seal(t, p, int(o), text)
                             if seal is not None and text else text])
        frame = {"ts": ts, "set": rows}
        if delete:
            frame["del"] = [[t, p] for t, p in delete]
        payload = json.dumps(frame, separators=(",", ":")).encode()
        if len(payload) > MAX_FRAME:
            raise InvalidArgument(f"a commit of {len(offsets)} offset(s) takes {len(payload)} "
                                  f"bytes, more than the {MAX_FRAME} a commit may: commit fewer "
                                  "partitions at once or use shorter metadata")
        with self._mutex:
            lock = os.path.join(self.dir, LOCK)
            if not self._checked:  # (groups/<group> and groups/: never written through a link)
                guard.check_own_dir(self.dir, 2)
                self._checked = True
            try:
                lock_fd = open_lock_file(lock)
            except FileNotFoundError:  # a new group (or one deleted meanwhile): its dirs first
                # (the data dir is two levels up: DATA/groups/<group>)
                guard.make_dirs(os.path.dirname(os.path.dirname(self.dir)), self.dir)
                lock_fd = open_lock_file(lock)
            try:
                with flocked(lock_fd, lock, self.lock_wait):
                    self._drop_debris()
                    self._refresh()
                    self._append(framelog.frame(payload))
                    self._merge(frame)
                    if self._good > COMPACT_MIN and self._good > COMPACT_FACTOR * self._live_size():
                        self._rewrite()
            finally:
                os.close(lock_fd)
        return ts

    def reseal(self, topic: str, reseal: Callable[[int, int, str | dict], str | dict | None],
               scrub: bool = False) -> int:
        """Seal anew the metadata of ``topic``'s committed offsets: ``reseal(partition,
        offset, stored)`` returns what to keep instead (None: leave it). The file is then
        rewritten (tmp, fsync, rename) with the live commits only, each with its original
        commit time: no frame keeps the metadata as it was. ``scrub`` (the topic encrypts):
        rewrite it too when only a superseded commit holds the topic's metadata as text
        (the file is append-only: a later sealed commit leaves the earlier frame). Returns
        how many commits changed."""
        with self._mutex:
            guard.check_own_dir(self.dir, 2)  # (as commit: the rewrite lands in the group dir)
            lock = os.path.join(self.dir, LOCK)
            try:
                lock_fd = open_lock_file(lock)
            except FileNotFoundError:
                return 0  # (no group dir: nothing committed)
            try:
                with flocked(lock_fd, lock, self.lock_wait):
                    self._drop_debris()
                    self._refresh()
                    changed = 0
                    for (t, p), c in sorted(self.offsets.items()):
                        if t != topic:
                            continue
                        new = reseal(p, c.offset, c.metadata)
                        if new is not None:
                            self.offsets[(t, p)] = Committed(c.offset, new, c.timestamp)
                            changed += 1
                    if changed or (scrub and self._holds_text(topic)):
                        self._rewrite()
            finally:
                os.close(lock_fd)
        return changed

    def _holds_text(self, topic: str) -> bool:
        """(Lock held.) Does any frame of the file, superseded or not, hold metadata of
        ``topic`` as text?"""
        found = False

        def apply(payload: bytes, pos: int, end: int) -> None:
            nonlocal found
            if not found and topic.encode() in payload:  # (most frames: no JSON parsed)
                found = any(row[0] == topic and type(row[3]) is str and row[3]
                            for row in self._decode(payload, pos).get("set", ()))

        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            framelog.scan(fd, 0, os.fstat(fd).st_size, MAX_FRAME, apply, self._damage,
                          "commit")
        finally:
            os.close(fd)
        return found

    def _drop_debris(self) -> None:
        """(Lock held.) A rewrite's tmp file left by a crash: nobody else writes one now."""
        for f in os.listdir(self.dir):
            if f.startswith(LOG + ".tmp."):
                os.unlink(os.path.join(self.dir, f))

    def _append(self, frame: bytes) -> None:
        fd = guard.open_file(self.path, os.O_WRONLY | os.O_CREAT)
        try:
            created = os.fstat(fd).st_size == 0 and self._stamp is None
            st = framelog.append(fd, self.path, frame, self._good, self.sync,
                                 "write a commit to")
        finally:
            os.close(fd)
        if self._good == 0:
            self._head = frame[:FRAME.size]
        self._good += len(frame)
        self.torn = False
        self._stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if created and self.sync:  # a new file in a (maybe new) group dir: make both durable
            groups = os.path.dirname(self.dir)
            for d in (self.dir, groups, os.path.dirname(groups)):
                durable.fsync_dir(d)  # the group dir, groups/, and the data dir

    def _live_size(self) -> int:
        return sum(len(t) + 40 + len(str(c.metadata)) for (t, _), c in self.offsets.items())

    def _rewrite(self) -> None:
        by_ts: dict[int, list] = {}
        for (t, p), c in self.offsets.items():
            by_ts.setdefault(c.timestamp, []).append([t, p, c.offset, c.metadata])
        out = bytearray()
        for ts, rows in sorted(by_ts.items()):  # keep each commit's time
            for payload in _payloads(ts, rows):
                out += framelog.frame(payload)
        durable.write_atomic(self.path, bytes(out))
        self._good = len(out)
        st = os.stat(self.path)
        self._stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        self._head = bytes(out[:FRAME.size])


def _payloads(ts: int, rows: list) -> list[bytes]:
    """``rows`` committed at ``ts`` as frame payloads of at most MAX_FRAME bytes each."""
    payload = json.dumps({"ts": ts, "set": rows}, separators=(",", ":")).encode()
    if len(payload) <= MAX_FRAME or len(rows) == 1:
        return [payload]
    half = len(rows) // 2
    return _payloads(ts, rows[:half]) + _payloads(ts, rows[half:])


def check_commit(offsets: dict[tuple[str, int], int],
                 metadata: str | Mapping[tuple[str, int], str],
                 delete: Sequence[tuple[str, int]]) -> None:
    """Refuse what a reader would take for damage (InvalidArgument)."""
    texts = metadata.values() if isinstance(metadata, Mapping) else (metadata,)
    for text in texts:
        if not isinstance(text, str):
            raise InvalidArgument(f"commit metadata must be a string, not {jsondoc.shown(text)}")
    for (t, p), o in offsets.items():
        if not is_tp(t, p) or not _is_int(o, jsondoc.MAX_INT):
            raise InvalidArgument(f"cannot commit offset {o!r} of {t!r} partition {p!r}: "
                                  "offsets are integers from 0, partitions 0 to "
                                  f"{MAX_PARTITION} of a valid topic name")
    for t, p in delete:
        if not is_tp(t, p):
            raise InvalidArgument(f"cannot forget {t!r} partition {p!r}: no such partition")


def _sealed(v: object) -> bool:
    """A sealed metadata as the log keeps it: ``{"v": key version, "s": base64 text}``."""
    return (type(v) is dict and len(v) == 2 and type(v.get("v")) is int
            and 1 <= v["v"] <= 0xFFFF and type(v.get("s")) is str and len(v["s"]) < MAX_FRAME)


def _is_int(v: object, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= hi


def is_tp(topic: object, partition: object) -> bool:
    """A topic name and a partition number as a file may hold them (checked before use)."""
    return (type(topic) is str and type(partition) is int and 0 <= partition <= MAX_PARTITION
            and _TOPIC.fullmatch(topic) is not None)
