"""``.gaps``: the offsets a repair removed from a partition, kept as a record (sealed JSON).

``rivven segment recover --truncate-corrupt`` cuts a damaged batch out of its segment (and a
damaged end off a sealed one); the offsets it held are then missing from the log, as
compacted offsets are. This file says so, so that ``segment verify`` reports them as a known
gap instead of an unexplained hole; readers (and the Spark jobs) step over them as they step
over any offsets no batch holds. It is written in the same swap as the rewritten segment
(``PartitionLog.replace_segments``'s side files, engine.segments.swap), or atomically before a
sealed segment is cut short, never after: a crash leaves a gap recorded, never one unexplained.

``{"version": 1, "gaps": [{"first": 50, "last": 99, "time_ms": 1795..., "reason": "CRC
mismatch ..."}, ...], "crc32c": ...}``, gaps in offset order, not overlapping. Nothing read
from it is trusted: a file that does not parse or fails its CRC32C is DamagedMetadata (verify
reports it; a repair refuses to write over it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..format.crc import crc32c
from ..fs import durable, jsondoc

NAME = ".gaps"
WHAT = "recorded gaps"
FIX = "restore it from a backup, or remove it (verify then reports those offsets as a hole)"
VERSION = 1
MAX_REASON = 300  # characters of the damage a gap keeps
MAX_GAPS = 1 << 16  # more is not a file a repair wrote


class Gap(NamedTuple):
    """Offsets ``first`` .. ``last`` a repair removed at ``time_ms`` (epoch ms), and why."""

    first: int
    last: int
    time_ms: int
    reason: str


def path(pdir: str) -> str:
    return os.path.join(pdir, NAME)


def read(pdir: str) -> list[Gap]:
    """The partition's recorded gaps, in offset order ([] without a file); DamagedMetadata
    when the file is damaged."""
    p = path(pdir)
    raw = jsondoc.read(p, WHAT, limit=64 << 20, fix=FIX)
    if raw is None:
        return []
    doc = jsondoc.unseal(raw, p, WHAT, FIX)
    if set(doc) != {"version", "gaps"} or jsondoc.get_int(doc, "version", p, WHAT, fix=FIX) != VERSION:
        raise jsondoc.damaged(p, WHAT, f"keys {sorted(doc)} of version {doc.get('version')!r}, "
                              f"expected version {VERSION} with 'gaps'", FIX)
    rows = doc["gaps"]
    if not isinstance(rows, list) or len(rows) > MAX_GAPS:
        raise jsondoc.damaged(p, WHAT, f"gaps is not a list of at most {MAX_GAPS}", FIX)
    out: list[Gap] = []
    for r in rows:
        if not isinstance(r, dict) or set(r) != {"first", "last", "time_ms", "reason"}:
            raise jsondoc.damaged(p, WHAT, f"a gap is not an object of first, last, time_ms "
                                  f"and reason: {jsondoc.shown(r)}", FIX)
        g = Gap(jsondoc.get_int(r, "first", p, WHAT, fix=FIX),
                jsondoc.get_int(r, "last", p, WHAT, fix=FIX),
                jsondoc.get_int(r, "time_ms", p, WHAT, fix=FIX),
                jsondoc.get_str(r, "reason", p, WHAT, MAX_REASON, fix=FIX))
        if g.last < g.first or (out and g.first <= out[-1].last):
            raise jsondoc.damaged(p, WHAT, f"gap {g.first}..{g.last} is empty, out of order or "
                                  "overlaps the one before", FIX)
        out.append(g)
    return out


def merged(old: Iterable[Gap], new: Iterable[Gap]) -> list[Gap]:
    """``old`` and ``new`` in offset order, overlapping or adjoining gaps made one (the
    earlier time and reason kept)."""
    out: list[Gap] = []
    for g in sorted([*old, *new]):
        if out and g.first <= out[-1].last + 1:
            last = out[-1]
            out[-1] = last._replace(last=max(last.last, g.last))
        else:
            out.append(g._replace(reason=g.reason[:MAX_REASON]))
    return out


def document(gaps: Iterable[Gap]) -> dict[str, Any]:
    """The file's sealed JSON document (a swap's side file: engine.segments.swap)."""
    doc: dict[str, Any] = {"version": VERSION, "gaps": [g._asdict() for g in gaps]}
    doc[jsondoc.CRC_KEY] = crc32c(jsondoc.canonical(doc))
    return doc


def write(pdir: str, gaps: Iterable[Gap]) -> None:
    """(Partition lock held.) Write the file whole (tmp, fsync, rename, fsync dir)."""
    durable.write_atomic(path(pdir), jsondoc.seal(document(gaps)))


def uncovered(lo: int, hi: int, gaps: Iterable[Gap]) -> list[tuple[int, int]]:
    """The parts of offsets ``lo`` .. ``hi`` no gap of ``gaps`` (in offset order) covers."""
    out: list[tuple[int, int]] = []
    for g in gaps:
        if g.last < lo or g.first > hi:
            continue
        if g.first > lo:
            out.append((lo, g.first - 1))
        lo = max(lo, g.last + 1)
        if lo > hi:
            return out
    return out + [(lo, hi)]
