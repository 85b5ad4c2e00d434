"""Plaintext searches, rows, segment files and resealed batches of encrypted topics: shared
by tests/unit/engine/test_encryption.py, tests/cli/test_cli_key.py,
tests/crash/test_encryption_crash.py and tests/spark/test_spark_encryption.py."""

from __future__ import annotations

import os

from engine import Engine
from engine.format import sealed
from engine.format.encode import encode_batch
from engine.format.records import HEADER_SIZE, read_header
from engine.segments import filenames

ENC = {"encryption.enable": "true", "encryption.key.id": "k1"}


def marker(i: int, tag: bytes = b"MARK") -> bytes:
    """A distinctive 32-byte value: found in a file only if stored in plaintext."""
    return (tag + b"-%d-" % i).ljust(32, b"x")


def plaintext_in(roots: list[str], needles: list[bytes]) -> list[str]:
    """Every file under ``roots`` (hidden ones too) holding one of ``needles``."""
    found = []
    for root in roots:
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, "rb") as f:
                    data = f.read()
                found += [f"{p}: {x!r}" for x in needles if x in data]
    return found


def rows(eng: Engine, topic: str, **kw) -> list[tuple]:
    out = []
    for p in range(eng.topic(topic).partitions):
        out += [(p, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                for r in eng.read(topic, p, eng.partition_offsets(topic, p)[0], 1 << 30, **kw)]
    return out


def segment_files(data_dir: str, topic: str, partition: int = 0) -> list[str]:
    d = filenames.partition_dir(data_dir, topic, partition)
    return [filenames.path(d, b, filenames.LOG) for b in filenames.segment_bases(d)]


def batches_of(path: str) -> list[tuple[int, object]]:
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + HEADER_SIZE <= len(data):
        h = read_header(data, pos)
        out.append((pos, h))
        pos += h.size
    return out


# ---------------------------------------------------------------- damage and relocation
def reseal_crc(path: str, pos: int, edit) -> None:
    """Change the batch at ``pos`` of a segment with ``edit(bytearray)`` and give it a valid
    CRC again (a tamperer who knows the format, not the key)."""
    with open(path, "r+b") as f:
        f.seek(pos)
        head = f.read(HEADER_SIZE)
        h = read_header(head)
        f.seek(pos)
        buf = bytearray(f.read(h.size))
        edit(buf)
        sealed.finish(buf)
        f.seek(pos)
        f.write(buf)


def forge_plaintext(path: str, pos: int, base: int, size: int) -> None:
    """Replace the batch at ``pos`` (``size`` bytes) with a plaintext batch of the same base
    offset and size and a valid CRC: what someone who can write the files, but holds no key,
    can do (the checkpoint, the indexes and the offsets all still agree)."""
    for n in range(1, size):
        buf = encode_batch([None], [b"F" * n], 1_700_000_000_000).assign(base)
        if len(buf) == size:
            break
    else:
        raise AssertionError(f"no plaintext batch of {size} bytes")
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(buf)
