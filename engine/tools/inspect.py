"""Looking at segments: a partition's segments as rows (``rivven segment list``), one segment
file batch by batch and an index file entry by entry (``rivven segment inspect``). Headers
only, unless records are asked for."""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from ..errors import CorruptRecordError, DataDirError, plural
from ..format.codecs import IDS
from ..format.decode import Opener, body_of, decode_records, layout
from ..format.records import HEADER_SIZE, check_crc, read_header
from ..segments import filenames
from ..segments.filenames import parse
from ..segments.index import OffsetIndex, TimeIndex
from ..segments.segment import TornTail
from ..storage.catalog import TopicMeta
from ..storage.config import effective
from ..storage.log import PartitionLog
from .results import PartitionInfo, SegmentRow, TopicDescription


def inspect_segment(path: str, records: bool = False, opener: Opener | None = None
                    ) -> Iterator[dict[str, Any]]:
    """One dict per batch (and its records with ``records``: keys, values and header values
    as bytes, for the caller to show in the encoding it wants); stops at unreadable bytes.
    Encrypted batches' records need ``opener`` (KeyUnavailable without)."""
    name = parse(os.path.basename(path))
    if name is None or name[1] != ".log":
        raise DataDirError(f"{path} is not a segment .log file (20-digit base offset + .log)")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise DataDirError(f"cannot read {path}: {e.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + HEADER_SIZE <= size:
            raw = os.pread(fd, HEADER_SIZE, pos)
            try:
                h = read_header(raw, 0, f" in {path} at position {pos}")
            except CorruptRecordError as e:
                yield {"position": pos, "error": str(e)}
                return
            if pos + h.size > size:
                yield {"position": pos, "error": f"incomplete batch ({plural(h.size, 'byte')}, "
                       f"{size - pos} remain): a torn tail"}
                return
            buf = os.pread(fd, h.size, pos)
            try:
                check_crc(buf, 0, h)
                ok = True
            except CorruptRecordError:
                ok = False
            row: dict[str, Any] = {
                "position": pos, "base_offset": h.base_offset, "last_offset": h.last_offset,
                "count": h.record_count, "codec": IDS.get(h.codec, str(h.codec)),
                "bytes": h.size, "body_bytes": h.body_length, "stored_bytes": h.stored_length,
                "first_timestamp": h.first_timestamp, "max_timestamp": h.max_timestamp,
                "producer_id": h.producer_id, "attributes": h.attributes, "crc": h.crc,
                "crc_ok": ok, "key_version": h.key_version,
            }
            if records and ok:
                body = body_of(buf, 0, h, f" in {path} at position {pos}", opener)
                row["records"] = [
                    {"offset": r.offset, "timestamp": r.timestamp, "key": r.key,
                     "value": r.value, "headers": [[k, v] for k, v in r.headers]}
                    for r in decode_records(body, h, layout(body, h))]
            yield row
            pos += h.size
        if pos < size:
            yield {"position": pos, "error": f"{size - pos} trailing bytes: a torn tail"}
    finally:
        os.close(fd)


def inspect_index(path: str) -> Iterator[dict[str, Any]]:
    """One dict per entry of a ``.index`` or ``.timeindex`` file, as ``kafka-dump-log`` prints
    them: ``entry`` (its number), ``relative_offset`` and ``offset``, then ``position`` (an
    offset index) or ``timestamp`` (a time index), and ``points_at_batch``: whether the
    segment's ``.log`` has a batch with that base offset (at that position); a time index entry
    also says ``timestamp_matches``: whether its time is the largest before that batch, as
    ``TimeIndex`` requires. None where the ``.log`` cannot be read. Entries are read a chunk at
    a time; a partial entry at the end is a row with ``error``."""
    name = parse(os.path.basename(path))
    if name is None or name[1] not in (filenames.INDEX, filenames.TIMEINDEX):
        raise DataDirError(f"{path} is not a segment index (20-digit base offset + .index or "
                           ".timeindex)")
    base, suffix = name
    entry = (OffsetIndex if suffix == filenames.INDEX else TimeIndex).ENTRY
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise DataDirError(f"cannot read {path}: {e.strerror}") from None
    try:
        scanned = _batches(filenames.path(os.path.dirname(path), base, filenames.LOG))
        starts = None if scanned is None else scanned[0]
        if scanned is not None:
            bases = list(scanned[0].values())
            before = list(accumulate(scanned[1], max, initial=-1))  # max time before batch i
        size = os.fstat(fd).st_size
        n = pos = 0
        while pos + entry.size <= size:
            data = os.pread(fd, min(size - pos, 4096 * entry.size) // entry.size * entry.size,
                            pos)
            if not data:
                break
            for a, b in entry.iter_unpack(data):
                if suffix == filenames.INDEX:
                    row: dict[str, Any] = {"entry": n, "relative_offset": a, "offset": base + a,
                                           "position": b,
                                           "points_at_batch": None if starts is None
                                           else starts.get(b) == base + a}
                else:
                    row = {"entry": n, "relative_offset": b, "offset": base + b, "timestamp": a,
                           "points_at_batch": None, "timestamp_matches": None}
                    if starts is not None:
                        i = bisect_left(bases, base + b)
                        found = i < len(bases) and bases[i] == base + b
                        row["points_at_batch"] = found
                        row["timestamp_matches"] = found and i > 0 and before[i] == a
                yield row
                n += 1
            pos += len(data)
        if pos < size:
            yield {"entry": n, "error": f"a partial entry ({size - pos} of {plural(entry.size, 'byte')}) at "
                   f"position {pos}: a torn write, ignored by readers"}
    finally:
        os.close(fd)


def _batches(log_path: str) -> tuple[dict[int, int], list[int]] | None:
    """Position -> base offset of every readable batch of a ``.log`` in file order, and their
    max timestamps (headers only); None when the file cannot be read."""
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except OSError:
        return None
    out: dict[int, int] = {}
    max_ts: list[int] = []
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + HEADER_SIZE <= size:
            try:
                h = read_header(os.pread(fd, HEADER_SIZE, pos), 0)
            except CorruptRecordError:
                break
            out[pos] = h.base_offset
            max_ts.append(h.max_timestamp)
            pos += h.size
    finally:
        os.close(fd)
    return out, max_ts

def segment_rows(log: PartitionLog) -> list[SegmentRow]:
    """Per segment, cold ones first: tier, file, base/last offset, records, bytes, time range
    (a header scan of local segments; cold ones from the tier manifest, records unknown)."""
    p = log.partition
    rows: list[SegmentRow] = []
    for e in log.cold_entries():
        rows.append({"partition": p, "tier": "cold", "file": e.url(".log"),
                     "base_offset": e.base_offset, "last_offset": e.next_offset - 1,
                     "records": None, "bytes": e.bytes, "min_timestamp": None,
                     "max_timestamp": e.max_timestamp})
    for seg in log.all_segments():
        records = 0
        last = lo = hi = damage = None
        try:
            for ref in seg.iter_batches(0, seg.size, crc=False):
                h = ref.header
                records += h.record_count
                last = h.last_offset
                lo = h.first_timestamp if lo is None else min(lo, h.first_timestamp)
                hi = h.max_timestamp if hi is None else max(hi, h.max_timestamp)
        except TornTail as t:  # (a sealed segment's size is its file size: junk at its end)
            damage = f"{t.reason} at position {t.position}"
        except CorruptRecordError as e:
            damage = str(e)
        rows.append({"partition": p, "tier": "local", "file": seg.path, "base_offset": seg.base,
                     "last_offset": last, "records": records, "bytes": seg.size,
                     "min_timestamp": lo, "max_timestamp": hi, "damage": damage})
    return rows


def describe_topic(meta: TopicMeta, logs: list[PartitionLog]) -> TopicDescription:
    """A topic's configs (with their source) and per partition: offsets, segments, bytes."""
    parts: list[PartitionInfo] = []
    for log in logs:
        segs = log.all_segments()
        start, end = log.offsets()
        parts.append({"partition": log.partition, "start_offset": start, "end_offset": end,
                      "segments": len(segs), "bytes": sum(s.size for s in segs)})
    return {"topic": meta.name, "id": meta.id, "partitions": meta.partitions,
            "config": [{"key": k, "value": v, "source": s} for k, v, s in effective(meta.config)],
            "partition_info": parts}
