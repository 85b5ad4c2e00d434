"""Mending segment files by hand (``rivven segment recover|reindex``), each partition under its
lock so a live writer waits while its files are mended. The caller reopens its logs after."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..storage import files
from ..storage.locks import DEFAULT_WAIT, LockWait, flocked
from ..storage.segment import Segment
from .verify import recover_segment, resolve_targets


@contextlib.contextmanager
def _partition_locked(pdir: str, wait: LockWait) -> Iterator[None]:
    """The partition's flock when it has a lock file (a topic's partition); else nothing."""
    lock = os.path.join(pdir, files.LOCK_FILE)
    if not os.path.lexists(lock):
        yield
        return
    files.check_own_dir(pdir)
    fd = files.open_file(lock, os.O_RDWR)
    try:
        with flocked(fd, lock, wait):
            yield
    finally:
        os.close(fd)


def recover_segments(data_dir: str, targets: Sequence[str], truncate_corrupt: bool = False,
                     dry_run: bool = False, wait: LockWait = DEFAULT_WAIT
                     ) -> list[dict[str, Any]]:
    """Truncate torn tails (and with ``truncate_corrupt`` corrupt tails) and rebuild indexes
    of the targeted segments, each partition under its lock."""
    out = []
    for d, only in resolve_targets(data_dir, list(targets)):
        logs = only or [files.path(d, b, files.LOG) for b in files.segment_bases(d)]
        with _partition_locked(d, wait):
            for path in logs:
                base = files.parse(os.path.basename(path))[0]
                out.append(recover_segment(path, base, truncate_corrupt, dry_run))
    return out


def reindex(path: str, wait: LockWait = DEFAULT_WAIT) -> dict[str, Any]:
    """Rebuild one segment's ``.index`` and ``.timeindex`` from its log, under its partition's
    lock."""
    d = os.path.dirname(os.path.abspath(path))
    parsed = files.parse(os.path.basename(path))
    if parsed is None or parsed[1] != files.LOG:
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
