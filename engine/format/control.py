"""Control batches: the COMMIT and ABORT markers that end a transaction in a partition.

A control batch is a format-2 batch with ``ATTR_CONTROL | ATTR_TRANSACTIONAL``, the producer
id and (bumped) epoch of the transaction it ends, base sequence -1, and exactly one record:
key ``<hh`` (version 0, type: 0 ABORT, 1 COMMIT), value ``<hi`` (version 0, coordinator epoch,
reserved: 0). No reader ever returns it; it takes one offset (docs/TRANSACTIONS.md).
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import CorruptRecordError
from .decode import body_of, decode_columns, layout
from .encode import encode_batch
from .records import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, EncodedBatch

ABORT, COMMIT = 0, 1
_KEY = struct.Struct("<hh")
_VALUE = struct.Struct("<hi")
NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}


def encode_marker(producer_id: int, epoch: int, commit: bool, timestamp: int) -> EncodedBatch:
    """The marker ending ``producer_id``'s transaction in one partition."""
    return encode_batch([_KEY.pack(0, COMMIT if commit else ABORT)], [_VALUE.pack(0, 0)],
                        timestamp, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=-1, flags=ATTR_CONTROL | ATTR_TRANSACTIONAL)


def marker_type(h: BatchHeader, buf: Any, pos: int = 0, where: str = "") -> int:
    """COMMIT or ABORT, read from the control batch at ``pos`` of ``buf`` (header ``h``);
    anything else is CorruptRecordError."""
    if not h.is_control:
        raise CorruptRecordError(f"batch at offset {h.base_offset} is not a control batch{where}")
    body = body_of(buf, pos, h, where)
    keys = decode_columns(body, h, layout(body, h, where), where)[2]
    key = keys[0] if keys else None
    if key is None or len(key) != _KEY.size:
        raise CorruptRecordError(f"control batch at offset {h.base_offset} has no valid key{where}")
    version, kind = _KEY.unpack(key)
    if version != 0 or kind not in NAMES:
        raise CorruptRecordError(f"control batch at offset {h.base_offset}: unknown marker "
                                 f"version {version} type {kind}{where}")
    return kind
