"""A partition's (log start, log end) read cheaply, without opening it as a PartitionLog.

``rivven topic list`` on 10,000 partitions cannot afford an open per partition (its lock,
segment set, indexes, tier view, producer state: ~0.3 ms). ``quick_offsets`` lists the
directory, reads ``.checkpoint``, opens the last ``.log`` alone and reads the batch headers
past the checkpoint's position (or past the last offset index entry) up to the durable end
(``.end``): a handful of syscalls.
Anything out of the ordinary — a tier manifest, swap or write debris, a checkpoint that does
not agree, a header that does not parse — answers None, and the caller opens the partition
the full way (engine.storage.partitions.peek), which knows every rule.
"""

from __future__ import annotations

import os
import struct

from ..errors import CorruptRecordError, DamagedMetadata, UnknownTopic
from ..format.records import HEADER_SIZE, check_crc, read_header
from ..segments import checkpoint, durable_end, filenames, swap
from ..segments.tier_manifest import MANIFEST

CHUNK = 64 << 10
_ENTRY = struct.Struct("<ii")  # OffsetIndex: relative offset, position


def quick_offsets(directory: str) -> tuple[int, int] | None:
    """``(log start, log end)`` of the partition in ``directory`` as a reader would see it
    now, or None when only a full open can tell. UnknownTopic when the directory is gone."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        raise UnknownTopic(f"{directory} is gone") from None
    if MANIFEST in names or swap.MANIFEST in names or any(
            ".tmp." in n or n.endswith((".cleaned", ".swap")) for n in names):
        return None  # tiered, or a write or a swap to finish: the full open knows
    bases = sorted([int(n[:20]) for n in names
                    if len(n) == 24 and n[20:] == filenames.LOG and n[:20].isdigit()])
    if not bases:
        return None
    try:
        point = checkpoint.read_checkpoint(directory) if filenames.CHECKPOINT in names else None
    except DamagedMetadata:
        return None
    active = bases[-1]
    path = f"{directory}/{active:020d}{filenames.LOG}"
    try:
        size = os.stat(path).st_size
    except OSError:
        return None  # rolled or deleted meanwhile (the full open says what else)
    if point is not None:
        try:
            checkpoint.check(directory, point, bases, size)
        except DamagedMetadata:
            return None
    log_start = point["log_start_offset"] if point is not None else 0
    pub = durable_end.read_published(directory) if filenames.DURABLE_END in names else None
    if pub is not None:  # no further than the durable end, as every reader
        if pub[0] > active:
            return None  # rolled since the listing
        size = min(size, durable_end.visible(pub, active) or 0)
    pos, end = _resume(directory, active, point, size)
    if pos < size:  # (bytes past the checkpoint: read their headers)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            scanned = _scan(fd, pos, end, min(size, os.fstat(fd).st_size))
        except (CorruptRecordError, OSError):
            return None
        finally:
            os.close(fd)
        if scanned is None:
            return None
        end = scanned
    return min(max(log_start, bases[0]), end), end


def _resume(directory: str, active: int, point: dict | None, size: int) -> tuple[int, int]:
    """Where to start reading headers: ``(position, offset)`` of a batch boundary."""
    if point is not None and point["segment"] == active and point["position"] <= size:
        return point["position"], point["recovery_point"]
    try:  # the last offset index entry (a header that does not parse there: slow path)
        with open(filenames.path(directory, active, filenames.INDEX), "rb") as f:
            n = os.fstat(f.fileno()).st_size // _ENTRY.size
            if n:
                f.seek((n - 1) * _ENTRY.size)
                rel, position = _ENTRY.unpack(f.read(_ENTRY.size))
                if 0 <= rel and 0 <= position < size:
                    return position, active + rel
    except (OSError, struct.error):
        pass
    return 0, active


def _scan(fd: int, pos: int, end: int, size: int) -> int | None:
    """The offset after the last complete, CRC-valid batch from ``pos`` (offset ``end``) to
    the end of the file, as a reader stops there; None when something does not add up (a
    batch below the offset reached: not a batch boundary)."""
    while pos + HEADER_SIZE <= size:
        buf = os.pread(fd, min(CHUNK, size - pos), pos)
        p = 0
        while p + HEADER_SIZE <= len(buf):
            h = read_header(buf, p)
            if h.base_offset < end:
                return None
            if pos + p + h.size > size:
                return end  # a batch still being written: not there yet
            if p + h.size > len(buf):
                if p:
                    break  # read on from this batch
                buf = os.pread(fd, h.size, pos)
                if len(buf) < h.size:
                    return end
            check_crc(buf, p, h)
            end = h.next_offset
            p += h.size
        if p == 0:
            return end
        pos += p
    return end
