"""engine.format.native: the C loops (engine/format/fastcodec.c) and their pure-Python
fallbacks give identical bytes, and both give what the general encoder gives."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Engine, Record
from engine.format import encode, native
from engine.format.decode import body_of, decode_records, layout
from engine.format.records import HEADER_SIZE, read_header
from engine.produce import partitioner

keys_values = st.integers(1, 300).flatmap(lambda n: st.tuples(
    st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=n, max_size=n),
    st.lists(st.binary(max_size=200), min_size=n, max_size=n)))


def test_the_extension_is_built():
    """`pip install` (make setup) compiles it; without a compiler the fallback runs."""
    assert native.BUILT


@settings(max_examples=300, deadline=None)
@given(keys_values, st.sampled_from([0, HEADER_SIZE]))
def test_plain_body_c_and_python_agree(kv, reserve):
    keys, values = kv
    c = native.plain_body(keys, values, reserve)
    py = native.py_plain_body(keys, values, reserve)
    assert c is not None and py is not None
    assert (bytes(c[0]), c[1]) == (bytes(py[0]), py[1])
    assert bytes(c[0][:reserve]) == bytes(reserve)


@settings(max_examples=200, deadline=None)
@given(keys_values)
def test_a_plain_batch_is_the_general_encoders_batch(kv):
    keys, values = kv
    fast = encode.encode_batch(keys, values, 1234)
    # the general path: per-record timestamps that are all equal take it
    general = encode.encode_batch(keys, values, [1234] * len(values))
    assert bytes(fast.buf) == bytes(general.buf)
    h = read_header(fast.buf, 0)
    body = body_of(bytes(fast.buf), 0, h)
    got = decode_records(body, h, layout(body, h))
    assert [r.key for r in got] == keys and [r.value for r in got] == values


def test_plain_body_declines_what_it_does_not_handle():
    for keys, values in [([b"k"], [None]), ([b"k"], [bytearray(b"v")]), ([1], [b"v"]),
                         ([b"k", b"k"], [b"v"]), ([], []), ("ab", [b"v", b"w"])]:
        assert native.plain_body(keys, values) is None
        assert native.py_plain_body(keys, values) is None


def test_record_columns_c_and_python_agree():
    plain = [Record(b"k%d" % i, b"v%d" % i) for i in range(50)] + [Record(None, b"x")]
    assert native.record_columns(plain) == native.py_record_columns(plain) == (
        [r.key for r in plain], [r.value for r in plain])
    for odd in ([Record(b"k", b"v", headers=[("h", b"1")])], [Record(b"k", b"v", timestamp=5)],
                [Record(b"k", b"v", partition=0)], [(b"k", b"v")], (Record(b"k", b"v"),)):
        assert native.record_columns(odd) is None
        assert native.py_record_columns(odd) is None
    assert native.record_columns([Record(b"k", b"v", headers=[])]) == ([b"k"], [b"v"])


@pytest.mark.parametrize("count", [1, 3, 7, 100, 1 << 20])
def test_key_partitions_are_kafkas(count):
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"hello world", bytes(range(256)), None]
    want = [None if k is None else partitioner.partition_for_key(k, count) for k in keys]
    assert native.key_partitions(keys, count) == native.py_key_partitions(keys, count) == want
    # Kafka's own test vectors (Utils.murmur2): "21" -> -973932308
    assert native.murmur2(b"21") == -973932308


def test_produce_routes_keys_like_the_python_partitioner(data_dir):
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", partitions=5)
        recs = [Record(b"key-%d" % i, b"v") for i in range(200)]
        acks = eng.produce("t", recs)
        assert [p for p, _ in acks] == [partitioner.partition_for_key(r.key, 5) for r in recs]


def test_segments_written_with_and_without_the_extension_are_identical(tmp_path):
    """The same produce calls in two processes, one on the pure-Python twins: byte-identical
    segment files (the WAL differs only in its write times)."""
    import os
    import subprocess
    import sys

    code = """
import sys, pyarrow as pa
from engine import Engine
from engine.format import native
assert native.BUILT is (sys.argv[2] == "1")
with Engine.open(sys.argv[1], sync=False) as eng:
    eng.create_topic("t", partitions=3)
    keys = [b"k%d" % i for i in range(500)] + [None] * 20
    vals = [b"v" * (i % 37) for i in range(520)]
    eng.produce_batch("t", vals, keys=keys, timestamps=1_700_000_000_000)
    eng.produce_arrow("t", pa.table({"key": keys, "value": vals,
                                     "timestamp": pa.array(range(520), pa.int64())}))
    eng.produce_arrow("t", pa.table({"value": vals[:50], "timestamp": [5] * 50}), partition=1)
"""
    outs = []
    for flag in ("1", "0"):
        d = str(tmp_path / f"d{flag}")
        env = dict(os.environ, RIVVEN_NATIVE=flag)
        subprocess.run([sys.executable, "-c", code, d, flag], check=True, env=env)
        segs = {}
        for p in range(3):
            pdir = os.path.join(d, "topics", "t", f"partition-{p}")
            segs[p] = open(os.path.join(pdir, "00000000000000000000.log"), "rb").read()
        outs.append(segs)
    assert outs[0] == outs[1] and all(outs[0].values())


def test_acks_c_and_python_agree():
    for p, base, count in ((0, 0, 0), (3, 10, 5), (1, (1 << 40) + 7, 1000)):
        assert native.acks(p, base, count) == native.py_acks(p, base, count) == [
            (p, base + i) for i in range(count)]
