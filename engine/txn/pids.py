"""Producer ids, allocated durably across the processes that share a data dir.

``<data>/txn/producer-ids`` is a sealed JSON document ``{"next": N, "crc32c": ...}``: the
lowest id never handed out. ``allocate`` takes ``flock(<data>/txn/.lock)``, reads it, writes
``N + count`` (tmp, fsync, rename, fsync dir) and only then hands out ``N .. N + count - 1``,
so no two producers of any processes ever share an id, across kill -9 and machine crashes
(an id taken by a process that died is simply never used). A damaged file is reported,
never guessed past: handing out an id twice would let one producer's batches pass for
another's duplicates.
"""

from __future__ import annotations

import os

from ..errors import DamagedMetadata, InvalidArgument
from ..fs import durable, guard, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path

DIR = "txn"
FILE = "producer-ids"
LOCK = ".lock"
WHAT = "producer-id file"
FIX = ("no producer id can be handed out safely until it is fixed: restore it, or write "
       "{\"next\": N} with N above every producer id in use ('rivven txn producers' lists them)")
MAX_ID = (1 << 63) - 2


def path(data_dir: str) -> str:
    return os.path.join(data_dir, DIR, FILE)


def _read(p: str) -> int:
    raw = jsondoc.read(p, WHAT, limit=4096, fix=FIX)
    if raw is None:
        return 0
    doc = jsondoc.unseal(raw, p, WHAT, FIX)
    if set(doc) != {"next"}:
        raise jsondoc.damaged(p, WHAT, f"keys {sorted(doc)}, expected ['next']", FIX)
    return jsondoc.get_int(doc, "next", p, WHAT, 0, MAX_ID, fix=FIX)


def allocate(data_dir: str, lock_wait: LockWait = DEFAULT_WAIT, count: int = 1) -> int:
    """Take ``count`` new producer ids for good; returns the first. Durable before it
    returns (the coordinator takes transactional ids' producer ids here too)."""
    if not 1 <= count <= 1 << 20:
        raise InvalidArgument(f"count must be 1..{1 << 20}, not {count}")
    d = os.path.join(data_dir, DIR)
    if not guard.real_dir(d) and guard.make_dir(d):
        durable.fsync_dir(data_dir)  # (the file in it must not vanish with it in a crash)
    p = path(data_dir)
    with lock_path(os.path.join(d, LOCK), lock_wait):
        for f in os.listdir(d):  # a write a crash cut short (we hold the lock)
            if f.startswith(FILE + ".tmp."):
                os.unlink(os.path.join(d, f))
        first = _read(p)
        if first + count > MAX_ID:
            raise DamagedMetadata(f"{WHAT} {p} says the next id is {first}: producer ids are "
                                  "used up", p)
        durable.write_atomic(p, jsondoc.seal({"next": first + count}))
    return first
