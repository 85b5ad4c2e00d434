import os
import sys

import pytest

from engine import (
    DataDirError,
    Engine,
    InvalidArgument,
    InvalidConfig,
    InvalidTopicName,
    ReadOnlyError,
    Record,
    RecordTooLarge,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from engine.produce.partitioner import partition_for_key


def test_contract_example(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("orders", partitions=3, config={"retention.ms": "604800000"})
        acks = eng.produce("orders", [Record(key=b"k1", value=b"v1", headers=[("src", b"api")])],
                           partition=None, compression=None)
        p = partition_for_key(b"k1", 3)
        assert acks == [(p, 0)]
        recs = eng.read("orders", partition=p, offset=0, max_records=1000)
        assert recs[0].key == b"k1" and recs[0].value == b"v1" and recs[0].offset == 0
        assert recs[0].headers == (("src", b"api"),) and recs[0].timestamp > 0
        assert eng.end_offsets("orders")[p] == 1 and eng.start_offsets("orders") == {0: 0, 1: 0, 2: 0}
        assert eng.offset_for_time("orders", p, 0) == 0
    with Engine.open(data_dir, read_only=True) as ro:
        assert ro.read("orders", p, 0)[0].value == b"v1"
        with pytest.raises(ReadOnlyError):
            ro.produce("orders", [Record(value=b"x")])


def test_acks_in_input_order_across_partitions(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 4)
        keys = [b"key-%d" % i for i in range(200)]
        acks = eng.produce("t", [Record(key=k, value=k) for k in keys])
        for k, (p, off) in zip(keys, acks):
            assert p == partition_for_key(k, 4)
            assert eng.read("t", p, off, 1)[0].value == k


def test_keyless_records_are_sticky_per_call(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 3)
        parts = [{p for p, _ in eng.produce("t", [Record(value=b"x")] * 5)} for _ in range(3)]
        assert all(len(s) == 1 for s in parts)
        assert set().union(*parts) == {0, 1, 2}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_per_call_and_per_topic(data_dir, codec):
    with Engine.open(data_dir) as eng:
        eng.create_topic("a", 1)
        eng.create_topic("b", 1, {"compression.type": codec})
        vals = [b"hello world %d" % i * 20 for i in range(500)]
        eng.produce_batch("a", vals, compression=codec)
        eng.produce_batch("b", vals)
        for t in ("a", "b"):
            assert [r.value for r in eng.read(t, 0, 0, 1000)] == vals


def test_read_arrow(data_dir):
    pa = pytest.importorskip("pyarrow")
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "2048"})
        for i in range(20):
            eng.produce("t", [Record(key=None if j % 3 == 0 else b"k%d" % j,
                                     value=None if j == 4 else b"v%d-%d" % (i, j),
                                     headers=[("h", b"%d" % j)] if j == 1 else (),
                                     timestamp=1000 + i)
                              for j in range(10)])
        table = eng.read_arrow("t", 0, 15, 100)
        recs = eng.read("t", 0, 15, 100)
        assert table.num_rows == 100
        assert table.column("offset").to_pylist() == [r.offset for r in recs]
        assert table.column("key").to_pylist() == [r.key for r in recs]
        assert table.column("value").to_pylist() == [r.value for r in recs]
        assert table.column("timestamp").cast(pa.int64()).to_pylist() == \
            [r.timestamp for r in recs]
        assert table.column("headers").to_pylist() == \
            [[{"key": k, "value": v} for k, v in r.headers] for r in recs]
        assert table.schema.field("timestamp").type == pa.timestamp("ms")
        assert eng.read_arrow("t", 0, 200).num_rows == 0


def test_import_engine_is_light():
    code = "import engine, sys; print('pyspark' in sys.modules, 'pyarrow' in sys.modules)"
    out = os.popen(f"{sys.executable} -c \"{code}\"").read().split()
    assert out == ["False", "False"]


def test_topic_admin(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
        with pytest.raises(TopicExists):
            eng.create_topic("t", 2)
        assert eng.create_topic("t", 5, if_not_exists=True).partitions == 2
        eng.alter_topic_config("t", {"retention.ms": "1000"})
        assert eng.topic("t").config == {"retention.ms": "1000"}
        eng.alter_topic_config("t", delete=["retention.ms"])
        assert eng.topic("t").config == {}
        eng.add_partitions("t", 4)
        assert eng.produce("t", [Record(value=b"x")], partition=3) == [(3, 0)]
        with pytest.raises(InvalidArgument):
            eng.add_partitions("t", 3)
        d = eng.describe_topic("t")
        assert d["partitions"] == 4 and d["partition_info"][3]["end_offset"] == 1
        assert {"key": "retention.ms", "value": "604800000", "source": "default"} in d["config"]
        eng.delete_topic("t")
        with pytest.raises(UnknownTopic):
            eng.read("t", 0, 0)
        eng.create_topic("t", 1)
        assert eng.end_offsets("t") == {0: 0}  # recreated empty
    assert not os.listdir(os.path.join(data_dir, "trash"))


@pytest.mark.parametrize("name", ["", "../x", "a" * 250, ".", "..", "a/b", "ü"])
def test_invalid_topic_names(data_dir, name):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidTopicName):
            eng.create_topic(name)


