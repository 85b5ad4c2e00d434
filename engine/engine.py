"""``Engine``: an open data dir and the public API over it — a façade composed of services.

The data path is flat here (topics, produce, read, stream, consumers, producers); each other
concern is a service constructed with its collaborators and usable alone: ``eng.offsets``
(engine.fetch.offsets), ``eng.groups`` (groups.admin), ``eng.txn`` (txn.transactions),
``eng.keys`` (maintenance.keys), ``eng.maintenance`` (maintenance.admin), ``eng.segments``
(tools.admin), ``eng.recovery`` (wal.recovery). Names earlier releases documented on the
engine itself (``eng.compact``, ``eng.end_offsets``, ...) are one-line forwards to them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .counters import gather
from .counters.meter import Meter
from .crypto.keyring import check_outside
from .crypto.keyring import resolve as resolve_keyring
from .crypto.topic import Vault
from .descriptors import Forward, Lazy, new
from .errors import InvalidArgument, ReadOnlyError, RivvenError
from .format.records import ATTR_TRANSACTIONAL, ColumnBatch, Record
from .fs.locks import LockWait
from .progress import Progress
from .results import RecoveryReport
from .settings import Settings
from .storage import datadir
from .storage.budget import FileBudget, effective_limit
from .storage.catalog import TopicMeta
from .storage.finder import LogFinder
from .storage.log import PartitionLog
from .storage.partitions import Partitions
from .storage.topics import Topics
from .tiering import status
from .tiering.cache import ColdCache
from .tiering.hot import HotCache
from .wal.owner import WalOwner
from .wal.recovery import Recovery
from .wal.results import Checkpointed
from .wal.stream import WalStream

READ_UNCOMMITTED = "read_uncommitted"  # (txn.isolation.READ_UNCOMMITTED: no txn import here)
DEFAULT_TIMEOUT_MS = 60_000  # (txn.coordinator.DEFAULT_TIMEOUT_MS, for the same reason)

if TYPE_CHECKING:  # (each imported when first used: a command loads what it needs)
    from .crypto.topic import OffsetMetadata
    from .fetch.offsets import Offsets
    from .fetch.positions import Position
    from .format.encode import BodySource
    from .groups.admin import GroupAdmin
    from .groups.consumer import Consumer
    from .maintenance.admin import Maintenance
    from .maintenance.keys import Keys
    from .metrics.results import Metrics
    from .produce.factory import Producers
    from .produce.idempotent import IdempotentProducer
    from .produce.path import ProducePath
    from .produce.transactional import TransactionalProducer
    from .schemas.registry import Registry
    from .security.acls import Acls
    from .security.users import Users
    from .tools.admin import Segments
    from .topic_admin import TopicAdmin
    from .txn.coordinator import Coordinator
    from .txn.decisions import Decisions
    from .txn.transactions import Transactions


def _retain(log: PartitionLog, meta: TopicMeta | None = None) -> None:
    from .maintenance.retention import retain

    retain(log, meta)


def _request() -> Any:
    from .produce.request import ProduceRequest

    return ProduceRequest


def _producer_state(log: PartitionLog) -> Any:
    from .txn.hook import PartitionProducers

    return PartitionProducers(log)


class Engine:
    """An open data dir. Thread-safe; many processes may open the same dir at once.

    >>> import tempfile
    >>> with Engine.open(tempfile.mkdtemp()) as eng:
    ...     _ = eng.create_topic("orders", partitions=1)
    ...     eng.produce("orders", [Record(key=b"k1", value=b"v1")])
    ...     [r.value for r in eng.read("orders", partition=0, offset=0)]
    [(0, 0)]
    [b'v1']
    """

    def __init__(self, path: str, read_only: bool = False, sync: bool = True,
                 settings: dict[str, str] | None = None, recover: bool = True,
                 progress: Progress | None = None,
                 on_lock_wait: Callable[[str], None] | None = None,
                 keyring: Any = None) -> None:
        self.path = os.path.abspath(path)
        self.read_only = read_only
        self.progress = progress  # (what, total bytes, bytes done) during long recovery work
        merged = dict(settings or {})
        if not sync:
            merged.setdefault("wal.sync", "none")
        self.settings = st = Settings.parse(merged)
        # every wait for a lock another process holds: bounded, and reported after a while
        self.lock_wait = lw = LockWait(None if st.lock_timeout_ms < 0
                                       else st.lock_timeout_ms / 1000, on_lock_wait)
        datadir.check(self.path, read_only)
        self.closed = False
        self.last_recovery: RecoveryReport = {}
        # master keys (outside the data dir) and the topics' data keys (docs/ENCRYPTION.md)
        self.keyring = resolve_keyring(keyring)
        check_outside(self.keyring, self.path)
        self._vault = vault = Vault(self.keyring)
        self._topics = Topics(self.path, lw, vault)
        self.catalog = self._topics.catalog
        vault.lookup = self.catalog.get
        # this process's counters, in .stats/ for `rivven metrics` (docs/METRICS.md)
        self.meter = m = Meter(self.path, st.metrics_enabled)
        self.hot = HotCache(st.hot_max_bytes) if st.hot_max_bytes > 0 else None
        self.cold_cache = ColdCache.for_data_dir(self.path, st.tier_cache_max_bytes, m)
        self._hot_stats = status.HotStats(self.path, self.hot, lambda: [
            log for _, _, log in self._partitions.open_logs()], m, not read_only)
        self._partitions = Partitions(self.path, not read_only, st.wal_sync, progress,
                                      self.cold_cache, self.hot, on_open=_retain,
                                      lock_wait=lw, producers=_producer_state, vault=vault,
                                      counts=m.partition if m.enabled else None,
                                      budget=FileBudget(effective_limit(st.files_max_open)),
                                      direct_bytes=st.append_direct_bytes)
        self._wal = wal = WalOwner(self.path, st, self._partitions, read_only,
                                   after_checkpoint=_retain,
                                   after_checkpoints=self._hot_stats.publish, lock_wait=lw,
                                   meter=m)
        self._find = find = LogFinder(self._topics, self._partitions, wal.attach)
        self._sync_commits = st.wal_sync != "none"
        self._consumers: set[Consumer] = set()
        self.recovery = Recovery(self.path, wal, find, progress, self._writable)
        if not read_only:
            datadir.clear_debris(self.path)  # (what dead processes left: trash, staging)
            if recover:  # dead WAL streams replayed, then what a crash left of transactions
                self.last_recovery = {**self.recovery.at_open(m)}
                if "deferred" not in self.last_recovery:
                    self.last_recovery.update(self.txn.after_crash())

    @classmethod
    def open(cls, path: str, read_only: bool = False, sync: bool = True,
             settings: dict[str, str] | None = None, recover: bool = True,
             progress: Progress | None = None,
             on_lock_wait: Callable[[str], None] | None = None,
             keyring: Any = None) -> Engine:
        """Open (creating when needed, unless ``read_only``) the data dir at ``path``; a
        writable open first replays the WAL streams of processes that died.
        ``sync=False`` (= ``settings={"wal.sync": "none"}``) skips fsyncs: data survives a
        process crash, not a machine crash (engine.settings). ``recover=False`` skips the
        replay (tools that mend WAL files first). ``progress(what, total, done)`` follows
        long recovery work; ``on_lock_wait(message)`` is called once a wait for another
        process's lock lasted a few seconds (default: a warning on ``rivven.locks``; given
        up with LockTimeout after ``lock.timeout.ms``). ``keyring``: the master keys of
        encrypted topics (docs/ENCRYPTION.md): a keyring file's path (JSON of base64 32-byte
        keys, mode 0600) or an object with ``get(key_id) -> bytes`` (a KMS); by default the
        file ``RIVVEN_KEYRING`` names."""
        return cls(path, read_only=read_only, sync=sync, settings=settings, recover=recover,
                   progress=progress, on_lock_wait=on_lock_wait, keyring=keyring)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Checkpoint what this process wrote, delete its WAL, release every file."""
        if self.closed:
            return
        for c in list(self._consumers):
            c.close()
        producers = self.__dict__.get("_producers")  # (made on first use: Lazy)
        if producers is not None:
            producers.close_all()  # (open transactions aborted rather than left to time out)
        # refuse new appends first: one that got in after the checkpoint below passed its
        # partition would be acknowledged, and its WAL deleted, with its segment bytes unsynced
        self._partitions.stop()
        clean = True
        if self._wal.stream is not None:
            try:
                self._wal.checkpoint()
            except RivvenError:
                clean = False  # keep the WAL: the next open replays it
        self._partitions.forget_all()
        self._wal.close(delete=clean)
        self._hot_stats.unpublish()
        self.cold_cache.close()
        gather.retire(self.meter, self.lock_wait)  # its counts join the retired ones
        self.closed = True

    @property
    def wal(self) -> WalStream | None:
        """This process's WAL stream, or None before a write."""
        return self._wal.stream

    @property
    def checkpoint_error(self) -> RivvenError | None:
        return self._wal.checkpoint_error

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("this engine was opened read-only; open it without read_only")

    # ---------------------------------------------------------------- WAL and recovery
    def checkpoint(self) -> list[Checkpointed]:
        """fsync every partition this process wrote, record recovery points, and delete the
        WAL files wholly below them."""
        self._writable()
        if self.closed:
            raise InvalidArgument("this engine is closed; open it again")
        return self._wal.checkpoint()

    # ---------------------------------------------------------------- topics
    def topic(self, name: str, create_hint: bool = False) -> TopicMeta:
        """Metadata of an existing topic (raises UnknownTopic, saying how to list the topics;
        ``create_hint``: how to create it instead, for a writer)."""
        return self._topics.get(name, create_hint)

    def topics(self, names: Sequence[str] | None = None, regex: bool = False
               ) -> list[TopicMeta]:
        """Every topic, by name; with ``names`` only those (that exist), or with ``regex``
        those one of the expressions matches whole (Kafka's ``subscribe(Pattern)``)."""
        if names is None:
            return self._topics.all()
        return self._topics.matching(names, regex)

    def match_topics(self, patterns: Sequence[str]) -> list[str]:
        """Names of the topics a regular expression of ``patterns`` matches whole."""
        return sorted(m.name for m in self.topics(patterns, regex=True))

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     if_not_exists: bool = False) -> TopicMeta:
        """A new topic: TopicExists when one of that name exists, unless ``if_not_exists``
        (the existing one then, unchanged: ``eng.topic_admin.create`` says what it did)."""
        return self.topic_admin.create(name, partitions, config, if_not_exists)["topic"]

    # ---------------------------------------------------------------- produce
    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None,
                compression: str | None = None) -> list[tuple[int, int]]:
        """Append records; returns one ``(partition, offset)`` per record once durable."""
        recs = records if isinstance(records, list) else list(records)
        if not recs:
            return []
        self._writable()
        with self._path.call(topic):
            return self._path.produce(_request().of_records(topic, recs, partition,
                                                                compression))

    def produce_batch(self, topic: str, values: Sequence[bytes | None],
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                      timestamps: Sequence[int | None] | int | None = None,
                      partition: int | None = None,
                      partitions: Sequence[int | None] | None = None,
                      compression: str | None = None) -> list[tuple[int, int]]:
        """Columnar produce: the fast path behind ``produce`` (no Record objects needed)."""
        self._writable()
        if not len(values):
            return []
        with self._path.call(topic):
            return self._path.produce(_request().of(
                topic, values, keys, headers, timestamps, partition, partitions, compression))

    def produce_arrow(self, topic: str, table: Any, partition: int | None = None,
                      compression: str | None = None) -> list[tuple[int, int, int]]:
        """Append the rows of a pyarrow Table or RecordBatch (columns: engine.produce.from_arrow);
        ``(partition, base offset, records)`` per batch stored, once durable: each
        partition's rows, in table order, hold consecutive offsets."""
        self._writable()
        with self._path.call(topic):
            return self._path.produce_arrow(topic, table, partition, compression)

    def produce_wire(self, topic: str, partition: int, keys: Sequence[bytes | None],
                     values: Sequence[bytes | None], headers: Sequence | None,
                     timestamps: list[int], producer: tuple[int, int, int] | None = None,
                     transactional: bool = False, codec: int = 0,
                     append_time: int | None = None) -> int:
        """A Kafka client's batch stored as sent (``rivven serve``'s Produce): one partition,
        ``producer`` = (producer id, epoch, base sequence) or None, checked by the partition's
        producer state as an in-process producer's batch is; its base offset once durable
        (a duplicate's original base offset, nothing written). A LogAppendTime topic stamps
        ``append_time`` (default: now) on its records: what the response tells the client."""
        self._writable()
        if not len(values):
            raise InvalidArgument("a batch of no records")
        with self._path.call(topic):
            return self._path.append_wire(topic, partition, keys, values, headers, timestamps,
                                          producer, ATTR_TRANSACTIONAL if transactional else 0,
                                          codec, append_time)

    def produce_wire_body(self, topic: str, partition: int, records: BodySource,
                          producer: tuple[int, int, int] | None = None,
                          transactional: bool = False, codec: int = 0) -> int:
        """``produce_wire`` of records that lay themselves out as batch bodies
        (``engine.format.encode.BodySource``: ``rivven serve``'s Kafka batches, transcoded in
        C by ``engine.format.kafka_batch``); the same checks, the same result."""
        self._writable()
        with self._path.call(topic):
            return self._path.append_wire_body(topic, partition, records, producer,
                                               ATTR_TRANSACTIONAL if transactional else 0,
                                               codec)

    def produce_wire_bodies(self, items: Sequence[tuple]) -> list[int | RivvenError]:
        """``produce_wire_body`` of several ``(topic, partition, records, producer,
        transactional, codec[, append_time])`` at once (a Produce request's partitions), one
        WAL fsync for all: each one's base offset once durable, or the error it met (the
        others go on). ``append_time``: what a LogAppendTime topic stamps (now if left out)."""
        self._writable()
        with contextlib.ExitStack() as calls:
            for topic in dict.fromkeys(t for t, *_ in items):
                calls.enter_context(self._path.call(topic))
            return self._path.append_wire_bodies(
                [(t, p, r, producer, ATTR_TRANSACTIONAL if txn else 0, codec, *rest)
                 for t, p, r, producer, txn, codec, *rest in items])

    def producer(self, transactional_id: str | None = None, *,
                 transaction_timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 producer_id: int | None = None, epoch: int = 0,
                 sequences: Mapping[tuple[str, int], int] | None = None,
                 decision_key: str | None = None, retries: int = 0,
                 retry_backoff_ms: int = 100) -> IdempotentProducer | TransactionalProducer:
        """With ``transactional_id`` a TransactionalProducer (fencing every older producer of
        that id in any process), else an IdempotentProducer: engine.produce.factory has the
        whole story (``decision_key``, timeouts, taking an id up, retries)."""
        self._writable()
        return self._producers.make(transactional_id, transaction_timeout_ms, producer_id,
                                    epoch, sequences, decision_key, retries, retry_backoff_ms)

    # ---------------------------------------------------------------- read
    def read(self, topic: str, partition: int, offset: int, max_records: int = 1000,
             isolation_level: str = READ_UNCOMMITTED) -> list[Record]:
        """Up to ``max_records`` records from ``offset`` on (fewer at the end of the log;
        read_committed: up to the last stable offset, aborted ones left out)."""
        from .fetch import read_path

        committed = read_path.checked(offset, isolation_level)
        if max_records <= 0:
            return []
        return read_path.read(self._find.partition(topic, partition), offset, max_records,
                            committed)

    def read_columns(self, topic: str, partition: int, offset: int, max_records: int = 1000,
                     isolation_level: str = READ_UNCOMMITTED, reach: Any = None
                     ) -> Iterator[tuple[Any, Any, list, list, Any]]:
        """Per batch ``(offsets, timestamps, keys, values, headers)`` columns from ``offset``
        (the first batch may start before it, the last run past ``max_records``: the cheapest
        way to stream). ``reach`` (``storage.reader.Reach``) learns where the scan got to past
        markers and aborted batches, which hold no records (a consumer steps over them)."""
        from .fetch import read_path

        committed = read_path.checked(offset, isolation_level)
        if max_records > 0:
            yield from read_path.read_columns(self._find.partition(topic, partition), offset,
                                            max_records, committed, reach)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
              isolation_level: str = READ_UNCOMMITTED) -> Any:
        """Kafka's Fetch of one partition (``engine.fetch.wire.Fetched``): whole batches from
        the one holding ``offset``, markers and aborted batches included, about ``max_bytes``;
        the high watermark, last stable offset, log start and aborted transactions."""
        from .fetch import read_path, wire

        committed = read_path.checked(offset, isolation_level)
        return wire.fetch(self._find.partition(topic, partition), offset, max_bytes, committed)

    def read_arrow(self, topic: str, partition: int, offset: int, max_records: int = 1 << 62,
                   isolation_level: str = READ_UNCOMMITTED) -> Any:
        """A ``pyarrow.Table`` (offset, timestamp, key, value, headers), zero-copy per batch."""
        from .fetch import read_path

        committed = read_path.checked(offset, isolation_level)
        if max_records <= 0:
            from .format.arrow import empty_table

            return empty_table()
        return read_path.read_arrow(self._find.partition(topic, partition), offset, max_records,
                                  committed)

    def stream(self, topic: str | Sequence[str], partitions: Sequence[int] | None = None,
               start: Position | None = None, max_records: int | None = None,
               follow: bool = False, on_idle: Callable[[], None] | None = None,
               idle_timeout_ms: int | None = None, end: Position | None = None,
               isolation_level: str = READ_UNCOMMITTED) -> Iterator[ColumnBatch]:
        """Column batches of ``topic`` (a name, or several: each batch says its topic) or of
        its ``partitions`` (in every topic named) from ``start`` in each, up to the end
        offsets at the call, or up to ``end`` (exclusive, resolved at the call inside
        [log start, log end]: rpk's ``-o START:END``; ``follow`` is then moot), with
        ``follow`` on as records arrive (``on_idle`` called before each wait, until
        ``idle_timeout_ms`` pass without a record), at most ``max_records`` in all
        (``rivven consume``). ``start`` None: the beginning."""
        from .fetch import streaming
        from .fetch.positions import Position

        return streaming.stream_topics(self._find, topic, partitions,
                                       start or Position("beginning"), max_records, follow,
                                       on_idle, idle_timeout_ms, end, isolation_level)

    # ---------------------------------------------------------------- consumers, metrics
    def consumer(self, group: str, topics: str | Iterable[str],
                 auto_offset_reset: str = "earliest", **options: Any) -> Consumer:
        """A group member reading ``topics`` from the group's committed offsets; see
        engine.groups.consumer.Consumer for ``options`` (enable_auto_commit, member_id, ...)."""
        from .groups.consumer import Consumer

        c = Consumer(self, group, topics, auto_offset_reset=auto_offset_reset,
                     sync_commits=self.settings.wal_sync != "none",
                     on_close=self._consumers.discard, lock_wait=self.lock_wait,
                     settle=self._coordinator.settle_group, metadata=self._metadata,
                     meter=self.meter, **options)
        self._consumers.add(c)
        return c

    def metrics(self, problems: list[str] | None = None) -> Metrics:
        """Every metric of the data dir (docs/METRICS.md): every process's counters, summed
        (each counted once, also after it was killed), and the data dir's state read now
        (``engine.metrics``: the Prometheus text, a textfile, an HTTP endpoint). A damaged
        file of a process's counters is set aside, never merged: one line naming it is
        appended to ``problems``."""
        from .metrics import collect

        return collect.collect(self, {(t, p): log for t, p, log in self._partitions.open_logs()},
                               problems)

    # ---------------------------------------------------------------- built on first use
    _path: Lazy[ProducePath] = Lazy(lambda e: new(
        ".produce.path", "ProducePath", e._topics, e._partitions.get, e._wal.attach, e.meter,
        e._wal.maybe_checkpoint))
    _metadata: Lazy[OffsetMetadata] = Lazy(lambda e: new(
        ".crypto.topic", "OffsetMetadata", e._vault.metadata_keys))
    _coordinator: Lazy[Coordinator] = Lazy(lambda e: new(
        ".txn.coordinator", "Coordinator", e.path, e._find.txn_log_of, e._sync_commits,
        e.lock_wait, e.meter))
    _decisions: Lazy[Decisions] = Lazy(lambda e: new(
        ".txn.decisions", "Decisions", e.path, e._coordinator, e.lock_wait))
    _producers: Lazy[Producers] = Lazy(lambda e: new(
        ".produce.factory", "Producers", e.path, e._coordinator, e._decisions, e._path,
        e._find.log, e.lock_wait, e._wal.maybe_checkpoint))
    topic_admin: Lazy[TopicAdmin] = Lazy(lambda e: new(
        ".topic_admin", "TopicAdmin", e.path, e._topics, e._find, e._writable))
    offsets: Lazy[Offsets] = Lazy(lambda e: new(".fetch.offsets", "Offsets", e._find))
    groups: Lazy[GroupAdmin] = Lazy(lambda e: new(
        ".groups.admin", "GroupAdmin", e.path, e._sync_commits, e.offsets.of_topic,
        e.offsets.for_time, e.lock_wait, e._metadata, e._writable))
    txn: Lazy[Transactions] = Lazy(lambda e: new(
        ".txn.transactions", "Transactions", e._coordinator, e._decisions, e._find,
        e._writable, e._wal.maybe_checkpoint))
    maintenance: Lazy[Maintenance] = Lazy(lambda e: new(
        ".maintenance.admin", "Maintenance", e.path, e._find, e.meter, e._writable,
        e._hot_stats.own))
    keys: Lazy[Keys] = Lazy(lambda e: new(
        ".maintenance.keys", "Keys", e.path, e._topics, e._vault, e._find, e.groups,
        e._writable, e.checkpoint))
    users: Lazy[Users] = Lazy(lambda e: new(
        ".security.users", "Users", e.path, e._writable, e.lock_wait))
    acls: Lazy[Acls] = Lazy(lambda e: new(
        ".security.acls", "Acls", e.path, e._writable, e.lock_wait))
    schemas: Lazy[Registry] = Lazy(lambda e: new(
        ".schemas.registry", "Registry", new(".schema_log", "EngineSchemaLog", e),
        os.path.join(e.path, "schemas"), e._writable, e.lock_wait))
    segments: Lazy[Segments] = Lazy(lambda e: new(
        ".tools.admin", "Segments", e.path, e._find, e._vault, e.lock_wait, e._writable,
        e._wal.reopen_partitions))


