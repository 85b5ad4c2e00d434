"""Bringing cold segments back to local disk (``rivven tier restore``).

Download every picked segment (each file checked against the manifest's size and CRC32C) into
a staging folder in the partition dir, then one swap (PartitionLog.replace_segments) installs
them and writes the manifest without them; only then are the cold objects deleted. A crash
before the swap commits leaves the staging folder (removed by the next restore) and the log as
it was; after it, the swap is finished by whoever finds it.
"""

from __future__ import annotations

import os
import uuid

from ..failpoint import failpoint
from ..fs import guard
from ..segments import filenames, tier_manifest
from ..segments.tier_manifest import ColdSegment
from ..storage.log import PartitionLog
from . import cold
from .cache import download_segment
from .results import Restored
from .tier_pass import locked, manifest_row

STAGING_PREFIX = ".restore-"


def restore(log: PartitionLog, from_offset: int, dry_run: bool = False) -> Restored:
    """Bring the cold segments from the one holding ``from_offset`` up to the local start back
    to local disk, then drop them from the manifest and the cold store."""
    with locked(log):
        log.cold_entries()  # (refreshes the view; raises on a damaged manifest)
        where = log.tier_home()
        entries = tier_manifest.load(log.dir, where)  # (checked: only our own objects)
        # entries held locally too (a crash between a tier run's manifest write and its
        # deletes) only lose their cold copy
        pick = [e for e in entries if e.next_offset > from_offset]
        out: Restored = {"topic": log.topic, "partition": log.partition,
                         "from_offset": from_offset, "dry_run": dry_run,
                         "segments": [manifest_row(e) for e in pick],
                         "bytes": sum(e.bytes for e in pick)}
        if dry_run or not pick:
            return out
        for name in os.listdir(log.dir):  # a restore that died: we hold the tier lock
            if name.startswith(STAGING_PREFIX):
                guard.remove_tree(log.dir, os.path.join(log.dir, name))
        staging = os.path.join(log.dir, f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}")
        guard.make_dir(staging)
        try:
            install = [e.base_offset for e in pick if not _is_local(log, e)]
            for e in pick:
                if e.base_offset in install:
                    download_segment(e, staging)
            picked = {e.object for e in pick}
            log.replace_segments(install=install, staged_dir=staging, side_files={
                tier_manifest.MANIFEST: tier_manifest.document(
                    [e for e in entries if e.object not in picked], where)})
        finally:
            guard.remove_tree(log.dir, staging)
        failpoint("restore-manifest")
        for e in pick:
            for suffix in e.suffixes():
                cold.remove(e.url(suffix))
        return out


def _is_local(log: PartitionLog, e: ColdSegment) -> bool:
    try:
        return os.path.getsize(filenames.path(log.dir, e.base_offset, filenames.LOG)) == e.bytes
    except FileNotFoundError:
        return False
