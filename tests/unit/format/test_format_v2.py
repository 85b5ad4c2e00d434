"""Format 2: batches with a producer id, epoch and sequence; control batches (markers)."""

import struct

import pytest

from engine.errors import CorruptRecordError
from engine.format import control
from engine.format.encode import encode_batch
from engine.format.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    HEADER,
    check_crc,
    read_header,
)


def test_a_producer_batch_is_format_2_and_a_plain_one_stays_format_1():
    plain = read_header(encode_batch([None], [b"v"], 5).assign(0))
    assert (plain.magic, plain.producer_id, plain.base_sequence) == (1, -1, -1)
    buf = encode_batch([None, None], [b"a", b"b"], 5, producer_id=9, producer_epoch=2,
                       base_sequence=(1 << 31) - 1, flags=ATTR_TRANSACTIONAL).assign(100)
    h = read_header(buf)
    check_crc(buf, 0, h)
    assert (h.magic, h.producer_id, h.producer_epoch, h.base_sequence) == (2, 9, 2, (1 << 31) - 1)
    assert h.is_transactional and not h.is_control
    assert h.last_sequence == 0  # sequences wrap, as Kafka's


def test_markers_round_trip():
    for commit in (True, False):
        buf = control.encode_marker(7, 3, commit, 1000).assign(42)
        h = read_header(buf)
        check_crc(buf, 0, h)
        assert h.is_control and h.is_transactional and h.record_count == 1
        assert control.marker_type(h, buf) == (control.COMMIT if commit else control.ABORT)


def _forge(buf, **fields):
    """``buf`` with header fields rewritten (the CRC is not: read_header checks fields only)."""
    names = ["base", "blen", "magic", "r1", "r2", "crc", "attrs", "r3", "delta", "count",
             "first_ts", "max_ts", "pid", "epoch", "r4", "seq", "body", "stored"]
    values = dict(zip(names, HEADER.unpack_from(buf, 0)))
    values.update(fields)
    out = bytearray(buf)
    HEADER.pack_into(out, 0, *[values[n] for n in names])
    return out


@pytest.mark.parametrize("fields,problem", [
    ({"attrs": ATTR_TRANSACTIONAL}, "format-1 batch"),
    ({"magic": 2, "pid": -1}, "producer id -1"),
    ({"magic": 2, "pid": 1, "epoch": -1, "seq": 0}, "producer epoch -1"),
    ({"magic": 2, "pid": 1, "epoch": 0, "seq": -5}, "base sequence -5"),
    ({"magic": 2, "pid": 1, "epoch": 0, "seq": 0, "attrs": ATTR_CONTROL}, "control batch"),
    ({"magic": 3}, "bad magic 3"),
])
def test_impossible_producer_fields_are_corrupt(fields, problem):
    buf = encode_batch([None], [b"v"], 5).assign(0)
    with pytest.raises(CorruptRecordError, match=problem):
        read_header(_forge(buf, **fields))


def test_a_control_batch_with_a_strange_key_is_corrupt():
    buf = encode_batch([struct.pack("<hh", 0, 9)], [b"x"], 5, producer_id=1, producer_epoch=0,
                       base_sequence=-1, flags=ATTR_CONTROL | ATTR_TRANSACTIONAL).assign(0)
    with pytest.raises(CorruptRecordError, match="unknown marker"):
        control.marker_type(read_header(buf), buf)
