"""Mending segment files by hand (``rivven segment recover|reindex``), each partition under its
lock so a live writer waits while its files are mended. The caller reopens its logs after.

``recover_segments`` first plans from a full verify of each partition (engine.tools.verify):
where each segment would be cut, and what the cut drops, counted honestly from the batch
headers it can still read — batches, records and offsets, an incomplete last batch, and the
holes (offsets no segment holds) the partition has once it is done, including the one a
sealed segment cut short leaves before the next segment. A plan ``needs_confirmation`` when it
drops more than any writable open would drop by itself (a torn tail of the active segment past
its checkpoint); the CLI asks first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TypedDict

from ..errors import CorruptRecordError, DamagedMetadata, InvalidArgument, RivvenError
from ..format.records import HEADER_SIZE, read_header
from ..fs import guard
from ..fs.locks import DEFAULT_WAIT, LockWait, flocked
from ..segments import checkpoint, filenames, snapshot_files
from ..segments.segment import Segment
from .results import Reindexed, SegmentRepair
from .verify import (
    CUTTABLE,
    SegmentReport,
    resolve_targets,
    verify_partition,
    whole_batch_size,
)


@contextlib.contextmanager
def _partition_locked(pdir: str, wait: LockWait, data_dir: str | None = None
                      ) -> Iterator[None]:
    """The partition's flock when it has a lock file (a topic's partition); else nothing.
    Neither the partition dir nor (one of ``data_dir``'s topics) its topic dir and
    ``topics/`` may be a link: a repair cuts and removes files there."""
    topics = os.path.abspath(os.path.join(data_dir, "topics")) if data_dir else None
    own = topics is not None and os.path.dirname(os.path.dirname(os.path.abspath(pdir))) == topics
    guard.check_own_dir(pdir, 3 if own else 1)
    lock = os.path.join(pdir, filenames.LOCK_FILE)
    if not os.path.lexists(lock):
        yield
        return
    fd = guard.open_file(lock, os.O_RDWR)
    try:
        with flocked(fd, lock, wait):
            yield
    finally:
        os.close(fd)


def recover_segments(data_dir: str, targets: Sequence[str], truncate_corrupt: bool = False,
                     dry_run: bool = False, approved: Mapping[str, int | None] | None = None,
                     wait: LockWait = DEFAULT_WAIT
                     ) -> list[SegmentRepair]:
    """Truncate torn tails (and with ``truncate_corrupt`` corrupt tails) and rebuild indexes
    of the targeted segments, each partition under its lock; one row per segment (``plan``).
    With ``approved`` (path -> cut position the user agreed to), a cut that needs confirmation
    and differs from its approved one is refused (the files changed since the question)."""
    out: list[SegmentRepair] = []
    for d, only in resolve_targets(data_dir, list(targets)):
        with _partition_locked(d, wait, data_dir):
            out += recover_partition(d, only, truncate_corrupt, dry_run, approved)
    return out


def recover_partition(pdir: str, only: Sequence[str], truncate_corrupt: bool,
                      dry_run: bool, approved: Mapping[str, int | None] | None = None
                      ) -> list[SegmentRepair]:
    """(Partition lock held.) Plan every targeted segment of ``pdir``, then (unless
    ``dry_run``) cut and reindex them, and bring ``.checkpoint`` back below a cut of the
    active segment."""
    reports = verify_partition(pdir)
    try:
        point = checkpoint.read_checkpoint(pdir)
    except DamagedMetadata:
        point = None  # (verify reports it; a writable open ignores it)
    rows: list[SegmentRepair] = []
    for i, rep in enumerate(reports):
        if only and rep.path not in only:
            continue
        nxt = reports[i + 1].base_offset if i + 1 < len(reports) else None
        row = plan(rep, nxt, point, truncate_corrupt)
        rows.append(row)
    if dry_run:
        return rows
    for row in rows:
        if (approved is not None and row["needs_confirmation"]
                and approved.get(row["path"], -1) != row["truncate_at"]):
            raise RivvenError(f"{row['path']} changed since it was planned (a cut at "
                              f"{row['truncate_at']} was not confirmed); nothing was changed "
                              "in its partition, run the command again")
    by_path = {r.path: r for r in reports}
    for row in rows:
        _apply(pdir, by_path[row["path"]], row, point)
    return rows


def plan(rep: SegmentReport, next_base: int | None, point: dict | None,
         truncate_corrupt: bool) -> SegmentRepair:
    """What recovering one segment does: where it cuts, what the cut drops (counted from the
    headers still readable after the cut), the holes left, and whether to ask first."""
    damage = [f for f in rep.findings if f.kind in CUTTABLE and f.kind != "torn-tail"]
    torn = [f for f in rep.findings if f.kind == "torn-tail"]
    cut_at: int | None = None
    if damage and truncate_corrupt:
        cut_at = damage[0].position
    elif torn and not damage:
        cut_at = torn[0].position
    dropped = _dropped(rep.path, cut_at) if cut_at is not None else _NOTHING
    new_end = rep.next_at(cut_at) if cut_at is not None else None
    holes = [{"first": f.offsets[0], "last": f.offsets[1],
              "offsets": f.offsets[1] - f.offsets[0] + 1}
             for f in rep.findings if f.kind == "gap" and f.offsets
             and (cut_at is None or f.position is None or f.position < cut_at)]
    sealed = next_base is not None
    if next_base is not None and new_end is not None and new_end < next_base and cut_at is not None:
        holes.append({"first": new_end, "last": next_base - 1, "offsets": next_base - new_end})
    durable = 0  # bytes of this segment a checkpoint vouches for
    if point is not None and point["segment"] == rep.base_offset:
        durable = point["position"]
    elif point is not None and point["segment"] > rep.base_offset:
        durable = rep.bytes
    # a writable open cuts an unfinished tail of the active segment past its checkpoint by
    # itself (the WAL holds what was acknowledged); anything else loses data for good
    confirm = cut_at is not None and (dropped["batches"] > 0 or sealed or cut_at < durable)
    return {"path": rep.path, "size": rep.bytes, "truncate_at": cut_at,
            "bytes_removed": (rep.bytes - cut_at) if cut_at is not None else 0,
            "records_removed": dropped["records"], "batches_removed": dropped["batches"],
            "incomplete_batch": dropped["incomplete"],
            "offsets_removed": dropped["offsets"], "offset_range": dropped["range"],
            "end_offset": new_end, "sealed": sealed, "holes": holes,
            "needs_confirmation": confirm,
            "unrepaired": [f.to_json() for f in damage] if not truncate_corrupt else [],
            "reindexed": False}


class _Dropped(TypedDict):
    batches: int
    records: int
    offsets: int
    incomplete: bool
    range: list[int] | None  # [first, last] offset


_NOTHING: _Dropped = {"batches": 0, "records": 0, "offsets": 0, "incomplete": False,
                      "range": None}


def _dropped(path: str, position: int) -> _Dropped:
    """What a cut at ``position`` drops, as far as headers can be read from there on: whole
    batches, records and offsets, and whether the last is an incomplete batch."""
    out = _NOTHING.copy()
    lo: int | None = None
    hi: int | None = None
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = position
        while pos + HEADER_SIZE <= size:
            raw = os.pread(fd, HEADER_SIZE, pos)
            try:
                h = read_header(raw, 0)
            except CorruptRecordError:
                n = whole_batch_size(fd, raw, pos, size)
                if not n:
                    break
                out["batches"] += 1  # CRC-valid, fields out of range: counted, not trusted
                pos += n
                continue
            out["records"] += h.record_count
            out["offsets"] += h.last_offset_delta + 1
            lo = h.base_offset if lo is None else min(lo, h.base_offset)
            hi = h.last_offset if hi is None else max(hi, h.last_offset)
            if pos + h.size > size:
                out["incomplete"] = True
                break
            out["batches"] += 1
            pos += h.size
    finally:
        os.close(fd)
    out["range"] = [lo, hi] if lo is not None and hi is not None else None  # (set together)
    return out


def _apply(pdir: str, rep: SegmentReport, row: SegmentRepair, point: dict | None) -> None:
    cut_at = row["truncate_at"]
    if cut_at is not None:
        fd = guard.open_file(rep.path, os.O_RDWR)  # (never a link's target)
        try:
            os.ftruncate(fd, cut_at)
            os.fsync(fd)
        finally:
            os.close(fd)
    seg = Segment(pdir, rep.base_offset, writable=True)
    try:
        seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True)
        seg.sync_all()
        end = seg.next_offset
    finally:
        seg.close()
    row["reindexed"] = True
    if cut_at is not None:  # producer-state snapshots past the cut describe batches it removed
        snapshot_files.remove(pdir, [off for off in snapshot_files.offsets(pdir) if off > end])
    if (cut_at is not None and point is not None and point["segment"] == rep.base_offset
            and point["position"] > cut_at and not row["sealed"]):
        # the checkpoint vouched for bytes that are gone: it now ends at the cut (a log start
        # past the new end comes back to it), so the loader's checks hold again
        checkpoint.write_checkpoint(pdir, {
            "segment": rep.base_offset, "position": cut_at, "recovery_point": end,
            "log_start_offset": min(point["log_start_offset"], end)})


def reindex(path: str, wait: LockWait = DEFAULT_WAIT) -> Reindexed:
    """Rebuild one segment's ``.index`` and ``.timeindex`` from its log, under its partition's
    lock."""
    d = os.path.dirname(os.path.abspath(path))
    parsed = filenames.parse(os.path.basename(path))
    if parsed is None or parsed[1] != filenames.LOG:
        raise InvalidArgument(f"{path} is not a segment .log file")
    with _partition_locked(d, wait):
        seg = Segment(d, parsed[0], writable=True)
        try:
            seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True)
            seg.sync_all()
            return {"path": path, "index_entries": len(seg.index),
                    "timeindex_entries": len(seg.timeindex), "valid_bytes": seg.size}
        finally:
            seg.close()
