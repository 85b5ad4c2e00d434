"""Kafka's ConsumerProtocol: a consumer's member metadata (Subscription) and its assignment
(Assignment) as bytes, read (the coordinator's subscribed topics, what ``rivven group
describe`` shows) and written (DescribeGroups of a native group's members); bytes that do not
read as one give None, never an error."""

from __future__ import annotations

import struct

# Kafka's consumers' member metadata (Subscription) and assignment (Assignment): a version
# (int16), then topics ([string]) or partitions ([string, [int32]]); later fields follow.
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
MAX_ITEMS = 1 << 20


def _string(b: bytes, pos: int) -> tuple[str, int]:
    (n,), pos = _I16.unpack_from(b, pos), pos + 2
    if n < 0 or pos + n > len(b):
        raise ValueError("a string runs past the metadata")
    return b[pos:pos + n].decode("utf-8"), pos + n


def _count(b: bytes, pos: int) -> tuple[int, int]:
    (n,) = _I32.unpack_from(b, pos)
    if not 0 <= n <= MAX_ITEMS:
        raise ValueError(f"an array of {n} items")
    return n, pos + 4


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics a consumer's Subscription names (None: not a Subscription we can read)."""
    try:
        pos = 2
        n, pos = _count(metadata, pos)
        out = set()
        for _ in range(n):
            t, pos = _string(metadata, pos)
            out.add(t)
        return out
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def assignment_partitions(data: bytes) -> list[tuple[str, list[int]]] | None:
    """The partitions a consumer's Assignment gives (None: not one we can read)."""
    if not data:
        return []
    try:
        pos = 2
        n, pos = _count(data, pos)
        out = []
        for _ in range(n):
            t, pos = _string(data, pos)
            k, pos = _count(data, pos)
            if pos + 4 * k > len(data):
                raise ValueError("partitions run past the assignment")
            out.append((t, list(struct.unpack_from(f">{k}i", data, pos))))
            pos += 4 * k
        return out
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def encode_assignment(parts: list[tuple[str, list[int]]]) -> bytes:
    """An Assignment (version 0, no user data): DescribeGroups of a native group's members."""
    out = bytearray(_I16.pack(0) + _I32.pack(len(parts)))
    for t, ps in parts:
        tb = t.encode()
        out += _I16.pack(len(tb)) + tb + _I32.pack(len(ps)) + struct.pack(f">{len(ps)}i", *ps)
    out += _I32.pack(-1)
    return bytes(out)
