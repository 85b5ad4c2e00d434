"""Consistency checks of segment files, returned as data (the CLI renders them).

``verify_partition`` reads every batch of every segment: its header (every field in range),
CRC32C and body (decompressed, laid out and every column checked, as a reader would), its
offsets (increasing, inside the segment's range, no gap), checks every ``.index`` and
``.timeindex`` entry against the log, the offsets between segments (no overlap, no gap), and
``.checkpoint`` (intact, and agreeing with the segments), and for a topic that encrypts no
plaintext data batch where ``encryption.json`` records only sealed ones (headers: no key
needed; engine.segments.sealed_range). Gaps are allowed only where the log
may legitimately have them (docs/DURABILITY.md, What verify checks): in a compacted range
(below ``.cleaner``'s ``cleaned_end``), below the log start, and below the first local
segment of a tiered partition when the tier manifest covers them. It never changes a file;
repair is ``recover_segment`` — a separate, explicit step. One segment's checks (its batches,
its index files) are segment_check.py's; this module checks the partition around them.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Callable

from ..errors import CorruptRecordError, DamagedMetadata, InvalidArgument
from ..format.decode import Opener
from ..fs import jsondoc
from ..progress import Progress, counter
from ..segments import (
    checkpoint,
    filenames,
    gaps,
    sealed_range,
    snapshot_files,
    tier_manifest,
)
from ..segments.sealed_range import Ranges
from ..storage.catalog import home_of
from ..tiering.status import check_manifests
from .results import VerifyReport
from .segment_check import (
    CUTTABLE,
    Finding,
    SegmentReport,
    check_indexes,
    check_txn_index,
    gap,
    scan_segment,
)

CLEANER = ".cleaner"  # (engine.maintenance.compaction's state file: a peer, not imported)


def verify_partition(directory: str, progress: Callable[[int], None] | None = None,
                     opener: Opener | None = None) -> list[SegmentReport]:
    """Reports for every segment of one partition directory, in offset order; findings about
    the partition as a whole (gaps between segments, ``.checkpoint``) go to the report of the
    segment they follow. ``opener``: open encrypted batches and check their tags too."""
    bases = filenames.segment_bases(directory)
    point, point_problem = _checkpoint(directory)
    claim, claim_problem = _sealed_range(directory)
    gaps_below = _cleaned_end(directory, bases)  # (the log start is applied once checked)
    recorded, gaps_problem = _recorded_gaps(directory)
    vouched = max(snapshot_files.offsets(directory), default=0)
    reports = []
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        path = filenames.path(directory, base, filenames.LOG)
        rep = scan_segment(path, base, nxt, progress, gaps_below=gaps_below, opener=opener)
        for _ in range(5):  # a torn tail of the active segment may be a write in flight
            if nxt is not None or not any(f.kind == "torn-tail" for f in rep.findings):
                break
            time.sleep(0.05)
            rep = scan_segment(path, base, nxt, gaps_below=gaps_below, opener=opener)
        check_indexes(rep, directory)
        if claim:
            check_sealed(rep, claim, directory)
        reports.append(rep)
    open_txns: set[int] = set()  # producers with transactional data and no marker yet
    for rep in reports:
        for offset, pid, kind in rep.txn_events:
            if kind == "data":
                open_txns.add(pid)
            elif pid in open_txns:  # (a marker where nothing was open ends nothing)
                open_txns.discard(pid)
                if kind == "abort":
                    rep.aborts.append((pid, offset))
        check_txn_index(rep, directory, vouched, recorded)
    for rep, nxt in zip(reports, bases[1:]):
        end = rep.batch_nexts[-1] if rep.batch_nexts else rep.base_offset
        if not rep.broken and end < nxt and nxt > gaps_below:
            rep.findings.append(gap(rep.path, rep.bytes, max(end, gaps_below), nxt - 1,
                                    f"between the end of this segment and the next one (base "
                                    f"offset {nxt})"))
    if reports:
        last = reports[-1]
        if claim_problem is not None:
            last.findings.append(Finding("encryption", sealed_range.path(directory), None,
                                         claim_problem))
        if point_problem is None and point is not None:
            point_problem = _checkpoint_problem(directory, point, bases, reports)
        if point_problem is not None:
            last.findings.append(Finding("checkpoint", checkpoint.path(directory), None,
                                         point_problem))
        elif point is not None:
            start = point["log_start_offset"]
            for rep in reports:  # offsets below the log start are gone for readers anyway
                rep.findings = [_above(f, start) for f in rep.findings
                                if not _gap_below(f, start) and not _damage_below(f, start)]
            _check_start(directory, start, reports, gaps_below)
            recorded = [g for g in recorded if g.last >= start]
        if gaps_problem is not None:
            last.findings.append(Finding("gaps", gaps.path(directory), None, gaps_problem))
        _known_gaps(reports, recorded)
    return reports


def _recorded_gaps(directory: str) -> tuple[list[gaps.Gap], str | None]:
    """The partition's recorded gaps (engine.segments.gaps), or the problem with the file."""
    try:
        return gaps.read(directory), None
    except DamagedMetadata as e:
        return [], str(e)


