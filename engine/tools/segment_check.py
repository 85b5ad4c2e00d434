"""One segment checked: its ``.log`` read batch by batch (``scan_segment``: every header
field in range, CRC32C, the body decoded as a reader would, offsets increasing and inside
the segment, reading on past damage where an intact batch follows, as readers do), then its
``.index``, ``.timeindex`` and ``.txnindex`` against what the scan found. Findings as data
(``Finding``, ``SegmentReport``); nothing is changed. The partition and the data dir around
it are verify.py's."""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate

from ..errors import CorruptRecordError, DamagedMetadata, plural
from ..format import control
from ..format.decode import Opener, check_body
from ..format.records import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    MAX_BATCH_BYTES,
    MAX_RELATIVE_OFFSET,
    BatchHeader,
    check_crc,
    crc_intact,
    read_header,
)
from ..segments import filenames, gaps, txn_index
from ..segments.damage import next_intact
from ..segments.index import OffsetIndex, TimeIndex, max_entries

CHUNK = 8 << 20
# findings about a batch's own bytes: what ``segment recover --truncate-corrupt`` cuts at
CUTTABLE = ("crc", "header", "body", "offsets", "range", "torn-tail", "plaintext")


@dataclass
class Finding:
    # crc | header | body | torn-tail | offsets | range | gap | index | timeindex | txnindex
    # | checkpoint | plaintext (where every batch is sealed) | encryption (encryption.json)
    kind: str
    path: str
    position: int | None
    message: str
    offsets: tuple[int, int] | None = None
    records: int = 0  # records in the damaged batch(es), when known
    # damage an intact batch follows: where that batch starts (reads step over the damage
    # to it; a repair cuts out the bytes in between), and ``offsets`` are those between the
    # intact batches around it; None: nothing intact follows in this file
    resume_at: int | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        d["offsets"] = list(self.offsets) if self.offsets else None
        return d


@dataclass
class SegmentReport:
    path: str
    base_offset: int
    bytes: int = 0
    batches: int = 0
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    valid_end: int = 0  # position after the last good batch before damage nothing follows
    findings: list[Finding] = field(default_factory=list)
    known_gaps: list[dict] = field(default_factory=list)  # recorded gaps in its offsets
    batch_starts: list[int] = field(default_factory=list, repr=False)
    batch_bases: list[int] = field(default_factory=list, repr=False)
    batch_nexts: list[int] = field(default_factory=list, repr=False)
    batch_ends: list[int] = field(default_factory=list, repr=False)
    batch_max_ts: list[int] = field(default_factory=list, repr=False)
    # transactional batches in order: (offset, producer id, "data" | "abort" | "commit")
    txn_events: list[tuple[int, int, str]] = field(default_factory=list, repr=False)
    aborts: list[tuple[int, int]] = field(default_factory=list, repr=False)  # that ended one
    # where reading went on after damage: position of the intact batch -> its base offset
    resumed: dict[int, int] = field(default_factory=dict, repr=False)

    _PRIVATE = ("findings", "batch_starts", "batch_bases", "batch_nexts", "batch_ends",
                "batch_max_ts", "txn_events", "aborts", "resumed")

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in self._PRIVATE} | {
            "findings": [f.to_json() for f in self.findings]}

    @property
    def damaged(self) -> bool:
        return any(f.kind in CUTTABLE for f in self.findings)

    @property
    def broken(self) -> bool:
        """Damage that ends what can be read of the file (no intact batch follows it)."""
        return any(f.kind in CUTTABLE and f.resume_at is None for f in self.findings)

    def next_at(self, position: int) -> int | None:
        """The offset that follows the good batches before ``position``, when ``position`` is
        the end of one of them (or 0) and no damage that nothing intact follows lies before
        it; else None."""
        if position == 0:
            return self.base_offset
        if position in self.resumed and position <= self.valid_end:
            return self.resumed[position]
        i = bisect_left(self.batch_ends, position)
        if i < len(self.batch_ends) and self.batch_ends[i] == position <= self.valid_end:
            return self.batch_nexts[i]
        return None


