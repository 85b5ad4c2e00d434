"""A tiered topic, its manifest and cold objects, and what reads back: shared by
tests/unit/tiering/test_tier.py and tests/crash/test_tier_crash.py."""

import os

from engine import Engine, Record
from engine.segments import tier_manifest
from engine.storage.catalog import home_of

TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
          "segment.bytes": "1500"}


def load_manifest(d: str) -> list:
    return tier_manifest.load(d, home_of(d))


def pdir(data_dir, p=0, topic="t"):
    return os.path.join(data_dir, "topics", topic, f"partition-{p}")


def local_bases(data_dir, p=0, topic="t"):
    return sorted(int(f[:20]) for f in os.listdir(pdir(data_dir, p, topic))
                  if f.endswith(".log") and len(f) == 24)


def cold_objects(data_dir):
    out = []
    for root, _, names in os.walk(os.path.join(data_dir, "cold")):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


def make(data_dir, n=400, partitions=1, cfg=None, ts=None):
    """``n`` records per partition, 10 per batch (~5 batches per segment); values name their
    partition and index so every read can be compared with what was written."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", partitions, {**TIERED, **(cfg or {})})
        for p in range(partitions):
            for i in range(0, n, 10):
                eng.produce("t", [Record(key=b"k%d" % ((i + j) % 7), value=b"p%d-v%05d" % (p, i + j),
                                         timestamp=ts(i + j) if ts else None)
                                  for j in range(10)], partition=p)


def everything(eng, p=0, topic="t"):
    start = eng.start_offsets(topic)[p]
    out = []
    while True:
        recs = eng.read(topic, p, start, 97)
        if not recs:
            return out
        out += [(r.offset, r.key, r.value) for r in recs]
        start = recs[-1].offset + 1


def expected(n, p=0):
    return [(i, b"k%d" % (i % 7), b"p%d-v%05d" % (p, i)) for i in range(n)]
