"""Engine.produce_wire_body and produce_wire_bodies: a Kafka client's batch stored from the
body transcoded in C (engine.format.kafka_batch), as produce_wire stores its columns; one cut
where rivven's columns pass max.message.bytes; a request's partitions in one WAL fsync, each
answered on its own."""

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from engine import Engine
from engine.errors import RecordTooLarge, UnknownPartition
from engine.format import kafka_batch

TS = 1_700_000_000_000


def kafka(n, value=b"v" * 100, producer=(-1, -1, -1), first=0, headers=True):
    b = DefaultRecordBatchBuilder(2, 0, 0, *producer, 1 << 30)
    for i in range(n):
        b.append(i, TS + i % 3, b"k%05d" % (first + i), value + b"%d" % (first + i),
                 [("h", b"%d" % i)] if headers and i % 4 == 0 else [])
    return kafka_batch.decode(bytes(b.build()), 1 << 24)


def held(eng, topic, partition=0):
    return [(r.offset, r.key, r.value, list(r.headers), r.timestamp)
            for r in eng.read(topic, partition, 0, 100_000)]


def test_a_body_is_stored_as_produce_wire_stores_the_columns(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("a")
        eng.create_topic("b")
        kb = kafka(300)
        assert eng.produce_wire_body("a", 0, kb) == 0
        assert eng.produce_wire("b", 0, kb.keys, kb.values, kb.headers, kb.timestamps) == 0
        assert held(eng, "a") == held(eng, "b")
        assert [v for _, _, v, _, _ in held(eng, "a")][:2] == [b"v" * 100 + b"0",
                                                              b"v" * 100 + b"1"]


def test_records_larger_as_columns_than_max_message_bytes_are_cut(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", config={"max.message.bytes": "8000"})
        kb = kafka(200, producer=(0, 0, 0))  # (an idempotent producer's: 200 sequences)
        eng.producer(producer_id=0)  # (the producer id taken, as InitProducerId does)
        assert eng.produce_wire_body("t", 0, kb, (0, 0, 0)) == 0
        f = eng.fetch("t", 0, 0, 1 << 20)
        sizes = [b.header.size for b in f.batches]
        # (at most 5: a retry is known as one by the producer state's last 5 batches)
        assert 1 < len(sizes) <= 5 and max(sizes) <= 8000
        # each batch's sequence is its first record's
        assert [b.header.base_sequence for b in f.batches] == [b.header.base_offset
                                                               for b in f.batches]
        assert [k for _, k, _, _, _ in held(eng, "t")] == kb.keys
        # the same batch again (a client's retry) is a duplicate: its first offset, nothing new
        assert eng.produce_wire_body("t", 0, kafka(200, producer=(0, 0, 0)), (0, 0, 0)) == 0
        assert eng.offsets.of_partition("t", 0)[1] == 200


def test_a_record_too_large_alone_is_refused(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", config={"max.message.bytes": "1000"})
        with pytest.raises(RecordTooLarge, match="record 0 is .* over max.message.bytes=1000"):
            eng.produce_wire_body("t", 0, kafka(3, value=b"x" * 2000))
        assert eng.offsets.of_partition("t", 0) == (0, 0)


def test_a_requests_partitions_share_one_wal_fsync_and_answer_each(data_dir, monkeypatch):
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    with Engine.open(data_dir, settings={"checkpoint.interval.bytes": str(1 << 30)}) as eng:
        eng.create_topic("t", partitions=4)
        eng.produce_wire_body("t", 0, kafka(1))  # (the WAL file prepared)
        monkeypatch.setattr(os, "fdatasync", recording)
        got = eng.produce_wire_bodies([("t", p, kafka(50, first=100 * p), None, False, 0)
                                       for p in range(4)] +
                                      [("t", 9, kafka(5), None, False, 0),
                                       ("t", 2, kafka(5, first=900), None, False, 0)])
        monkeypatch.undo()
        assert got[:4] == [1, 0, 0, 0] and isinstance(got[4], UnknownPartition)
        assert got[5] == 50
        assert [f[-4:] for f in synced] == [".wal"]
        assert [k for _, k, _, _, _ in held(eng, "t", 2)] == (
            [b"k%05d" % i for i in range(200, 250)] + [b"k%05d" % i for i in range(900, 905)])


def test_several_batches_of_one_partition_at_once_never_wait_for_themselves(data_dir,
                                                                            monkeypatch):
    """append_each logs every batch before it waits for any: once the partition's flock has
    been held past HOLD_S, the pipeline lets pending batches drain before it logs another,
    which must not mean waiting for the batches the same call logged (a deadlock found by
    bench_kafka: pipelined Produce requests to one partition handled as one)."""
    import threading

    from engine.storage import pipeline

    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce_wire_body("t", 0, kafka(1))
        monkeypatch.setattr(pipeline, "HOLD_S", -1.0)  # (every flock held "too long")
        got: list = []
        t = threading.Thread(target=lambda: got.extend(eng.produce_wire_bodies(
            [("t", 0, kafka(10, first=10 * i), None, False, 0) for i in range(4)])),
            daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "produce_wire_bodies waits for its own batches"
        assert got == [1, 11, 21, 31]