def _known_gaps(reports: list[SegmentReport], recorded: list[gaps.Gap]) -> None:
    """Offsets a repair cut out are a known gap, as compacted ones: each gap finding keeps
    only what no recorded gap covers, and each recorded gap is listed with the segment its
    first offset lies in."""
    if not recorded:
        return
    for rep in reports:
        found: list[Finding] = []
        for f in rep.findings:
            if f.kind != "gap" or f.offsets is None:
                found.append(f)
                continue
            where = f.message.split(" are missing ", 1)[1].rsplit(": readers skip them", 1)[0]
            found += [gap(f.path, f.position, lo, hi, where)
                      for lo, hi in gaps.uncovered(f.offsets[0], f.offsets[1], recorded)]
        rep.findings = found
    bases = [r.base_offset for r in reports]
    for g in recorded:
        rep = reports[max(bisect_left(bases, g.first + 1) - 1, 0)]
        rep.known_gaps.append({"first": g.first, "last": g.last, "time_ms": g.time_ms,
                               "reason": g.reason})


def _gap_below(f: Finding, start: int) -> bool:
    """Is ``f`` a gap wholly below ``start``?"""
    if f.kind != "gap":
        return False
    assert f.offsets is not None  # (``gap`` gives each its offsets)
    return f.offsets[1] < start


def _damage_below(f: Finding, start: int) -> bool:
    """Is ``f`` damage that intact batches enclose, wholly below ``start``? (Readers never
    reach it: retention deletes its segment once it is sealed.)"""
    return f.kind in CUTTABLE and f.resume_at is not None and f.offsets is not None \
        and f.offsets[1] < start


def _above(f: Finding, start: int) -> Finding:
    """A gap finding without its offsets below ``start``."""
    if f.kind != "gap":
        return f
    assert f.offsets is not None  # (``gap`` gives each its offsets)
    if f.offsets[0] >= start:
        return f
    return gap(f.path, f.position, start, f.offsets[1], f.message.split(" are missing ", 1)[1]
               .rsplit(": readers skip them", 1)[0])


def check_sealed(rep: SegmentReport, claim: Ranges, directory: str) -> None:
    """A plaintext data batch where the partition records that every batch is sealed
    (``encryption.json``): rivven never writes one there (a forgery with a recomputed CRC
    passes every other check). The file is read again before a batch is reported: a live
    writer that turned encryption off narrows it before appending plaintext."""
    found = sealed_range.plaintext(rep.path, claim, rep.batch_starts)
    now = _sealed_range(directory)[0] if found else ()
    for pos, h in found:
        span = sealed_range.covering(now, h.base_offset, h.next_offset)
        if span is None:
            continue
        rep.findings.append(Finding(
            "plaintext", rep.path, pos, f"batch at offsets {h.base_offset}..{h.last_offset} is "
            f"plaintext, but every batch of the partition at {span} is sealed "
            f"({sealed_range.path(directory)}): rivven did not write it (damaged or forged)",
            (h.base_offset, h.last_offset), h.record_count))


def _sealed_range(directory: str) -> tuple[Ranges, str | None]:
    try:
        return sealed_range.read(directory), None
    except DamagedMetadata as e:
        return (), str(e)


def _checkpoint(directory: str) -> tuple[dict | None, str | None]:
    try:
        return checkpoint.read_checkpoint(directory), None
    except DamagedMetadata as e:
        return None, str(e)


