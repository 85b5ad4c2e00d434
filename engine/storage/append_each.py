"""``append_each``: one batch to each of several partitions, durable when it returns, one WAL
fsync for all (a transaction's markers, ``rivven serve``'s Produce of several partitions):
each partition's append pipeline is started for every batch first, then finished."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..failpoint import failpoint
from ..format.records import EncodedBatch
from .pipeline import AppendPipeline


class Appends(Protocol):
    """What ``append_each`` needs of a partition (``PartitionLog``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def pipeline(self) -> AppendPipeline: ...


def append_each(items: Sequence[tuple[Appends, EncodedBatch]], durable: bool = False,
                done: list[int] | None = None,
                errors: list[Exception | None] | None = None) -> list[int]:
    """Append one batch to each of several partitions, durably when this returns, sharing
    the WAL fsync (one for all when their logs share a stream): every batch is logged first,
    then each is waited for. ``durable``: fsync the WAL whatever the partitions' ``wal.sync``
    says (a transaction's markers). Returns the base offsets, in the order given (``done``
    gets each as its batch is stored: what a failure part of the way left stored).

    The partitions are taken in (topic, partition) order, whatever the order given: a batch
    logged keeps its partition's flock until it reaches the segment, so two callers taking
    several partitions in one order can never each hold what the other waits for. When one
    fails, the batches logged before it are still finished (durable, or failed as their
    appends would), then the first error is raised. With ``errors`` (as long as ``items``)
    each batch's own error is put there instead (its base offset left 0) and the others go
    on (``rivven serve``'s Produce: each partition answered on its own)."""
    order = sorted(range(len(items)), key=lambda i: (items[i][0].topic, items[i][0].partition))
    # several partitions: their batches share one WAL fsync, where direct appends would pay
    # one fsync each, in turn (docs/DURABILITY.md, "Direct appends")
    direct = len({id(log) for log, _ in items}) == 1
    started: list[tuple[int, Any]] = []
    error: BaseException | None = None
    for i in order:
        log, batch = items[i]
        try:
            started.append((i, log.pipeline.start(batch, durable=durable,
                                                  direct=direct)))
        except Exception as e:
            if errors is None:
                error = e  # (raised once the others are finished)
                break
            errors[i] = e
        except BaseException as e:  # noqa: BLE001 - raised once the others are finished
            error = e
            break
        failpoint("append.each_logged")
    bases = [0] * len(items)
    for i, entry in started:
        log = items[i][0]
        try:
            bases[i] = log.pipeline.finish(entry)  # (one fsync: all)
            if done is not None:
                done.append(bases[i])
        except Exception as e:
            if errors is None:
                error = error or e  # (the first error is raised below)
            else:
                errors[i] = e
        except BaseException as e:  # noqa: BLE001 - the first error is raised below
            error = error or e
    if error is not None:
        raise error
    return bases
