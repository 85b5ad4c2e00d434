"""Crash recovery: replaying the WAL streams of processes that died, mending their tails."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..format.records import read_header
from . import stream as wal_mod

if TYPE_CHECKING:
    from ..engine import Engine


def replay_dead_streams(eng: Engine, dry_run: bool) -> dict[str, Any]:
    """Batches of dead streams past each partition's log end go back into its segments
    (merged across streams by offset, idempotent); then those partitions are checkpointed
    and the streams deleted. The caller holds the recovery lock."""
    own = eng.wal.id if eng.wal is not None else None
    dead = wal_mod.dead_streams(eng.path, own)
    report: dict[str, Any] = {"streams": [d for d, _ in dead], "partitions": [],
                              "applied": 0, "skipped": 0, "dropped": 0, "torn_tails": []}
    if not dead:
        return report
    try:
        found: dict[tuple[bytes, int], list] = defaultdict(list)
        sizes = {f: os.path.getsize(f) for d, _ in dead for f in wal_mod.stream_files(d)}
        total = sum(sizes.values())
        done = 0
        for f, size in sizes.items():
            try:
                for rec in wal_mod.scan_file(f):
                    h = read_header(rec.batch, 0)
                    # where the bytes are, not the bytes: most batches of a process crash
                    # are already in the log and are never read again
                    found[(rec.topic_id, rec.partition)].append(
                        (rec.write_ns, h.base_offset, h.record_count,
                         h.last_offset_delta, h.max_timestamp,
                         (f, rec.batch_position, len(rec.batch))))
            except wal_mod.WalTail as t:
                if not t.zero:
                    report["torn_tails"].append({"file": f, "position": t.position,
                                                 "reason": t.reason})
            done += size
            if eng.progress is not None:
                eng.progress("replaying WAL", total, done)
        by_id = {bytes.fromhex(m.id): m for m in eng.topics()}
        for (tid, p), recs in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            meta = by_id.get(tid)
            if meta is None or p >= meta.partitions:
                continue  # the topic was deleted since
            plan = wal_mod.merge_by_offset(recs)
            log = eng._log(meta, p)
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
                log.checkpoint()
            report["partitions"].append({"topic": meta.name, "partition": p,
                                         "applied": applied, "skipped": skipped,
                                         "dropped": dropped})
            report["applied"] += applied
            report["skipped"] += skipped
            report["dropped"] += dropped
        if not dry_run:
            for d, _ in dead:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        for _, fd in dead:
            os.close(fd)
    return report


def cut_dead_tails(eng: Engine, dry_run: bool = False) -> list[dict[str, Any]]:
    """Cut torn tails of dead streams' WAL files (a live stream is left alone)."""
    out = []
    own = eng.wal.id if eng.wal is not None else None
    dead = wal_mod.dead_streams(eng.path, own)
    try:
        for d, _ in dead:
            for f in wal_mod.stream_files(d):
                torn = wal_mod.torn_tail(f)
                if torn is not None:
                    out.append({"file": f, "truncate_at": torn,
                                "bytes_removed": os.path.getsize(f) - torn})
                    if not dry_run:
                        wal_mod.truncate_torn_tail(f)
    finally:
        for _, fd in dead:
            os.close(fd)
    return out


def _load(where: tuple[str, int, int]) -> bytes:
    path, position, length = where
    with open(path, "rb") as f:
        f.seek(position)
        return f.read(length)
