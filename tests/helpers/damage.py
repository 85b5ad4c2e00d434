"""Damage that stays where it is (issue 29, item 0): what the segment, storage, tools, CLI and
Spark tests of a damaged batch share — a topic of batches of 50 records, the positions of its
batches, and the ways a byte of one goes bad."""

import os

from engine import Engine, Record
from engine.format import encode_batch, read_header
from engine.format.records import HEADER_SIZE
from engine.segments.segment import Segment
from helpers import flip

TS0 = 1_700_000_000_000
PER_BATCH = 50


def make_batch(base: int, i: int, n: int = 3, ts: int | None = None) -> bytearray:
    return encode_batch([b"k%d" % i] * n, [b"value-%d" % i * 8] * n,
                        TS0 + 10 * i if ts is None else ts).assign(base)


def write_batches(seg: Segment, count: int) -> list[tuple]:
    """Append ``count`` batches of 3 records after ``seg.size``; returns (position, base, size,
    next, max timestamp) of each."""
    out = []
    pos, off = seg.size, seg.next_offset
    for _ in range(count):
        buf = make_batch(off, off)
        h = read_header(buf)
        seg.write(buf, pos)
        seg.appended(pos, off, len(buf), h.next_offset, h.max_timestamp)
        out.append((pos, off, len(buf), h.next_offset, h.max_timestamp))
        pos, off = pos + len(buf), h.next_offset
    return out


def pdir(data_dir: str, topic: str = "t") -> str:
    return os.path.join(data_dir, "topics", topic, "partition-0")


def make_topic(data_dir: str, batches: int = 3, cfg: dict | None = None, topic: str = "t",
               ts: int | None = None) -> None:
    """``topic``, one partition: ``batches`` batches of PER_BATCH records (offsets from 0,
    values ``v<offset>``, batch ``b`` stamped ``ts + b`` when given), closed cleanly (its
    ``.checkpoint`` covers every byte)."""
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, 1, {"retention.ms": "-1", **(cfg or {})})
        for b in range(batches):
            eng.produce(topic, [Record(key=b"k%d" % (b * PER_BATCH + i),
                                       value=b"v%d" % (b * PER_BATCH + i),
                                       timestamp=None if ts is None else ts + b)
                                for i in range(PER_BATCH)])


def batch_positions(data_dir: str, topic: str = "t") -> list[tuple[str, int, int]]:
    """(segment path, position, base offset) of every batch of the topic, in offset order."""
    d = pdir(data_dir, topic)
    out = []
    for name in sorted(f for f in os.listdir(d) if f.endswith(".log")):
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            h = read_header(data, pos)
            out.append((path, pos, h.base_offset))
            pos += h.size
    return out


# where a flipped bit lands in a batch: its body (the CRC fails), its length and its stored
# length (the header does not parse: where the next batch starts must be found)
WHERE = {"body": HEADER_SIZE + 30, "length": 8, "stored length": 68}


def damage_batch(data_dir: str, base: int, where: str = "body", topic: str = "t") -> tuple[str, int]:
    """Flip a bit of the batch at base offset ``base``; returns (its segment, its position)."""
    for path, pos, b in batch_positions(data_dir, topic):
        if b == base:
            flip(path, pos + WHERE[where], bit=3)
            return path, pos
    raise AssertionError(f"no batch at {base}")


def values(records) -> list[int]:
    return [r.offset for r in records]
