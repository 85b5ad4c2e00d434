"""Append-only files of CRC-framed records: a group's ``offsets.log`` (engine.groups.
offset_store) and a transactional id's ``<id>.log`` (engine.txn.txn_store).

A frame is ``<I length><I crc32c(payload)>`` followed by ``length`` bytes of payload
(docs/FORMAT.md). Frames are appended and fdatasynced by the one writer holding the file's
lock; a file too large for its live content is rewritten whole (``files.write_atomic``).

``scan`` reads a file a chunk at a time (a chunk, or one frame of at most ``max_frame``
bytes, in memory whatever the file's size) and checks every frame before it is used. An
unfinished append ends the file (``torn``): a short header, a frame that runs past the end,
a last frame that fails its CRC, a zero-filled tail. Such an append was never acknowledged,
and the next writer cuts it off (``append``). A length no writer writes, with data after it,
is damage; so is a CRC failure with more frames after it, unless the caller takes frames as
independent (``on_skip``: each frame of a txn state log is a whole state, so a frame a crash
tore under the fdatasync of the next one is only an older state, stepped over). With
``on_skip`` a length of 0 followed by an intact frame is stepped over too, up to that frame:
a machine crash can lose an append's pages (they read as zeros) while a later append's
reached the disk.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable

from ..errors import os_error, plural
from ..format.crc import crc32c

FRAME = struct.Struct("<II")
CHUNK = 1 << 20  # frames are read a chunk at a time (a larger frame alone)

Apply = Callable[[bytes, int, int], None]  # (payload, frame start, frame end)
Damage = Callable[[int, str], Exception]  # (frame start, reason) -> the error to raise


def frame(payload: bytes) -> bytes:
    """``payload`` framed: length, CRC32C, the bytes."""
    return FRAME.pack(len(payload), crc32c(payload)) + payload


def scan(fd: int, start: int, size: int, max_frame: int, apply: Apply, damage: Damage,
         unit: str = "frame", on_skip: Callable[[int], None] | None = None) -> bool:
    """Call ``apply`` on each intact frame of ``[start, size)`` in order; returns whether
    the file ends in a torn append. Raises ``damage(pos, reason)`` on damage. ``unit`` names
    a frame in those reasons ("commit"). With ``on_skip``, a frame that fails its CRC with
    more frames after it is stepped over (``on_skip(pos)``) instead of being damage."""
    buf, at = b"", start  # buf holds the file's bytes [at, at + len(buf))
    pos = start
    while pos < size:
        if size - pos < FRAME.size:
            return True  # a header cut short: an append in flight or cut by a crash
        if pos + FRAME.size > at + len(buf):
            buf, at = os.pread(fd, min(CHUNK, size - pos), pos), pos
            if len(buf) < FRAME.size:
                return True  # (the file shrank under us: a rewrite or a cut)
        length, crc = FRAME.unpack_from(buf, pos - at)
        end = pos + FRAME.size + length
        if not 0 < length <= max_frame:
            if zeros(fd, pos, size):
                return True  # a zero-filled tail: an append a crash left unwritten
            nxt = None if on_skip is None or length else _next_frame(fd, pos, size, max_frame)
            if nxt is None or on_skip is None:
                raise damage(pos, f"a frame length of {plural(length, 'byte')} (a {unit} is "
                                  f"1 to {max_frame})")
            on_skip(pos)
            pos, buf, at = nxt, b"", nxt
            continue
        if end > size:
            return True  # runs past the end: an append in flight or cut by a crash
        if end > at + len(buf):
            if FRAME.size + length > CHUNK:  # one large frame: read it alone
                buf, at = os.pread(fd, FRAME.size + length, pos), pos
            else:
                buf, at = os.pread(fd, min(CHUNK, size - pos), pos), pos
            if at + len(buf) < end:
                return True  # (the file shrank under us)
        payload = buf[pos - at + FRAME.size:end - at]
        if crc32c(payload) != crc:
            if end == size:  # the last frame: an append that a crash left half written
                return True
            if on_skip is None:
                raise damage(pos, f"checksum mismatch, with more {unit}s after it")
            on_skip(pos)
        else:
            apply(payload, pos, end)
        pos = end
    return False


def _next_frame(fd: int, pos: int, size: int, max_frame: int) -> int | None:
    """The start of the first intact frame (a length of 1 .. ``max_frame``, that many bytes
    after the header, their CRC32C matching) after ``pos``, None when there is none (read
    ``max_frame`` + 2 chunks at a time)."""
    at = pos + 1
    while at < size:
        buf = os.pread(fd, min(size - at, max_frame + 2 * CHUNK), at)
        if len(buf) < FRAME.size:
            break
        last = len(buf) - FRAME.size
        for i in range(last + 1):
            length = int.from_bytes(buf[i:i + 4], "little")
            if not 0 < length <= max_frame:
                continue
            end = i + FRAME.size + length
            if end > len(buf):
                if at + end > size:
                    continue  # runs past the file: not a frame
                break  # (read on from here)
            if crc32c(buf[i + FRAME.size:end]) == int.from_bytes(buf[i + 4:i + 8], "little"):
                return at + i
        else:
            at += last + 1
            continue
        at += i
    return None


def zeros(fd: int, pos: int, size: int) -> bool:
    """Are the bytes ``[pos, size)`` all zero? (Holes are skipped, not read.)"""
    while pos < size:
        try:
            pos = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # nothing but a hole up to the end
                return True
            if e.errno != errno.EINVAL:  # (EINVAL: no SEEK_DATA here: read it all)
                raise
        if pos >= size:
            return True
        chunk = os.pread(fd, min(CHUNK, size - pos), pos)
        if not chunk:
            return True
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def append(fd: int, path: str, data: bytes, good: int, sync: bool,
           doing: str = "write to") -> os.stat_result:
    """(The file's lock held; ``fd`` open for writing.) Write ``data`` (whole frames) at
    ``good``, the end of the last intact frame, first cutting whatever lies past it (an
    append a crash tore); fdatasync when ``sync``. A failed write is cut off again and raised
    as a StorageError (``doing`` the file: "write a commit to"). Returns the file's stat."""
    try:
        if os.fstat(fd).st_size != good:
            os.ftruncate(fd, good)  # cut an append torn by a crash
        if os.pwrite(fd, data, good) != len(data):
            raise OSError(errno.ENOSPC, "short write")
        if sync:
            os.fdatasync(fd)
    except OSError as e:
        try:
            os.ftruncate(fd, good)
        except OSError:
            pass
        raise os_error(e, doing, path) from None
    return os.fstat(fd)
