"""A random compacted log, all its records, and Kafka's rule for what a pass keeps: shared by
tests/unit/maintenance and tests/crash/test_compaction_crash.py."""

import random

from engine import Engine, Record

CFG = {"cleanup.policy": "compact", "segment.bytes": "3000", "delete.retention.ms": "0",
       "min.cleanable.dirty.ratio": "0.01"}


def random_log(data_dir, seed=1, n=600, keys=40, partitions=2, cfg=None):
    rng = random.Random(seed)
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", partitions, {**CFG, **(cfg or {})})
        for i in range(0, n, 3):
            eng.produce("c", [Record(key=b"k%d" % rng.randrange(keys),
                                     value=None if rng.random() < 0.1 else b"v%d" % (i + j),
                                     headers=[("h", b"%d" % j)] if j == 1 else ())
                              for j in range(3)])


def everything(eng, topic="c"):
    return {p: eng.read(topic, p, eng.start_offsets(topic)[p], 10**9)
            for p in range(eng.topic(topic).partitions)}


def reference(before, cleanable_end, bound=0):
    """Kafka's rule: in [start, cleanable_end) the last record per key survives (a tombstone
    only while its offset >= bound); everything from cleanable_end on is kept."""
    last = {}
    for r in before:
        if r.offset < cleanable_end:
            last[r.key] = r
    keep = {r.offset for r in last.values() if not (r.value is None and r.offset < bound)}
    return [r for r in before if r.offset >= cleanable_end or r.offset in keep]


def transactions(eng, n=40, topic="t"):
    """The issue's log: ``n`` transactions of one transactional id, every third aborted,
    then plain records that seal the segment holding the last marker. Returns the values
    read_committed readers must see per key."""
    want = {}
    p = eng.producer(transactional_id="x")
    for i in range(n):
        p.begin()
        key, value = b"k%d" % (i % 7), b"v%d-" % i + b"." * 50
        p.produce(topic, [Record(key=key, value=value)], partition=0)
        if i % 3 == 2:
            p.abort()
        else:
            p.commit()
            want[key] = value
    p.close()
    for i in range(12):
        eng.produce(topic, [Record(key=b"z%d" % i, value=b"." * 100)], partition=0)
        want[b"z%d" % i] = b"." * 100
    eng.checkpoint()
    return want
