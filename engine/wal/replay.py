"""Crash recovery: replaying the WAL streams of processes that died, mending their tails.

Both run with ``wal/recovery.lock`` held (engine.wal.owner) and take the lock of every dead
stream they touch, so two processes never recover one stream at once.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..errors import CorruptRecordError, StorageError, disk_full
from ..format.records import check_crc, read_header
from ..fs import guard
from ..progress import Progress
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog, RecoveryPointNotWritten
from . import inventory
from .results import ReplayReport, TailCut
from .stream import stream_files
from .wal_file import WalTail, scan_file


def replay_dead_streams(data_dir: str, own: str | None, topics: Callable[[], list[TopicMeta]],
                        log_for: Callable[[TopicMeta, int], PartitionLog],
                        progress: Progress | None,
                        dry_run: bool) -> ReplayReport:
    """Batches of dead streams past each partition's log end go back into its segments
    (merged across streams by offset, idempotent); then those partitions are checkpointed
    and the streams deleted. ``own`` is this process's live stream. The caller holds the
    recovery lock.

    On a full disk a recovery point that cannot be written does not stop the open: the
    segments are fsynced first, so the streams may still go. Should the fsync itself fail
    for want of space, the streams are kept (``report["kept"]``) and replayed again —
    idempotently — by a later open. A batch that must go back into its segment needs the
    space: that raises (the engine then refuses appends until a replay succeeds)."""
    dead = inventory.dead_streams(data_dir, own)
    report: ReplayReport = {"streams": [d for d, _ in dead], "partitions": [],
                            "applied": 0, "skipped": 0, "dropped": 0, "torn_tails": [],
                            "kept": False}
    if not dead:
        return report
    try:
        found: dict[tuple[bytes, int], list] = defaultdict(list)
        sizes = {f: os.path.getsize(f) for d, _ in dead for f in stream_files(d)}
        total = sum(sizes.values())
        done = 0
        for f, size in sizes.items():
            try:
                for rec in scan_file(f):
                    h = rec.header
                    # where the bytes are, not the bytes: most batches of a process crash
                    # are already in the log and are never read again
                    found[(rec.topic_id, rec.partition)].append(
                        (rec.write_ns, h.base_offset, h.record_count,
                         h.last_offset_delta, h.max_timestamp,
                         (f, rec.position, rec.batch_position, rec.batch_length)))
            except WalTail as t:
                if t.inner:  # written like this: what follows may be acknowledged records
                    raise damaged_record(f, t.position, t.reason) from None
                if not t.zero:
                    report["torn_tails"].append({"file": f, "position": t.position,
                                                 "bytes": max(size - t.position, 0),
                                                 "reason": t.reason,
                                                 "incomplete": t.incomplete})
            done += size
            if progress is not None:
                progress("replaying WAL", total, done)
        by_id = {bytes.fromhex(m.id): m for m in topics()}
        for (tid, p), recs in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            meta = by_id.get(tid)
            if meta is None or p >= meta.partitions:
                continue  # the topic was deleted since
            plan = merge_by_offset(recs)
            log = log_for(meta, p)
            if dry_run:
                end = log.end_offset()
                applied = dropped = 0
                for r in plan:
                    if r[0] == end:
                        applied += 1
                        end = r[0] + r[2] + 1
                    elif r[0] > end:
                        dropped += 1
                skipped = len(plan) - applied - dropped
            else:
                end = log.end_offset()
                plan = [(b, c, d, t, _load(where) if b >= end else b"")
                        for b, c, d, t, where in plan]
                applied, skipped, dropped = log.replay(plan)
                # even batches "already present" may sit in unsynced pages of the segment:
                # fsync before the only other copy (the dead stream) goes
                try:
                    log.checkpoint()
                except RecoveryPointNotWritten:
                    pass  # (a full disk) the segment is fsynced: the stream may go
                except StorageError as e:
                    if not disk_full(e):
                        raise
                    report["kept"] = True  # the streams stay the only record: kept
            report["partitions"].append({"topic": meta.name, "partition": p,
                                         "applied": applied, "skipped": skipped,
                                         "dropped": dropped})
            report["applied"] += applied
            report["skipped"] += skipped
            report["dropped"] += dropped
        if not dry_run and not report["kept"]:
            for d, _ in dead:
                guard.remove_tree(data_dir, d)
    finally:
        for _, fd in dead:
            os.close(fd)
    return report


def cut_dead_tails(data_dir: str, own: str | None, dry_run: bool = False
                   ) -> list[TailCut]:
    """Cut dead streams' WAL files where their valid records end (a live stream is left
    alone): a torn tail, or a damaged record and what follows it. One row per cut: where, the
    bytes, why, and how many records with an intact frame follow the damaged one (dropped
    with it)."""
    out: list[TailCut] = []
    dead = inventory.dead_streams(data_dir, own)
    try:
        for d, _ in dead:
            for f in stream_files(d):
                t = inventory.tail_of(f)
                if t is not None:
                    out.append({"file": f, "truncate_at": t.position,
                                "bytes_removed": os.path.getsize(f) - t.position,
                                "reason": t.reason, "incomplete": t.incomplete,
                                "damaged_record": t.inner,
                                "records_after": inventory.intact_after(f, t.position)})
                    if not dry_run:
                        inventory.truncate_torn_tail(f)
    finally:
        for _, fd in dead:
            os.close(fd)
    return out


def damaged_record(path: str, position: int, reason: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"WAL record {path}:{position} is damaged ({reason}); replay stopped there: "
        "'rivven wal recover' cuts the file there (--dry-run shows what that drops)",
        path, position)


def _load(where: tuple[str, int, int, int]) -> bytes:
    """The batch of a WAL record, checked whole (the scan read only its header)."""
    path, record, position, length = where
    with open(path, "rb") as f:
        f.seek(position)
        data = f.read(length)
    try:
        h = read_header(data, 0) if len(data) == length else None
        if h is None or h.size != length:
            raise CorruptRecordError("the file changed under the replay")
        check_crc(data, 0, h)
    except CorruptRecordError as e:
        raise damaged_record(path, record, str(e)) from None
    return data


def merge_by_offset(recs: list[tuple]) -> list[tuple[int, int, int, int, Any]]:
    """``(write_ns, base, count, last_delta, max_ts, bytes)`` from any number of streams to
    ``(base, count, last_delta, max_ts, bytes)`` in offset order.

    Two records can claim the same offsets only when a writer died after logging a batch it
    never acknowledged and a later writer reused the offsets; the later write wins.
    """
    chosen: list[tuple] = []
    cluster: list[tuple] = []
    cluster_end = -1
    # clusters of records whose offset ranges overlap; only inside one does anything compete
    for r in sorted(recs, key=lambda r: (r[1], -r[0])) + [None]:
        if r is not None and r[1] <= cluster_end:
            cluster.append(r)
            cluster_end = max(cluster_end, r[1] + r[3])
            continue
        if len(cluster) == 1:
            chosen.append(cluster[0])
        elif cluster:
            taken: list[tuple[int, int]] = []
            for c in sorted(cluster, key=lambda c: -c[0]):  # later write wins
                lo, hi = c[1], c[1] + c[3]
                if not any(lo <= b and a <= hi for a, b in taken):
                    taken.append((lo, hi))
                    chosen.append(c)
        if r is not None:
            cluster = [r]
            cluster_end = r[1] + r[3]
    chosen.sort(key=lambda r: r[1])
    return [(r[1], r[2], r[3], r[4], r[5]) for r in chosen]
