"""read_committed: which batches of a read a reader may see.

A read_committed read stops before the last stable offset (LSO: the first offset of the oldest
open transaction) and leaves out every batch of an aborted transaction: a batch of producer
``P`` whose base offset lies in ``[first_offset, last_offset]`` of an aborted entry of ``P``
(engine/segments/txn_index.py). Control batches are never returned, at any isolation level.
Pure functions over batch headers: the read path feeds them what it read.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator

from ..errors import InvalidArgument
from ..format.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from ..segments.txn_index import AbortedTxn, overlapping
from ..storage.log import PartitionLog
from .hook import producers_of

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


def check_level(level: str) -> bool:
    """Is ``level`` read_committed? (InvalidArgument naming the two levels otherwise.)"""
    if level not in LEVELS:
        raise InvalidArgument(f"unknown isolation level {level!r}: use read_uncommitted (the "
                              "default, as Kafka) or read_committed")
    return level == READ_COMMITTED


class Aborted:
    """The aborted transactions overlapping a read, by producer id, searchable by offset."""

    def __init__(self, ranges: dict[int, list[tuple[int, int]]]) -> None:
        self._firsts = {pid: [r[0] for r in sorted(rs)] for pid, rs in ranges.items()}
        self._lasts = {pid: [r[1] for r in sorted(rs)] for pid, rs in ranges.items()}

    def ranges(self) -> list[list[int]]:
        """``[[producer id, first, last]...]``: JSON for a plan (``from_ranges`` reads it)."""
        return [[pid, f, last] for pid in sorted(self._firsts)
                for f, last in zip(self._firsts[pid], self._lasts[pid])]

    @classmethod
    def from_ranges(cls, ranges: Iterable[Iterable[int]] | None) -> Aborted:
        out: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last in ranges or ():
            out.setdefault(int(pid), []).append((int(first), int(last)))
        return cls(out)

    def __bool__(self) -> bool:
        return bool(self._firsts)

    def covers(self, producer_id: int, offset: int) -> bool:
        """Is the batch of ``producer_id`` at ``offset`` part of an aborted transaction?"""
        firsts = self._firsts.get(producer_id)
        if firsts is None:
            return False
        i = bisect_right(firsts, offset) - 1
        return i >= 0 and offset <= self._lasts[producer_id][i]


def hidden(h: BatchHeader, aborted: Aborted | None) -> bool:
    """Is this a batch no reader sees: a control batch (a marker), or, with ``aborted`` (a
    read_committed read), a batch of an aborted transaction?"""
    attrs = h.attributes
    return bool(attrs & ATTR_CONTROL) or bool(
        aborted and attrs & ATTR_TRANSACTIONAL and aborted.covers(h.producer_id, h.base_offset))


def stable_end(log: PartitionLog) -> int:
    """The last stable offset of ``log`` now (its end when it has no producer state)."""
    producers = producers_of(log)
    return log.end_offset() if producers is None else producers.last_stable_offset()[0]


def view(log: PartitionLog, start: int) -> tuple[int, Aborted]:
    """What a read_committed read of ``log`` from ``start`` may see: the last stable offset
    (it stops before it) and the aborted transactions with data in ``[start, LSO)``."""
    producers = producers_of(log)
    recent: list[AbortedTxn]
    if producers is None:  # (a log opened without producer state: tools)
        lso, recent = log.end_offset(), []
    else:
        lso, recent = producers.stable()
    if start >= lso:
        return lso, Aborted({})
    return lso, Aborted(overlapping([*indexed(log, start, lso), *recent], start, lso))


def indexed(log: PartitionLog, start: int, upper: int) -> Iterator[AbortedTxn]:
    """The ``.txnindex`` entries of the segments from the one holding ``start`` on (cold ones
    first), until one recorded a last stable offset past ``upper``: every transaction with
    data below ``upper`` had ended by then (Kafka's rule)."""
    for e in log.aborted_txns(start):
        yield e
        if e.last_stable_offset > upper:
            return
