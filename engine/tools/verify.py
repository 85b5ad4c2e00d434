"""Consistency checks of segment files, returned as data (the CLI renders them).

``verify_partition`` reads every batch of every segment (CRC32C, header sanity, offsets
increasing and inside the segment's range), checks every ``.index`` and ``.timeindex`` entry
against the log, and looks for overlaps between segments. It never changes a file; repair is
``recover_segment`` — a separate, explicit step.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import accumulate

from ..errors import CorruptRecordError, InvalidArgument
from ..format.records import HEADER_SIZE, BatchHeader, check_crc, read_header
from ..progress import Progress, counter
from ..storage import files
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.segment import Segment
from ..tiering.status import check_manifests

CHUNK = 8 << 20


@dataclass
class Finding:
    kind: str  # crc | header | torn-tail | offsets | range | overlap | index | timeindex
    path: str
    position: int | None
    message: str
    offsets: tuple[int, int] | None = None
    records: int = 0  # records in the damaged batch(es), when known

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
    valid_end: int = 0  # position after the last good batch before any damage
    findings: list[Finding] = field(default_factory=list)
    batch_starts: list[int] = field(default_factory=list, repr=False)
    batch_bases: list[int] = field(default_factory=list, repr=False)
    batch_max_ts: list[int] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items()
                if k not in ("findings", "batch_starts", "batch_bases", "batch_max_ts")} | {
            "findings": [f.to_json() for f in self.findings]}


def scan_segment(path: str, base_offset: int, end_offset: int | None = None,
                 progress: Callable[[int], None] | None = None,
                 headers: Callable[[int, BatchHeader], None] | None = None) -> SegmentReport:
    """Read every batch of one ``.log``; findings for anything wrong, nothing changed."""
    rep = SegmentReport(path, base_offset)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        rep.bytes = size
        pos = 0
        prev_next = None
        damaged = False
        while pos < size:
            buf = os.pread(fd, min(CHUNK, size - pos), pos)
            p = 0
            while p + HEADER_SIZE <= len(buf):
                at = pos + p
                where = f" in {path} at position {at}"
                try:
                    h = read_header(buf, p, where)
                except CorruptRecordError as e:
                    rest = os.pread(fd, min(size - at, CHUNK), at)
                    kind = "torn-tail" if rest.count(0) == len(rest) else "header"
                    rep.findings.append(Finding(kind, path, at, f"{e}; {size - at} bytes from "
                                                "here to the end cannot be read"))
                    rep.valid_end = rep.valid_end if damaged else at
                    return rep
                if at + h.size > size:
                    rep.findings.append(Finding(
                        "torn-tail", path, at, f"incomplete batch at position {at}: header says "
                        f"{h.size} bytes, {size - at} remain", (h.base_offset, h.last_offset),
                        h.record_count))
                    rep.valid_end = rep.valid_end if damaged else at
                    return rep
                if p + h.size > len(buf):
                    if p == 0:
                        buf = os.pread(fd, h.size, at)
                    else:
                        break
                bad = False
                try:
                    check_crc(buf, p, h, where)
                except CorruptRecordError as e:
                    bad = True
                    rep.findings.append(Finding("crc", path, at, str(e),
                                                (h.base_offset, h.last_offset), h.record_count))
                if not bad:
                    bad = _check_offsets(rep, h, at, prev_next, end_offset)
                if bad:
                    damaged = True
                else:
                    _account(rep, h, at, headers)
                    if not damaged:
                        rep.valid_end = at + h.size
                prev_next = max(prev_next or 0, h.next_offset)
                p += h.size
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


def _check_offsets(rep: SegmentReport, h: BatchHeader, at: int, prev_next: int | None,
                   end_offset: int | None) -> bool:
    path = rep.path
    if h.base_offset < rep.base_offset:
        rep.findings.append(Finding("range", path, at, f"batch offsets {h.base_offset}.."
                                    f"{h.last_offset} start below the segment's base offset "
                                    f"{rep.base_offset}", (h.base_offset, h.last_offset)))
        return True
    if prev_next is not None and h.base_offset < prev_next:
        rep.findings.append(Finding("offsets", path, at, f"batch offsets {h.base_offset}.."
                                    f"{h.last_offset} do not increase (previous batch ended "
                                    f"before {prev_next})", (h.base_offset, h.last_offset)))
        return True
    if end_offset is not None and h.last_offset >= end_offset:
        rep.findings.append(Finding("range", path, at, f"batch offsets {h.base_offset}.."
                                    f"{h.last_offset} reach the next segment's base offset "
                                    f"{end_offset}", (h.base_offset, h.last_offset)))
        return True
    return False


def _account(rep: SegmentReport, h: BatchHeader, at: int,
             headers: Callable[[int, BatchHeader], None] | None) -> None:
    rep.batches += 1
    rep.records += h.record_count
    if rep.first_offset is None:
        rep.first_offset = h.base_offset
    rep.last_offset = h.last_offset
    if h.record_count:
        lo = h.first_timestamp if rep.min_timestamp is None else min(rep.min_timestamp,
                                                                      h.first_timestamp)
        rep.min_timestamp = lo
        rep.max_timestamp = max(rep.max_timestamp or h.max_timestamp, h.max_timestamp)
    rep.batch_starts.append(at)
    rep.batch_bases.append(h.base_offset)
    rep.batch_max_ts.append(h.max_timestamp)
    if headers:
        headers(at, h)


def check_indexes(rep: SegmentReport, directory: str) -> None:
    """Every index entry must point at a batch start with the offset (and time) it claims."""
    base = rep.base_offset
    ipath = files.path(directory, base, files.INDEX)
    if os.path.exists(ipath):
        idx = OffsetIndex(ipath, writable=False)
        try:
            if idx.loaded != os.path.getsize(ipath):
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
    tpath = files.path(directory, base, files.TIMEINDEX)
    if os.path.exists(tpath):
        tidx = TimeIndex(tpath, writable=False)
        before = list(accumulate(rep.batch_max_ts, max, initial=-1))  # max ts before batch i
        try:
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


def verify_partition(directory: str, progress: Callable[[int], None] | None = None
                     ) -> list[SegmentReport]:
    """Reports for every segment of one partition directory, in offset order."""
    bases = files.segment_bases(directory)
    reports = []
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        path = files.path(directory, base, files.LOG)
        rep = scan_segment(path, base, nxt, progress)
        for _ in range(5):  # a torn tail of the active segment may be a write in flight
            if nxt is not None or not any(f.kind == "torn-tail" for f in rep.findings):
                break
            time.sleep(0.05)
            rep = scan_segment(path, base, nxt)
        check_indexes(rep, directory)
        reports.append(rep)
    return reports


def verify(data_dir: str, targets: list[str], cold: bool = False,
           progress: Progress | None = None) -> dict:
    """Check every segment of ``targets`` (see ``resolve_targets``; default: the data dir),
    and with ``cold`` every cold copy against its tier manifest. Returns the report as data:
    segments, batches, records, bytes, ok, findings (and cold). Changes nothing."""
    parts = resolve_targets(data_dir, targets)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _ in parts for f in os.listdir(d)
                if f.endswith(files.LOG))
    advance = counter(progress, "verifying", total)
    reports = []
    for d, only in parts:
        for rep in verify_partition(d, advance):
            if not only or rep.path in only:
                reports.append(rep)
    findings = [f.to_json() for r in reports for f in r.findings]
    doc = {"segments": len(reports), "batches": sum(r.batches for r in reports),
           "records": sum(r.records for r in reports), "bytes": sum(r.bytes for r in reports),
           "ok": not findings, "findings": findings}
    if cold:
        doc["cold"] = check_manifests([d for d, _ in parts], progress)
        doc["ok"] = doc["ok"] and not doc["cold"]["findings"]
    return doc


def recover_segment(path: str, base_offset: int, truncate_corrupt: bool,
                    dry_run: bool) -> dict:
    """Cut a torn tail (and, with ``truncate_corrupt``, everything from the first damage on),
    then rebuild the indexes. Returns what was (or would be) done."""
    rep = scan_segment(path, base_offset)
    damage = [f for f in rep.findings if f.kind != "torn-tail"]
    torn = [f for f in rep.findings if f.kind == "torn-tail"]
    cut_at = None
    dropped = 0
    if damage and truncate_corrupt:
        cut_at = damage[0].position
        dropped = _records_after(path, base_offset, cut_at)
    elif torn and not damage:
        cut_at = torn[0].position
    result = {"path": path, "size": rep.bytes, "truncate_at": cut_at,
              "bytes_removed": (rep.bytes - cut_at) if cut_at is not None else 0,
              "records_removed": dropped, "unrepaired": [f.to_json() for f in damage]
              if not truncate_corrupt else [], "reindexed": not dry_run}
    if dry_run:
        result["reindexed"] = False
        return result
    directory = os.path.dirname(path)
    if cut_at is not None:
        fd = files.open_file(path, os.O_RDWR)  # (never a link's target)
        try:
            os.ftruncate(fd, cut_at)
            os.fsync(fd)
        finally:
            os.close(fd)
    seg = Segment(directory, base_offset, writable=True)
    try:
        seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True)
        seg.sync_all()
    finally:
        seg.close()
    return result


def _records_after(path: str, base_offset: int, position: int) -> int:
    """Records in complete batches from ``position`` on (what a cut there drops)."""
    count = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = position
        while pos + HEADER_SIZE <= size:
            raw = os.pread(fd, HEADER_SIZE, pos)
            try:
                h = read_header(raw, 0)
            except CorruptRecordError:
                break
            count += h.record_count
            pos += h.size
    finally:
        os.close(fd)
    return count


def resolve_targets(data_dir: str, targets: list[str]) -> list[tuple[str, list[str]]]:
    """Targets (topic names, partition dirs, topic dirs, .log files or a data dir) to
    ``(partition_dir, [log files or []=all])``. Raises InvalidArgument for unknown targets."""
    out: dict[str, list[str]] = {}

    def add_partitions(topic_dir: str) -> None:
        for name in sorted(os.listdir(topic_dir)):
            d = os.path.join(topic_dir, name)
            if name.startswith("partition-") and os.path.isdir(d):
                out.setdefault(d, [])

    if not targets:
        targets = [data_dir]
    for t in targets:
        topic_dir = os.path.join(data_dir, "topics", t)
        if os.path.sep not in t and os.path.isdir(topic_dir):
            add_partitions(topic_dir)
        elif os.path.isfile(t) and t.endswith(files.LOG):
            d = os.path.dirname(os.path.abspath(t))
            if out.get(d) != []:
                out.setdefault(d, []).append(os.path.abspath(t))
        elif os.path.isdir(os.path.join(t, "topics")):
            for name in sorted(os.listdir(os.path.join(t, "topics"))):
                add_partitions(os.path.join(t, "topics", name))
        elif os.path.isdir(t) and files.segment_bases(t):
            out[os.path.abspath(t)] = []
        elif os.path.isdir(t) and any(n.startswith("partition-") for n in os.listdir(t)):
            add_partitions(t)
        else:
            raise InvalidArgument(f"{t!r} is not a topic, a partition directory, a .log file or a "
                                  "data dir; check the name or path")
    return sorted(out.items(), key=lambda kv: _natural(kv[0]))


def _natural(path: str) -> tuple:
    head, _, tail = path.rpartition("partition-")
    return (head, int(tail)) if tail.isdigit() else (path, 0)
