"""Engine.produce_arrow and `rivven produce --input parquet|arrow`: Arrow columns stored as
batches without a Python step per row, read back as produce() would have stored them."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import run_rivven
from helpers.cli import run_in_process
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Engine, Record
from engine.errors import InvalidArgument, RecordTooLarge, UnknownPartition
from engine.format import native


def rows(eng, topic):
    out = []
    for p in range(eng.topic(topic).partitions):
        out += [(p, r.offset, r.key, r.value, r.timestamp, list(r.headers))
                for r in eng.read(topic, p, 0, 100_000)]
    return out


def test_keyed_rows_land_where_produce_puts_them(data_dir):
    keys = [b"key-%d" % i for i in range(3000)]
    values = [b"value-%d" % i for i in range(3000)]
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("a", partitions=5)
        eng.create_topic("r", partitions=5)
        out = eng.produce_arrow("a", pa.table({"key": keys, "value": values}))
        acks = eng.produce("r", [Record(k, v) for k, v in zip(keys, values)])
        assert sorted((p, b, n) for p, b, n in out) == sorted(out)
        assert sum(n for _, _, n in out) == 3000
        per = {}
        for p, base, n in out:
            per.setdefault(p, []).extend(range(base, base + n))
        assert {p: len(v) for p, v in per.items()} == {
            p: sum(1 for q, _ in acks if q == p) for p in range(5)}
        a = [(p, o, k, v) for p, o, k, v, _, _ in rows(eng, "a")]
        r = [(p, o, k, v) for p, o, k, v, _, _ in rows(eng, "r")]
        assert a == r


def test_strings_slices_chunks_nulls_and_timestamps(data_dir):
    n = 500
    t1 = pa.table({"key": pa.array([None if i % 7 == 0 else f"k{i}" for i in range(n)]),
                   "value": pa.array([None if i % 11 == 0 else f"v{i}" for i in range(n)],
                                     pa.large_string()),
                   "timestamp": pa.array([1_700_000_000_000 + (i * 37) % 1000 for i in range(n)],
                                         pa.int64())})
    chunked = pa.concat_tables([t1.slice(0, 200), t1.slice(200)])  # two chunks
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=1)
        eng.produce_arrow("t", chunked.slice(3, 400))  # a slice: offsets not at 0
        got = rows(eng, "t")
        assert [g[1] for g in got] == list(range(400))
        want = t1.slice(3, 400).to_pylist()
        assert [g[2] for g in got] == [None if w["key"] is None else w["key"].encode()
                                       for w in want]
        assert [g[3] for g in got] == [None if w["value"] is None else w["value"].encode()
                                       for w in want]
        assert [g[4] for g in got] == [w["timestamp"] for w in want]


def test_arrow_timestamps_null_timestamps_partition_column_and_headers(data_dir):
    ts = pa.array([1_600_000_000_123_456, None, 1_600_000_000_999_000], pa.timestamp("us"))
    hs = pa.array([[{"key": "h", "value": b"1"}], None, [{"key": "a", "value": None}]],
                  pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    t = pa.table({"value": [b"x", b"y", b"z"], "timestamp": ts, "headers": hs,
                  "partition": pa.array([1, None, 0], pa.int32())})
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=2)
        eng.produce_arrow("t", t)
        got = {g[3]: g for g in rows(eng, "t")}
        assert got[b"x"][0] == 1 and got[b"z"][0] == 0
        assert got[b"x"][4] == 1_600_000_000_123 and got[b"z"][4] == 1_600_000_000_999
        assert got[b"y"][4] > 1_700_000_000_000  # null: now
        assert got[b"x"][5] == [("h", b"1")] and got[b"z"][5] == [("a", None)]
        assert got[b"y"][5] == []


def test_batches_are_cut_at_max_message_bytes(data_dir):
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=1, config={"max.message.bytes": "10000"})
        out = eng.produce_arrow("t", pa.table({"value": [b"x" * 100] * 1000}))
        assert len(out) > 10 and sum(n for _, _, n in out) == 1000
        assert [b for _, b, _ in out] == [sum(n for _, _, n in out[:i]) for i in range(len(out))]
        with pytest.raises(RecordTooLarge, match="row 2 is about"):
            eng.produce_arrow("t", pa.table({"value": [b"a", b"b", b"x" * 20000]}))
        assert eng.end_offsets("t") == {0: 1000}  # nothing of the refused call stored


def test_a_call_cut_into_many_batches_costs_one_wal_fsync(data_dir, monkeypatch):
    """Every batch of a call (produce_arrow's, produce's when cut at max.message.bytes) is
    logged before any is waited for: one WAL fdatasync for all of them, not one each."""
    import os

    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    with Engine.open(data_dir, settings={"checkpoint.interval.bytes": str(1 << 30)}) as eng:
        eng.create_topic("t", partitions=1, config={"max.message.bytes": "10000"})
        eng.produce_arrow("t", pa.table({"value": [b"w"]}))  # (the WAL file prepared)
        monkeypatch.setattr(os, "fdatasync", recording)
        out = eng.produce_arrow("t", pa.table({"value": [b"x" * 100] * 1000}))
        assert len(out) > 10 and [f[-4:] for f in synced] == [".wal"]
        synced.clear()
        acks = eng.produce("t", [Record(value=b"y" * 100)] * 1000)
        assert len({o for _, o in acks}) == 1000 and [f[-4:] for f in synced] == [".wal"]
        monkeypatch.undo()
        assert [r.value[:1] for r in eng.read("t", 0, 1, 3000)] == [b"x"] * 1000 + [b"y"] * 1000


@pytest.mark.parametrize("table, match", [
    (pa.table({"key": [b"k"]}), "needs a 'value' column"),
    (pa.table({"value": [b"v"], "extra": [1]}), "takes only key, value"),
    (pa.table({"value": [1]}), "column 'value' is int64"),
    (pa.table({"value": [b"v"], "timestamp": ["x"]}), "column 'timestamp' is string"),
    (pa.table({"value": [b"v"], "timestamp": [-5]}), "non-negative"),
    (pa.table({"value": [b"v"], "partition": [7]}), "partition 7 does not exist"),
    ([1, 2], "takes a pyarrow Table or RecordBatch"),
])
def test_bad_tables_are_refused_with_the_reason(data_dir, table, match):
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=2)
        with pytest.raises((InvalidArgument, UnknownPartition), match=match):
            eng.produce_arrow("t", table)
        assert eng.end_offsets("t") == {0: 0, 1: 0}


def test_a_compacted_topic_needs_every_key(data_dir):
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("c", partitions=1, config={"cleanup.policy": "compact"})
        with pytest.raises(InvalidArgument, match="every row needs a key"):
            eng.produce_arrow("c", pa.table({"key": [b"k", None], "value": [b"1", b"2"]}))
        eng.produce_arrow("c", pa.record_batch({"key": [b"k"], "value": [b"1"]}))
        assert eng.end_offsets("c") == {0: 1}


binary_rows = st.lists(st.one_of(st.none(), st.binary(max_size=30)), min_size=1, max_size=120)


@settings(max_examples=200, deadline=None)
@given(binary_rows, st.data())
def test_arrow_body_c_and_python_agree(items, data):
    arr = pa.array(items, pa.binary())
    a = data.draw(st.integers(0, len(items) - 1))
    n = data.draw(st.integers(1, len(items) - a))
    s = arr.slice(a, n)
    validity, offsets, body = s.buffers()
    spec = ("binary", validity, 0, offsets, body, s.offset, n)
    specs = [spec, ("null", n), ("fixed", pa.py_buffer(bytes(range(40))), 3, 17)]
    c, py = native.arrow_body(72, specs), native.py_arrow_body(72, specs)
    assert c is not None and bytes(c) == bytes(py)
    parts_c = native.arrow_key_partitions(validity, 0, offsets, body, s.offset, n, 7, 3)
    parts_py = native.py_arrow_key_partitions(validity, 0, offsets, body, s.offset, n, 7, 3)
    assert parts_c == parts_py


def test_arrow_body_refuses_buffers_that_do_not_add_up():
    offs = pa.py_buffer(b"\x00\x00\x00\x00" b"\x10\x00\x00\x00")  # 16 bytes of 4 present
    for fn in (native.arrow_body, native.py_arrow_body):
        assert fn(0, [("binary", None, 0, offs, pa.py_buffer(b"abcd"), 0, 1)]) is None
        assert fn(0, [("binary", None, 0, offs, None, 0, 2)]) is None  # past the offsets
        assert fn(0, [("fixed", pa.py_buffer(b"abc"), 2, 5)]) is None


def test_cli_produces_parquet_and_arrow_files_and_streams(data_dir, tmp_path):
    n = 3000
    t = pa.table({"key": [f"k{i}" for i in range(n)], "value": [f"v{i}" for i in range(n)],
                  "timestamp": pa.array(range(1_700_000_000_000, 1_700_000_000_000 + n),
                                        pa.int64())})
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=1000)
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
        w.write_table(t, max_chunksize=700)
    with pa.OSFile(str(tmp_path / "t.arrows"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    run_rivven(data_dir, "topic", "create", "t", "-p", "3", check=True)
    r = run_rivven(data_dir, "produce", "t", "--input", "parquet", str(tmp_path / "t.parquet"),
                   "--json", check=True)
    assert json.loads(r.stderr)["records"] == n
    run_rivven(data_dir, "produce", "t", "--input", "arrow", "--file", str(tmp_path / "t.arrow"),
               "-q", check=True)
    run_rivven(data_dir, "produce", "t", "--input", "arrow", "-q", check=True,
               input=(tmp_path / "t.arrows").read_bytes())
    run_rivven(data_dir, "produce", "t", "--input", "arrow", "-q", check=True,
               input=(tmp_path / "t.arrow").read_bytes())
    with Engine.open(data_dir, read_only=True) as eng:
        got = sorted((r[2], r[3], r[4]) for r in rows(eng, "t"))
    want = sorted((f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i)
                  for i in range(n))
    assert got == sorted(want * 4)


@pytest.mark.parametrize("args, code, message", [
    (["--input", "parquet"], 2, "needs a FILE"),
    (["--input", "parquet", "NOPE"], 1, "cannot read NOPE as Parquet"),
    (["--input", "parquet", "BAD"], 1, "needs a 'value' column"),
    (["--input", "arrow", "BAD"], 1, "cannot read BAD as Arrow IPC"),
    (["--input", "parquet", "GOOD", "--key", "x"], 2, "takes its records from the file"),
    (["--input", "parquet", "GOOD", "--transactional-id", "x"], 2, "does not apply"),
    (["--input", "parquet", "GOOD", "--file", "GOOD"], 2, "give the input once"),
])
def test_cli_table_input_errors(data_dir, tmp_path, args, code, message):
    pq.write_table(pa.table({"k": [1]}), tmp_path / "bad.parquet")
    pq.write_table(pa.table({"value": [b"v"]}), tmp_path / "good.parquet")
    paths = {"NOPE": str(tmp_path / "nope"), "BAD": str(tmp_path / "bad.parquet"),
             "GOOD": str(tmp_path / "good.parquet")}
    run_in_process(data_dir, "topic", "create", "t", check=True)
    r = run_in_process(data_dir, "produce", "t", *[paths.get(a, a) for a in args], input=b"")
    err = r.stderr.decode()
    for name, path in paths.items():
        message = message.replace(name, path)
    assert r.returncode == code and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.end_offsets("t") == {0: 0}


def test_rows_with_big_headers_are_split_until_their_batches_fit(data_dir):
    hs = [[{"key": "h", "value": b"x" * 900}]] * 40  # headers are not in the size estimate
    t = pa.table({"value": [b"v"] * 40, "headers": pa.array(
        hs, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=1, config={"max.message.bytes": "10000"})
        out = eng.produce_arrow("t", t)
        assert len(out) >= 4 and sum(n for _, _, n in out) == 40  # (one batch: 37 KB)
        assert [len(r.headers[0][1]) for r in eng.read("t", 0, 0, 100)] == [900] * 40


def test_a_transactional_producer_writes_tables_in_its_transaction(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", partitions=2, config={"max.message.bytes": "20000"})
        tp = eng.producer(transactional_id="tx")
        tp.begin()
        table = pa.table({"key": [b"k%d" % (i % 5) for i in range(1000)],
                          "value": [b"x" * 50 + b"%d" % i for i in range(1000)]})
        out = tp.produce_arrow("t", table)
        tp.produce("t", [Record(key=b"k1", value=b"mixed")])  # sequences go on after it
        tp.produce_arrow("t", pa.table({"value": [b"h"], "headers": [[("a", b"1")]]}),
                         partition=0)
        assert len(out) > 2 and sum(n for _, _, n in out) == 1000
        seen = [r.value for p in (0, 1) for r in eng.read("t", p, 0, 5000,
                                                            isolation_level="read_committed")]
        assert seen == []  # not before the commit
        tp.commit()
        got = {p: [r for r in eng.read("t", p, 0, 5000, isolation_level="read_committed")]
               for p in (0, 1)}
        assert sum(len(v) for v in got.values()) == 1002
        want = [produce_key_partition(eng, b"k%d" % (i % 5)) for i in range(1000)]
        assert sorted(r.value for rs in got.values() for r in rs) == sorted(
            [b"x" * 50 + b"%d" % i for i in range(1000)] + [b"mixed", b"h"])
        for p, rs in got.items():  # keyed rows where produce puts them
            assert all(want[int(r.value[50:])] == p for r in rs if r.value.startswith(b"x"))
        tp.begin()
        tp.produce_arrow("t", pa.table({"value": [b"gone"]}), partition=1)
        tp.abort()
        assert b"gone" not in [r.value for r in eng.read("t", 1, 0, 5000,
                                                          isolation_level="read_committed")]


def produce_key_partition(eng, key):
    from engine.produce.partitioner import partition_for_key

    return partition_for_key(key, 2)
