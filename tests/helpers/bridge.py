"""What the copy tests (tests/bridge) share: a topic of every kind of record, a partition's
content as a reader sees it (offsets left out: transaction markers shift them), and a Kafka
topic's content read with confluent-kafka, read_committed, to its end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import engine
from engine import Record
from helpers.kafka import Served, start_server

Row = tuple[Any, Any, tuple, int]


def fill(eng: engine.Engine, topic: str, parts: int = 3, per: int = 7,
         config: dict[str, str] | None = None) -> None:
    """Records of every kind over ``parts`` partitions: headers (a None value among them),
    a tombstone, set timestamps, a committed and an aborted transaction between them."""
    eng.create_topic(topic, parts, config)
    for p in range(parts):
        eng.produce(topic, [Record(f"k{p}-{i}".encode(), f"v{p}-{i}".encode() * (i + 1),
                                   [("h", str(i).encode()), ("n", None)] if i % 2 else (),
                                   1_700_000_000_000 + 1000 * p + i) for i in range(per)],
                    partition=p)
    eng.produce(topic, [Record(b"k0-1", None, (), 1_700_000_100_000)], partition=0)
    tp = eng.producer(transactional_id=f"fill-{topic}")
    tp.begin()
    tp.produce(topic, [Record(b"aborted", b"x", (), 1_700_000_200_000)], partition=1 % parts)
    tp.abort()
    tp.begin()
    tp.produce(topic, [Record(b"committed", b"y", (("t", b"1"),), 1_700_000_300_000)],
               partition=1 % parts)
    tp.produce(topic, [Record(b"committed2", b"z", (), 1_700_000_300_001)], partition=2 % parts)
    tp.commit()
    tp.close()
    eng.produce(topic, [Record(b"last", b"w", (), 1_700_000_400_000)], partition=1 % parts)


def content(eng: engine.Engine, topic: str) -> dict[int, list[Row]]:
    """Per partition what read_committed sees: key, value, headers, timestamp."""
    out = {}
    for p in range(eng.topic(topic).partitions):
        rows: list[Row] = []
        pos = 0
        while True:
            recs = eng.read(topic, p, pos, 100_000, isolation_level="read_committed")
            if not recs:
                break
            rows += [(r.key, r.value, tuple(tuple(h) for h in r.headers), r.timestamp)
                     for r in recs]
            pos = recs[-1].offset + 1
        out[p] = rows
    return out


def kafka_content(bootstrap: str, topic: str, parts: int, timeout: float = 30,
                  committed: bool = True) -> dict[int, list[Row]]:
    """Per partition a Kafka topic's records, read from the beginning to the end the
    partition shows (confluent-kafka, read_committed unless ``committed`` is False)."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rivven-test-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        out: dict[int, list[Row]] = {p: [] for p in range(parts)}
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < parts:
            assert time.monotonic() < deadline, f"{topic}: no end reached in {timeout} s"
            for m in c.consume(10_000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == -191, m.error().str()  # _PARTITION_EOF
                    ended.add(m.partition())
                    continue
                ended.discard(m.partition())
                out[m.partition()].append((m.key(), m.value(),
                                           tuple(tuple(h) for h in m.headers() or ()),
                                           m.timestamp()[1]))
        return out
    finally:
        c.close()


def kafka_fill(bootstrap: str, topic: str, parts: int, per: int = 5,
               transactions: bool = True) -> None:
    """Records into a Kafka topic through confluent-kafka: plain ones per partition with
    headers and timestamps, a tombstone, and (``transactions``) an aborted and a committed
    transaction."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for part in range(parts):
        for i in range(per):
            p.produce(topic, f"v{part}-{i}".encode(), f"k{part}-{i}".encode(), part,
                      timestamp=1_700_000_000_000 + 1000 * part + i,
                      headers=[("h", str(i).encode())] if i % 2 else None)
    p.produce(topic, None, b"k0-0", 0, timestamp=1_700_000_100_000)
    assert p.flush(30) == 0
    if not transactions:
        return
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fill-{topic}"})
    t.init_transactions(30)
    t.begin_transaction()
    t.produce(topic, b"x", b"aborted", 1 % parts, timestamp=1_700_000_200_000)
    t.abort_transaction(30)
    t.begin_transaction()
    t.produce(topic, b"y", b"committed", 1 % parts, timestamp=1_700_000_300_000,
              headers=[("t", b"1")])
    t.commit_transaction(30)


# ---------------------------------------------------------------------- fixtures
# (here, not in tests/bridge/conftest.py: a second conftest module named "conftest" collides
# with tests/conftest.py under --doctest-modules; a test module imports them by name)
@pytest.fixture(name="served")
def served_fixture(tmp_path: Path) -> Iterator[Served]:
    """A ``rivven serve`` on an empty data dir, on a free port: the Kafka cluster."""
    s = start_server(str(tmp_path / "cluster"))
    try:
        yield s
    finally:
        s.kill()


def _engine(path: Path) -> Iterator[engine.Engine]:
    eng = engine.Engine.open(str(path))
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture(name="source")
def source_fixture(tmp_path: Path) -> Iterator[engine.Engine]:
    """The data dir a copy reads (export) ..."""
    yield from _engine(tmp_path / "src")


@pytest.fixture(name="sink")
def sink_fixture(tmp_path: Path) -> Iterator[engine.Engine]:
    """... and the one it writes (import)."""
    yield from _engine(tmp_path / "sink")
