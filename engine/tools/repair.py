"""Mending segment files by hand (``rivven segment recover|reindex``), each partition under its
lock so a live writer waits while its files are mended. The caller reopens its logs after.

``recover_segments`` first plans from a full verify of each partition (engine.tools.verify):
where each segment would be cut, and what the cut drops, counted honestly from the batch
headers it can still read — batches, records and offsets, an incomplete last batch, and the
holes (offsets no segment holds) the partition has once it is done, including the one a
sealed segment cut short leaves before the next segment. A plan ``needs_confirmation`` when it
drops more than any writable open would drop by itself (a torn tail of the active segment past
its checkpoint); the CLI asks first.

With ``truncate_corrupt``, damage stays local: a damaged batch an intact one follows is cut
out alone (``cut_out``: the segment is rewritten without those bytes and swapped in with the
one replacement protocol, engine.segments.swap; an active segment is rolled first, so that
every process follows it as it follows any roll), and only damage nothing intact follows is
truncated. The offsets either leaves missing become recorded gaps (engine.segments.gaps,
``.gaps``: in the swap itself, or written before a sealed segment is cut short), which verify
reports as known, as compacted offsets.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TypedDict

from .. import clock
from ..errors import CorruptRecordError, DamagedMetadata, InvalidArgument, RivvenError
from ..failpoint import failpoint
from ..format.records import HEADER_SIZE, read_header
from ..fs import durable, guard
from ..fs.locks import DEFAULT_WAIT, LockWait, flocked
from ..segments import checkpoint, filenames, gaps, snapshot_files, swap, txn_index
from ..segments.durable_end import DurableEnd
from ..segments.segment import Segment
from .results import CutOut, Reindexed, SegmentRepair
from .segment_check import CUTTABLE, Finding, SegmentReport, whole_batch_size
from .verify import resolve_targets, verify_partition

STAGING = ".compaction"  # (the data dir's staging folder: a cut-out segment is written there)


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
                     dry_run: bool = False, approved: Mapping[str, SegmentRepair] | None = None,
                     wait: LockWait = DEFAULT_WAIT
                     ) -> list[SegmentRepair]:
    """Truncate torn tails (and with ``truncate_corrupt`` cut out corrupt batches, truncating
    corrupt ends) and rebuild indexes of the targeted segments, each partition under its
    lock; one row per segment (``plan``). With ``approved`` (path -> the planned row the user
    agreed to), a cut that needs confirmation and differs from its approved one is refused
    (the files changed since the question)."""
    out: list[SegmentRepair] = []
    if not dry_run and os.path.isdir(os.path.join(data_dir, STAGING)):
        _clear_dead(os.path.join(data_dir, STAGING))  # (what a killed repair left)
    for d, only in resolve_targets(data_dir, list(targets)):
        with _partition_locked(d, wait, data_dir):
            out += recover_partition(d, only, truncate_corrupt, dry_run, approved,
                                     os.path.join(data_dir, STAGING))
    return out


def recover_partition(pdir: str, only: Sequence[str], truncate_corrupt: bool,
                      dry_run: bool, approved: Mapping[str, SegmentRepair] | None = None,
                      staging: str | None = None) -> list[SegmentRepair]:
    """(Partition lock held.) Plan every targeted segment of ``pdir``, then (unless
    ``dry_run``) cut and reindex them, and bring ``.checkpoint`` back below a cut of the
    active segment. Cut-outs are written in ``staging`` (default: beside the partitions)."""
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
        agreed = approved.get(row["path"]) if approved is not None else None
        if (approved is not None and row["needs_confirmation"]
                and (agreed is None or _cuts(agreed) != _cuts(row))):
            raise RivvenError(f"{row['path']} changed since it was planned (a cut at "
                              f"{_cuts(row)} was not confirmed); nothing was changed "
                              "in its partition, run the command again")
    now = clock.now_ms()
    new = {by: [gaps.Gap(g["first"], g["last"], now, g["reason"]) for row in rows
                for g in row["recorded_gaps"] if g["by"] == by] for by in ("truncate", "cut-out")}
    recorded = gaps.read(pdir) if new["truncate"] or new["cut-out"] else []  # (damaged: refused)
    if new["truncate"]:  # recorded before the cut: a crash leaves a gap recorded, never one
        recorded = gaps.merged(recorded, new["truncate"])  # unexplained
        gaps.write(pdir, recorded)
    by_path = {r.path: r for r in reports}
    for row in rows:
        if row["truncate_at"] is not None or not row["cut_out"]:
            _apply(pdir, by_path[row["path"]], row, point)
    cuts = [row for row in rows if row["cut_out"]]
    if cuts:
        staging = staging or os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(pdir)))), STAGING)
        _cut_out(pdir, cuts, by_path, gaps.merged(recorded, new["cut-out"]), staging)
    return rows


def _cuts(row: SegmentRepair) -> tuple:
    """What a row cuts: its truncation and its cut-outs (compared with the approved plan)."""
    return row["truncate_at"], [(c["position"], c["end"]) for c in row["cut_out"]]


def plan(rep: SegmentReport, next_base: int | None, point: dict | None,
         truncate_corrupt: bool) -> SegmentRepair:
    """What recovering one segment does: where it cuts, what the cut drops (counted from the
    headers still readable after the cut), the damaged batches it cuts out, the holes left,
    the gaps it records, and whether to ask first."""
    damage = [f for f in rep.findings if f.kind in CUTTABLE and f.kind != "torn-tail"]
    ends = [f for f in damage if f.resume_at is None]  # nothing intact follows: truncated
    torn = [f for f in rep.findings if f.kind == "torn-tail"]
    cut_at: int | None = None
    if ends and truncate_corrupt:
        cut_at = ends[0].position
    elif torn and not damage:
        cut_at = torn[0].position
    cut_out = [_cut(f) for f in damage if truncate_corrupt and f.resume_at is not None
               and (cut_at is None or (f.position or 0) < cut_at)]
    dropped = _dropped(rep.path, cut_at) if cut_at is not None else _NOTHING
    new_end = rep.next_at(cut_at) if cut_at is not None else None
    holes = [{"first": f.offsets[0], "last": f.offsets[1],
              "offsets": f.offsets[1] - f.offsets[0] + 1}
             for f in rep.findings if f.kind == "gap" and f.offsets
             and (cut_at is None or f.position is None or f.position < cut_at)]
    sealed = next_base is not None
    recorded = [{"first": c["first"], "last": c["last"], "by": "cut-out", "reason": c["reason"]}
                for c in cut_out if c["first"] is not None and c["last"] is not None]
    if next_base is not None and new_end is not None and new_end < next_base and cut_at is not None:
        holes.append({"first": new_end, "last": next_base - 1, "offsets": next_base - new_end})
        if ends and truncate_corrupt:  # (damage cut off a sealed segment: a gap, recorded)
            recorded.append({"first": new_end, "last": next_base - 1, "by": "truncate",
                             "reason": f"cut off {rep.path} at {cut_at}: {ends[0].message}"})
    durable_at = 0  # bytes of this segment a checkpoint vouches for
    if point is not None and point["segment"] == rep.base_offset:
        durable_at = point["position"]
    elif point is not None and point["segment"] > rep.base_offset:
        durable_at = rep.bytes
    # a writable open cuts an unfinished tail of the active segment past its checkpoint by
    # itself (the WAL holds what was acknowledged); anything else loses data for good
    confirm = bool(cut_out) or (cut_at is not None and (
        dropped["batches"] > 0 or sealed or cut_at < durable_at))
    return {"path": rep.path, "size": rep.bytes, "truncate_at": cut_at,
            "bytes_removed": (rep.bytes - cut_at) if cut_at is not None else 0,
            "records_removed": dropped["records"], "batches_removed": dropped["batches"],
            "incomplete_batch": dropped["incomplete"],
            "offsets_removed": dropped["offsets"], "offset_range": dropped["range"],
            "end_offset": new_end, "sealed": sealed, "holes": holes, "cut_out": cut_out,
            "recorded_gaps": recorded, "needs_confirmation": confirm,
            "unrepaired": [f.to_json() for f in damage] if not truncate_corrupt else [],
            "reindexed": False}


def _cut(f: Finding) -> CutOut:
    """A damaged batch an intact one follows, as a cut-out: its bytes and the offsets between
    the intact batches around it (the damaged header's own cannot be trusted)."""
    assert f.position is not None and f.resume_at is not None  # (damage of a batch's bytes)
    first, last = f.offsets if f.offsets is not None else (None, None)
    return {"position": f.position, "end": f.resume_at, "bytes": f.resume_at - f.position,
            "first": first, "last": last,
            "offsets": 0 if first is None or last is None else last - first + 1,
            "records": f.records, "reason": f.message}


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


def _cut_out(pdir: str, rows: list[SegmentRepair], reports: Mapping[str, SegmentReport],
             recorded: list[gaps.Gap], staging: str) -> None:
    """(Partition lock held.) Rewrite each segment of ``rows`` without its cut-out bytes
    (indexes rebuilt, ``.txnindex`` kept, fsynced) in a private
    folder of ``staging``, and swap them in with ``recorded`` as the new ``.gaps``, in one
    swap (engine.segments.swap). The active segment is rolled first: its file is then sealed
    and replaced as any sealed one, and every other process follows the roll as it follows
    any (a file swapped under a writer's active segment would take its appends)."""
    bases = filenames.segment_bases(pdir)
    todo = {reports[r["path"]].base_offset: r for r in rows}
    end = None
    if bases[-1] in todo:
        seg = Segment(pdir, bases[-1], writable=True)  # (its end after any truncation)
        try:
            seg.rebuild_indexes(truncate_torn=False, tolerate_corruption=True)
            end = seg.next_offset
            seg.sync()
        finally:
            seg.close()
        Segment(pdir, end, writable=True, create=True).close()
        durable.fsync_dir(pdir)
        published = DurableEnd(pdir, writable=True)  # readers follow the roll by it
        try:
            published.publish(end, 0, end)
        finally:
            published.close()
        failpoint("repair-rolled")
    work = os.path.join(staging, f"repair-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    guard.make_path(work)
    try:
        for base, row in todo.items():
            _write_without(pdir, base, row["cut_out"], work)
        swap.stage(pdir, work, list(todo))
        failpoint("repair-staged")
        swap.commit(pdir, list(todo), [], {gaps.NAME: gaps.document(recorded)})
        swap.roll_forward(pdir)
        failpoint("repair-swapped")
    finally:
        guard.remove_tree(staging, work)
    for row in rows:
        row["reindexed"] = True
    try:
        point = checkpoint.read_checkpoint(pdir)
    except DamagedMetadata:
        point = None
    if end is not None:  # the new active segment, empty: everything before it is fsynced
        start = point["log_start_offset"] if point is not None else 0
        point = {"segment": end, "position": 0, "recovery_point": end,
                 "log_start_offset": min(start, end)}
    if point is not None:  # (a new file: other processes look at their segments again)
        checkpoint.write_checkpoint(pdir, point)


_WORK = re.compile(r"repair-(\d+)-[0-9a-f]{12}")


def _clear_dead(staging: str) -> None:
    """Remove the folders in ``staging`` a killed repair left (its process is gone; a pid
    reused by a live process keeps its folder, which the next run looks at again)."""
    for name in os.listdir(staging):
        m = _WORK.fullmatch(name)
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            guard.remove_tree(staging, os.path.join(staging, name))
        except (PermissionError, OverflowError):
            pass  # (alive as another user, or no pid at all: left alone)


def _write_without(pdir: str, base: int, cuts: Sequence[CutOut], work: str) -> None:
    """The segment at ``base`` of ``pdir`` without the bytes of ``cuts``, written in ``work``
    with its indexes and its ``.txnindex``, fsynced."""
    src = filenames.path(pdir, base, filenames.LOG)
    fd = os.open(src, os.O_RDONLY)
    out = Segment(work, base, writable=True, create=True)
    try:
        keep, at = [], 0
        for c in sorted(cuts, key=lambda c: c["position"]):
            keep.append((at, c["position"]))
            at = c["end"]
        keep.append((at, os.fstat(fd).st_size))
        pos = 0
        for a, b in keep:
            while a < b:
                chunk = os.pread(fd, min(b - a, 1 << 20), a)
                if not chunk:
                    raise RivvenError(f"{src} shrank while it was rewritten; run the command again")
                out.write(chunk, pos)
                pos += len(chunk)
                a += len(chunk)
        out.rebuild_indexes(truncate_torn=False)
        out.sync_all()
    finally:
        out.close()
        os.close(fd)
    # the aborted transactions stay as they were: one whose ABORT marker was cut out is
    # still left out of read_committed reads (verify knows the marker is in a recorded gap)
    entries, _ = txn_index.read_entries(filenames.path(pdir, base, filenames.TXNINDEX), base)
    if entries:
        txn_index.write_entries(work, base, entries)


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
