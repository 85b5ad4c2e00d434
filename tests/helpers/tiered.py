"""A tiered topic on real files, its segments and values, crafted manifest entries and clean
errors: shared by tests/unit/tiering/test_tier_manifest.py and test_cache_trust.py."""

import json
import os
import time

from engine import Engine, Record
from engine.segments import tier_manifest

TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
          "segment.bytes": "1500"}
SUFFIXES = (".log", ".index", ".timeindex")
TS0 = int(time.time() * 1000) - 60_000  # (recent: retention keeps it)


def pdir(data_dir, topic="tt", p=0):
    return os.path.join(data_dir, "topics", topic, f"partition-{p}")


def make(data_dir, topic="tt", n=300, letter=b"g", cfg=None):
    """A tiered topic of ``n`` records whose values are ``letter`` * 6 + index, fixed
    timestamps (two data dirs made with different letters have segments of the same sizes),
    moved to the default cold store."""
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, 1, {**TIERED, **(cfg or {})})
        for i in range(0, n, 10):
            eng.produce(topic, [Record(key=b"k%d" % (i + j), value=letter * 6 + b"%05d" % (i + j),
                                       timestamp=TS0 + i + j) for j in range(10)], partition=0)
        eng.maintenance.tier(topic)
        return eng.topic(topic).id


def segments(data_dir, topic="tt"):
    with open(tier_manifest.path(pdir(data_dir, topic)), "rb") as f:
        return json.loads(f.read())["segments"]


def tree(path):
    """Every file under ``path`` with its bytes."""
    out = {}
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".stats"]  # counters, not data (docs/METRICS.md)
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = f.read()
    return out


def victim_dir(base):
    """A directory that is not rivven's: a precious file, and files named like an object."""
    (base / "sub").mkdir(parents=True)
    (base / "keep.txt").write_text("precious")
    for s in SUFFIXES:
        (base / "sub" / f"obj{s}").write_bytes(b"not rivven's " + s.encode())
    return tree(base)


def clean(r):
    err = r.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err, err
    return err


def values(stdout):
    return [line.split(" ", 1)[1] for line in stdout.decode().splitlines()]


def entry(obj, base=0):
    return {"base_offset": base, "next_offset": base + 10, "bytes": 1, "crc32c": 2,
            "max_timestamp": TS0, "index_bytes": 0, "index_crc32c": 0, "timeindex_bytes": 0,
            "timeindex_crc32c": 0, "object": obj, "uploaded_ms": TS0}
