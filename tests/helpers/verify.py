"""A topic of sealed segments, forged CRC-valid batches and clean errors: shared by the
checkpoint, verify and WAL-damage tests."""

import os
import struct

from engine import Engine, Record
from engine.format.encode import encode_batch
from engine.format.records import HEADER, batch_crc
from helpers import run_rivven

FIELDS = ("base_offset", "batch_length", "magic", "r8", "r16", "crc", "attributes", "r16b",
          "last_offset_delta", "record_count", "first_timestamp", "max_timestamp",
          "producer_id", "producer_epoch", "r16c", "base_sequence", "body_length",
          "stored_length")


def forge(buf, body=None, **fields):
    """A batch with ``fields`` (and ``body``) changed and its CRC made valid again: bytes a
    CRC check alone cannot tell from a good batch."""
    buf = bytearray(buf)
    if body is not None:
        buf = buf[:72] + bytearray(body) + bytearray(-(72 + len(body)) & 7)
        fields = {"stored_length": len(body), "body_length": len(body),
                  "batch_length": len(buf) - 12, **fields}
    vals = dict(zip(FIELDS, HEADER.unpack_from(buf, 0)))
    vals.update(fields)
    HEADER.pack_into(buf, 0, *[vals[f] for f in FIELDS])
    struct.pack_into("<I", buf, 16, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def batch(base, n=10):
    return bytes(encode_batch([b"k"] * n, [b"x"] * n, 1000).assign(base))


def pdir_of(data_dir, topic="t"):
    return os.path.join(data_dir, "topics", topic, "partition-0")


def logs(pdir):
    return sorted(os.path.join(pdir, f) for f in os.listdir(pdir) if f.endswith(".log"))


def make(data_dir, batches=60, segment_bytes="2048", cfg=None):
    """Topic t, one partition: ``batches`` batches of 10 records (offsets 0..), closed cleanly
    (so its .checkpoint covers every byte)."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": segment_bytes, "retention.ms": "-1",
                                  **(cfg or {})})
        for b in range(batches):
            eng.produce("t", [Record(key=b"k%d" % i, value=b"v%06d" % (b * 10 + i),
                                     timestamp=1000 + b) for i in range(10)])
    return pdir_of(data_dir)


def consume_all(data_dir, n, run=run_rivven):
    """The offsets of ``rivven consume t`` from the beginning (``run``: run_rivven, or
    helpers.cli.run_in_process)."""
    r = run(data_dir, "consume", "t", "--offset", "beginning", "-n", str(n), "-f", "%o\n")
    return r, [int(x) for x in r.stdout.split()]


def assert_clean_error(r, code, *words):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err, r.stdout.decode()[-300:])
    assert "internal error" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
