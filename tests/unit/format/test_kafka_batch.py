"""engine.format.kafka_batch: Kafka's record batch (magic 2) in and out, checked against
kafka-python's own encoder and decoder (``kafka.record``) in all four codecs; every malformed
input refused with its one-line error, by the C transcoders (engine/format/fastcodec.c) and
their Python twins (kafka_batch.py_kafka_body, native.py_kafka_records) alike."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from engine.errors import CorruptRecordError
from engine.format import codecs, encode, kafka_batch, native
from engine.format.decode import body_of, decode_columns, layout
from engine.format.records import HEADER_SIZE, read_header

TS = 1_700_000_000_000
CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
# the C transcoder (engine/format/fastcodec.c; with RIVVEN_NATIVE=0 the twin stands in)
C_BODY = native.kafka_body or kafka_batch.py_kafka_body


def kafka_python_batch(records, codec=codecs.NONE, producer=(-1, -1, -1), transactional=False):
    """A batch as kafka-python's producer builds it (snappy: xerial's framing)."""
    b = DefaultRecordBatchBuilder(2, codec, int(transactional), *producer, 1 << 30)
    for i, (k, v, hs, ts) in enumerate(records):
        b.append(i, ts, k, v, hs)
    return bytes(b.build())


def kafka_python_read(data):
    """(offset, timestamp, key, value, headers) of every record, by kafka-python (its CRC
    checked), and the batch's producer fields."""
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    recs = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
            for r in batch]
    return recs, (batch.producer_id, batch.producer_epoch, batch.base_sequence,
                  batch.is_transactional)


def sample(n=60, headers=True):
    out = []
    for i in range(n):
        k = None if i % 7 == 3 else b"key-%d" % i
        v = None if i % 11 == 5 else b"value-%d" % i * (i % 5)
        hs = [(f"h{j}", None if (i + j) % 3 == 0 else b"x" * j) for j in range(i % 3)] \
            if headers else []
        out.append((k, v, hs, TS + (i * 37) % 19 - 9))
    return out


def stored(kb):
    """A decoded Kafka batch stored as rivven would: its batch header, body, layout."""
    body, = kb.bodies()
    enc = encode.finish_batch(body.buf, memoryview(body.buf)[HEADER_SIZE:], body.attributes,
                              body.record_count, body.record_count - 1, body.first_timestamp,
                              body.max_timestamp)
    h = read_header(enc.buf)
    plain = body_of(bytes(enc.buf), 0, h)
    return h, plain, layout(plain, h)


# ---------------------------------------------------------------- in (Produce)
@pytest.mark.parametrize("codec", CODECS)
def test_a_kafka_python_batch_decodes_to_its_records_in_every_codec(codec):
    recs = sample()
    data = kafka_python_batch(recs, codec, producer=(42, 3, 100), transactional=True)
    kb = kafka_batch.decode(data, 1 << 20)
    assert (kb.codec, kb.count, kb.producer_id, kb.producer_epoch, kb.base_sequence) == \
        (codec, len(recs), 42, 3, 100)
    assert kb.transactional and not kb.control and kb.size == len(data)
    assert kb.keys == [r[0] for r in recs] and kb.values == [r[1] for r in recs]
    assert kb.headers == [r[2] for r in recs] and kb.timestamps == [r[3] for r in recs]
    # the body made in C is the one the general encoder makes of those columns
    h, plain, lay = stored(kb)
    general = encode.encode_batch(kb.keys, kb.values, kb.timestamps, kb.headers)
    assert bytes(general.buf[HEADER_SIZE:]) == bytes(plain)
    offsets, ts, keys, values, headers = decode_columns(plain, h, lay)
    assert (list(offsets), list(ts), keys, values) == (
        list(range(len(recs))), kb.timestamps, kb.keys, kb.values)
    assert [list(x) for x in headers] == kb.headers


