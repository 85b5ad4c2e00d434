"""A segment's ``.log`` read batch by batch, as every reader and the loader read it: complete
batches only (``TornTail``: one cut short, a write in flight or a dead writer's; a
zero-filled tail is one too), each header's fields checked and, unless the caller says, its
CRC; a damaged batch handed to the caller as a ``Damage`` with the way past it (the next
intact batch, ``next_intact``), remembered by position so a later read steps over it
without looking again. ``Segment`` (segment.py) is a ``BatchScan`` over its file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..errors import CorruptRecordError, plural
from ..format.records import (
    ATTR_CONTROL,
    ATTR_ENCRYPTED,
    HEADER_SIZE,
    BatchHeader,
    check_crc,
    read_header,
)
from .damage import Damage, next_intact

READ_CHUNK = 1 << 18  # a read of one batch should not drag in much more
PLAIN_ONLY = "plain"  # iter_batches: check the CRCs of plaintext batches only
HEADER_CHUNK = 1 << 16  # a header scan reads this much at a time while batches are small



class TornTail(Exception):
    """Internal: the batch at ``position`` is incomplete (a write in flight or a dead writer)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


class BatchRef(NamedTuple):
    """A batch found in a buffer: ``buf[start:start + header.size]`` is at ``position`` of
    the file ``path`` ("" for a batch from the hot cache)."""

    position: int
    header: BatchHeader
    buf: bytes
    start: int
    path: str = ""


class BatchScan:
    """The reads of one segment file: ``fd`` open on ``path``, ``base`` its base offset,
    ``size`` the length of the prefix known to hold complete batches, ``damage`` the damaged
    stretches found so far (by position)."""

    fd: int
    path: str
    base: int
    size: int
    damage: dict[int, Damage]

    def where(self, position: int) -> str:
        return f" in {self.path} at position {position}"

    def iter_batches(self, start: int, end: int, crc: bool | str = True,
                     damaged: Callable[[Damage], None] | None = None,
                     expect: int | None = None) -> Iterator[BatchRef]:
        """Complete batches in ``[start, end)``; raises TornTail or CorruptRecordError.
        ``crc``: check each batch's CRC (``PLAIN_ONLY``: not an encrypted one's, whose
        authentication tag the caller checks as it opens it).

        With ``damaged``, a batch that fails its checks is handed to it as a ``Damage``
        (``expect``: the offset the batch at ``start`` begins at, when known) instead: it
        raises to stop there, or returns to go on at the next intact batch (when none
        follows, the iteration ends)."""
        pos = start
        while pos < end:
            want = min(end - pos, READ_CHUNK)
            if want < HEADER_SIZE:
                raise TornTail(pos, f"{want} trailing bytes, less than a batch header")
            buf = os.pread(self.fd, want, pos)
            if len(buf) < want:
                raise TornTail(pos + len(buf), "file shorter than expected")
            p = 0
            resume = -1
            while p + HEADER_SIZE <= len(buf):
                try:
                    h = self._header(buf, p, pos + p, end)
                    if p + h.size > len(buf):
                        if pos + p + h.size > end:
                            raise TornTail(pos + p, f"batch of {plural(h.size, 'byte')} runs past the end")
                        if p == 0:  # one batch larger than a chunk: read it whole
                            buf = os.pread(self.fd, h.size, pos)
                            if len(buf) < h.size:
                                raise TornTail(pos, "file shorter than expected")
                        else:
                            break
                    if crc is True or (crc and not h.attributes & ATTR_ENCRYPTED):
                        check_crc(buf, p, h, self.where(pos + p))
                except CorruptRecordError as e:
                    if damaged is None:
                        raise
                    d = self.damage_at(pos + p, end, expect, str(e))
                    damaged(d)
                    if d.next_offset is None:
                        return
                    resume, expect = d.end, d.next_offset
                    break
                yield BatchRef(pos + p, h, buf, p, self.path)
                expect = h.next_offset
                p += h.size
            if resume >= 0:
                pos = resume
                continue
            if p == 0:
                raise TornTail(pos, "incomplete batch header")
            pos += p

    def damage_at(self, position: int, end: int, expect: int | None, reason: str) -> Damage:
        """The damaged stretch that starts with the batch at ``position`` (it failed with
        ``reason``), the next intact batch looked for before ``end``; ``expect`` is the
        offset the batch before it ends at, when known. Remembered by position: a later
        read steps over it without looking again."""
        d = self.damage.get(position)
        if d is not None and d.end <= end and (d.next_offset is not None or d.end == end):
            return d
        found = next_intact(self.fd, position, end, self.base, expect)
        first = self.base if expect is None else expect
        if found is None:
            d = Damage(position, end, first, None, reason)
        else:
            d = Damage(position, found[0], first, found[1].base_offset, reason)
        self.damage[position] = d
        return d

    def iter_headers(self, start: int, end: int,
                     damaged: Callable[[Damage], None] | None = None,
                     expect: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of the complete batches in ``[start, end)``, headers only:
        no body is read or checksummed (a prefix the view already checked). Raises TornTail or
        CorruptRecordError like ``iter_batches``, and hands a header that does not parse to
        ``damaged`` as it does."""
        pos = start
        buf = b""
        at = start  # file position of buf[0]
        small = True  # batches so far fit many to a chunk: read chunks, else headers alone
        while pos < end:
            p = pos - at
            if p + HEADER_SIZE > len(buf):
                want = min(end - pos, HEADER_CHUNK if small else HEADER_SIZE)
                if want < HEADER_SIZE:
                    raise TornTail(pos, f"{want} trailing bytes, less than a batch header")
                buf = os.pread(self.fd, want, pos)
                at, p = pos, 0
                if len(buf) < HEADER_SIZE:
                    raise TornTail(pos, "file shorter than expected")
            try:
                h = self._header(buf, p, pos, end)
            except CorruptRecordError as e:
                if damaged is None:
                    raise
                d = self.damage_at(pos, end, expect, str(e))
                damaged(d)
                if d.next_offset is None:
                    return
                pos, expect, buf = d.end, d.next_offset, b""
                continue
            if pos + h.size > end:
                raise TornTail(pos, f"batch of {plural(h.size, 'byte')} runs past the end")
            yield pos, h
            expect = h.next_offset
            small = h.size <= HEADER_CHUNK // 8
            pos += h.size

    def key_bytes(self, start: int = 0, end: int | None = None) -> dict[int, int]:
        """Bytes of the data batches in ``[start, end)`` (default: to ``size``) per data key
        version, 0 for plaintext; transaction markers (never encrypted) left out. Headers
        only, as ``iter_headers``."""
        out: dict[int, int] = {}
        for _, h in self.iter_headers(start, self.size if end is None else end):
            if not h.attributes & ATTR_CONTROL:
                out[h.key_version] = out.get(h.key_version, 0) + h.size
        return out

    def _header(self, buf: bytes, p: int, position: int, end: int) -> BatchHeader:
        try:
            return read_header(buf, p, self.where(position))
        except CorruptRecordError:
            if self._zeros_from(position, end):
                raise TornTail(position, "zero-filled tail") from None
            raise

    def _zeros_from(self, position: int, end: int) -> bool:
        while position < end:
            chunk = os.pread(self.fd, min(READ_CHUNK, end - position), position)
            if not chunk or chunk.count(0) != len(chunk):
                return not chunk
            position += len(chunk)
        return True
