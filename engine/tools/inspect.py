"""Looking at segments: a partition's segments as rows (``rivven segment list``) and one segment
file batch by batch (``rivven segment inspect``). Headers only, unless records are asked for."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import CorruptRecordError, DataDirError, plural
from ..format.codecs import IDS
from ..format.decode import body_of, decode_records, layout
from ..format.records import HEADER_SIZE, check_crc, read_header
from ..storage.catalog import TopicMeta
from ..storage.config import effective
from ..storage.files import parse
from ..storage.log import PartitionLog
from ..storage.segment import TornTail


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "backslashreplace")


def inspect_segment(path: str, records: bool = False) -> Iterator[dict[str, Any]]:
    """One dict per batch (and its records with ``records``); stops at unreadable bytes."""
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
                "crc_ok": ok,
            }
            if records and ok:
                body = body_of(buf, 0, h)
                row["records"] = [
                    {"offset": r.offset, "timestamp": r.timestamp, "key": _text(r.key),
                     "value": _text(r.value), "headers": [[k, _text(v)] for k, v in r.headers]}
                    for r in decode_records(body, h, layout(body, h))]
            yield row
            pos += h.size
        if pos < size:
            yield {"position": pos, "error": f"{size - pos} trailing bytes: a torn tail"}
    finally:
        os.close(fd)


def segment_rows(log: PartitionLog) -> list[dict[str, Any]]:
    """Per segment, cold ones first: tier, file, base/last offset, records, bytes, time range
    (a header scan of local segments; cold ones from the tier manifest, records unknown)."""
    p = log.partition
    rows: list[dict[str, Any]] = []
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


def describe_topic(meta: TopicMeta, logs: list[PartitionLog]) -> dict[str, Any]:
    """A topic's configs (with their source) and per partition: offsets, segments, bytes."""
    parts = []
    for log in logs:
        segs = log.all_segments()
        start, end = log.offsets()
        parts.append({"partition": log.partition, "start_offset": start, "end_offset": end,
                      "segments": len(segs), "bytes": sum(s.size for s in segs)})
    return {"topic": meta.name, "id": meta.id, "partitions": meta.partitions,
            "config": [{"key": k, "value": v, "source": s} for k, v, s in effective(meta.config)],
            "partition_info": parts}