def test_decode_checks_the_records_without_making_a_body():
    kb = kafka_batch.decode(kafka_python_batch(sample(30)), 1 << 20)
    assert C_BODY(kb.records, kb.count, kb.base_timestamp, HEADER_SIZE, -1) == []
    assert kafka_batch.py_kafka_body(kb.records, kb.count, kb.base_timestamp, HEADER_SIZE, -1) == []
    a, b = kb.bodies(), kb.bodies()
    assert a[0].buf is not b[0].buf and bytes(a[0].buf) == bytes(b[0].buf)  # (new buffers)
    # asked for as it is decoded: made in the same pass, handed out once, then made anew
    kb = kafka_batch.decode(kafka_python_batch(sample(300)), 1 << 20, 1000)
    first, again = kb.bodies(1000), kb.bodies(1000)
    assert len(first) > 1 and first[0].buf is not again[0].buf
    assert [bytes(x.buf) for x in first] == [bytes(x.buf) for x in again]


def test_c_and_python_give_the_same_bodies():
    kb = kafka_batch.decode(kafka_python_batch(sample(300)), 1 << 20)
    for max_body in (0, 200, 1000, 5000, 1 << 20):
        c = C_BODY(kb.records, kb.count, kb.base_timestamp, HEADER_SIZE, max_body)
        py = kafka_batch.py_kafka_body(kb.records, kb.count, kb.base_timestamp, HEADER_SIZE, max_body)
        assert c is not None and [(bytes(b), *rest) for b, *rest in c] == \
            [(bytes(b), *rest) for b, *rest in py]
        # the parts cover the records in order, each within its bound
        assert [first for *_, first, _ in c] == \
            [sum(n for *_, n in c[:i]) for i in range(len(c))]
        if max_body:
            assert all(len(b) - HEADER_SIZE <= max(max_body, 2000) for b, *_ in c)
    assert len(kb.bodies(1000)) > 1 and kb.bodies(0)[0].first == 0


keys_values = st.integers(1, 80).flatmap(lambda n: st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=30)), st.one_of(st.none(), st.binary(max_size=60)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
             max_size=3),
    st.integers(-(1 << 40), 1 << 40)), min_size=n, max_size=n))


@settings(max_examples=150, deadline=None)
@given(keys_values, st.sampled_from([0, 64, 512]))
def test_c_and_python_agree_on_any_records(recs, max_body):
    data = kafka_python_batch(recs)
    kb = kafka_batch.decode(data, 1 << 22)
    args = (kb.records, kb.count, kb.base_timestamp, HEADER_SIZE, max_body)
    c, py = C_BODY(*args), kafka_batch.py_kafka_body(*args)
    assert [(bytes(b), *r) for b, *r in c] == [(bytes(b), *r) for b, *r in py]
    # and back out: the same Kafka records, whichever transcoder
    h, plain, lay = stored(kb)
    out = (plain, h.record_count, h.first_timestamp, h.last_offset_delta, 61, *lay)
    assert bytes(native.kafka_records(*out)) == bytes(native.py_kafka_records(*out))
    got, _ = kafka_python_read(bytes(kafka_batch.from_rivven(h, plain, lay)))
    assert [(k, v, hs, ts) for _, ts, k, v, hs in got] == [
        (k, v, [(hk, hv) for hk, hv in hs], ts) for k, v, hs, ts in recs]


def test_xerial_and_raw_snappy_both_decode():
    recs = sample(40)
    java = kafka_python_batch(recs, codecs.SNAPPY)  # kafka-python frames it as Java does
    assert java[kafka_batch.HEAD_SIZE:].startswith(b"\x82SNAPPY\x00")
    plain = kafka_python_batch(recs)
    raw_records = codecs.compress(codecs.SNAPPY, plain[kafka_batch.HEAD_SIZE:])  # librdkafka
    raw = rewrap(plain, raw_records, codecs.SNAPPY)
    for data in (java, raw):
        kb = kafka_batch.decode(data, 1 << 20)
        assert kb.values == [r[1] for r in recs] and kb.codec == codecs.SNAPPY


