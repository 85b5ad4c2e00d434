"""Topics as a Spark sink, exactly once: ``df.write.format("rivven")`` and
``df.writeStream.format("rivven")``.

Input columns as Kafka's sink takes them: ``value`` (binary or string; null: a tombstone),
and optionally ``key`` (binary or string), ``headers`` (array<struct<key string, value
binary>>), ``partition`` (int; null: where ``eng.produce`` puts the row), ``timestamp``
(timestamp or long milliseconds; null: now) and ``topic`` (string; the ``topic`` option,
when given, overrides it, as in Kafka's sink). Other columns are ignored, as Kafka's sink
ignores them. Keyed rows go where
``eng.produce`` puts them (murmur2 of the key).

Exactly once, a two-phase commit (engine.txn.decisions):
- every task writes its rows in a transaction of its own and *prepares* it (durable, never
  timed out) — nothing is visible yet — and sends the prepared transaction to the driver;
- the driver's commit commits all of them as one under a decision key: the decision is
  written first, so a driver killed part way is finished by the next writer of the key or
  the next writable open of the data dir;
- a streaming sink's decision key is the query's (from its checkpoint location, or the
  ``transactionalIdPrefix`` option) and its sequence the micro-batch id: a batch that runs
  again after a restart (the same id) is a replay, its transactions aborted, so each batch
  is visible once; task ``p`` of every micro-batch uses one transactional id, so a retried
  or restarted task fences and aborts what an earlier attempt left;
- a batch write (``save()``) has a decision key of its own: all of it becomes visible or,
  when a task fails, nothing (its transactions and those of failed attempts are aborted);
- a batch write is a *job* under its key: the driver records its end (commit or abort) under
  the key before it settles anything, and a task prepares under the key's lock, aborting its
  transaction instead when the job has ended — Spark does not wait for the other tasks of a
  failed job, and one that prepares after the driver's abort would otherwise stay prepared
  (never timed out) with nobody to decide it;
- a micro-batch cannot be recorded ended so (a restarted query runs the same batch id
  again): its abort is counted under the query's key before it fences the key's ids, a task
  reads that count (its batch id: Spark's local property ``streaming.sql.batchId``) before
  it reads a row, and prepares under the key's lock only when no abort of its batch was
  counted since — a task of the failed run, begun before the abort, that prepares late aborts
  itself; a task of the run after a restart began after the abort and prepares.
Readers with read_uncommitted see prepared rows before the commit, and rows of aborted
attempts (as Kafka's read_uncommitted does).

Options: ``path`` (required; the same data dir at this path on every executor), ``topic``
(unless every row has a ``topic``), ``transactionalIdPrefix`` (a streaming query's decision
key; default: from ``checkpointLocation``), ``batchId`` (a batch write inside
``foreachBatch``: with ``transactionalIdPrefix``, a batch id written before is a no-op),
``transactionTimeoutMs`` (a task's transaction before it is prepared; default 900000),
``keyring`` (an encrypted topic's keyring file, where the executors run), ``valueSchema`` /
``keySchema`` (SUBJECT or ``id:N``: the column, a struct or any type the schema takes, encoded
in Confluent's wire format with that registered schema: schema_columns).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default


@dataclass
class Written(WriterCommitMessage):
    """A task's answer: its prepared transaction and what it wrote."""

    prepared: tuple[str, int, int]
    rows: int


class SinkOptions:
    def __init__(self, options: dict[str, str], schema: Any) -> None:
        o = {k.lower(): v for k, v in options.items()}
        if not o.get("path"):
            raise ValueError("the rivven sink needs .option('path', DATA_DIR)")
        self.path = o["path"]
        self.topic = o.get("topic") or None
        names = {f.name for f in schema.fields}
        if "value" not in names:
            raise ValueError("the rivven sink needs a 'value' column (binary or string); "
                             "key, headers, partition, timestamp and topic are optional")
        if self.topic is None and "topic" not in names:
            raise ValueError("the rivven sink needs .option('topic', T) or a 'topic' column")
        self.keyring = o.get("keyring")
        raw = o.get("transactiontimeoutms", str(TIMEOUT_MS))
        if not raw.isdigit() or not 1 <= int(raw) < 1 << 31:
            raise ValueError(f"transactionTimeoutMs {raw!r}: milliseconds, 1 to 2147483647")
        self.timeout_ms = int(raw)
        self.prefix = o.get("transactionalidprefix")
        self.checkpoint = o.get("checkpointlocation")
        from .schema_columns import encode_options

        self.schema_refs = encode_options(o)
        self.schema_ids: dict[str, int] = {}  # (resolved in the driver: check_topic)
        from pyspark.sql.types import BinaryType, NullType, StringType

        types = {f.name: f.dataType for f in schema.fields}
        for c in ("value", "key"):
            t = types.get(c)
            if c not in self.schema_refs and t is not None and \
                    not isinstance(t, (BinaryType, StringType, NullType)):
                raise ValueError(f"the rivven sink's {c} column is {t.simpleString()}: a "
                                 f"{c} is binary or string, unless .option('{c}Schema', "
                                 "SUBJECT or id:N) names a registered schema to encode it with")

    def check_topic(self) -> None:
        """(The driver.) The ``topic`` option names a topic that exists; the schemas of
        ``valueSchema``/``keySchema`` exist (their ids, for the tasks)."""
        from .schema_columns import resolve_encoding

        self.schema_ids = resolve_encoding(self.path, self.keyring, self.schema_refs)
        if self.topic is None:
            return
        from engine import Engine

        with Engine.open(self.path, read_only=True, keyring=self.keyring) as eng:
            eng.topic(self.topic)