def scan_segment(path: str, base_offset: int, end_offset: int | None = None,
                 progress: Callable[[int], None] | None = None,
                 headers: Callable[[int, BatchHeader], None] | None = None,
                 gaps_below: int = 0, opener: Opener | None = None) -> SegmentReport:
    """Read every batch of one ``.log``; findings for anything wrong, nothing changed.
    ``end_offset`` is the next segment's base offset; a gap between batches is a finding
    unless it ends at or below ``gaps_below`` (compacted, or below the log start). An
    encrypted batch's body is checked only with an ``opener`` (its tag verified, then as any
    body): without one, its header, CRC and padding."""
    rep = SegmentReport(path, base_offset)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        rep.bytes = size
        pos = 0
        expect: int | None = base_offset  # where the next batch's offsets should start
        damaged = False
        while pos < size:
            buf = os.pread(fd, min(CHUNK, size - pos), pos)
            p = 0
            resume = -1
            while p + HEADER_SIZE <= len(buf):
                at = pos + p
                where = f" in {path} at position {at}"
                try:
                    h = read_header(buf, p, where)
                except CorruptRecordError as e:
                    whole = whole_batch_size(fd, buf[p:p + HEADER_SIZE], at, size)
                    if not whole:
                        rest = os.pread(fd, min(size - at, CHUNK), at)
                        if rest.count(0) == len(rest):
                            rep.findings.append(Finding(
                                "torn-tail", path, at, f"{e}; {plural(size - at, 'byte')} from "
                                "here to the end cannot be read"))
                            rep.valid_end = rep.valid_end if damaged else at
                            return rep
                    f = Finding("header", path, at, f"{e} (its CRC matches: it was written "
                                "like this)" if whole else str(e))
                    rep.findings.append(f)
                    found = _resume(f, fd, at, size, base_offset, expect, None)
                    if found is None:
                        if not whole:
                            f.message += (f"; {plural(size - at, 'byte')} from here to the end "
                                          "cannot be read")
                            rep.valid_end = rep.valid_end if damaged else at
                            return rep
                        rep.valid_end = rep.valid_end if damaged else at
                        damaged = True
                        expect = None
                        p += whole
                        continue
                    resume, expect = found
                    rep.resumed[resume] = expect
                    break
                if at + h.size > size:
                    rep.findings.append(Finding(
                        "torn-tail", path, at, f"incomplete batch at position {at}: header says "
                        f"{plural(h.size, 'byte')}, {size - at} remain", (h.base_offset, h.last_offset),
                        h.record_count))
                    rep.valid_end = rep.valid_end if damaged else at
                    return rep
                if p + h.size > len(buf):
                    if p == 0:
                        buf = os.pread(fd, h.size, at)
                    else:
                        break
                bad = _bytes_problem(path, buf, p, h, at, where, opener)
                if bad is not None:
                    rep.findings.append(bad)
                    found = _resume(bad, fd, at, size, base_offset, expect, h)
                    if found is not None:
                        resume, expect = found
                        rep.resumed[resume] = expect
                        break
                bad = bad or _offsets_problem(rep, h, at, expect, end_offset)
                if bad is not None:
                    if bad not in rep.findings:
                        rep.findings.append(bad)
                    rep.valid_end = rep.valid_end if damaged else at
                    damaged = True
                    expect = None  # its offsets are not to be trusted: no gap or order check
                else:
                    if h.is_control:
                        kind = control.NAMES[control.marker_type(h, buf, p)].lower()
                        rep.txn_events.append((h.base_offset, h.producer_id, kind))
                    elif h.is_transactional:
                        rep.txn_events.append((h.base_offset, h.producer_id, "data"))
                    if expect is not None and h.base_offset > max(expect, gaps_below):
                        rep.findings.append(gap(
                            path, at, max(expect, gaps_below), h.base_offset - 1,
                            f"before the batch at offsets {h.base_offset}..{h.last_offset}"))
                    _account(rep, h, at, headers)
                    if not damaged:
                        rep.valid_end = at + h.size
                    expect = h.next_offset
                p += h.size
            if resume >= 0:
                if progress:
                    progress(resume - pos)
                pos = resume
                continue
            if p == 0:
                break
            pos += p
            if progress:
                progress(p)
        if pos < size:
            rep.findings.append(Finding("torn-tail", path, pos,
                                        f"{size - pos} trailing bytes, less than a batch header"))
        return rep
    finally:
        if fd >= 0:
            os.close(fd)