def rewrap(batch: bytes, records: bytes, codec: int | None = None, count: int | None = None
           ) -> bytes:
    """``batch``'s header around other ``records`` (codec, count), its length and CRC made
    right: what a client that got something else wrong would send."""
    f = list(kafka_batch.HEAD.unpack_from(batch, 0))
    if codec is not None:
        f[5] = (f[5] & ~kafka_batch.ATTR_CODEC) | codec
    return kafka_batch.frame(f[0], f[5], f[6], f[7], f[8], f[9], f[10], f[11],
                             f[12] if count is None else count, records)


def test_a_batch_of_no_records_has_no_body():
    data = kafka_batch.frame(0, 0, -1, TS, TS, -1, -1, -1, 0, b"")
    kb = kafka_batch.decode(data, 1024)
    assert kb.count == 0 and kb.bodies() == [] and kb.values == []


# ---------------------------------------------------------------- malformed input
def good_records() -> tuple[bytes, bytes]:
    data = kafka_python_batch(sample(5))
    return data, data[kafka_batch.HEAD_SIZE:]


def zz(n: int) -> bytes:
    return native.zigzag(n)


def record(body: bytes) -> bytes:
    return zz(len(body)) + body


def plain_record(i: int = 0, key: bytes = zz(1) + b"k", rest: bytes = zz(1) + b"v" + zz(0),
                 ts: bytes = zz(0)) -> bytes:
    return record(b"\x00" + ts + zz(i) + key + rest)


