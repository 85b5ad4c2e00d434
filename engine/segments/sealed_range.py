"""A partition's ``encryption.json``: the offsets at which every data batch is sealed.

``{"version": 1, "ranges": [[from, until], ..., [from, null]], "crc32c": ...}``: every data
batch (transaction markers are never sealed) holding an offset in one of the ranges
``[from, until)`` (``null``: to the end of the log) is encrypted. A plaintext batch there was
not written by rivven: a reader refuses it as damage (engine.crypto.topic.SealedOpener) and
``segment verify`` reports it. Without it, a batch replaced by a plaintext one with the same
offsets and a recomputed CRC would read as if nothing happened (a plaintext batch has no tag).

Who writes it, always under the partition's flock, before what it vouches for can be seen:

- **An append** (``after_append``): the first sealed data batch appended where no range
  reaches its offset starts a range ``[that offset, null)``; a plaintext data batch
  (encryption turned off, or a writer whose configs are not refreshed yet) ends the open range
  at its offset. The file is fsynced before the batch is logged, so what readers see never
  contradicts it. Turning encryption off and on again leaves one range per sealed stretch
  (the oldest go beyond ``MAX_RANGES``: those offsets are no longer vouched for).
- **A re-encryption** that leaves no plaintext data batch makes it ``[[0, null)]``; one back
  to plaintext removes it. A segment swap that would install plaintext batches in a range
  takes their offsets out of it first when the topic no longer encrypts, and is refused when
  it still does (engine.storage.log.PartitionLog.replace_segments).

Written whole (tmp, fsync, rename, fsync dir); sealed with a CRC32C like ``.checkpoint`` (a
flipped bit is caught, a forgery that recomputes the CRC is not: docs/DURABILITY.md, Security
model). A damaged file is reported and ignored, as a damaged ``.checkpoint`` is: never acted
on, and the next change rewrites it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import CorruptRecordError, DamagedMetadata
from ..format.records import HEADER_SIZE, BatchHeader, read_header
from ..fs import durable, jsondoc

FILE = "encryption.json"
VERSION = 1
MAX_RANGES = 64
WHAT = "sealed ranges"
FIX = ("it is ignored (no batch is refused because of it) and the next change of the ranges "
       "rewrites it; 'rivven key reencrypt TOPIC' records them whole again")
KEYS = ("version", "ranges")


class Span(NamedTuple):
    """Every data batch holding an offset in ``[start, end)`` is sealed (``end`` None: to
    the end of the log)."""

    start: int
    end: int | None

    def covers(self, base: int, nxt: int) -> bool:
        """Does the batch holding ``[base, nxt)`` lie (partly) in the span?"""
        return self.start < nxt and (self.end is None or base < self.end)

    def __str__(self) -> str:
        return (f"offsets {self.start}..{self.end - 1}" if self.end is not None
                else f"offset {self.start} on")


Ranges = tuple[Span, ...]  # in offset order, disjoint; () is no file


def covering(rng: Ranges, base: int, nxt: int) -> Span | None:
    """The span of ``rng`` the batch holding ``[base, nxt)`` lies in, if any."""
    for s in rng:
        if s.covers(base, nxt):
            return s
    return None


def path(directory: str) -> str:
    return os.path.join(directory, FILE)


def read(directory: str) -> Ranges:
    """The partition's ranges as written, () when there are none; DamagedMetadata (naming
    the file) when it is damaged."""
    p = path(directory)
    try:
        raw = jsondoc.read(p, WHAT, limit=16 << 10, fix=FIX)
    except OSError as e:
        raise jsondoc.damaged(p, WHAT, f"unreadable: {e.strerror or e}", FIX) from None
    if raw is None:
        return ()
    doc = jsondoc.unseal(raw, p, WHAT, FIX)
    if set(doc) != set(KEYS):
        raise jsondoc.damaged(p, WHAT, f"keys {sorted(doc)}, expected {list(KEYS)}", FIX)
    jsondoc.get_int(doc, "version", p, WHAT, VERSION, VERSION, FIX)
    rows = doc["ranges"]
    out: list[Span] = []
    last = 0
    ok = type(rows) is list and 0 < len(rows) <= MAX_RANGES
    for i, row in enumerate(rows if ok else ()):
        ok = (type(row) is list and len(row) == 2 and type(row[0]) is int
              and last <= row[0] <= jsondoc.MAX_INT
              and (row[1] is None and i == len(rows) - 1
                   or type(row[1]) is int and row[0] < row[1] <= jsondoc.MAX_INT))
        if not ok:
            break
        out.append(Span(row[0], row[1]))
        last = row[1] if row[1] is not None else jsondoc.MAX_INT
    if not ok:
        raise jsondoc.damaged(p, WHAT, f"ranges is {jsondoc.shown(rows)}, not up to "
                              f"{MAX_RANGES} increasing [from, until] pairs", FIX)
    return tuple(out)


def write(directory: str, rng: Ranges) -> None:
    """Replace the file with ``rng`` (none: remove it), durably."""
    p = path(directory)
    if not rng:
        try:
            os.unlink(p)
        except FileNotFoundError:
            return
        durable.fsync_dir(directory)
        return
    durable.write_atomic(p, jsondoc.seal({"version": VERSION,
                                          "ranges": [list(s) for s in rng]}))


def _cut(rng: Ranges, offset: int) -> Ranges:
    """``rng`` without any offset from ``offset`` on."""
    return tuple(Span(s.start, offset if s.end is None else min(s.end, offset))
                 for s in rng if s.start < offset)


def after_append(rng: Ranges, sealed: bool, offset: int) -> Ranges:
    """The ranges once a data batch, ``sealed`` or not, is appended at ``offset`` (the log
    end): a sealed one extends the range reaching it to the end of the log, or starts one; a
    plaintext one ends the open range at its offset."""
    if rng and rng[-1].end is None and rng[-1].start <= offset:
        if sealed:
            return rng  # (the common case: nothing changes)
    out = _cut(rng, offset)
    if not sealed:
        return out
    if out and out[-1].end == offset:
        out = out[:-1] + (Span(out[-1].start, None),)
    else:
        out = out + (Span(offset, None),)
    return out[-MAX_RANGES:]


def without(rng: Ranges, plain: list[tuple[int, int]]) -> Ranges:
    """``rng`` without the offsets of the plaintext batches ``plain`` (``(base, next)``
    each): what it may still claim once they are installed."""
    out = list(rng)
    for base, nxt in plain:
        kept: list[Span] = []
        for s in out:
            if not s.covers(base, nxt):
                kept.append(s)
                continue
            if s.start < base:
                kept.append(Span(s.start, base))
            if s.end is None or nxt < s.end:
                kept.append(Span(nxt, s.end))
        out = kept
    return tuple(out[-MAX_RANGES:])


def plaintext(log_path: str, rng: Ranges, positions: list[int] | None = None
              ) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of the plaintext data batches of a ``.log`` file lying in
    ``rng``: the batches starting at ``positions`` (a scan already found them), or every
    batch (headers only, up to the first that cannot be read: a file just written)."""
    out: list[tuple[int, BatchHeader]] = []
    if not rng:
        return out
    fd = os.open(log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        todo = iter(positions) if positions is not None else None
        while True:
            if todo is not None:
                pos = next(todo, -1)
                if pos < 0:
                    break
            if pos + HEADER_SIZE > size:
                break
            try:
                h = read_header(os.pread(fd, HEADER_SIZE, pos))
            except CorruptRecordError:  # (what verify reports itself)
                break
            if not h.is_encrypted and not h.is_control and \
                    covering(rng, h.base_offset, h.next_offset) is not None:
                out.append((pos, h))
            pos += h.size
    finally:
        os.close(fd)
    return out


class Tracker:
    """The ranges of one partition directory as they are now: one ``stat`` per look, the
    file read again only when it changed. A damaged file counts as none (``error`` says
    why)."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self._path = path(directory)
        self._stamp: tuple[int, int, int] | None = None
        self._rng: Ranges = ()
        self.error: DamagedMetadata | None = None

    def current(self) -> Ranges:
        # (most partitions have none: access answers that without an exception, which costs
        # more than the syscall; every append that takes the flock looks)
        st = None
        if os.access(self._path, os.F_OK):
            try:
                st = os.stat(self._path)
            except FileNotFoundError:
                pass  # (deleted meanwhile)
        if st is None:
            self._stamp, self._rng, self.error = None, (), None
            return ()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                self._rng, self.error = read(self.dir), None
            except DamagedMetadata as e:
                self._rng, self.error = (), e
            self._stamp = stamp
        return self._rng
