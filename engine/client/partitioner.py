"""Which partition a record goes to: Kafka's murmur2 for keys, a sticky partition otherwise."""

from __future__ import annotations

import itertools
from functools import lru_cache

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def _positive_hash(key: bytes) -> int:
    return murmur2(key) & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """Where a Kafka client's default partitioner puts ``key``."""
    return _positive_hash(bytes(key)) % partitions


class StickyPartitioner:
    """Keyless records of one produce call share a partition; the next call moves on."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def next(self, partitions: int) -> int:
        return next(self._counter) % partitions