MALFORMED = {
    "cut short inside a varint": (b"\x80", 1, "cut short inside a varint"),
    "record length below 6": (record(b"\x00" * 5), 1, "claims 5 bytes"),
    "record longer than what follows": (zz(40) + b"\x00" * 10, 1, "claims 40 bytes"),
    "offset delta not its index": (plain_record(1), 1, "has offset delta 1"),
    "field length -2": (plain_record(key=zz(-2)), 1, "field length is -2"),
    "field past its record": (record(b"\x00" + zz(0) + zz(0) + zz(50) + b"k" * 4), 1,
                              "runs past its record"),
    "impossible header count": (plain_record(rest=zz(1) + b"v" + zz(90)), 1, "claims 90 headers"),
    "null header key": (plain_record(rest=zz(1) + b"v" + zz(1) + zz(-1) + zz(-1)), 1,
                        "null key"),
    "header key not UTF-8": (plain_record(rest=zz(1) + b"v" + zz(1) + zz(1) + b"\xff" + zz(-1)),
                             1, "not UTF-8"),
    "surrogate header key": (plain_record(rest=zz(1) + b"v" + zz(1) + zz(3) + b"\xed\xa0\x80"
                                          + zz(-1)), 1, "not UTF-8"),
    "fields end early": (record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(0) + b"\x00"), 1,
                         "end 1 byte before"),
    "bytes after the last record": (plain_record() + b"\x00", 1, "follow the last"),
    "fewer records than counted": (plain_record(), 2, "cut short"),
    "varint past 10 bytes": (record(b"\x00" + b"\xff" * 10 + b"\x01" + zz(0) + b"\x01\x01\x00"),
                             1, "past 10 bytes"),
    "varint past 64 bits": (record(b"\x00" + b"\xff" * 9 + b"\x7f" + zz(0) + b"\x01\x01\x00"), 1,
                            "past 64 bits"),
    "timestamp past int64": (plain_record(ts=zz((1 << 63) - 1)), 1, "past a 64-bit time"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_every_malformed_record_is_refused_by_both_transcoders(name, monkeypatch):
    records, count, message = MALFORMED[name]
    base_ts = TS
    assert C_BODY(records, count, base_ts, HEADER_SIZE) is None
    assert kafka_batch.py_kafka_body(records, count, base_ts, HEADER_SIZE) is None
    data = kafka_batch.frame(0, 0, count - 1, base_ts, base_ts, -1, -1, -1, count, records)
    messages = []
    for twin in (C_BODY, None):  # (None: RIVVEN_NATIVE=0, the Python twin)
        monkeypatch.setattr(native, "kafka_body", twin)
        with pytest.raises(CorruptRecordError, match=message) as e:
            kafka_batch.decode(data, 1 << 20)
        messages.append(str(e.value))
        assert "\n" not in str(e.value)
    assert messages[0] == messages[1]


def test_a_batch_cut_short_or_mislabelled_is_refused():
    data, records = good_records()
    with pytest.raises(CorruptRecordError, match="cut short"):
        kafka_batch.split(data[:5])
    with pytest.raises(CorruptRecordError, match="claims .* where"):
        kafka_batch.split(data[:-1])
    assert kafka_batch.split(data + data) == [(0, len(data)), (len(data), len(data))]
    with pytest.raises(CorruptRecordError, match="shorter than its 61-byte header"):
        kafka_batch.decode(data[:40], 1 << 20)
    with pytest.raises(CorruptRecordError, match="length field says"):
        kafka_batch.decode(data + b"\x00", 1 << 20)
    bad = bytearray(data)
    bad[16] = 1  # magic
    with pytest.raises(CorruptRecordError, match="magic 1"):
        kafka_batch.decode(bytes(bad), 1 << 20)


def test_a_bad_crc_is_refused():
    data, _ = good_records()
    bad = bytearray(data)
    bad[-1] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        kafka_batch.decode(bytes(bad), 1 << 20)


@pytest.mark.parametrize("count", [-1, kafka_batch.MAX_RECORD_COUNT + 1, 10**9])
def test_impossible_counts_are_refused(count):
    data, records = good_records()
    with pytest.raises(CorruptRecordError, match="claims|cut short"):
        kafka_batch.decode(rewrap(data, records, count=count), 1 << 20)
    assert C_BODY(records, count, TS, 0) is None
    assert kafka_batch.py_kafka_body(records, count, TS, 0) is None


def test_an_unknown_codec_and_undecompressable_records_are_refused():
    data, records = good_records()
    with pytest.raises(CorruptRecordError, match="codec 5 is unknown"):
        kafka_batch.decode(rewrap(data, records, codec=5), 1 << 20)
    for codec in CODECS[1:]:
        with pytest.raises(CorruptRecordError, match="does not decompress|cut short|past"):
            kafka_batch.decode(rewrap(data, b"\x82SNAPPY\x00" + b"\x01" * 20
                                      if codec == codecs.SNAPPY else b"garbage" * 3, codec),
                               1 << 20)


def bombs(size: int) -> dict[int, bytes]:
    zeros = bytes(size)
    import lz4.frame
    import snappy
    import zstandard

    # a zstd frame that does not state its size: only a bounded read can stop it
    zstd = zstandard.ZstdCompressor().compressobj()
    return {codecs.GZIP: zlib.compress(zeros), codecs.SNAPPY: snappy.compress(zeros),
            codecs.LZ4: lz4.frame.compress(zeros),
            codecs.ZSTD: zstd.compress(zeros) + zstd.flush()}


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_decompression_bomb_is_stopped_at_the_bound(codec):
    data, _ = good_records()
    bomb = bombs(8 << 20)[codec]
    assert len(bomb) < 1 << 20
    with pytest.raises(CorruptRecordError, match="past"):
        kafka_batch.decode(rewrap(data, bomb, codec), 1 << 20)


def test_a_xerial_snappy_bomb_is_stopped_at_the_bound():
    import snappy

    block = snappy.compress(bytes(4 << 20))
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (
        struct.pack(">i", len(block)) + block) * 4
    data, _ = good_records()
    with pytest.raises(CorruptRecordError, match="too large|past"):
        kafka_batch.decode(rewrap(data, xerial, codecs.SNAPPY), 8 << 20)


# ---------------------------------------------------------------- out (Fetch)
def rivven_batch(offset_deltas=None, headers=True, n=50):
    recs = sample(n, headers)
    keys, values = [r[0] for r in recs], [r[1] for r in recs]
    hs = [r[2] for r in recs] if headers else None
    ts = [r[3] for r in recs]
    enc = encode.encode_batch(keys, values, ts, hs, offset_deltas=offset_deltas,
                              producer_id=7, producer_epoch=2, base_sequence=30,
                              flags=kafka_batch.ATTR_TRANSACTIONAL)
    buf = enc.assign(1000)
    h = read_header(buf)
    body = body_of(bytes(buf), 0, h)
    return recs, h, body, layout(body, h)


@pytest.mark.parametrize("explicit", [False, True])
def test_a_rivven_batch_reads_back_in_kafka_python(explicit):
    deltas = [i * 2 for i in range(50)] if explicit else None
    recs, h, body, lay = rivven_batch(deltas)
    out = kafka_batch.from_rivven(h, body, lay)
    assert bytes(out) == kafka_batch.from_columns(h, decode_columns(body, h, lay))
    got, producer = kafka_python_read(bytes(out))
    assert producer == (7, 2, 30, True)
    offsets = [1000 + d for d in (deltas or range(50))]
    assert got == [(o, ts, k, v, [(hk, hv) for hk, hv in hs])
                   for o, (k, v, hs, ts) in zip(offsets, recs)]


def test_a_kafka_batch_round_trips_byte_for_byte():
    """Produce then Fetch: an uncompressed batch comes back as the client sent it, but for
    the base offset (the broker's), whatever the timestamps and nulls."""
    data = kafka_python_batch(sample(80), producer=(5, 1, 0))
    kb = kafka_batch.decode(data, 1 << 20)
    h, plain, lay = stored(kb)
    out = native.kafka_records(plain, h.record_count, h.first_timestamp, h.last_offset_delta, 0,
                               *lay)
    assert bytes(out) == bytes(kb.records)


def mangle(body, lay, field, value, at=0):
    b = bytearray(body)
    struct.pack_into("<i", b, getattr(lay, field) + 4 * at, value)
    return bytes(b)


def test_columns_that_do_not_check_out_are_declined_by_both_transcoders():
    recs, h, body, lay = rivven_batch([i * 2 for i in range(50)])
    cases = {
        "key offsets not increasing": mangle(body, lay, "key_offsets", 1 << 20, at=1),
        "value offsets past the data": mangle(body, lay, "value_offsets", 1 << 20, at=50),
        "offset deltas not increasing": mangle(body, lay, "offset_deltas", 5),
        "header lists past the headers": mangle(body, lay, "header_lists", 1 << 20, at=50),
    }
    for name, bad in cases.items():
        args = (bad, h.record_count, h.first_timestamp, h.last_offset_delta, 61, *lay)
        assert native.kafka_records(*args) is None, name
        assert native.py_kafka_records(*args) is None, name
        with pytest.raises(CorruptRecordError):
            decode_columns(bad, h, lay)


def test_a_header_key_that_is_not_utf8_goes_the_python_way():
    enc = encode.encode_batch([b"k"], [b"v"], TS, [[(b"\xffkey", b"v")]])
    buf = enc.assign(0)
    h = read_header(buf)
    body = body_of(bytes(buf), 0, h)
    lay = layout(body, h)
    assert kafka_batch.from_rivven(h, body, lay) is None
    assert native.py_kafka_records(body, 1, TS, 0, 61, *lay) is None
    got, _ = kafka_python_read(kafka_batch.from_columns(h, decode_columns(body, h, lay)))
    assert got[0][4] == [("\ufffdkey", b"v")]


def test_a_marker_is_kafkas_control_batch():
    from engine.format.control import encode_marker

    buf = encode_marker(9, 4, True, TS).assign(77)
    h = read_header(buf)
    data = kafka_batch.from_marker(h, True)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (9, 4, 77)
    assert kafka_batch.control_record(True, 0) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