# Names earlier releases documented on the engine itself, each now a service's own method
# (``eng.end_offsets`` is ``eng.offsets.end``): reachable, not typed (code here calls the services).
for _name, (_service, _method) in {
    "list_offsets": ("offsets", "list_offsets"), "end_offsets": ("offsets", "end"),
    "start_offsets": ("offsets", "start"), "partition_offsets": ("offsets", "of_partition"),
    "offset_for_time": ("offsets", "for_time"), "resolve_offset": ("offsets", "resolve"),
    "delete_topic": ("topic_admin", "delete"), "alter_topic_config": ("topic_admin", "alter_config"),
    "add_partitions": ("topic_admin", "add_partitions"), "describe_topic": ("topic_admin", "describe"),
    "wal_replay": ("recovery", "replay"), "wal_recover": ("recovery", "cut_tails"),
    "wal_streams": ("recovery", "streams"), "checkpoint_all": ("recovery", "checkpoint_all"),
    "repairs": ("recovery", "repairs"), "committed_offsets": ("groups", "committed"),
    "transactions": ("txn", "list_transactions"), "transactional_ids": ("txn", "ids"),
    "describe_transaction": ("txn", "describe"), "recover_transactions": ("txn", "recover"),
    "abort_transaction": ("txn", "abort"), "complete_transaction": ("txn", "complete"),
    "commit_prepared": ("txn", "commit_prepared"), "abort_prepared": ("txn", "abort_prepared"),
    "decision": ("txn", "decision"), "delete_records": ("maintenance", "delete_records"),
    "delete_records_before": ("maintenance", "delete_records_before"),
    "compaction_plan": ("maintenance", "compaction_plan"),
    "explain_compaction": ("maintenance", "explain_compaction"), "compact": ("maintenance", "compact"),
    "apply_compaction": ("maintenance", "apply_compaction"), "tier": ("maintenance", "tier"),
    "verify_cold": ("maintenance", "verify_cold"), "reencrypt": ("keys", "reencrypt"),
    "topic_keys": ("keys", "topic_keys"), "verify": ("segments", "verify"),
    "segment_recover": ("segments", "recover"), "reindex": ("segments", "reindex"),
    "log_offsets": ("offsets", "unopened"), "stable_view": ("offsets", "stable_view"),
    "describe_group": ("groups", "describe"), "group_state": ("groups", "state"),
    "list_groups": ("groups", "list_groups"), "group_names": ("groups", "names"),
    "reset_group_offsets": ("groups", "reset_offsets"), "reset_offsets": ("groups", "reset_offsets"),
    "delete_group": ("groups", "delete"),
    "delete_group_offsets": ("groups", "delete_offsets"), "key_status": ("keys", "status"),
    "rotate_key": ("keys", "rotate"), "rewrap_keys": ("keys", "rewrap"),
    "tier_status": ("maintenance", "tier_status"), "tier_restore": ("maintenance", "tier_restore"),
    "apply_retention": ("maintenance", "apply_retention"), "segment_list": ("segments", "list_segments"),
    "describe_producers": ("txn", "producers"), "find_hanging_transactions": ("txn", "find_hanging"),
    "abort_hanging_transaction": ("txn", "abort_hanging"),
}.items():
    setattr(Engine, _name, Forward(_service, _method))
    getattr(Engine, _name).__set_name__(Engine, _name)
