"""A partition's ``.checkpoint``: its recovery point and log start offset (sealed JSON, atomic).

``{"segment": base offset of the active segment, "position": bytes of it known fsynced,
"recovery_point": the offset they end at, "log_start_offset": N, "crc32c": ...}``. Written
whole (tmp, fsync, rename, fsync dir) under the partition lock; read by anyone.

Nothing in it is acted on unchecked: ``read_checkpoint`` refuses a file that is not JSON,
fails its CRC32C seal (files written before seals: exactly the four keys, accepted) or holds
anything but non-negative integers, and ``check`` refuses one that contradicts the segments on
disk (a log start past the log end, a segment newer than any on disk ...). The callers
(engine.segments.segment_set, log) then ignore the file, note why (``Engine.repairs()``), and
act as if there were none: recovery trusts no byte of the active segment it has not checked
itself, and the log start is the first segment's base offset; nothing is deleted because of
it. The next checkpoint replaces it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..errors import DamagedMetadata, plural
from ..format.crc import crc32c
from ..fs import durable, jsondoc
from . import filenames

_N = rb"(0|[1-9][0-9]{0,18})"
_WRITTEN = re.compile(rb'\{"segment": %s, "position": %s, "recovery_point": %s, '
                      rb'"log_start_offset": %s, "crc32c": %s\}' % ((_N,) * 5))
KEYS = ("segment", "position", "recovery_point", "log_start_offset")
WHAT = "checkpoint"
FIX = "it is ignored (nothing is deleted because of it) and the next checkpoint replaces it"


def path(directory: str) -> str:
    return os.path.join(directory, filenames.CHECKPOINT)


def read_checkpoint(directory: str) -> dict | None:
    """The partition's checkpoint as read, None when there is none; DamagedMetadata (naming
    the file) when it is damaged. ``check`` says whether it agrees with the log."""
    p = path(directory)
    try:
        raw = jsondoc.read(p, WHAT, limit=64 << 10, fix=FIX)
    except OSError as e:  # (EIO, EACCES: as unusable as a damaged file)
        raise jsondoc.damaged(p, WHAT, f"unreadable: {e.strerror or e}", FIX) from None
    if raw is None:
        return None
    m = _WRITTEN.fullmatch(raw)
    if m is not None:  # as seal() writes it: checked without a JSON round trip (topic list)
        seg, pos, rp, start, crc = (int(g) for g in m.groups())
        body = b'{"log_start_offset":%d,"position":%d,"recovery_point":%d,"segment":%d}' % (
            start, pos, rp, seg)
        if crc32c(body) == crc and max(seg, pos, rp, start) <= jsondoc.MAX_INT:
            return {"segment": seg, "position": pos, "recovery_point": rp,
                    "log_start_offset": start}
    doc = jsondoc.unseal(raw, p, WHAT, FIX, legacy=KEYS)
    if set(doc) != set(KEYS):
        raise jsondoc.damaged(p, WHAT, f"keys {sorted(doc)}, expected {list(KEYS)}", FIX)
    return {k: jsondoc.get_int(doc, k, p, WHAT, fix=FIX) for k in KEYS}


def check(directory: str, point: dict, bases: Sequence[int], active_size: int,
          end: int | None = None) -> None:
    """DamagedMetadata when ``point`` contradicts the segments on disk: ``bases`` (the last is
    the active segment, ``active_size`` bytes long) and, once known, the log ``end``.

    Only what a correct writer can never leave is refused: the file is written after the
    bytes it vouches for are fsynced, segments roll at the recovery point and only the active
    segment grows, and the log start never passes the log end (``segment recover`` rewrites
    the file when it cuts below it)."""
    seg, pos, rp, start = (point[k] for k in KEYS)
    reason = None
    if not start <= rp:
        reason = f"its log start offset {start} lies past its recovery point {rp}"
    elif not seg <= rp:
        reason = f"its recovery point {rp} lies below its segment {seg}"
    elif bases and seg > bases[-1]:
        reason = f"it names segment {seg}, newer than any on disk (the last is {bases[-1]})"
    elif bases and seg == bases[-1] and pos > active_size:
        reason = (f"it vouches for {plural(pos, 'byte')} of segment {seg}, which holds {active_size}")
    elif end is not None and rp > end:
        reason = f"its recovery point {rp} lies past the log end {end}"
    if reason is None and bases:
        i = _index(bases, seg)
        if i is not None and i + 1 < len(bases) and rp > bases[i + 1]:
            reason = (f"its recovery point {rp} lies past segment {bases[i + 1]}, which "
                      f"follows its segment {seg}")
    if reason is not None:
        raise DamagedMetadata(f"checkpoint {path(directory)} disagrees with the log ({reason}); "
                              f"{FIX}", path(directory))


def _index(bases: Sequence[int], base: int) -> int | None:
    from bisect import bisect_left

    i = bisect_left(bases, base)
    return i if i < len(bases) and bases[i] == base else None


def write_checkpoint(directory: str, point: dict, sync_dir: bool = True) -> None:
    """``sync_dir=False``: a WAL checkpoint's, whose log start did not move: a crash may leave
    the previous file, which only makes recovery scan further."""
    durable.write_atomic(path(directory), jsondoc.seal({k: point[k] for k in KEYS}), sync_dir)


def stamp(directory: str) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of the file: changes when any process writes a new one."""
    try:
        st = os.stat(path(directory))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
