"""Producer ids, allocated durably across processes: ``<data>/txn/producer-ids``.

INTERIM (branch i15-coord): the minimal allocator the transaction coordinator needs; the
idempotent-producer branch brings the real module with the same ``allocate(data_dir)``, and it
replaces this file at merge.

``producer-ids`` is a sealed JSON document ``{"next": N}`` (engine.storage.jsondoc), changed
only under ``flock(<data>/txn/.lock)`` and replaced atomically (write, fsync, rename, fsync
dir) before the id is handed out, so no two producers of any processes share an id, across
kill -9 and machine crashes (an id taken by a process that then died is never reused).
"""

from __future__ import annotations

import os

from ..storage import files, guard, jsondoc
from ..storage.locks import lock_path

TXN_DIR = "txn"
IDS_FILE = "producer-ids"
LOCK = ".lock"
MAX_ID = (1 << 63) - 2
_WHAT = "producer id file"
_FIX = "restore it from a backup; ids must never go back"


def allocate(data_dir: str) -> int:
    """A producer id no process of this data dir has had or will have."""
    root = os.path.join(data_dir, TXN_DIR)
    guard.make_dirs(data_dir, root)
    path = os.path.join(root, IDS_FILE)
    with lock_path(os.path.join(root, LOCK)):
        raw = jsondoc.read(path, _WHAT, 1 << 16, _FIX)
        nxt = 0
        if raw is not None:
            doc = jsondoc.unseal(raw, path, _WHAT, _FIX)
            nxt = jsondoc.get_int(doc, "next", path, _WHAT, 0, MAX_ID, _FIX)
        files.write_atomic(path, jsondoc.seal({"next": nxt + 1}))
    return nxt
