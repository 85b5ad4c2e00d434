"""Which data key versions a partition's segments use: the bytes of their data batches per
key version, read from batch headers (local segments) or the tier manifest (cold ones). What
a re-encryption plans on and ``rivven key`` reports (engine.maintenance)."""

from __future__ import annotations

import os
from typing import Any, Protocol

from ..segments.segment import Segment
from ..segments.tier_manifest import ColdSegment


class UsageSource(Protocol):
    """What the report reads of a partition (``PartitionLog``)."""

    def cold_entries(self) -> list[ColdSegment]: ...
    def all_segments(self, recheck: bool = False) -> list[Segment]: ...
    def end_offset(self) -> int: ...


def rows(log: UsageSource, cache: dict | None = None) -> list[dict[str, Any]]:
    """Per segment, cold ones first, oldest first: ``base_offset``, ``next_offset``,
    ``tier`` (local, cold), ``bytes`` and ``key_bytes``, the bytes of its data batches per
    data key version (0: plaintext; markers left out). Local segments' headers are read (no
    body); cold ones' come from the tier manifest. ``cache`` (a dict the caller keeps)
    remembers what was read of each file: a second call reads only what was appended since,
    or a file that was replaced."""
    out = [{"base_offset": e.base_offset, "next_offset": e.next_offset, "tier": "cold",
            "bytes": e.bytes, "key_bytes": e.key_usage()} for e in log.cold_entries()]
    segs = log.all_segments()
    end = log.end_offset()
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base if i + 1 < len(segs) else end
        size = seg.size
        ino = os.fstat(seg.fd).st_ino
        seen = cache.get(seg.path) if cache is not None else None
        if seen is not None and seen[0] == ino and seen[1] <= size:
            found = dict(seen[2])
            for v, n in seg.key_bytes(seen[1], size).items():
                found[v] = found.get(v, 0) + n
        else:
            found = seg.key_bytes(0, size)
        if cache is not None:
            cache[seg.path] = (ino, size, found)
        out.append({"base_offset": seg.base, "next_offset": nxt, "tier": "local",
                    "bytes": size, "key_bytes": found})
    return out
