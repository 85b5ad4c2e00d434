"""Damage in a segment's log, and the way past it (docs/DURABILITY.md, Damage stays where it
is): ``Damage`` (a damaged stretch and the offsets it held), ``DamagedRange`` (a read that
reached them, exit 3), ``refuse_damage`` (for whole-segment rewrites that must not go past
it), ``next_intact`` (where the next intact batch starts) and ``header_at``."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import NamedTuple

from ..errors import CorruptRecordError
from ..format.records import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    MAGIC,
    MAGIC_PRODUCER,
    MAX_RELATIVE_OFFSET,
    BatchHeader,
    crc_intact,
    read_header,
)

READ_CHUNK = 1 << 18  # how much of the file one step of the search for an intact batch reads
MAGICS = (MAGIC, MAGIC_PRODUCER)  # the format versions a batch may have


class Damage(NamedTuple):
    """A damaged stretch of a segment's log: the bytes ``[position, end)`` fail their checks
    (a CRC, a header that does not parse) and held offsets ``first`` .. ``next_offset - 1``.
    ``end`` is where the next intact batch starts and ``next_offset`` its base offset; when
    no intact batch follows, ``next_offset`` is None and ``end`` is where the scan stopped
    (the end of the file or of the view). ``first`` is the offset the intact batch before it
    ends at (the damaged header's own offsets cannot be trusted)."""

    position: int
    end: int
    first: int
    next_offset: int | None
    reason: str


class DamagedRange(CorruptRecordError):
    """A read reached offsets a damaged batch held: ``first`` .. ``next_offset - 1``.
    ``next_offset`` is where reading can go on (None: nothing intact follows it). Exit 3,
    as all damage."""

    def __init__(self, message: str, path: str | None = None, position: int | None = None,
                 first: int | None = None, next_offset: int | None = None) -> None:
        super().__init__(message, path, position)
        self.first = first
        self.next_offset = next_offset


def refuse_damage(path: str, doing: str) -> Callable[[Damage], None]:
    """The ``damaged`` callback of a whole-segment rewrite or scan of the segment ``path``
    (``doing``: compaction, a Spark job's read) that must not go past a damaged batch: it
    raises DamagedRange naming the batch's offsets and the repair, which cuts it out (its
    offsets then a recorded gap, which readers, compaction and the Spark jobs step over as
    they step over compacted offsets)."""

    def refuse(d: Damage) -> None:
        offs = f"{d.first}..{d.next_offset - 1}" if d.next_offset is not None else f"from {d.first}"
        raise DamagedRange(f"{d.reason}; {doing} does not go past a damaged batch (offsets "
                           f"{offs}): 'rivven segment recover {path} --truncate-corrupt' cuts "
                           "it out first", path, d.position, d.first, d.next_offset)
    return refuse


RESYNC_LIMIT = 64 << 20  # how far past a damaged batch the next intact one is looked for
_MAGIC = re.compile(b"[%s]" % re.escape(bytes(MAGICS)))  # at byte 12 of a header


def next_intact(fd: int, position: int, end: int, base: int, expect: int | None
                ) -> tuple[int, BatchHeader] | None:
    """The first whole, CRC-valid batch after the damaged one at ``position`` of a segment
    (base offset ``base``; ``fd`` its log) that lies before ``end`` and whose offsets fit
    (at or past ``expect``, the offset the damaged batch should start at, when known; within
    the segment's int32 range): ``(position, header)``, or None when there is none.

    Looked for first where the damaged header's length says the next batch starts, then
    where its stored length does, then at every 8-byte boundary (batches are 8-byte
    aligned) up to RESYNC_LIMIT past it. A CRC32C that matches over a whole batch is what
    tells a batch boundary from bytes that look like one; a record value that itself holds
    a whole batch could still be taken for one (docs/DURABILITY.md says what that means)."""
    raw = os.pread(fd, HEADER_SIZE, position)
    guesses = []
    if len(raw) >= LENGTH_PREFIX:
        guesses.append(position + int.from_bytes(raw[8:12], "little", signed=True) + LENGTH_PREFIX)
    if len(raw) == HEADER_SIZE:
        stored = int.from_bytes(raw[68:72], "little", signed=True)
        guesses.append(position + ((HEADER_SIZE + stored + 7) & ~7))
    for at in guesses:
        if position < at and not at & 7:
            h = _intact_at(fd, at, end, base, expect)
            if h is not None:
                return at, h
    pos = (position + 8) & ~7
    limit = min(end, position + RESYNC_LIMIT)
    while pos < limit:
        chunk = os.pread(fd, min(READ_CHUNK, limit - pos) + HEADER_SIZE, pos)
        n = min(len(chunk), limit - pos)
        for m in _MAGIC.finditer(chunk, 12):
            q = m.start() - 12
            if q >= n:
                break
            if not q & 7:
                h = _intact_at(fd, pos + q, end, base, expect)
                if h is not None:
                    return pos + q, h
        if len(chunk) <= HEADER_SIZE:
            break
        pos += READ_CHUNK
    return None


def header_at(fd: int, position: int) -> BatchHeader | None:
    """The parsed header of the batch at ``position`` of ``fd``; None when it is cut short
    or does not parse."""
    raw = os.pread(fd, HEADER_SIZE, position)
    if len(raw) < HEADER_SIZE:
        return None
    try:
        return read_header(raw, 0)
    except CorruptRecordError:
        return None


def _intact_at(fd: int, at: int, end: int, base: int, expect: int | None) -> BatchHeader | None:
    """The header of the batch at ``at`` when it is whole before ``end``, CRC-valid and its
    offsets fit (see ``next_intact``); else None."""
    if at + HEADER_SIZE > end:
        return None
    h = header_at(fd, at)
    if h is None or at + h.size > end or h.base_offset < max(base, expect or 0) or \
            h.next_offset - base > MAX_RELATIVE_OFFSET:
        return None
    return h if crc_intact(os.pread(fd, h.size, at)) else None
