"""engine.format: encode_batch over Arrow columns takes any binary array (large_binary,
offsets that do not start at 0)."""


def test_arrow_encoder_takes_any_binary_array():
    """encode_batch copied an Arrow column's buffers as they were: large_binary (int64
    offsets) and arrays whose offsets do not start at 0 (IPC, Java Arrow slices) became
    batches with a valid CRC that decode to other bytes or fail with CorruptRecordError, and a
    ChunkedArray raised AttributeError."""
    import struct

    import pyarrow as pa

    from engine.format.decode import body_of, decode_columns, layout
    from engine.format.encode import encode_batch
    from engine.format.records import read_header

    def roundtrip(values):
        buf = bytes(encode_batch([b"k"] * len(values), values, 5).assign(0))
        h = read_header(buf, 0)
        body = body_of(buf, 0, h)
        return decode_columns(body, h, layout(body, h))[3]

    py = [b"a", None, b"", b"bcd", None, b"efgh", b"i", None, b"jk"]
    assert roundtrip(pa.array(py, pa.large_binary())) == py
    assert roundtrip(pa.array(py, pa.large_binary()).slice(3, 5)) == py[3:8]
    assert roundtrip(pa.chunked_array([pa.array(py[:4]), pa.array(py[4:])])) == py
    shifted = pa.Array.from_buffers(pa.binary(), 3, [
        None, pa.py_buffer(struct.pack("<4i", 2, 3, 5, 6)), pa.py_buffer(b"xxabcdef")])
    assert roundtrip(shifted) == [b"a", b"bc", b"d"]
