"""The one crash-safe way to replace a partition's segments (Kafka's ``.cleaned`` -> ``.swap``).

Compaction and restore hand finished segments to ``PartitionLog.replace_segments``, which
calls, under the partition lock:

1. ``stage``: move each staged file to ``<name>.cleaned`` in the partition dir and fsync it;
2. ``commit``: write ``compaction.swap.json`` atomically — the commit point:
   ``{"segments": [bases installed], "replaces": [bases removed],
   "files": {name: JSON written as that file}, "txnindex": [installed bases that bring a
   .txnindex]}``;
3. ``roll_forward``: ``.cleaned`` -> ``.swap`` (fsync dir), ``.swap`` -> final name, newest
   segment first (fsync dir; a replaced segment with the same base goes in this one rename,
   and the ``.txnindex`` of a replaced segment whose replacement brings none is deleted
   after it: its entries would name markers the new segment may not hold), write the side
   files (``.cleaner``, ``tier.json``), delete the replaced segments that were not
   overwritten, delete the swap manifest.

Whoever finds the manifest finishes the swap: a writer opening the partition, or the next
replacement (``roll_forward`` is idempotent). Without it, ``.cleaned`` and ``.swap`` files are
debris of a swap that never committed, and are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import RivvenError
from ..failpoint import failpoint
from ..fs import durable, guard
from . import filenames

MANIFEST = "compaction.swap.json"  # (named for its first user; the name is on disk)


class SwapRefused(RivvenError):
    """Nothing was replaced: the partition changed since the caller planned the swap."""


def pending(pdir: str) -> bool:
    return os.path.exists(os.path.join(pdir, MANIFEST))


def stage(pdir: str, staged_dir: str, bases: Sequence[int]) -> None:
    """(Lock held.) Move the staged segments in as ``.cleaned`` files, each fsynced."""
    for b in bases:
        for suffix in filenames.INSTALL_ORDER:
            src = filenames.path(staged_dir, b, suffix)
            if os.path.islink(src):  # (a staged file becomes a segment: never a link)
                raise guard.UnexpectedLink(src)
            if suffix in filenames.OPTIONAL_FILES and not os.path.exists(src):
                continue
            dst = filenames.path(pdir, b, suffix + filenames.CLEANED)
            shutil.move(src, dst)
            durable.fsync_file(dst)
    durable.fsync_dir(pdir)


def commit(pdir: str, install: Sequence[int], remove: Sequence[int],
           side_files: Mapping[str, Any]) -> None:
    """(Lock held, staged.) The commit point: from here on the swap happens."""
    # which new segments bring a .txnindex: the roll-forward deletes the old one of the others
    # (it cannot tell later whether a .txnindex at an installed base is the new or the old one)
    with_txn = [b for b in install if os.path.exists(
        filenames.path(pdir, b, filenames.TXNINDEX + filenames.CLEANED))]
    manifest = {"segments": list(install), "replaces": list(remove), "files": dict(side_files),
                "txnindex": with_txn}
    durable.write_atomic(os.path.join(pdir, MANIFEST), json.dumps(manifest).encode())


def _read(pdir: str) -> dict[str, Any] | None:
    """The manifest, checked: bases are offsets, side files are plain names in ``pdir``."""
    p = os.path.join(pdir, MANIFEST)
    try:
        with open(p, "rb") as f:
            m = json.loads(f.read(64 << 20))
        install = [int(b) for b in m["segments"]]
        remove = [int(b) for b in m["replaces"]]
        side = dict(m.get("files") or {})
        txn = m.get("txnindex")  # (None in a manifest of an earlier rivven: left alone)
        with_txn = None if txn is None else {int(b) for b in txn}
        if "cleaner" in m:  # written by rivven before the protocol moved into storage
            side[".cleaner"] = m["cleaner"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RivvenError(f"swap manifest {p} is damaged ({e}): the swap it commits cannot "
                          "be finished; restore the file from a backup") from None
    for name in side:
        if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
            raise RivvenError(f"swap manifest {p} names the file {name!r} outside its partition")
    if any(b < 0 for b in install + remove):
        raise RivvenError(f"swap manifest {p} names a negative base offset")
    return {"install": install, "remove": remove, "files": side, "txnindex": with_txn}


def roll_forward(pdir: str) -> bool:
    """Finish a committed swap, or discard the debris of one that never committed. Run with
    the partition lock held. Idempotent. Returns True when a swap was finished."""
    m = _read(pdir)
    if m is None:
        # debris of a swap that never committed (a manifest's temp file is the loader's:
        # durable.remove_write_debris)
        for f in os.listdir(pdir):
            if f.endswith((filenames.CLEANED, filenames.SWAP)):
                os.unlink(os.path.join(pdir, f))
        return False
    install = m["install"]
    # 1. .cleaned -> .swap: every new file is whole and fsynced under a name of its own
    for b in install:
        for suffix in filenames.INSTALL_ORDER:
            c = filenames.path(pdir, b, suffix + filenames.CLEANED)
            if os.path.exists(c):
                os.replace(c, filenames.path(pdir, b, suffix + filenames.SWAP))
                failpoint("swap-renaming")
    durable.fsync_dir(pdir)
    failpoint("swap-swapped")
    # 2. .swap -> final name (a replaced segment with the same base goes in this rename),
    #    newest first: segments installed below the local ones (a restore) then always extend
    #    the local log downwards, so a reader never finds a hole between local segments
    for b in sorted(install, reverse=True):
        for suffix in filenames.INSTALL_ORDER:
            s = filenames.path(pdir, b, suffix + filenames.SWAP)
            if os.path.exists(s):
                os.replace(s, filenames.path(pdir, b, suffix))
                failpoint("swap-installing")
        if m["txnindex"] is not None and b not in m["txnindex"]:
            with contextlib.suppress(FileNotFoundError):  # (the replaced segment's, if any)
                os.unlink(filenames.path(pdir, b, filenames.TXNINDEX))
        failpoint("swap-installed")
    durable.fsync_dir(pdir)
    # 3. side files (the tier manifest must name cold copies before local ones go)
    for name, doc in m["files"].items():
        durable.write_atomic(os.path.join(pdir, name), json.dumps(doc).encode())
    failpoint("swap-files")
    # 4. the replaced segments not overwritten by a new one
    for b in m["remove"]:
        if b in install:
            continue
        for suffix in filenames.DELETE_ORDER:
            try:
                os.unlink(filenames.path(pdir, b, suffix))
                failpoint("swap-deleting")
            except FileNotFoundError:
                pass
    durable.fsync_dir(pdir)
    failpoint("swap-cleaner")
    os.unlink(os.path.join(pdir, MANIFEST))
    durable.fsync_dir(pdir)
    return True