def _checkpoint_problem(directory: str, point: dict, bases: list[int],
                        reports: list[SegmentReport]) -> str | None:
    """What in an intact ``.checkpoint`` contradicts the segments (the loader's checks, and
    exactly: its position must end a batch of its segment, at its recovery point)."""
    last = reports[-1]
    end = last.batch_nexts[-1] if last.batch_nexts else last.base_offset
    try:
        checkpoint.check(directory, point, bases, last.bytes, None if last.broken else end)
    except DamagedMetadata as e:
        return str(e)
    if point["segment"] == last.base_offset and point["position"] <= last.valid_end:
        at = last.next_at(point["position"])
        if at != point["recovery_point"]:
            what = ("is not the end of a batch" if at is None
                    else f"ends at offset {at}, not at its recovery point "
                         f"{point['recovery_point']}")
            return (f"checkpoint {checkpoint.path(directory)} disagrees with the log (position "
                    f"{point['position']} of {last.path} {what}); {checkpoint.FIX}")
    return None


def _check_start(directory: str, start: int, reports: list[SegmentReport],
                 gaps_below: int) -> None:
    """Offsets from the log start up to the first local segment must be in the cold store
    (a tiered partition) or compacted away."""
    first = reports[0].base_offset
    try:
        entries = tier_manifest.load(directory, home_of(directory))
    except CorruptRecordError:
        return  # (segment verify --cold reports a damaged manifest)
    covered = start
    for e in entries:
        if e.base_offset <= covered < e.next_offset:
            covered = e.next_offset
    if covered < first and first > gaps_below:
        reports[0].findings.append(gap(reports[0].path, 0, max(covered, gaps_below), first - 1,
                                       f"between the log start {start} (in "
                                       f"{checkpoint.path(directory)}) and the first segment"))


def _cleaned_end(directory: str, bases: list[int]) -> int:
    """Below this offset the partition was compacted (gaps are normal): ``cleaned_end`` of its
    ``.cleaner``; the active segment's base when that file is unreadable (compacted once, but
    how far is unknown)."""
    p = os.path.join(directory, CLEANER)
    try:
        raw = jsondoc.read(p, "compaction state", limit=1 << 20)
        if raw is None:
            return 0
        return jsondoc.get_int(jsondoc.loads(raw, p, "compaction state"), "cleaned_end", p,
                               "compaction state")
    except (DamagedMetadata, OSError):
        return bases[-1] if bases else 0


def verify(data_dir: str, targets: list[str], cold: bool = False,
           progress: Progress | None = None,
           opener_of: Callable[[str], Opener | None] | None = None) -> VerifyReport:
    """Check every segment of ``targets`` (see ``resolve_targets``; default: the data dir),
    and with ``cold`` every cold copy against its tier manifest. Returns the report as data:
    segments, batches, records, bytes, ok, findings (and cold). Changes nothing.
    ``opener_of(partition dir)``: the opener of that partition's encrypted batches, to check
    their tags (``segment verify --decrypt``); without it they are checked without keys."""
    parts = resolve_targets(data_dir, targets)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _ in parts for f in os.listdir(d)
                if f.endswith(filenames.LOG))
    advance = counter(progress, "verifying", total)
    reports = []
    for d, only in parts:
        for rep in verify_partition(d, advance, opener_of(d) if opener_of else None):
            if not only or rep.path in only:
                reports.append(rep)
    findings = [f.to_json() for r in reports for f in r.findings]
    doc: VerifyReport = {
        "segments": len(reports), "batches": sum(r.batches for r in reports),
        "records": sum(r.records for r in reports), "bytes": sum(r.bytes for r in reports),
        "ok": not findings, "findings": findings,
        "known_gaps": [{"path": r.path, **g} for r in reports for g in r.known_gaps]}
    if cold:
        doc["cold"] = check_manifests([d for d, _ in parts], progress)
        doc["ok"] = doc["ok"] and not doc["cold"]["findings"]
    return doc


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
        elif os.path.isfile(t) and t.endswith(filenames.LOG):
            d = os.path.dirname(os.path.abspath(t))
            if out.get(d) != []:
                out.setdefault(d, []).append(os.path.abspath(t))
        elif os.path.isdir(os.path.join(t, "topics")):
            for name in sorted(os.listdir(os.path.join(t, "topics"))):
                add_partitions(os.path.join(t, "topics", name))
        elif os.path.isdir(t) and filenames.segment_bases(t):
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
