"""The per-partition tier manifest ``tier.json``: which offsets live in the cold store, where.

Written whole and atomically, as part of a segment swap (PartitionLog.set_tier), by the one
process holding the partition's ``.tier.lock``; read by anyone without a lock (old file or new,
never a mix). An entry is added only after its cold copy is verified, and a local segment is
deleted only after its entry is in the file: a crash never leaves offsets that are neither
local nor in here. Everything read from the file is checked before use.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from ..errors import CorruptRecordError
from . import files

MANIFEST = "tier.json"
TIER_LOCK = ".tier.lock"
VERSION = 1
SUFFIXES = files.SEGMENT_FILES  # the files a cold segment is copied as


@dataclass(frozen=True)
class ColdSegment:
    base_offset: int
    next_offset: int  # one past the last offset the segment covers
    bytes: int
    crc32c: int
    max_timestamp: int
    index_bytes: int
    index_crc32c: int
    timeindex_bytes: int
    timeindex_crc32c: int
    object: str  # URI of the copy without suffix: object + ".log" / ".index" / ".timeindex"
    uploaded_ms: int

    def url(self, suffix: str) -> str:
        return self.object + suffix

    def expected(self, suffix: str) -> tuple[int, int]:
        """(bytes, crc32c) the manifest records for one of the three files."""
        if suffix == files.LOG:
            return self.bytes, self.crc32c
        if suffix == files.INDEX:
            return self.index_bytes, self.index_crc32c
        return self.timeindex_bytes, self.timeindex_crc32c


def path(pdir: str) -> str:
    return os.path.join(pdir, MANIFEST)


def stamp(pdir: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path(pdir))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def load(pdir: str) -> list[ColdSegment]:
    """The entries, oldest first; [] when there is no manifest. Raises CorruptRecordError."""
    p = path(pdir)
    try:
        with open(p, "rb") as f:
            raw = f.read(64 << 20)
    except FileNotFoundError:
        return []
    try:
        doc = json.loads(raw)
        if doc.get("version") != VERSION:
            raise ValueError(f"version {doc.get('version')!r}, this rivven reads {VERSION}")
        out = [_entry(e) for e in doc["segments"]]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CorruptRecordError(f"tier manifest {p} is damaged ({e}); the cold copies are "
                                 "intact: restore the file from a backup", p) from None
    for a, b in zip(out, out[1:]):
        if b.base_offset < a.next_offset:
            raise CorruptRecordError(f"tier manifest {p} is damaged: segments at {a.base_offset} "
                                     f"and {b.base_offset} overlap", p)
    return out


def _entry(e: dict) -> ColdSegment:
    ints = {k: e[k] for k in ("base_offset", "next_offset", "bytes", "crc32c", "max_timestamp",
                              "index_bytes", "index_crc32c", "timeindex_bytes",
                              "timeindex_crc32c", "uploaded_ms")}
    for k, v in ints.items():
        if not isinstance(v, int) or isinstance(v, bool) or (v < 0 and k != "max_timestamp"):
            raise ValueError(f"{k} is {v!r}")
    if ints["next_offset"] <= ints["base_offset"] or not isinstance(e["object"], str):
        raise ValueError(f"bad entry at base offset {ints['base_offset']}")
    return ColdSegment(object=e["object"], **ints)


def document(entries: list[ColdSegment]) -> dict:
    """The file's JSON document for ``entries`` (written by PartitionLog.set_tier)."""
    entries = sorted(entries, key=lambda e: e.base_offset)
    return {"version": VERSION, "segments": [asdict(e) for e in entries]}