def _resume(f: Finding, fd: int, at: int, size: int, base: int, expect: int | None,
            h: BatchHeader | None) -> tuple[int, int] | None:
    """Where reading goes on after the damaged batch at ``at`` (``f`` its finding; ``h`` its
    header when it parses): the next intact batch, as readers find it (engine.segments.
    damage.next_intact). Sets the finding's ``resume_at`` and ``offsets`` (those between
    the intact batches around it) and returns ``(position, base offset)`` of that batch;
    None when nothing intact follows."""
    found = next_intact(fd, at, size, base, expect)
    if found is None:
        return None
    nxt, nh = found
    first = expect if expect is not None else (h.base_offset if h is not None else nh.base_offset)
    f.resume_at = nxt
    f.offsets = (min(first, nh.base_offset), nh.base_offset - 1) if first < nh.base_offset else None
    return nxt, nh.base_offset


def whole_batch_size(fd: int, head: bytes, at: int, size: int) -> int:
    """The size of the batch at ``at`` (its header ``head``) when its bytes are whole and its
    CRC matches whatever its fields say; else 0."""
    n = int.from_bytes(head[8:12], "little", signed=True) + LENGTH_PREFIX
    if not HEADER_SIZE <= n <= min(size - at, MAX_BATCH_BYTES) or n & 7:
        return 0
    return n if crc_intact(os.pread(fd, n, at)) else 0


def _bytes_problem(path: str, buf: bytes, p: int, h: BatchHeader, at: int, where: str,
                   opener: Opener | None = None) -> Finding | None:
    """The batch's CRC, then its body as a reader would decode it (an encrypted one's only
    with an ``opener``: its padding otherwise)."""
    try:
        check_crc(buf, p, h, where)
    except CorruptRecordError as e:
        return Finding("crc", path, at, str(e), (h.base_offset, h.last_offset), h.record_count)
    if h.is_encrypted and opener is None:
        end = p + HEADER_SIZE + h.stored_length
        if any(bytes(memoryview(buf)[end:p + h.size])):
            return Finding("body", path, at, f"non-zero padding after the body (batch at "
                           f"offsets {h.base_offset}..{h.last_offset}){where}",
                           (h.base_offset, h.last_offset), h.record_count)
        return None
    try:
        check_body(buf, p, h, f" (batch at offsets {h.base_offset}..{h.last_offset}){where}",
                   opener)
        if h.is_control:
            control.marker_type(h, buf, p, where)
    except CorruptRecordError as e:
        return Finding("body", path, at, str(e), (h.base_offset, h.last_offset), h.record_count)
    return None


def _offsets_problem(rep: SegmentReport, h: BatchHeader, at: int, expect: int | None,
                     end_offset: int | None) -> Finding | None:
    path = rep.path
    offs = (h.base_offset, h.last_offset)
    what = f"batch offsets {h.base_offset}..{h.last_offset}"
    if h.base_offset < rep.base_offset:
        return Finding("range", path, at, f"{what} start below the segment's base offset "
                       f"{rep.base_offset}", offs)
    if h.next_offset - rep.base_offset > MAX_RELATIVE_OFFSET:
        return Finding("range", path, at, f"{what} lie more than {MAX_RELATIVE_OFFSET} past the "
                       f"segment's base offset {rep.base_offset}", offs)
    if expect is not None and h.base_offset < expect:
        return Finding("offsets", path, at, f"{what} do not increase (the previous batch "
                       f"ended before {expect})", offs)
    if end_offset is not None and h.last_offset >= end_offset:
        return Finding("range", path, at, f"{what} reach the next segment's base offset "
                       f"{end_offset}", offs)
    return None


def _account(rep: SegmentReport, h: BatchHeader, at: int,
             headers: Callable[[int, BatchHeader], None] | None) -> None:
    rep.batches += 1
    rep.records += h.record_count
    if rep.first_offset is None:
        rep.first_offset = h.base_offset
    rep.last_offset = h.last_offset
    lo = h.first_timestamp if rep.min_timestamp is None else min(rep.min_timestamp,
                                                                  h.first_timestamp)
    rep.min_timestamp = lo
    rep.max_timestamp = max(rep.max_timestamp or h.max_timestamp, h.max_timestamp)
    rep.batch_starts.append(at)
    rep.batch_bases.append(h.base_offset)
    rep.batch_nexts.append(h.next_offset)
    rep.batch_ends.append(at + h.size)
    rep.batch_max_ts.append(h.max_timestamp)
    if headers:
        headers(at, h)