# ---------------------------------------------------------------- the executors
def _task() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0
    return ctx.partitionId(), ctx.attemptNumber()


def tables_of(batch: Any, default_topic: str | None) -> list[tuple[str, Any]]:
    """A record batch as ``[(topic, table of its rows)]`` for ``produce_arrow``, rows in
    order: all to ``default_topic`` (the ``topic`` option) when given, else each row to its
    ``topic`` (null: refused)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    keep = [c for c in ("value", "key", "headers", "partition", "timestamp") if c in names]
    table = pa.Table.from_batches([batch]).select(keep)
    if "key" in keep and pa.types.is_null(table.schema.field("key").type):
        table = table.drop_columns(["key"])
    if default_topic is not None or "topic" not in names:
        if default_topic is None:
            raise ValueError("the rivven sink has no 'topic' option and no 'topic' column")
        return [(default_topic, table)] if table.num_rows else []
    topics = batch.column(names.index("topic"))
    if topics.null_count:
        raise ValueError("a row has a null 'topic' and the sink has no 'topic' option")
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        return [(distinct[0], table)]
    return [(t, table.filter(pc.equal(topics, t))) for t in distinct]


def write_rows(opts: SinkOptions, tid: str, key: str, batches: Iterator[Any],
               job: str | None = None, batch: int | None = None) -> Written:
    """(A task.) The rows in one transaction of ``tid``, prepared (for ``job`` under ``key``:
    aborted instead, InvalidTxnState, when the job ended meanwhile; for micro-batch
    ``batch``: when an abort of it was recorded since the task began).

    The task's writable engine is its own, closed when the task ends: a Python worker is
    reused across tasks but ends with ``os._exit`` or a signal (PySpark's daemon), so an
    engine kept open in it would leave its WAL stream behind for the next open to recover as
    a crashed writer's. (Closing checkpoints: the stream is removed.)"""
    from engine import Engine
    from engine.txn.decisions import DecisionFiles

    # first thing, before the engine opens or a row is read: an abort of the batch from here
    # on is one that failed this run of it (a restarted query's run begins after it)
    seen = DecisionFiles(opts.path).batch_seen(key, batch) if batch is not None else None
    rows = 0
    with Engine.open(opts.path, keyring=opts.keyring) as eng:
        tp: Any = eng.producer(transactional_id=tid, transaction_timeout_ms=opts.timeout_ms,
                               decision_key=key)  # (a TransactionalProducer)
        try:
            tp.begin()
            encoders = None
            if opts.schema_ids:
                from .schema_columns import Encoders

                encoders = Encoders(eng.schemas, opts.schema_ids)
            for b in batches:
                if encoders is not None:
                    b = encoders.batch(b)
                for topic, table in tables_of(b, opts.topic):
                    tp.produce_arrow(topic, table)  # (the Arrow buffers go in as they are)
                    rows += table.num_rows
            prepared = tp.prepare(job, seen)
        finally:
            tp.close()  # (aborts the transaction unless it was prepared)
    return Written(tuple(prepared), rows)


def _prepared(messages: list[Any]) -> list[tuple[str, int, int]]:
    return [m.prepared for m in messages if m is not None]


def _orphans(eng: Any, key: str, keep: set[str]) -> None:
    """Abort the open transactions of ``key``'s ids (``<key>-<task>`` or
    ``<key>-<task>-<attempt>``: not another key's of which this one is a prefix) that no
    answer names: attempts that failed before they prepared, whose answer was lost, or that
    prepared after the job's end was recorded. (After the end is recorded, so one that
    prepares later aborts itself.)"""
    ours = re.compile(re.escape(key) + r"-[0-9]+(?:-[0-9]+)?")
    for row in eng.txn.list_transactions():
        tid = row["transactional_id"]
        if ours.fullmatch(tid) and tid not in keep:
            eng.txn.abort(tid)


# ---------------------------------------------------------------- df.write
class RivvenBatchWriter(DataSourceArrowWriter):
    """``save()``: all or nothing. With ``batchId`` and ``transactionalIdPrefix`` (a
    ``foreachBatch`` function's write: ``.option("batchId", batch_id)``), a batch id not above
    the last one committed under the prefix is a replay and writes nothing: exactly once for
    output modes the streaming sink cannot take (update, complete)."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.opts = SinkOptions(options, schema)
        self.opts.check_topic()
        raw = {k.lower(): v for k, v in options.items()}.get("batchid")
        self.batch: int | None = None
        if raw is not None:
            if not raw.isdigit():
                raise ValueError(f"batchId {raw!r}: the micro-batch id foreachBatch gives")
            if not self.opts.prefix:
                raise ValueError("batchId needs .option('transactionalIdPrefix', NAME): the "
                                 "name under which the batch ids are counted")
            self.batch = int(raw)
            self.key = f"spark-batch-{self.opts.prefix}"
        else:
            self.key = f"spark-write-{uuid.uuid4().hex[:16]}"
        # this save() under the key (the writer is pickled to the tasks and to the commit)
        self.job = f"write-{uuid.uuid4().hex[:16]}"

    def write(self, iterator: Iterator[Any]) -> Written:
        partition, attempt = _task()
        tid = f"{self.key}-{partition}" if self.batch is not None else \
            f"{self.key}-{partition}-{attempt}"
        return write_rows(self.opts, tid, self.key, iterator, self.job)

    def commit(self, messages: list[Any]) -> None:
        from engine import Engine

        prepared = _prepared(messages)
        with Engine.open(self.opts.path, keyring=self.opts.keyring) as eng:
            eng.txn.commit_prepared(self.key, prepared, self.batch, job=self.job)
            if self.batch is None:  # (with a batch id, a task's attempts share one id)
                _orphans(eng, self.key, {p[0] for p in prepared})

    def abort(self, messages: list[Any]) -> None:
        from engine import Engine

        with Engine.open(self.opts.path, keyring=self.opts.keyring) as eng:
            eng.txn.abort_prepared(self.key, _prepared(messages), job=self.job)
            _orphans(eng, self.key, set())


# ---------------------------------------------------------------- df.writeStream
def stream_key(opts: SinkOptions) -> str:
    """A streaming query's decision key: stable across restarts from its checkpoint."""
    if opts.prefix:
        return f"spark-stream-{opts.prefix}"
    if not opts.checkpoint:
        raise ValueError("the rivven streaming sink needs .option('checkpointLocation', DIR) "
                         "(its exactly-once state is keyed by it) or "
                         ".option('transactionalIdPrefix', NAME)")
    where = os.path.realpath(opts.checkpoint) if "://" not in opts.checkpoint \
        else opts.checkpoint
    return "spark-stream-" + hashlib.sha256(where.encode()).hexdigest()[:20]


BATCH_ID = "streaming.sql.batchId"  # (the local property Spark's MicroBatchExecution sets)


def _micro_batch() -> int:
    """(A streaming task.) The id of the micro-batch it writes, from Spark's local property."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty(BATCH_ID) if ctx is not None else None
    if raw is None or not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"the rivven streaming sink writes in a micro-batch's task, whose "
                         f"local property {BATCH_ID} names its batch (got {raw!r}): use a "
                         "micro-batch trigger, or foreachBatch with the batch sink")
    return int(raw)


class RivvenStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream``: each micro-batch once. A micro-batch's abort is counted under the
    query's key (its id runs again after a restart, so it cannot be recorded ended as a batch
    write's job is) before it fences the key's ids, and a task reads that count as it begins
    and prepares under the key's lock only when no abort of its batch came since."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.opts = SinkOptions(options, schema)
        self.opts.check_topic()
        self.key = stream_key(self.opts)

    def write(self, iterator: Iterator[Any]) -> Written:
        partition, _ = _task()
        return write_rows(self.opts, f"{self.key}-{partition}", self.key, iterator,
                          batch=_micro_batch())

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        from engine import Engine

        with Engine.open(self.opts.path, keyring=self.opts.keyring) as eng:
            eng.txn.commit_prepared(self.key, _prepared(messages), batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        from engine import Engine

        with Engine.open(self.opts.path, keyring=self.opts.keyring) as eng:
            eng.txn.abort_prepared(self.key, _prepared(messages), batch=batchId)
            _fence(eng, self.key)


def _fence(eng: Any, key: str) -> None:
    """(A micro-batch's abort, counted under ``key`` already: the query fails with it.) Take
    up every transactional id of ``key``: whatever a task of the batch has open or prepared
    is aborted, and a task still running, whose producer is older, can neither write nor
    prepare any more. A task whose producer is made after this point and that began before
    the abort was counted finds the count grown when it prepares, and aborts instead. (One
    that began after it — launched before the job failed, not yet killed, its Python not yet
    started when the abort was done — is taken for the next run of the batch: Spark kills a
    failed job's tasks before it calls the abort; should one run on, the query's restart
    takes up its id, or ``rivven txn abort``.)"""
    ours = re.compile(re.escape(key) + r"-[0-9]+")
    for tid in eng.txn.ids():
        if ours.fullmatch(tid):
            eng.producer(transactional_id=tid, decision_key=key).close()
