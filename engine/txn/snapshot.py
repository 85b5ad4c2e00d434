"""Producer-state snapshots: ``<partition dir>/<offset as 20 digits>.snapshot``.

A snapshot is the ``ProducerState`` of a partition as it was when the log ended at ``offset``
(the file's name): loading it and applying the batches from ``offset`` to the log end gives
the state without reading the older log. This module holds the bytes (``encode``,
``decode``); the files are the partition's (engine.segments.snapshot_files), written whole
under the partition lock at each checkpoint through its log (engine.txn.hook calls
``PartitionLog.write_snapshot``); docs/FORMAT.md has every byte. All integers are
little-endian::

    header, 32 bytes
      0  magic  4s  b"RVPS"          4  version u16 (=1)      6  reserved u16 (=0)
      8  crc32c u32: of bytes [0, 8) and then [12, end): everything but itself
      12 reserved u32 (=0)          16 offset i64 (= the name)
      24 producer count i32         28 reserved i32 (=0)
    per producer, in producer id order, 40 bytes
      0  producer id i64            8  last offset i64 (its last batch or marker here)
      16 last seen i64 (ms: its last batch's max timestamp or, if later, when it was
         taken in; expiry)
      24 open transaction's first offset i64 (-1: none)
      32 epoch i16                  34 open transaction's epoch i16 (-1: none)
      36 batch count i32 (0..5), then that many batches, oldest first, 32 bytes each:
         0 first offset i64, 8 last offset i64, 16 max timestamp i64,
         24 first sequence i32, 28 last sequence i32

Nothing read is used unchecked: the seal, then every count and range before it sizes or
indexes anything (``decode``); a file that fails is DamagedMetadata, which the caller reports
and ignores (an older snapshot or the log serves instead).
"""

from __future__ import annotations

import struct

from ..errors import DamagedMetadata, plural
from ..format.crc import crc32c
from ..format.records import MAX_EPOCH
from ..segments.snapshot_files import FIX, WHAT
from .state import MAX_BATCHES, NONE, SEQ_MASK, BatchMeta, ProducerEntry, ProducerState

MAGIC = b"RVPS"
VERSION = 1
HEADER = struct.Struct("<4sHHIIqii")  # 32
PRODUCER = struct.Struct("<qqqqhhi")  # 40
BATCH = struct.Struct("<qqqii")  # 32
CRC_AT = 8


def encode(state: ProducerState) -> bytes:
    parts = [b""]
    count = 0
    for pid, e in state.entries():
        parts.append(PRODUCER.pack(pid, e.last_offset, e.last_timestamp, e.txn_first_offset,
                                   e.epoch, e.txn_epoch, len(e.batches)))
        parts += [BATCH.pack(b.first_offset, b.last_offset, b.max_timestamp, b.first_seq,
                             b.last_seq) for b in e.batches]
        count += 1
    parts[0] = HEADER.pack(MAGIC, VERSION, 0, 0, 0, state.end, count, 0)
    data = bytearray(b"".join(parts))
    struct.pack_into("<I", data, CRC_AT, crc32c(memoryview(data)[12:], crc32c(data[:CRC_AT])))
    return bytes(data)


def decode(data: bytes, where: str, offset: int, name: str = "") -> ProducerState:
    """The state in ``data`` (the bytes of ``where``, named for ``offset``); every field is
    checked (DamagedMetadata naming the file and what is wrong)."""

    def bad(reason: str) -> DamagedMetadata:
        return DamagedMetadata(f"{WHAT} {where} is damaged ({reason}); {FIX}", where)

    n = len(data)
    if n < HEADER.size:
        raise bad(f"{plural(n, 'byte')}, shorter than its {HEADER.size}-byte header")
    magic, version, r1, crc, r2, end, count, r3 = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise bad(f"magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise bad(f"version {version}, this rivven reads version {VERSION}")
    if crc32c(memoryview(data)[12:], crc32c(data[:CRC_AT])) != crc:
        raise bad("checksum mismatch")
    if r1 or r2 or r3:
        raise bad("reserved header fields are not zero")
    if end != offset:
        raise bad(f"it holds offset {end}, its name says {offset}")
    if count < 0 or HEADER.size + count * PRODUCER.size > n:
        raise bad(f"producer count {count} does not fit its {plural(n, 'byte')}")
    state = ProducerState(name, end)
    pos = HEADER.size
    prior = -1
    for _ in range(count):
        if pos + PRODUCER.size > n:
            raise bad(f"producer entry at byte {pos} runs past the end")
        pid, last_off, last_ts, txn_first, epoch, txn_epoch, nb = PRODUCER.unpack_from(data, pos)
        at = f"producer {pid} at byte {pos}"
        pos += PRODUCER.size
        if pid <= prior:
            raise bad(f"{at}: producer ids must be >= 0 and ascending")
        prior = pid
        if not 0 <= epoch <= MAX_EPOCH:
            raise bad(f"{at}: epoch {epoch} out of range")
        if not 0 <= last_off < end:
            raise bad(f"{at}: last offset {last_off} outside 0..{end - 1}")
        if (txn_first == NONE) != (txn_epoch == NONE) or (
                txn_first != NONE and not (0 <= txn_first <= last_off
                                           and 0 <= txn_epoch <= epoch)):
            raise bad(f"{at}: open transaction (offset {txn_first}, epoch {txn_epoch}) "
                      "out of range")
        if not 0 <= nb <= MAX_BATCHES or pos + nb * BATCH.size > n:
            raise bad(f"{at}: batch count {nb} out of range")
        batches = []
        low = 0
        for _ in range(nb):
            first_off, last_b, max_ts, first_seq, last_seq = BATCH.unpack_from(data, pos)
            pos += BATCH.size
            if not low <= first_off <= last_b <= last_off:
                raise bad(f"{at}: batch offsets {first_off}..{last_b} out of order or range")
            if not (0 <= first_seq <= SEQ_MASK and 0 <= last_seq <= SEQ_MASK):
                raise bad(f"{at}: batch sequences {first_seq}..{last_seq} out of range")
            low = last_b + 1
            batches.append(BatchMeta(first_seq, last_seq, first_off, last_b, max_ts))
        state.add(pid, ProducerEntry(epoch, batches, txn_first, txn_epoch, last_off, last_ts))
    if pos != n:
        raise bad(f"{plural(n - pos, 'byte')} after the last producer entry")
    return state