@pytest.mark.parametrize("cfg", [{"nope": "1"}, {"segment.bytes": "abc"},
                                 {"segment.bytes": "10"}, {"cleanup.policy": "keep"},
                                 {"compression.type": "brotli"}, {"retention.ms": "-5"}])
def test_invalid_configs(data_dir, cfg):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidConfig):
            eng.create_topic("t", 1, cfg)
        assert eng.topics() == []


def test_partition_checks(data_dir):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidArgument):
            eng.create_topic("t", 0)
        eng.create_topic("t", 2)
        with pytest.raises(UnknownPartition):
            eng.produce("t", [Record(value=b"x")], partition=2)
        with pytest.raises(UnknownPartition):
            eng.read("t", 5, 0)


def test_max_message_bytes(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"max.message.bytes": "2000"})
        with pytest.raises(RecordTooLarge) as e:
            eng.produce("t", [Record(value=b"a")] * 3 + [Record(value=b"x" * 5000)])
        assert e.value.index == 3
        assert eng.end_offsets("t") == {0: 0}  # nothing of the call stored
        acks = eng.produce("t", [Record(value=b"y" * 100)] * 100)  # split into batches
        assert [o for _, o in acks] == list(range(100))
        assert len(eng.read("t", 0, 0, 1000)) == 100


def test_compacted_topic_needs_keys(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact"})
        with pytest.raises(InvalidArgument, match="needs a key"):
            eng.produce("c", [Record(value=b"x")])


def test_data_dir_checks(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DataDirError, match="is a file"):
        Engine.open(str(f))
    other = tmp_path / "other"
    other.mkdir()
    (other / "stuff.txt").write_text("x")
    with pytest.raises(DataDirError, match="not a rivven data dir"):
        Engine.open(str(other))
    with pytest.raises(DataDirError):
        Engine.open(str(tmp_path / "missing"), read_only=True)


def test_produce_notices_topic_recreated_by_another_process(data_dir, monkeypatch):
    # a produce looks at topics.json at most every CATALOG_RECHECK_S; make the cache always
    # hit, so that only the failure paths can notice what the other "process" did
    import engine.produce.path as produce_mod
    monkeypatch.setattr(produce_mod, "CATALOG_RECHECK_S", 3600.0)
    with Engine.open(data_dir) as a, Engine.open(data_dir) as b:
        a.create_topic("t", 1)
        assert a.produce_batch("t", [b"old"], partition=0) == [(0, 0)]
        b.delete_topic("t")
        with pytest.raises(UnknownTopic):  # its partition lock file is gone
            a.produce_batch("t", [b"x"], partition=0)
        b.create_topic("t", 2)  # recreated, with more partitions
        assert a.produce_batch("t", [b"new"], partition=0) == [(0, 0)]
        b.delete_topic("t")
        b.create_topic("t", 3)
        assert a.produce_batch("t", [b"p2"], partition=2) == [(2, 0)]  # UnknownPartition: look again
        assert a.produce_batch("t", [b"p0"], partition=0) == [(0, 0)]
        assert [r.value for r in b.read("t", 0, 0)] == [b"p0"]
        assert [r.value for r in b.read("t", 2, 0)] == [b"p2"]
        b.add_partitions("t", 4)
        assert a.produce_batch("t", [b"p3"], partition=3) == [(3, 0)]
        with pytest.raises(UnknownPartition):
            a.produce_batch("t", [b"x"], partition=4)


def test_produce_sees_config_changed_by_another_process(data_dir):
    import time

    import engine.produce.path as produce_mod
    with Engine.open(data_dir) as a, Engine.open(data_dir) as b:
        a.create_topic("t", 1)
        a.produce_batch("t", [b"x" * 500], partition=0)
        b.alter_topic_config("t", {"max.message.bytes": "200"})
        time.sleep(produce_mod.CATALOG_RECHECK_S * 2)
        with pytest.raises(RecordTooLarge):
            a.produce_batch("t", [b"x" * 500], partition=0)
        a.alter_topic_config("t", {"max.message.bytes": "100000"})  # this engine's: at once
        assert a.produce_batch("t", [b"x" * 500], partition=0) == [(0, 1)]
