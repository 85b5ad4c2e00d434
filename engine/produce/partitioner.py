"""Which partition a record goes to: Kafka's murmur2 for keys, a sticky partition otherwise."""

from __future__ import annotations

import itertools
from functools import lru_cache

from ..format.native import murmur2


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