def check_indexes(rep: SegmentReport, directory: str) -> None:
    """Every index entry must point at a batch start with the offset (and time) it claims."""
    base = rep.base_offset
    ipath = filenames.path(directory, base, filenames.INDEX)
    limit = max_entries(rep.bytes)  # (a bigger index is not read: see Index.oversized)
    if os.path.exists(ipath):
        idx = OffsetIndex(ipath, writable=False, max_entries=limit)
        try:
            if idx.oversized:
                rep.findings.append(Finding(
                    "index", ipath, 0, "index has more entries than the "
                    f"{plural(len(rep.batch_starts), 'batch', 'batches')} of {rep.path}"))
            elif idx.loaded != os.path.getsize(ipath):
                rep.findings.append(Finding("index", ipath, idx.loaded,
                                            "index ends with a partial entry"))
            prev = -1
            for n, (rel, pos) in enumerate(zip(idx.keys, idx.values)):
                i = bisect_left(rep.batch_starts, pos)
                ok = (i < len(rep.batch_starts) and rep.batch_starts[i] == pos
                      and rep.batch_bases[i] == base + rel and rel > prev)
                if not ok:
                    rep.findings.append(Finding(
                        "index", ipath, n * 8, f"entry {n} (offset {base + rel} -> position "
                        f"{pos}) does not point at that batch in {rep.path}"))
                    break
                prev = rel
        finally:
            idx.close()
    tpath = filenames.path(directory, base, filenames.TIMEINDEX)
    if os.path.exists(tpath):
        tidx = TimeIndex(tpath, writable=False, max_entries=limit)
        before = list(accumulate(rep.batch_max_ts, max, initial=-1))  # max ts before batch i
        try:
            if tidx.oversized:
                rep.findings.append(Finding("timeindex", tpath, 0, "time index has more "
                                            f"entries than the batches of {rep.path}"))
            for n, (ts, rel) in enumerate(zip(tidx.keys, tidx.values)):
                i = bisect_left(rep.batch_bases, base + rel)
                ok = i < len(rep.batch_bases) and rep.batch_bases[i] == base + rel and i > 0
                if ok:
                    ok = before[i] == ts
                if not ok:
                    rep.findings.append(Finding(
                        "timeindex", tpath, n * 12, f"entry {n} (time {ts} -> offset "
                        f"{base + rel}) does not match the batches of {rep.path}"))
                    break
        finally:
            tidx.close()


def check_txn_index(rep: SegmentReport, directory: str, vouched: int,
                    known: Sequence[gaps.Gap] = ()) -> None:
    """The ``.txnindex`` must hold one entry per ABORT marker of the segment below
    ``vouched`` (the newest producer-state snapshot: entries are written before it; markers
    after it are known from the log), each naming that marker's producer id and offset, and
    nothing that is not such a marker (or a marker a repair cut out: in a ``known`` gap)."""
    tpath = filenames.path(directory, rep.base_offset, filenames.TXNINDEX)
    try:
        entries, _ = txn_index.read_entries(tpath, rep.base_offset)
    except DamagedMetadata as e:
        rep.findings.append(Finding("txnindex", tpath, None, str(e)))
        return
    if rep.damaged:
        return  # (markers after the damage were not read: nothing to compare with)
    have = {(e.producer_id, e.last_offset) for e in entries}
    want = set(rep.aborts)
    markers = {(pid, off) for off, pid, kind in rep.txn_events if kind == "abort"}
    for pid, off in sorted({a for a in want - have if a[1] < vouched}, key=lambda x: x[1]):
        rep.findings.append(Finding("txnindex", tpath, None, f"the ABORT marker of producer "
                                    f"{pid} at offset {off} has no entry: read_committed "
                                    "readers would see that transaction's records"))
    for pid, off in sorted(have - markers, key=lambda x: x[1]):
        if any(g.first <= off <= g.last for g in known):
            continue
        rep.findings.append(Finding("txnindex", tpath, None, f"entry for producer {pid} at "
                                    f"offset {off} names no ABORT marker of {rep.path}"))


def gap(path: str, position: int | None, lo: int, hi: int, where: str) -> Finding:
    return Finding("gap", path, position, f"offsets {lo}..{hi} are missing {where}: readers "
                   "skip them", (lo, hi))
