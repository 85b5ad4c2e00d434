"""``Engine``: an open data dir and the public API over it.

A façade: each method checks what it must and hands the work to one module; docs/ARCHITECTURE.md
maps which. It holds the parts an open data dir is made of: the topics (engine.storage.topics),
the open partitions (storage.partitions), the WAL (wal.owner), the produce path
(client.produce), the consumer-group admin (groups.admin) and the hot and cold caches. Its
producers and transactions are in api_transactions.py, its maintenance (retention,
compaction, tiering, segment tools) in api_maintenance.py: parts of the same class.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import clock
from .api_keys import KeysApi
from .api_maintenance import MaintenanceApi
from .api_produce import ProduceApi
from .api_transactions import TransactionsApi
from .counters import gather
from .counters.meter import Meter
from .crypto.keyring import check_outside
from .crypto.keyring import resolve as resolve_keyring
from .crypto.topic import OffsetMetadata, Vault
from .errors import InvalidArgument, ReadOnlyError, RivvenError, StorageError, UnknownTopic, disk_full
from .fetch import positions
from .fetch import records as read
from .fetch.positions import Position
from .format.arrow import empty_table
from .format.records import ColumnBatch, Record
from .fs.locks import LockWait
from .groups.admin import GroupAdmin
from .maintenance import retention
from .produce.path import ProducePath
from .produce.transactional import TransactionalProducer
from .progress import Progress
from .settings import Settings
from .storage import datadir
from .storage import topics as topics_mod
from .storage.budget import FileBudget, effective_limit
from .storage.catalog import TopicMeta
from .storage.config import validate as validate_config
from .storage.log import PartitionLog
from .storage.partitions import Partitions
from .storage.topics import Topics
from .tiering import cold, status
from .tiering import tier as tiering
from .tiering.cache import ColdCache
from .tiering.hot import HotCache
from .tools import inspect
from .txn import isolation
from .txn.coordinator import Coordinator
from .txn.decisions import Decisions
from .txn.hook import PartitionProducers
from .txn.isolation import READ_UNCOMMITTED
from .txn.txn_store import TxnPartition
from .wal import inventory as streams
from .wal.owner import WalOwner


def check_store(config: dict[str, str]) -> None:
    """A ``remote.storage.uri`` being set is checked now, not when tiering first runs: its
    form (storage.config), then the cold store's (tiering.cold: plain form, a backend
    installed for its scheme). Raises InvalidConfig."""
    uri = config.get("remote.storage.uri")
    if uri and uri.strip():
        cold.check_store(validate_config({"remote.storage.uri": uri})["remote.storage.uri"])


# the reset mode of each kind of Position (engine.groups.admin.RESET_MODES)
RESET_MODE_OF = {"beginning": "to-earliest", "end": "to-latest", "offset": "to-offset",
                 "timestamp": "to-datetime", "from_start": "from-start", "from_end": "from-end"}

if TYPE_CHECKING:  # (imported when first used: logging, which it needs, costs start-up)
    from .groups.consumer import Consumer


class Engine(ProduceApi, TransactionsApi, MaintenanceApi, KeysApi):
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
        self.last_recovery: dict[str, Any] = {}
        # master keys (outside the data dir) and the topics' data keys (docs/ENCRYPTION.md)
        self.keyring = resolve_keyring(keyring)
        check_outside(self.keyring, self.path)
        self._vault = Vault(self.keyring)
        self._topics = Topics(self.path, lw, self._vault)
        self.catalog = self._topics.catalog
        self._vault.lookup = self.catalog.get
        # this process's counters, in .stats/ for `rivven metrics` (docs/METRICS.md)
        self.meter = m = Meter(self.path, st.metrics_enabled)
        self.hot = HotCache(st.hot_max_bytes) if st.hot_max_bytes > 0 else None
        self.cold_cache = ColdCache.for_data_dir(self.path, st.tier_cache_max_bytes, m)
        self._partitions = Partitions(self.path, not read_only, st.wal_sync, progress,
                                      self.cold_cache, self.hot, on_open=self._retain,
                                      lock_wait=lw, producers=PartitionProducers,
                                      vault=self._vault,
                                      counts=m.partition if m.enabled else None,
                                      budget=FileBudget(effective_limit(st.files_max_open)))
        self._wal = WalOwner(self.path, st, self._partitions, read_only,
                             after_checkpoint=self._retain,
                             after_checkpoints=self._publish_hot_stats, lock_wait=lw, meter=m)
        self._producer = ProducePath(self._topics, self._partitions.get, self._wal.attach)
        self._produce_counts: dict[str, tuple[Any, Any]] = {}
        self._metadata = OffsetMetadata(self.metadata_keys)
        self._groups = GroupAdmin(self.path, st.wal_sync != "none", self._topic_offsets,
                                  self.offset_for_time, lock_wait=lw, metadata=self._metadata)
        self._consumers: set[Consumer] = set()
        self._txn = Coordinator(self.path, self._txn_log, st.wal_sync != "none", lw, m)
        self._decisions = Decisions(self.path, self._txn, lw)
        self._txn_producers: set[TransactionalProducer] = set()
        if not read_only:
            datadir.empty_trash(self.path)
            if recover:
                self._recover()

    @classmethod
    def open(cls, path: str, read_only: bool = False, sync: bool = True,
             settings: dict[str, str] | None = None, recover: bool = True,
             progress: Progress | None = None,
             on_lock_wait: Callable[[str], None] | None = None,
             keyring: Any = None) -> Engine:
        """Open (creating when needed, unless ``read_only``) the data dir at ``path``.

        A writable open first replays the WAL streams of processes that died (crash recovery).
        ``sync=False`` (= ``settings={"wal.sync": "none"}``) skips fsyncs (benchmarks, bulk
        loads): data survives a process crash but not a machine crash. See engine.settings.
        ``recover=False`` skips the replay (for tools that mend WAL files first).
        ``progress(what, total_bytes, done_bytes)`` is called during long recovery work.
        ``on_lock_wait(message)`` is called once a wait for a lock another process holds has
        lasted a few seconds, naming the lock and the holder's pid (default: a ``logging``
        warning on ``rivven.locks``); the wait gives up with LockTimeout after the setting
        ``lock.timeout.ms``.
        ``keyring``: the master keys of encrypted topics (docs/ENCRYPTION.md): the path of a
        keyring file (JSON of base64 32-byte keys, mode 0600), or an object with
        ``get(key_id) -> bytes`` (a KMS); by default the file ``RIVVEN_KEYRING`` names, if any.
        """
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
        for tp in list(self._txn_producers):
            try:
                tp.close()  # an open transaction is aborted rather than left to time out
            except RivvenError:
                pass  # (it times out, or the next open's recovery aborts it)
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
        if self.hot is not None and not self.read_only:
            status.unpublish_hot_stats(self.path)
        self.cold_cache.close()
        gather.retire(self.meter, self.lock_wait)  # its counts join the retired ones
        self.closed = True

    @property
    def wal(self) -> Any:
        """This process's WAL stream (engine.wal.stream.WalStream), or None before a write."""
        return self._wal.stream

    @property
    def checkpoint_error(self) -> RivvenError | None:
        return self._wal.checkpoint_error

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("this engine was opened read-only; open it without read_only")

    def _log(self, meta: TopicMeta, partition: int, retain: bool = True) -> PartitionLog:
        return self._partitions.get(meta, partition, retain)

    def _partition(self, topic: str, partition: int) -> PartitionLog:
        return self._log(self.topic(topic), partition)

    def _logs(self, topic: str | None, partitions: Iterable[int] | None = None,
              retain: bool = True) -> list[PartitionLog]:
        """The logs of ``topic`` (every topic when None), or of its ``partitions``."""
        metas = [self.topic(topic)] if topic is not None else self.topics()
        return [self._log(m, p, retain) for m in metas
                for p in (partitions if partitions is not None else range(m.partitions))]

    def _retain(self, log: PartitionLog, meta: TopicMeta | None = None) -> None:
        try:  # retention runs when a writer opens a partition, and after its checkpoints
            retention.apply(log, meta.typed if meta is not None else log.config,
                            clock.now_ms())
        except (RivvenError, OSError):
            pass  # the next checkpoint or 'rivven retention apply' tries again

    # ---------------------------------------------------------------- WAL and recovery
    def _recover(self) -> None:
        """Replay dead WAL streams at open, then finish the transactions a crash left
        prepared and abort the timed-out ones. On a full disk a batch that must go back into
        its segment cannot: the engine opens anyway — the commands that free space need it —
        but refuses appends (their offsets are the replay's) until an open replays the
        streams."""
        t0 = time.monotonic()
        try:
            self.last_recovery = report = self.wal_replay()
            if report.get("streams"):
                m = self.meter
                m.get("rivven_recovery_duration_seconds").observe(time.monotonic() - t0)
                m.get("rivven_recovery_batches_replayed_total").inc(report.get("applied", 0))
                m.get("rivven_recovery_bytes_cut_total").inc(
                    sum(t.get("bytes", 0) for t in report.get("torn_tails", [])))
        except StorageError as e:
            if not disk_full(e):
                raise
            self.last_recovery = {"deferred": str(e)}
            self._wal.replay_pending = StorageError(
                f"the WAL of a crashed writer still has to be replayed, and the disk is full "
                f"({e}); free space (rivven delete-records, retention apply or topic delete), "
                "then open the data dir again")
            return
        decided = self._decisions.recover()  # (two-phase commits a crash cut short)
        if decided:
            self.last_recovery["decisions"] = decided
        self.last_recovery["transactions"] = self._txn.recover()
    def checkpoint(self) -> list[dict[str, Any]]:
        """fsync every partition this process wrote, record recovery points, and delete the
        WAL files wholly below them."""
        self._writable()
        if self.closed:
            raise InvalidArgument("this engine is closed; open it again")
        return self._wal.checkpoint()

    def checkpoint_all(self) -> dict[str, Any]:
        """Replay dead WAL streams, then checkpoint every partition of every topic."""
        self._writable()
        replay = self.wal_replay()
        return {"replayed": replay, "checkpoints": self._wal.checkpoint_logs(self._logs(None))}

    def wal_replay(self, dry_run: bool = False) -> dict[str, Any]:
        """Replay the WAL streams whose process is gone (``rivven wal replay``): batches past a
        partition's log end go back into its segments (merged across streams by offset,
        idempotent), then those partitions are checkpointed and the streams deleted."""
        return self._wal.replay(self.topics, self._log, self.progress, dry_run)

    recover_wal = wal_replay  # (its name before 0.2)

    def wal_recover(self, dry_run: bool = False) -> list[dict[str, Any]]:
        """Cut torn tails of dead streams' WAL files (``rivven wal recover``; no replay)."""
        return self._wal.recover_tails(dry_run)

    def wal_streams(self) -> list[dict[str, Any]]:
        return [streams.stream_info(d) for d in streams.all_streams(self.path)]

    def repairs(self) -> list[dict[str, Any]]:
        """What this engine mended or set aside while opening partitions: ``action`` "cut", a
        damaged segment tail it cut (past the checkpoint, with no intact batch after it; WAL
        replay restores what it held: file, position, bytes, reason), or "ignored", a damaged
        metadata file it did not act on (a ``.checkpoint`` that fails its seal or disagrees
        with the log: file, reason)."""
        return list(self._partitions.cuts)

    # ---------------------------------------------------------------- topics
    def topic(self, name: str, create_hint: bool = False) -> TopicMeta:
        """Metadata of an existing topic (raises UnknownTopic, saying how to list the topics;
        ``create_hint``: how to create it instead, for a writer)."""
        return self._topics.get(name, create_hint)

    def topics(self, names: Sequence[str] | None = None, regex: bool = False
               ) -> list[TopicMeta]:
        """Every topic, by name; with ``names`` only those (that exist), or with ``regex``
        those one of the expressions matches whole."""
        if names is None:
            return self._topics.all()
        return self._topics.matching(names, regex)

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     if_not_exists: bool = False) -> TopicMeta:
        return self.ensure_topic(name, partitions, config, if_not_exists)[0]

    def ensure_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     exists_ok: bool = True) -> tuple[TopicMeta, dict[str, Any]]:
        """``create_topic`` (``exists_ok``: no error when the topic exists), with what it
        did: ``created``, and ``not_applied``, what the call asked that the existing topic
        does not have (``partitions``, ``config``: neither is changed)."""
        self._writable()
        check_store(config or {})
        meta, created = self._topics.ensure(name, partitions, config or {}, exists_ok)
        return meta, {"created": created, "not_applied": [] if created else
                      topics_mod.not_applied(meta, partitions, config or {})}

    def delete_topic(self, name: str, if_exists: bool = False) -> dict[str, Any]:
        """Remove a topic and all its files; producers to it get UnknownTopic from then on.
        Returns ``deleted`` (False: there was no such topic, with ``if_exists``),
        ``cold_prefixes`` (the cold-store prefixes removed: the configured one, and those its
        tier manifests recorded) and ``problems``: damaged tier manifests, whose objects
        outside the configured prefix are left in place (never acted on)."""
        self._writable()
        try:
            prefixes, problems = self._topics.delete(
                name, lambda m: tiering.topic_prefixes(self.path, m))
        except UnknownTopic:
            if not if_exists:
                raise
            return {"topic": name, "deleted": False, "cold_prefixes": [], "problems": []}
        self._partitions.forget(name)
        for prefix in sorted(prefixes):  # its cold objects too (the topic id keeps a new
            try:                         # topic of this name apart)
                cold.remove_tree(prefix)
            except (RivvenError, OSError):
                pass  # best effort: the manifests that named them are gone with the topic
        return {"topic": name, "deleted": True, "cold_prefixes": sorted(prefixes),
                "problems": problems}

    def alter_topic_config(self, name: str, set: dict[str, str] | None = None,
                           delete: Sequence[str] = ()) -> TopicMeta:
        self._writable()
        check_store(set or {})
        return self._topics.alter_config(name, set or {}, delete)

    def add_partitions(self, name: str, total: int) -> TopicMeta:
        self._writable()
        return self._topics.add_partitions(name, total)

    def describe_topic(self, name: str) -> dict[str, Any]:
        return inspect.describe_topic(self.topic(name), self._logs(name))

    def _txn_log(self, part: TxnPartition) -> PartitionLog | None:
        """The writable log of a transaction's partition, or None when its topic is gone
        (deleted, or created again under its name)."""
        try:
            meta = self.topic(part.topic)
        except UnknownTopic:
            return None
        if meta.id != part.topic_id or part.partition >= meta.partitions:
            return None
        log = self._log(meta, part.partition)
        if log.wal is None:
            self._wal.attach(log)
        return log

    # ---------------------------------------------------------------- read
    def read(self, topic: str, partition: int, offset: int, max_records: int = 1000,
             isolation_level: str = READ_UNCOMMITTED) -> list[Record]:
        """Up to ``max_records`` records from ``offset`` on (fewer at the end of the log).
        ``isolation_level="read_committed"``: only up to the last stable offset, without
        the records of aborted transactions (docs/TRANSACTIONS.md)."""
        positions.check_offset(offset)
        committed = isolation.check_level(isolation_level)
        if max_records <= 0:
            return []
        return read.read(self._partition(topic, partition), offset, max_records, committed)

    def read_columns(self, topic: str, partition: int, offset: int, max_records: int = 1000,
                     isolation_level: str = READ_UNCOMMITTED, reach: read.Reach | None = None
                     ) -> Iterator[tuple[Any, Any, list, list, Any]]:
        """Per batch ``(offsets, timestamps, keys, values, headers)`` columns from ``offset``.

        The first batch may start before ``offset`` and the last may run past ``max_records``:
        the cheapest way to stream (used by ``rivven consume``). ``reach`` (an
        ``engine.storage.reader.Reach``) learns where the scan got to past transaction markers
        and aborted batches, which hold no records: a consumer's position steps over them.
        """
        positions.check_offset(offset)
        committed = isolation.check_level(isolation_level)
        if max_records > 0:
            yield from read.read_columns(self._partition(topic, partition), offset, max_records,
                                         committed, reach)

    def read_arrow(self, topic: str, partition: int, offset: int, max_records: int = 1 << 62,
                   isolation_level: str = READ_UNCOMMITTED) -> Any:
        """A ``pyarrow.Table`` (offset, timestamp, key, value, headers), zero-copy per batch."""
        positions.check_offset(offset)
        committed = isolation.check_level(isolation_level)
        if max_records <= 0:
            return empty_table()
        return read.read_arrow(self._partition(topic, partition), offset, max_records, committed)

    def stream(self, topic: str | Sequence[str], partitions: Sequence[int] | None = None,
               start: Position = Position("beginning"), max_records: int | None = None,
               follow: bool = False, on_idle: Callable[[], None] | None = None,
               idle_timeout_ms: int | None = None, end: Position | None = None,
               isolation_level: str = READ_UNCOMMITTED) -> Iterator[ColumnBatch]:
        """Column batches of ``topic`` (a name, or several: each batch says its topic) or of
        its ``partitions`` (in every topic named) from ``start`` in each, up to the end
        offsets at the call, or up to ``end`` (exclusive, resolved at the call inside
        [log start, log end]: rpk's ``-o START:END``; ``follow`` is then moot), with
        ``follow`` on as records arrive (``on_idle`` called before each wait, until
        ``idle_timeout_ms`` pass without a record), at most ``max_records`` in all
        (``rivven consume``)."""
        names = [topic] if isinstance(topic, str) else list(dict.fromkeys(topic))
        if not names:
            raise InvalidArgument("no topic to read: name at least one")
        if idle_timeout_ms is not None and idle_timeout_ms < 0:
            raise InvalidArgument(f"idle_timeout_ms must be >= 0, not {idle_timeout_ms}")
        committed = isolation.check_level(isolation_level)
        metas = [self.topic(n) for n in names]
        logs = [self._log(m, p) for m in metas for p in (partitions or range(m.partitions))]
        starts = [positions.resolve(log, start, committed) for log in logs]
        stops = None if end is None else [positions.resolve(log, end, committed) for log in logs]
        return read.stream(logs, starts, max_records, follow, on_idle=on_idle,
                           idle_timeout_s=None if idle_timeout_ms is None
                           else idle_timeout_ms / 1000, stops=stops, committed=committed)

    def match_topics(self, patterns: Sequence[str]) -> list[str]:
        """Names of the topics that a regular expression of ``patterns`` matches whole
        (Kafka's ``subscribe(Pattern)``), in name order."""
        return sorted(m.name for m in self.topics(patterns, regex=True))

    # ---------------------------------------------------------------- offsets
    def end_offsets(self, topic: str, isolation_level: str = READ_UNCOMMITTED) -> dict[int, int]:
        """Per partition, the log end offset (the next offset written); with
        ``isolation_level="read_committed"`` the last stable offset."""
        committed = isolation.check_level(isolation_level)
        return {log.partition: read.offsets(log, committed)[1] for log in self._logs(topic)}

    def log_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition ``(log start offset, log end offset)``, read cheaply: the partitions
        this engine has open as they are, the others from their files without opening them
        (``rivven topic list`` on 10,000 partitions)."""
        return self._partitions.offsets(self.topic(topic))

    def start_offsets(self, topic: str) -> dict[int, int]:
        return {log.partition: log.offsets()[0] for log in self._logs(topic)}

    def partition_offsets(self, topic: str, partition: int,
                          isolation_level: str = READ_UNCOMMITTED) -> tuple[int, int]:
        """(log start offset, log end offset) of one partition (read_committed: the end is
        the last stable offset)."""
        committed = isolation.check_level(isolation_level)
        return read.offsets(self._partition(topic, partition), committed)

    def _topic_offsets(self, topic: str) -> dict[int, tuple[int, int]] | None:
        try:
            return {log.partition: log.offsets() for log in self._logs(topic)}
        except UnknownTopic:
            return None

    def stable_view(self, topic: str, partitions: Sequence[int] | None = None
                    ) -> dict[int, dict[str, Any]]:
        """Per partition what read_committed sees: ``last_stable_offset`` and ``aborted``, the
        aborted transactions with data between the log start and it, as ``[[producer id,
        first offset, last offset]...]`` (the Spark reader's filter)."""
        out = {}
        for log in self._logs(topic, partitions):
            lso, aborted = isolation.view(log, log.offsets()[0])
            out[log.partition] = {"last_stable_offset": lso, "aborted": aborted.ranges()}
        return out

    def offset_for_time(self, topic: str, partition: int, timestamp: int,
                        isolation_level: str = READ_UNCOMMITTED) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (None if none is),
        cold segments included (read_committed: below the last stable offset only)."""
        committed = isolation.check_level(isolation_level)
        return positions.offset_for_time(self._partition(topic, partition), timestamp, committed)

    def resolve_offset(self, topic: str, partition: int, position: Position) -> int:
        """The offset a ``Position`` (beginning, end, offset N, from_end N, timestamp T) names
        in a partition, inside its [log start, log end]."""
        return positions.resolve(self._partition(topic, partition), position)

    def list_offsets(self, topic: str, at: Position | None = None,
                     isolation_level: str = READ_UNCOMMITTED) -> list[dict[str, Any]]:
        """Per partition: start and end offset (read_committed: the last stable offset is the
        end), and with ``at`` the offset it names."""
        committed = isolation.check_level(isolation_level)
        return positions.list_offsets(self._logs(topic), at, committed)

    def _own_hot_stats(self) -> dict[str, dict[str, int]]:
        return status.own_hot_stats(self.hot, [log for _, _, log in self._partitions.open_logs()])

    def _publish_hot_stats(self) -> None:
        if self.hot is not None and not self.read_only:
            own = self._own_hot_stats()
            status.publish_hot_stats(self.path, own)
            self.meter.get("rivven_hot_cache_bytes").set(sum(v["bytes"] for v in own.values()))

    # ---------------------------------------------------------------- metrics
    def metrics(self) -> dict[str, Any]:
        """Every metric of the data dir (docs/METRICS.md), as ``{name: {"type", "help",
        "labels", "samples"}}``: the counters of every process that wrote to it, summed
        (each counted once, also after it exited or was killed), and the data dir's state
        (partitions, groups, WAL streams, transactions) read now. ``engine.metrics`` has
        the Prometheus text, a textfile and an HTTP endpoint (``serve``)."""
        from .metrics import collect

        return collect.collect(self, {(t, p): log for t, p, log in self._partitions.open_logs()})

    # ---------------------------------------------------------------- consumer groups
    def consumer(self, group: str, topics: str | Iterable[str],
                 auto_offset_reset: str = "earliest", **options: Any) -> Consumer:
        """A group member reading ``topics`` from the group's committed offsets; see
        engine.groups.consumer.Consumer for ``options`` (enable_auto_commit, member_id, ...)."""
        from .groups.consumer import Consumer

        c = Consumer(self, group, topics, auto_offset_reset=auto_offset_reset,
                     sync_commits=self.settings.wal_sync != "none",
                     on_close=self._consumers.discard, lock_wait=self.lock_wait,
                     settle=self._txn.settle_group, metadata=self._metadata,
                     meter=self.meter, **options)
        self._consumers.add(c)
        return c

    def reseal_metadata(self, topic: str) -> int:
        """Seal the groups' committed metadata of ``topic`` anew with its current data key
        (back to text when it no longer encrypts): part of a re-encryption."""
        resealed = self._metadata.resealed
        return self._groups.reseal_metadata(
            topic, lambda group, p, offset, stored: resealed(group, topic, p, offset, stored))

    def metadata_versions(self, topic: str) -> set[int]:
        """The data key versions that groups' committed metadata of ``topic`` is sealed with
        (an encrypted topic's: docs/ENCRYPTION.md)."""
        return self._groups.sealed_versions(topic)

    def list_groups(self) -> list[dict[str, Any]]:
        return self._groups.list_groups()

    def group_names(self) -> list[str]:
        """The groups' names alone: no offsets read, nothing changed."""
        return self._groups.group_names()

    def describe_group(self, group: str) -> dict[str, Any]:
        """Per partition: committed offset, log start/end, lag, owner; the live members with
        the partitions each holds (``assignment``)."""
        return self._groups.describe(group)

    def group_state(self, group: str) -> dict[str, Any]:
        """group, state (Active / Empty), assignment_strategy, members (a count), topics,
        total_lag: a row of ``list_groups``."""
        return self._groups.state(group)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return self._groups.committed(group)

    def reset_offsets(self, group: str, targets: dict[str, list[int] | None] | None,
                      mode: str | Position, value: Any = None, execute: bool = False,
                      force: bool = False) -> list[dict[str, Any]]:
        """Plan (and with ``execute`` apply) a reset of the group's committed offsets; see
        engine.groups.admin.GroupAdmin.reset. ``mode`` is one of its modes, or a
        ``Position`` (``value`` then unused). Refused while the group has live consumers
        unless ``force``."""
        return self.reset_group_offsets(group, targets, mode, value, execute, force)["partitions"]

    def reset_group_offsets(self, group: str, targets: dict[str, list[int] | None] | None,
                            mode: str | Position, value: Any = None, execute: bool = False,
                            force: bool = False, new_topics: bool = True) -> dict[str, Any]:
        """``reset_offsets`` with the whole plan: ``group, mode, executed, new_group,
        active_members, skipped_topics, partitions`` (``rivven group reset-offsets --json``).
        Modes also ``to-current`` and ``from-file`` (``value``: a plan file's path, or a
        mapping ``{(topic, partition): offset}``), or a ``Position``. A group that does not
        exist yet is set up by ``execute``. ``new_topics=False`` leaves out the topics the
        group has no committed offset for (``rivven group seek`` without
        ``--allow-new-topics``). See engine.groups.admin.GroupAdmin.reset."""
        if isinstance(mode, Position):
            mode, value = RESET_MODE_OF[mode.kind], mode.value
        if execute:
            self._writable()
        return self._groups.reset(group, targets, mode, value, execute, force, new_topics)

    def delete_group(self, group: str) -> dict[str, Any]:
        self._writable()
        return self._groups.delete_group(group)

    def delete_group_offsets(self, group: str, topic: str) -> dict[str, Any]:
        self._writable()
        return self._groups.delete_offsets(group, topic)
