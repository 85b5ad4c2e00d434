"""What the admin tools ask of the transaction layer (``rivven txn producers``, ``rivven txn
find-hanging``; Kafka's ``kafka-transactions.sh describe-producers`` and ``find-hanging``,
KIP-664): the producer state of partitions, and the transactions open in a partition that
nothing will end.

A partition's open transaction (producer id P, data epoch e, first offset F) is **known** when
a transactional id's state has P as its producer id, the transaction open — Ongoing with
epoch e, or PrepareCommit/PrepareAbort with epoch e + 1 (the markers' epoch, being written) —
and the partition among its partitions. The coordinator ends a known transaction (commit,
abort, the timeout, recovery); an unknown one it never will, so the partition's last stable
offset stays at F and read_committed readers stop there for good. Hanging, then, is:

- ``unknown-producer``: no transactional id's state names P (a state file lost or restored
  from an older backup after P was taken);
- ``not-in-transaction``: P's transactional id has no open transaction with that epoch and
  that partition (its state went back: a backup);
- ``timed-out``: known, but open longer than its id's ``transaction.timeout.ms`` (recovery
  at the next writable open, or ``rivven txn abort ID``, aborts it).

The first two nothing ends but ``abort_hanging`` (``rivven txn abort --topic T --partition P
--start-offset O``): an ABORT marker written straight into the partition.

Reading the partitions and the states is not one atomic look: a transaction that ends between
the two would seem unknown. A partition joins a transaction durably before its data is
written, and a transaction's markers are written before its state says it is complete, so a
candidate is reported only if the partition still has it open (same producer id, same first
offset) after the states were read: then it was open, and unknown, at the moment they were.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ..errors import InvalidArgument
from ..format.records import MAX_EPOCH
from ..storage.log import PartitionLog
from . import markers
from .hook import producers_of
from .results import DamagedTransaction, HangingTransaction, ProducerRow, TransactionRow
from .txn_store import ONGOING, OPEN

UNKNOWN_PRODUCER, NOT_IN_TRANSACTION, TIMED_OUT = (
    "unknown-producer", "not-in-transaction", "timed-out")
log_ = logging.getLogger("rivven.txn")


def producer_rows(logs: Iterable[PartitionLog]) -> list[ProducerRow]:
    """Every producer each partition's state knows, in producer id order: ``topic,
    partition, producer_id, epoch, last_sequence`` (None: no batch at this epoch yet),
    ``last_offset`` (of its last batch or marker), ``last_timestamp`` (the largest record
    timestamp of its last batch, Kafka's LastTimestamp; None: none since its last marker),
    ``last_seen_ms`` (what expiry counts from: that timestamp, or when this process's state
    took the batch in if later), ``txn_start_offset`` (the first offset of its open
    transaction here; None: none)."""
    rows: list[ProducerRow] = []
    for log in logs:
        hook = producers_of(log)
        if hook is None:
            continue
        with log.mutex:  # (the state changes as appends go on)
            for pid, e in hook.state().entries():
                rows.append({"topic": log.topic, "partition": log.partition,
                             "producer_id": pid, "epoch": e.epoch,
                             "last_sequence": _known(e.last_seq),
                             "last_offset": _known(e.last_offset),
                             "last_timestamp": e.batches[-1].max_timestamp if e.batches
                             else None,
                             "last_seen_ms": _known(e.last_timestamp),
                             "txn_start_offset": _known(e.txn_first_offset)})
    return rows


def _known(v: int) -> int | None:
    return None if v < 0 else v


def _open_in(log: PartitionLog) -> dict[int, tuple[int, int]]:
    """{producer id: (first offset, data epoch)} of the transactions open in ``log`` now."""
    hook = producers_of(log)
    return hook.open_transactions() if hook is not None else {}


States = Callable[[], "list[TransactionRow | DamagedTransaction]"]


def find_hanging(logs: list[PartitionLog], states: States, now: int
                 ) -> list[HangingTransaction]:
    """The hanging transactions of ``logs`` (see the module docstring). ``states()``: the
    rows of every transactional id (``Coordinator.transactions(all_ids=True)``). One row each:
    ``topic, partition, producer_id, epoch`` (of its data), ``start_offset``,
    ``last_seen_ms``, ``transactional_id, state, timeout_ms, age_ms`` (None when no id knows
    the producer), ``reason``."""
    first = [(log, found) for log in logs if (found := _open_in(log))]
    if not first:
        return []
    by_pid: dict[int, TransactionRow] = {}
    for r in states():
        if "error" in r:  # (state "Damaged")
            log_.warning("the state of transactional id %r is damaged (%s): a transaction "
                         "found hanging with an unknown producer may be its own",
                         r["transactional_id"], r["error"])
            continue
        by_pid[r["producer_id"]] = r
    out: list[HangingTransaction] = []
    for log, found in first:
        again: dict[int, tuple[int, int]] | None = None
        for pid, (start, epoch) in sorted(found.items()):
            st = by_pid.get(pid)
            reason = _reason(st, log.topic, log.partition, epoch, now)
            if reason is None:
                continue
            if again is None:
                again = _open_in(log)
            if again.get(pid, (None,))[0] != start:
                continue  # it ended meanwhile: the states read were older than its end
            seen = next((r["last_seen_ms"] for r in producer_rows([log])
                         if r["producer_id"] == pid), None)
            out.append({"topic": log.topic, "partition": log.partition, "producer_id": pid,
                        "epoch": epoch, "start_offset": start,
                        "last_seen_ms": seen,
                        "transactional_id": st["transactional_id"] if st else None,
                        "state": st["state"] if st else None,
                        "timeout_ms": st["timeout_ms"] if st else None,
                        "age_ms": st["age_ms"] if st else None, "reason": reason})
    return out


def _reason(st: TransactionRow | None, topic: str, partition: int, epoch: int, now: int
            ) -> str | None:
    """Why the open transaction (of the producer ``st`` names, data ``epoch``) in
    ``topic``-``partition`` hangs, None when it does not."""
    if st is None:
        return UNKNOWN_PRODUCER
    state = st["state"]
    data_epoch = st["epoch"] - (state != ONGOING)  # (Prepare*: the markers' epoch)
    if (state not in OPEN or data_epoch != epoch
            or [topic, partition] not in st["partitions"]):
        return NOT_IN_TRANSACTION
    if st["started_ms"] and now - st["started_ms"] > st["timeout_ms"]:
        return TIMED_OUT
    return None


def abort_hanging(log: PartitionLog, start_offset: int, states: States, now: int
                  ) -> HangingTransaction:
    """Abort the transaction open in ``log`` from ``start_offset`` when no transactional id
    will (Kafka's ``kafka-transactions.sh abort --start-offset``): an ABORT marker with its
    epoch + 1, as the coordinator would write. Only a transaction ``find_hanging`` reports
    as ``unknown-producer`` or ``not-in-transaction``: one its transactional id knows is
    aborted through the id (``Engine.abort_transaction``), so that the id's state and the
    partitions agree. Returns the hanging row with ``marker_offset``."""
    found = [r for r in find_hanging([log], states, now) if r["start_offset"] == start_offset]
    name = f"{log.topic}-{log.partition}"
    if not found:
        open_at = sorted(first for first, _ in _open_in(log).values())
        raise InvalidArgument(
            f"no hanging transaction starts at offset {start_offset} in {name} (open there: "
            f"{', '.join(map(str, open_at)) or 'none'}); 'rivven txn find-hanging' lists them")
    row = found[0]
    if row["reason"] == TIMED_OUT:
        raise InvalidArgument(
            f"the transaction at offset {start_offset} in {name} is transactional id "
            f"{row['transactional_id']!r}'s (timed out): abort it through its id "
            "(eng.txn.abort, rivven txn abort ID), which ends it in every partition")
    if row["epoch"] >= MAX_EPOCH:
        raise InvalidArgument(f"the transaction at offset {start_offset} in {name} has epoch "
                              f"{row['epoch']}: no marker epoch is above it")
    row["marker_offset"] = markers.write([log], row["producer_id"], row["epoch"] + 1,
                                         commit=False)[0]
    return row
