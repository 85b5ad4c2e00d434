"""Compaction's cleaner: which records survive, and writing the cleaned segments.

``survivor_offsets`` is the straightforward reference (a dict of key -> last offset) that the
Spark job is measured against; ``write_group`` turns one group of source segments into one
cleaned segment in a staging folder — the same code in process and in Spark executors. Nothing
here touches a live partition: the swap goes through PartitionLog.replace_segments
(engine.maintenance.compaction.swap).

Transactions follow Kafka's cleaner (``TxnRules``, from the plan): the records of aborted
transactions never survive; a committed transaction's surviving records are written as plain
ones, so after the first pass that covers a transaction's marker no data of it is left in the
log; the marker itself is kept until ``delete.retention.ms`` after that pass (the tombstones'
delete horizon, ``tombstone_bound``), and for good while it is its producer's last batch (its
epoch fences zombies when the producer state is rebuilt from the log). A cleaned segment's
``.txnindex`` holds the entry of each ABORT marker it keeps, nothing else.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..errors import RivvenError
from ..format.arrow import batch_columns
from ..format.decode import Opener, body_of, decode_columns, layout
from ..format.encode import encode_batch
from ..format.records import ATTR_CODEC, ATTR_EXPLICIT_OFFSETS, ATTR_HAS_HEADERS, ATTR_VALUE_NULLS
from ..fs import guard
from ..segments import filenames, txn_index
from ..segments.damage import refuse_damage
from ..segments.segment import Segment
from ..segments.txn_index import AbortedTxn
from ..txn.isolation import Aborted, hidden


class CompactionError(RivvenError):
    pass


class CompactionConflict(CompactionError):
    """Nothing was swapped: the partition's segments changed since the pass planned (another
    pass, or retention, got there first); the next pass plans again."""


Seal = Callable[[bytearray], bytearray]  # a plaintext batch -> the same batch encrypted


class TxnRules:
    """What a pass does with the transaction markers of a partition (picklable: it travels to
    Spark executors in the plan). A marker below ``bound`` (the tombstone bound: a pass at
    least ``delete.retention.ms`` ago covered it, and left no data of its transaction) goes,
    unless its offset is in ``keep`` (its producer's last batch); every other one is copied
    as it is. ``aborted``: the aborted transactions ``[producer id, first, last, lso]`` whose
    markers lie in the cleaned range (their ``.txnindex`` entries, written anew beside the
    markers kept). None of them given (``TxnRules()``): every marker is kept."""

    def __init__(self, bound: int = 0, keep: Iterable[int] = (),
                 aborted: Iterable[Sequence[int]] = ()) -> None:
        self.bound = bound
        self.keep = frozenset(int(o) for o in keep)
        self.aborted = {int(a[2]): AbortedTxn(*(int(x) for x in a)) for a in aborted}

    @classmethod
    def of_plan(cls, plan: Any) -> TxnRules:
        """The rules of a partition's compaction plan (engine.maintenance.compaction)."""
        return cls(plan["tombstone_bound"], plan.get("markers_kept", ()),
                   plan.get("aborted_txns", ()))

    def keeps(self, offset: int) -> bool:
        return offset >= self.bound or offset in self.keep


def scan_keys(segs: Iterable[dict[str, Any]], aborted: Aborted | None = None,
              opener: Opener | None = None) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(offset, key, is_tombstone)`` of every record of the given segment files, but for
    transaction markers and the records of ``aborted`` transactions (never survivors: Kafka's
    cleaner drops them); ``opener`` opens encrypted batches."""
    for s in segs:
        seg = Segment(os.path.dirname(s["path"]), s["base_offset"], writable=False)
        try:
            for ref in seg.iter_batches(0, seg.file_size(),
                                        damaged=refuse_damage(seg.path, "compaction")):
                h = ref.header
                if hidden(h, aborted):
                    continue
                body = body_of(ref.buf, ref.start, h, seg.where(ref.position), opener)
                offs, _, keys, values, _ = decode_columns(body, h, layout(body, h))
                for o, k, v in zip(offs, keys, values):
                    yield o, k, v is None
        finally:
            seg.close()


def survivor_offsets(records: Iterable[tuple[int, bytes | None, bool]], tombstone_bound: int,
                     where: str = "") -> tuple[set[int], dict[str, int]]:
    """The straightforward reference: a dict of key -> last (offset, tombstone)."""
    last: dict[bytes, tuple[int, bool]] = {}
    n = tombs = 0
    for o, k, dead in records:
        if k is None:
            raise CompactionError(f"record at offset {o}{where} has no key: a compacted topic "
                                  "needs a key on every record (set cleanup.policy=delete or "
                                  "delete the records with 'rivven delete-records')")
        last[k] = (o, dead)
        n += 1
        tombs += dead
    keep = {o for o, dead in last.values() if not (dead and o < tombstone_bound)}
    kept_tombs = sum(1 for o, dead in last.values() if dead and o >= tombstone_bound)
    return keep, {"records_in": n, "keys": len(last), "tombstones_in": tombs,
                  "tombstones_kept": kept_tombs}


def write_group(group: list[dict[str, Any]], keep: Callable[[Any], Any], out_dir: str,
                opener: Opener | None = None, seal: Seal | None = None,
                txn: TxnRules | None = None) -> dict[str, Any]:
    """Write the survivors of one group of source segments as one segment in ``out_dir``
    (named after the group's first segment, indexes rebuilt, fsynced).

    ``keep(offsets)`` returns booleans (a list or a pyarrow BooleanArray) for a batch's
    offsets. A batch whose records all survive is copied byte for byte without decoding; a
    partly surviving one is re-encoded from its Arrow columns (only the survivors are
    touched), keeping offsets (as explicit deltas), timestamps, headers and codec.
    Aborted records are never survivors (``scan_keys``), and the surviving records of
    transactional batches are written as plain ones; transaction markers are kept or dropped
    by ``txn`` (default: all kept), and the ``.txnindex`` is written for the ABORT markers
    kept. Encrypted batches are opened with ``opener``; a re-encoded batch is sealed with
    ``seal`` (the topic's current data key) when given (a batch copied whole keeps its own).
    """
    base = group[0]["base_offset"]
    work = work_dir(out_dir)
    txn = txn if txn is not None else TxnRules()
    stats: dict[str, Any] = {
        "base_offset": base, "bytes_in": 0, "bytes_out": 0, "records_in": 0, "records_out": 0,
        "tombstones_in": 0, "batches_copied": 0, "batches_rewritten": 0, "min_tombstone": None,
        "markers_in": 0, "markers_kept": 0}
    entries: list[AbortedTxn] = []  # of the ABORT markers kept, in offset order
    out = Segment(work, base, writable=True, create=True)
    try:
        pos = 0
        prev_end = base
        for s in group:
            src = Segment(os.path.dirname(s["path"]), s["base_offset"], writable=False)
            try:
                size = src.file_size()
                stats["bytes_in"] += size
                for ref in src.iter_batches(0, size, damaged=refuse_damage(src.path, "compaction")):
                    h = ref.header
                    if h.base_offset < max(prev_end, s["base_offset"]) or \
                            h.next_offset > s["next_offset"]:
                        # overlapping segments (a half-done swap): never write offsets twice
                        raise CompactionError(
                            f"batch at offsets {h.base_offset}..{h.last_offset} of {s['path']} "
                            f"is outside {max(prev_end, s['base_offset'])}..{s['next_offset']}"
                            " (segments overlap: an interrupted swap?); nothing was swapped")
                    prev_end = h.next_offset
                    if h.is_control:
                        data, n_keep = _marker(ref, txn, stats, entries), 0
                    else:
                        data, n_keep = _clean_batch(ref, keep, stats, opener, seal)
                    if data:
                        out.write(data, pos)
                        pos += len(data)
                        stats["records_out"] += n_keep
            finally:
                src.close()
        out.rebuild_indexes(truncate_torn=False)
        out.sync_all()
    finally:
        out.close()
    if entries:
        txn_index.write_entries(work, base, entries)
    publish(work, out_dir, base)
    stats["bytes_out"] = pos
    return stats


def work_dir(out_dir: str) -> str:
    """A private folder in ``out_dir`` to write one segment in: two attempts of one task
    (Spark speculation, a retry) never write into each other's file (``publish`` after)."""
    work = os.path.join(out_dir, f".w-{os.getpid()}-{uuid.uuid4().hex}")
    guard.make_path(work)
    return work


def publish(work: str, out_dir: str, base: int) -> None:
    """Move the segment at ``base`` written (and fsynced) in ``work`` into ``out_dir``, its
    ``.log`` last, and remove ``work``."""
    for suffix in filenames.INSTALL_ORDER:
        if suffix in filenames.OPTIONAL_FILES and not os.path.exists(filenames.path(work, base, suffix)):
            continue
        os.replace(filenames.path(work, base, suffix), filenames.path(out_dir, base, suffix))
    os.rmdir(work)


def _marker(ref: Any, txn: TxnRules, stats: dict[str, Any], entries: list[AbortedTxn]
            ) -> bytes:
    """A transaction marker's bytes when the pass keeps it (copied as it is), else b"";
    the entry of a kept ABORT marker goes to ``entries``."""
    h = ref.header
    stats["markers_in"] += 1  # (not a record: records_in and records_out count data)
    if not txn.keeps(h.base_offset):
        return b""
    stats["markers_kept"] += 1
    if h.base_offset not in txn.keep and (stats["min_tombstone"] is None
                                          or h.base_offset < stats["min_tombstone"]):
        stats["min_tombstone"] = h.base_offset  # (a later pass removes it at its horizon)
    entry = txn.aborted.get(h.base_offset)
    if entry is not None and entry.producer_id == h.producer_id:
        entries.append(entry)
    return bytes(ref.buf[ref.start:ref.start + h.size])


def _clean_batch(ref: Any, keep: Callable[[Any], Any], stats: dict[str, Any],
                 opener: Opener | None, seal: Seal | None) -> tuple[bytes, int]:
    """The bytes of one batch's survivors (b"" when none) and how many there are."""
    h = ref.header
    n = h.record_count
    stats["records_in"] += n
    body = lay = cols = None
    where = f" in {ref.path} at position {ref.position}"
    if h.attributes & ATTR_EXPLICIT_OFFSETS:
        body = body_of(ref.buf, ref.start, h, where, opener)
        lay = layout(body, h)
        offs: Any = [h.base_offset + d
                     for d in struct.unpack_from(f"<{n}i", body, lay.offset_deltas)]
    else:
        offs = range(h.base_offset, h.next_offset)
    mask = keep(offs)
    mask = mask.to_pylist() if hasattr(mask, "to_pylist") else list(mask)
    n_keep = mask.count(True)
    nulls = None
    if h.attributes & ATTR_VALUE_NULLS:  # tombstones: counted, and the lowest kept noted
        if body is None:
            body = body_of(ref.buf, ref.start, h, where, opener)
            lay = layout(body, h)
        assert lay is not None  # (set with body)
        cols = batch_columns(body, h, lay)
        nulls = cols[3].is_null().to_pylist()
        stats["tombstones_in"] += nulls.count(True)
        kept = [o for o, m, dead in zip(offs, mask, nulls) if m and dead]
        if kept and (stats["min_tombstone"] is None or kept[0] < stats["min_tombstone"]):
            stats["min_tombstone"] = kept[0]
    if n_keep == 0:
        return b"", 0
    if n_keep == n and not h.is_transactional:
        stats["batches_copied"] += 1
        return bytes(ref.buf[ref.start:ref.start + h.size]), n
    # (a transactional batch is rewritten as a plain one: its transaction ended below the
    # last stable offset, and once no batch of it is transactional nothing depends on its
    # marker any more: neither readers nor a producer state rebuilt from the log)
    import pyarrow as pa

    if body is None:
        body = body_of(ref.buf, ref.start, h, where, opener)
        lay = layout(body, h)
    if cols is None:
        assert lay is not None  # (set with body)
        cols = batch_columns(body, h, lay)
    idx = pa.array([i for i, m in enumerate(mask) if m], pa.int32())
    kept_offs = [offs[i] for i in idx.to_pylist()]
    headers = None
    if h.attributes & ATTR_HAS_HEADERS:
        headers = [[(x["key"], x["value"]) for x in hs] for hs in cols[4].take(idx).to_pylist()]
    first = kept_offs[0]
    enc = encode_batch(cols[2].take(idx), cols[3].take(idx),
                       cols[1].take(idx).cast(pa.int64()).to_pylist(), headers,
                       h.attributes & ATTR_CODEC, offset_deltas=[o - first for o in kept_offs])
    stats["batches_rewritten"] += 1
    out = enc.assign(first)
    return bytes(seal(out) if seal is not None else out), n_keep
