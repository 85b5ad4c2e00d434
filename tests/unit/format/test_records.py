import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import CorruptRecordError, InvalidArgument
from engine.format import codecs
from engine.format.decode import body_of, decode_records, layout
from engine.format.encode import encode_batch
from engine.format.records import HEADER_SIZE, check_crc, read_header

blobs = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                        max_size=3)


def roundtrip(keys, values, ts, headers, codec, deltas=None, base=7):
    buf = bytes(encode_batch(keys, values, ts, headers, codec, offset_deltas=deltas).assign(base))
    h = read_header(buf)
    check_crc(buf, 0, h)
    assert h.size == len(buf) and len(buf) % 8 == 0
    body = body_of(buf, 0, h)
    return h, decode_records(body, h, layout(body, h), partition=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(blobs, blobs, header_lists, st.integers(0, 1 << 45)), min_size=1,
                max_size=40),
       st.sampled_from([codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]))
@pytest.mark.slow
def test_roundtrip_every_codec(rows, codec):
    keys = [r[0] for r in rows]
    values = [r[1] for r in rows]
    headers = [r[2] for r in rows]
    ts = [r[3] for r in rows]
    h, recs = roundtrip(keys, values, ts, headers, codec)
    assert [r.key for r in recs] == keys
    assert [r.value for r in recs] == values
    assert [list(r.headers) for r in recs] == headers
    assert [r.timestamp for r in recs] == ts
    assert [r.offset for r in recs] == list(range(7, 7 + len(rows)))
    assert {r.partition for r in recs} == {3}
    assert h.max_timestamp == max(ts) and h.first_timestamp == ts[0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_offset_gaps_roundtrip(steps):
    deltas = [0]
    for s in steps[1:]:
        deltas.append(deltas[-1] + s)
    n = len(deltas)
    h, recs = roundtrip([b"k"] * n, [b"v"] * n, 5, None, codecs.NONE, deltas=deltas, base=100)
    assert [r.offset for r in recs] == [100 + d for d in deltas]
    assert h.last_offset == 100 + deltas[-1]


def test_large_and_empty_values():
    big = bytes(range(256)) * 4096  # 1 MiB
    _, recs = roundtrip([b"", None], [big, b""], 1, None, codecs.ZSTD)
    assert recs[0].value == big and recs[1].value == b"" and recs[1].key is None


def test_every_single_bit_flip_is_detected():
    buf = bytes(encode_batch([b"key"], [b"value"], 1700000000000, [[("h", b"x")]]).assign(42))
    for i in range(len(buf)):
        for bit in (0, 3, 7):
            bad = bytearray(buf)
            bad[i] ^= 1 << bit
            with pytest.raises(CorruptRecordError):
                h = read_header(bad)
                if h.size > len(bad):
                    raise CorruptRecordError("length changed")
                check_crc(bad, 0, h)


def test_lying_length_fields_are_refused():
    buf = bytearray(encode_batch([b"k"], [b"v"], 1).assign(0))
    struct.pack_into("<i", buf, 8, (1 << 31) - 1)  # batch_length
    with pytest.raises(CorruptRecordError):
        read_header(buf)
    buf = bytearray(encode_batch([b"k"], [b"v"], 1).assign(0))
    struct.pack_into("<i", buf, 64, -5)  # body_length
    with pytest.raises(CorruptRecordError):
        read_header(buf)


def test_decompression_bomb_bounded():
    buf = bytearray(encode_batch([b"k"], [b"v" * 1000], 1, codec=codecs.ZSTD).assign(0))
    struct.pack_into("<i", buf, 64, 10)  # claims a tiny body; the frame says otherwise
    h = read_header(buf)
    with pytest.raises(CorruptRecordError):
        body_of(buf, 0, h)


def test_bad_values_are_refused_cleanly():
    with pytest.raises(InvalidArgument):
        encode_batch([None], ["a str"], 1)
    with pytest.raises(InvalidArgument):
        encode_batch([], [], 1)


def test_header_is_72_bytes():
    assert HEADER_SIZE == 72
