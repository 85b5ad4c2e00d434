import os

import pytest

from engine import CorruptRecordError, Engine, OffsetOutOfRange, Record
from engine.segments.filenames import segment_bases

SMALL = {"segment.bytes": "4096", "index.interval.bytes": "512"}


def fill(eng, topic, batches, per_batch=7, ts=None):
    acks = []
    for b in range(batches):
        recs = [Record(key=b"k%d" % (b * per_batch + i), value=b"value-%06d" % (b * per_batch + i),
                       timestamp=None if ts is None else ts + b)
                for i in range(per_batch)]
        acks += eng.produce("t", recs)
    return acks


def pdir(data_dir):
    return os.path.join(data_dir, "topics", "t", "partition-0")


def test_reads_from_every_offset_across_rolls(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, SMALL)
        acks = fill(eng, "t", 60)
        assert [o for _, o in acks] == list(range(420))
        assert len(segment_bases(pdir(data_dir))) >= 4
        for off in range(0, 421):
            recs = eng.read("t", 0, off, max_records=25)
            assert [r.offset for r in recs] == list(range(off, min(off + 25, 420)))
            assert all(r.value == b"value-%06d" % r.offset for r in recs)


def test_reopen_continues_offsets_and_indexes_are_used(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, SMALL)
        fill(eng, "t", 30)
    idx = [f for f in os.listdir(pdir(data_dir)) if f.endswith(".index")]
    assert any(os.path.getsize(os.path.join(pdir(data_dir), f)) > 0 for f in idx)
    with Engine.open(data_dir) as eng:
        assert eng.end_offsets("t") == {0: 210}
        acks = eng.produce("t", [Record(value=b"x")])
        assert acks == [(0, 210)]
        assert eng.read("t", 0, 210)[0].value == b"x"


def test_offset_out_of_range(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        fill(eng, "t", 1)
        assert eng.read("t", 0, 7) == []
        with pytest.raises(OffsetOutOfRange, match="valid offsets are 0..7"):
            eng.read("t", 0, 8)


def test_offset_for_time_across_segments(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, SMALL)
        fill(eng, "t", 40, ts=1_000_000)  # batch b has timestamp 1_000_000 + b
        for b in (0, 1, 17, 39):
            assert eng.offset_for_time("t", 0, 1_000_000 + b) == b * 7
        assert eng.offset_for_time("t", 0, 0) == 0
        assert eng.offset_for_time("t", 0, 2_000_000) is None


def test_torn_tail_is_invisible_then_truncated_by_next_writer(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        fill(eng, "t", 3)
    log_path = os.path.join(pdir(data_dir), "00000000000000000000.log")
    size = os.path.getsize(log_path)
    with open(log_path, "ab") as f:  # half a batch, as a writer killed mid-write leaves it
        from engine.format.encode import encode_batch
        f.write(bytes(encode_batch([b"k"], [b"torn"], 1).assign(21))[:50])
    with Engine.open(data_dir, read_only=True) as ro:
        assert ro.end_offsets("t") == {0: 21}
        assert len(ro.read("t", 0, 0, 100)) == 21
    with Engine.open(data_dir) as eng:
        assert eng.produce("t", [Record(value=b"after")]) == [(0, 21)]
        assert [r.value for r in eng.read("t", 0, 20)] == [b"value-000020", b"after"]
    assert os.path.getsize(log_path) > size


def test_every_truncation_point_of_the_last_batch(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        fill(eng, "t", 2)
    log_path = os.path.join(pdir(data_dir), "00000000000000000000.log")
    data = open(log_path, "rb").read()
    with Engine.open(data_dir, read_only=True) as ro:
        last_start = [r.offset for r in ro.read("t", 0, 0)].index(7)
    first_size = len(data) // 2
    assert last_start == 7
    for cut in range(first_size, len(data)):
        with open(log_path, "wb") as f:
            f.write(data[:cut])
        with Engine.open(data_dir) as eng:
            assert eng.end_offsets("t") == {0: 7}
            assert eng.produce("t", [Record(value=b"n")]) == [(0, 7)]


def test_corrupt_sealed_batch_is_reported_not_skipped(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, SMALL)
        fill(eng, "t", 30)
    first = os.path.join(pdir(data_dir), "00000000000000000000.log")
    with open(first, "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0x10]))
    with Engine.open(data_dir, read_only=True) as ro:
        with pytest.raises(CorruptRecordError, match="00000000000000000000.log"):
            ro.read("t", 0, 0)
        assert len(ro.read("t", 0, 100)) > 0  # later segments still readable


def test_damaged_index_is_rebuilt(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"index.interval.bytes": "100"})
        fill(eng, "t", 20)
    idx = os.path.join(pdir(data_dir), "00000000000000000000.index")
    good = open(idx, "rb").read()
    assert len(good) >= 16
    with open(idx, "r+b") as f:
        f.write(b"\xff" * 8)
    with Engine.open(data_dir) as eng:
        eng.produce("t", [Record(value=b"z")])
        assert [r.offset for r in eng.read("t", 0, 50, 5)] == list(range(50, 55))
    assert open(idx, "rb").read()[: len(good)] == good


def test_segment_ms_rolls_by_age(data_dir, monkeypatch):
    import engine.clock

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.ms": "60000"})
        eng.produce("t", [Record(value=b"a")])
        eng.produce("t", [Record(value=b"b", timestamp=1)])  # old timestamps alone don't roll
        assert segment_bases(pdir(data_dir)) == [0]
        later = engine.clock.now_ms() + 61_000
        monkeypatch.setattr(engine.clock, "now_ms", lambda: later)
        eng.produce("t", [Record(value=b"c")])
    assert segment_bases(pdir(data_dir)) == [0, 2]


def test_reads_skip_offset_gaps(data_dir):
    from engine.format.encode import encode_batch
    from engine.storage.log import PartitionLog

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "600"})
        meta = eng.topic("t")
        # another writer of the partition appends batches with holes, as compaction leaves
        # them: offsets 0,2,5 | 6,9 | 10 | 11
        log = PartitionLog(pdir(data_dir), "t", 0, meta.typed, writable=True,
                           topic_id=bytes.fromhex(meta.id))
        for deltas, vals in (([0, 2, 5], [b"a", b"b", b"c"]), ([0, 3], [b"d", b"e"]),
                             ([0], [b"f"])):
            log.append(encode_batch([b"k"] * len(vals), vals, 1, offset_deltas=deltas))
        log.append(encode_batch([b"k"], [b"g"], 1, offset_deltas=[0]))
        log.close()
        assert eng.end_offsets("t") == {0: 12}
        got = {o: [r.offset for r in eng.read("t", 0, o, 100)] for o in range(12)}
        assert got[0] == [0, 2, 5, 6, 9, 10, 11]
        assert got[3] == [5, 6, 9, 10, 11]
        assert got[7] == [9, 10, 11]
        assert [r.value for r in eng.read("t", 0, 1, 2)] == [b"b", b"c"]
        table = eng.read_arrow("t", 0, 1)
        assert table.column("offset").to_pylist() == [2, 5, 6, 9, 10, 11]
        assert table.column("value").to_pylist() == [b"b", b"c", b"d", b"e", b"f", b"g"]


def test_threads_share_a_partition(data_dir):
    import threading

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, SMALL)
        acks: list = []

        def work(n):
            for i in range(50):
                acks.extend(eng.produce("t", [Record(value=b"%d-%d" % (n, i))] * 3))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(o for _, o in acks) == list(range(600))
        assert [r.offset for r in eng.read("t", 0, 0, 1000)] == list(range(600))
