"""``Engine``: opens a data dir and is the public API over topics, partitions and records."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any

from .client.partitioner import StickyPartitioner, partition_for_key
from .errors import (
    DataDirError,
    InvalidArgument,
    InvalidConfig,
    OffsetOutOfRange,
    ReadOnlyError,
    RecordTooLarge,
    RivvenError,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from .format import codecs
from .format.arrow import batch_columns
from .format.arrow import table as arrow_table
from .format.records import (
    HEADER_SIZE,
    Record,
    body_of,
    decode_columns,
    decode_records,
    encode_batch,
    layout,
)
from .groups import admin as groups
from .maintenance import retention
from .storage import files, tier_manifest
from .storage.catalog import Catalog, TopicMeta, check_topic_name
from .storage.config import KEYS, TopicConfig, check_combination, effective, validate
from .storage.locks import flocked, lock_path, open_lock_file
from .storage.log import FlockHolds, PartitionLog, now_ms
from .storage.segment import BatchRef
from .storage.settings import Settings
from .tiering import tier as tiering
from .tiering.cache import ColdCache
from .tiering.hot import HotCache
from .tools import repair as admin
from .wal import stream as wal_mod
from .wal.replay import cut_dead_tails, replay_dead_streams
from .wal.stream import WalStream

FORMAT_VERSION = 1
MARKER = "rivven.json"
STATS_DIR = ".stats"
MAX_PARTITIONS = 10_000
CATALOG_RECHECK_S = 0.01  # a produce stats topics.json at most this often (_produce_meta)
_offset_of = attrgetter("offset")


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
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        self.path = os.path.abspath(path)
        self.read_only = read_only
        self.progress = progress  # (what, total bytes, bytes done) during long recovery work
        merged = dict(settings or {})
        if not sync:
            merged.setdefault("wal.sync", "none")
        self.settings = Settings.parse(merged)
        self._check_data_dir()
        self.wal: WalStream | None = None
        self._wal_mutex = threading.Lock()
        self._ckpt_lock = threading.Lock()
        self._ckpt_at = 0
        self._ckpt_time = time.monotonic()
        self._syncer: threading.Thread | None = None
        self.checkpoint_error: RivvenError | None = None
        self._recovery_mutex = threading.Lock()
        self._recovery_owner: int | None = None
        self._cuts: list[dict[str, Any]] = []
        self.catalog = Catalog(self.path)
        self._catalog_checked = -1e9  # monotonic time of the last catalog look (_produce_meta)
        self._logs: dict[tuple[str, int], tuple[str, PartitionLog]] = {}
        self._logs_mutex = threading.Lock()
        self._holds = FlockHolds()  # partition flocks kept between appends (FlockHolds)
        self._sticky: dict[str, StickyPartitioner] = defaultdict(StickyPartitioner)
        self._consumers: set[Any] = set()
        self.closed = False
        self._closing = False
        self.last_recovery: dict[str, Any] = {}
        st = self.settings
        self.hot = HotCache(st.hot_max_bytes) if st.hot_max_bytes > 0 else None
        self.cold_cache = ColdCache(self._cache_root(), st.tier_cache_max_bytes)
        if not read_only:
            self._empty_trash()
            if recover:
                self.last_recovery = self.recover_wal()

    def _cache_root(self) -> str:
        """The cold-segment cache: in the data dir, or (read-only data dir) a temp folder."""
        root = os.path.join(self.path, ".tier-cache")
        if os.access(self.path, os.W_OK):
            return root
        tag = hashlib.sha1(self.path.encode()).hexdigest()[:12]
        return os.path.join(tempfile.gettempdir(), f"rivven-tier-cache-{os.getuid()}-{tag}")

    @classmethod
    def open(cls, path: str, read_only: bool = False, sync: bool = True,
             settings: dict[str, str] | None = None, recover: bool = True,
             progress: Callable[[str, int, int], None] | None = None) -> Engine:
        """Open (creating when needed, unless ``read_only``) the data dir at ``path``.

        A writable open first replays the WAL streams of processes that died (crash recovery).
        ``sync=False`` (= ``settings={"wal.sync": "none"}``) skips fsyncs (benchmarks, bulk
        loads): data survives a process crash but not a machine crash. See engine.settings.
        ``recover=False`` skips the replay (for tools that mend WAL files first).
        ``progress(what, total_bytes, done_bytes)`` is called during long recovery work.
        """
        return cls(path, read_only=read_only, sync=sync, settings=settings, recover=recover,
                   progress=progress)

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
        # refuse new appends first: one that got in after the checkpoint below passed its
        # partition would be acknowledged, and its WAL deleted, with its segment bytes unsynced
        with self._logs_mutex:
            self._closing = True  # no partition is opened any more (Engine._log)
            logs = [log for _, log in self._logs.values()]
        for log in logs:
            log.stop_appends()
        clean = True
        if self.wal is not None:
            try:
                self.checkpoint()
            except RivvenError:
                clean = False  # keep the WAL: the next open replays it
        with self._logs_mutex:
            for _, log in self._logs.values():
                log.close()
            self._logs.clear()
        if self.wal is not None:
            self.wal.close(delete=clean)
        if self.hot is not None and not self.read_only:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.path, STATS_DIR, f"hot-{os.getpid()}.json"))
        self.closed = True

    # ---------------------------------------------------------------- WAL and checkpoints
    def _wal_stream(self) -> WalStream:
        if self.wal is None:
            with self._recovery_lock(), self._wal_mutex:  # same order as recovery takes them
                if self.wal is None:
                    self.wal = WalStream(self.path, self.settings.wal_segment_bytes)
                    if self.settings.wal_sync == "interval":
                        self._syncer = threading.Thread(target=self._sync_loop, daemon=True,
                                                        name="rivven-wal-sync")
                        self._syncer.start()
        return self.wal

    def _sync_loop(self) -> None:
        wal = self.wal
        while wal is not None and not wal.closed:
            time.sleep(self.settings.wal_sync_interval_ms / 1000)
            try:
                if not wal.closed:
                    wal.sync(wal.written)
            except (RivvenError, OSError):
                pass  # the next produce or checkpoint reports it

    def checkpoint(self) -> list[dict[str, Any]]:
        """fsync every partition this process wrote, record recovery points, and delete the
        WAL files wholly below them."""
        self._writable()
        if self.closed:
            raise InvalidArgument("this engine is closed; open it again")
        with self._ckpt_lock:
            done = []
            wal = self.wal
            boundary = wal.rotate() if wal is not None else 0
            for (name, p), (_, log) in list(self._logs.items()):
                if log.dirty and log.writable:
                    try:
                        done.append({"topic": name, "partition": p, **log.checkpoint()})
                        retention.apply(log, log.config, now_ms())
                    except UnknownTopic:
                        pass  # deleted meanwhile: its WAL records are moot
            if wal is not None:
                # only files before *this* rotation: a later one (the WAL rotates by size)
                # may hold records of partitions checkpointed before they were written
                for f in wal.files_before(boundary):
                    os.unlink(f)
                self._ckpt_at = wal.written
            self._ckpt_time = time.monotonic()
            self._publish_hot_stats()
            return done

    def checkpoint_all(self) -> dict[str, Any]:
        """Replay dead WAL streams, then checkpoint every partition of every topic."""
        self._writable()
        replay = self.recover_wal()
        done = []
        for meta in self.topics():
            for p in range(meta.partitions):
                try:
                    done.append({"topic": meta.name, "partition": p,
                                 **self._log(meta, p).checkpoint()})
                except UnknownTopic:
                    pass
        return {"replayed": replay, "checkpoints": done}

    def repairs(self) -> list[dict[str, Any]]:
        """Damaged segment tails this engine cut while opening partitions (past their
        checkpoint, with no intact batch after them; WAL replay restores what they held)."""
        return list(self._cuts)

    def wal_streams(self) -> list[dict[str, Any]]:
        return [wal_mod.stream_info(d) for d in wal_mod.all_streams(self.path)]

    def _maybe_checkpoint(self) -> None:
        wal = self.wal
        if wal is None:
            return
        st = self.settings
        if (wal.written - self._ckpt_at >= st.checkpoint_bytes
                or (time.monotonic() - self._ckpt_time) * 1000 >= st.checkpoint_ms):
            if not self._ckpt_lock.locked():  # one already running covers this one
                try:
                    self.checkpoint()
                except RivvenError as e:
                    # the produce itself succeeded; the WAL keeps everything until a later
                    # checkpoint (or close) succeeds
                    self.checkpoint_error = e

    def recover_wal(self, dry_run: bool = False) -> dict[str, Any]:
        """Replay the WAL streams whose process is gone: batches past a partition's log end
        go back into its segments (merged across streams by offset, idempotent), then those
        partitions are checkpointed and the streams deleted.

        Holds ``wal/recovery.lock`` throughout: a process opening the data dir meanwhile waits
        here, so nobody appends to a partition before the acknowledged batches of a crashed
        writer are back in it.
        """
        with self._recovery_lock():
            return replay_dead_streams(self, dry_run)

    def wal_recover(self, dry_run: bool = False) -> list[dict[str, Any]]:
        """Cut torn tails of dead streams' WAL files (a live stream is left alone)."""
        with self._recovery_lock():
            return cut_dead_tails(self, dry_run)

    @contextlib.contextmanager
    def _recovery_lock(self) -> Iterator[None]:
        """Held by whoever takes dead streams' locks or creates a stream, so a dead stream never
        looks live to a process opening the data dir (re-entrant within this engine)."""
        if self._recovery_owner == threading.get_ident():
            yield
            return
        with self._recovery_mutex:
            self._recovery_owner = threading.get_ident()
            try:
                with self._recovery_flock():
                    yield
            finally:
                self._recovery_owner = None

    @contextlib.contextmanager
    def _recovery_flock(self) -> Iterator[None]:
        root = os.path.join(self.path, "wal")
        if not os.path.isdir(root):
            if self.read_only:
                yield
                return
            os.makedirs(root, exist_ok=True)
        with lock_path(os.path.join(root, wal_mod.RECOVERY_LOCK)):
            yield

    # ---------------------------------------------------------------- data dir
    def _check_data_dir(self) -> None:
        p = self.path
        marker = os.path.join(p, MARKER)
        if os.path.exists(p) and not os.path.isdir(p):
            raise DataDirError(f"data dir {p} is a file, not a directory; pass a directory path")
        if self.read_only:
            if not os.path.exists(p):
                raise DataDirError(f"no data dir at {p}: create a topic first ('rivven topic "
                                   "create NAME') or point --data-dir at an existing one")
            if not os.path.isfile(marker):
                raise DataDirError(f"{p} is not a rivven data dir (no {MARKER}); check --data-dir")
        else:
            try:
                os.makedirs(p, exist_ok=True)
                if not os.path.isfile(marker):
                    if [f for f in os.listdir(p) if not f.startswith(".")]:
                        raise DataDirError(
                            f"{p} is not a rivven data dir (it has files but no {MARKER}); "
                            "pass an empty or new directory with --data-dir"
                        )
                    os.makedirs(os.path.join(p, "topics"), exist_ok=True)
                    files.write_atomic(marker, json.dumps({"format": FORMAT_VERSION}).encode())
                probe = os.path.join(p, ".write-probe")
                fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644)
                os.close(fd)
            except PermissionError as e:
                raise DataDirError(f"data dir {p} is not writable ({e.strerror}); "
                                   "fix its permissions or choose another --data-dir") from None
            except OSError as e:
                if isinstance(e, DataDirError):
                    raise
                raise DataDirError(f"cannot use data dir {p}: {e.strerror or e}") from None
        try:
            with open(marker, "rb") as f:
                fmt = json.loads(f.read()).get("format")
        except (OSError, ValueError, AttributeError) as e:
            raise DataDirError(f"{marker} is unreadable ({e}); is {p} a rivven data dir?") from None
        if fmt != FORMAT_VERSION:
            raise DataDirError(f"{p} has data format {fmt}; this rivven reads format "
                               f"{FORMAT_VERSION} — upgrade rivven")

    def _empty_trash(self) -> None:
        trash = os.path.join(self.path, "trash")
        if os.path.isdir(trash):
            for name in os.listdir(trash):
                shutil.rmtree(os.path.join(trash, name), ignore_errors=True)

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("this engine was opened read-only; open it without read_only")

    # ---------------------------------------------------------------- topics
    def topic(self, name: str) -> TopicMeta:
        """Metadata of an existing topic (raises UnknownTopic)."""
        meta = self.catalog.get(name)
        if meta is None:
            check_topic_name(name)
            raise UnknownTopic(f"topic {name!r} does not exist; create it with "
                               f"'rivven topic create {name}'")
        return meta

    def topics(self) -> list[TopicMeta]:
        self.catalog.refresh()
        return [self.catalog.topics[n] for n in sorted(self.catalog.topics)]

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     if_not_exists: bool = False) -> TopicMeta:
        self._writable()
        check_topic_name(name)
        if not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidArgument(
                f"invalid partition count {partitions}: use 1 to {MAX_PARTITIONS}")
        cfg = validate(config or {})
        check_combination(cfg)
        with self.catalog.mutate() as topics:
            if name in topics:
                if if_not_exists:
                    return topics[name]
                raise TopicExists(f"topic {name!r} already exists; use --if-not-exists to ignore")
            meta = TopicMeta.new(name, partitions, cfg)
            tdir = os.path.join(self.path, "topics", name)
            if os.path.exists(tdir):  # debris of a create that crashed before the catalog write
                self._trash(tdir, name)
            for p in range(partitions):
                self._make_partition(name, p)
            files.fsync_dir(os.path.join(self.path, "topics"))
            topics[name] = meta
        return meta

    def _make_partition(self, topic: str, p: int) -> None:
        d = files.partition_dir(self.path, topic, p)
        os.makedirs(d, exist_ok=True)
        os.close(open_lock_file(os.path.join(d, files.LOCK_FILE)))
        for suffix in (files.LOG, files.INDEX, files.TIMEINDEX):
            os.close(os.open(files.path(d, 0, suffix), os.O_WRONLY | os.O_CREAT, 0o644))
        files.fsync_dir(d)
        files.fsync_dir(os.path.dirname(d))

    def _trash(self, tdir: str, name: str) -> None:
        trash = os.path.join(self.path, "trash")
        os.makedirs(trash, exist_ok=True)
        target = os.path.join(trash, f"{name}-{time.time_ns()}")
        os.rename(tdir, target)
        shutil.rmtree(target, ignore_errors=True)

    def delete_topic(self, name: str) -> None:
        """Remove a topic and all its files; producers to it get UnknownTopic from then on."""
        self._writable()
        with self.catalog.locked() as topics:
            meta = topics.pop(name, None)
            if meta is None:
                self.topic(name)  # raises the usual error
            # The catalog goes first: a crash after it leaves only files, which the next
            # create of this name (under this same lock) moves to trash.
            self.catalog.write(topics)
            tdir = os.path.join(self.path, "topics", name)
            for p in range(meta.partitions):
                lock = os.path.join(files.partition_dir(self.path, name, p), files.LOCK_FILE)
                try:
                    fd = os.open(lock, os.O_RDWR)
                except FileNotFoundError:
                    continue
                try:
                    with flocked(fd):  # waits for an append in flight, then marks it gone
                        os.unlink(lock)
                finally:
                    os.close(fd)
            prefixes = tiering.topic_prefixes(self.path, meta)
            if os.path.exists(tdir):
                self._trash(tdir, name)
        self._forget(name)
        for prefix in prefixes:  # its cold objects too (the topic id keeps a new topic of
            try:                 # this name apart)
                from .tiering import cold
                cold.remove_tree(prefix)
            except (RivvenError, OSError):
                pass  # best effort: the manifests that named them are gone with the topic

    def _forget(self, name: str) -> None:
        with self._logs_mutex:
            for key in [k for k in self._logs if k[0] == name]:
                self._logs.pop(key)[1].close()

    def alter_topic_config(self, name: str, set: dict[str, str] | None = None,
                           delete: Sequence[str] = ()) -> TopicMeta:
        self._writable()
        updates = validate(set or {})
        validate({k: KEYS[k].default if k in KEYS else "" for k in delete})  # unknown keys
        with self.catalog.mutate() as topics:
            meta = topics.get(name)
            if meta is None:
                self.topic(name)
            cfg = dict(meta.config)
            cfg.update(updates)
            for k in delete:
                cfg.pop(k, None)
            check_combination(cfg)
            if TopicConfig.from_overrides(cfg).compacted:
                cold = sum(len(tier_manifest.load(files.partition_dir(self.path, name, p)))
                           for p in range(meta.partitions))
                if cold:
                    raise InvalidConfig(
                        f"topic {name!r} has {cold} segment(s) in the cold store, which compaction "
                        f"would never clean: bring them back first with 'rivven tier restore "
                        f"{name} --from 0', then set cleanup.policy")
            topics[name] = TopicMeta(name, meta.id, meta.partitions, cfg, meta.created_ms)
        return self.topic(name)

    def add_partitions(self, name: str, total: int) -> TopicMeta:
        self._writable()
        with self.catalog.mutate() as topics:
            meta = topics.get(name)
            if meta is None:
                self.topic(name)
            if not isinstance(total, int) or total <= meta.partitions or total > MAX_PARTITIONS:
                raise InvalidArgument(
                    f"topic {name!r} has {meta.partitions} partitions; --total must be larger "
                    f"(at most {MAX_PARTITIONS}), partitions can never be removed")
            for p in range(meta.partitions, total):
                self._make_partition(name, p)
            topics[name] = TopicMeta(name, meta.id, total, meta.config, meta.created_ms)
        return self.topic(name)

    def describe_topic(self, name: str) -> dict[str, Any]:
        meta = self.topic(name)
        parts = []
        for p in range(meta.partitions):
            log = self._log(meta, p)
            segs = log.all_segments()
            start, end = log.offsets()
            parts.append({
                "partition": p,
                "start_offset": start,
                "end_offset": end,
                "segments": len(segs),
                "bytes": sum(s.size for s in segs),
            })
        return {
            "topic": name,
            "id": meta.id,
            "partitions": meta.partitions,
            "config": [{"key": k, "value": v, "source": s} for k, v, s in effective(meta.config)],
            "partition_info": parts,
        }

    # ---------------------------------------------------------------- partitions
    def _log(self, meta: TopicMeta, partition: int, retain: bool = True) -> PartitionLog:
        if not isinstance(partition, int) or not 0 <= partition < meta.partitions:
            raise UnknownPartition(
                f"partition {partition} does not exist in topic {meta.name!r} "
                f"(it has partitions 0..{meta.partitions - 1})")
        key = (meta.name, partition)
        entry = self._logs.get(key)
        if entry is not None and entry[0] == meta.id:
            entry[1].config = meta.typed
            return entry[1]
        with self._logs_mutex:
            if self._closing:
                raise InvalidArgument("this engine is closed; open it again")
            entry = self._logs.get(key)
            if entry is not None and entry[0] == meta.id:
                return entry[1]
            if entry is not None:
                entry[1].close()
            d = files.partition_dir(self.path, meta.name, partition)
            if not os.path.isdir(d):  # create/add-partitions make dirs before the catalog names them
                raise UnknownTopic(f"topic {meta.name!r} has no files for partition {partition} "
                                   "(deleted meanwhile?)")
            # the WAL stream comes with the first append (_append): a process that only
            # consumes or administers leaves no stream behind when it is killed
            log = PartitionLog(d, meta.name, partition, meta.typed, writable=not self.read_only,
                               wal=None, topic_id=bytes.fromhex(meta.id),
                               wal_sync=self.settings.wal_sync, cuts=self._cuts,
                               progress=self.progress, holds=self._holds,
                               cold=self.cold_cache, hot=self.hot)
            self._logs[key] = (meta.id, log)
        if retain and not self.read_only:
            try:  # retention runs when a writer opens a partition (and at checkpoints)
                retention.apply(log, meta.typed, now_ms())
            except (RivvenError, OSError):
                pass  # the next checkpoint or 'rivven retention apply' tries again
        return log

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        return self._log(self.topic(topic), partition)

    # ---------------------------------------------------------------- produce
    def produce(self, topic: str, records: Iterable[Record], partition: int | None = None,
                compression: str | None = None) -> list[tuple[int, int]]:
        """Append records; returns one ``(partition, offset)`` per record once durable."""
        recs = records if isinstance(records, list) else list(records)
        if not recs:
            return []
        paused = gc.isenabled()  # transposing allocates many tuples; no cycles are made
        if paused:
            gc.disable()
        try:
            return self._produce(topic, recs, partition, compression)
        finally:
            if paused:
                gc.enable()

    def _produce(self, topic: str, recs: list, partition: int | None, compression: str | None
                 ) -> list[tuple[int, int]]:
        cols = list(zip(*recs))
        if len(cols) != 6:
            recs = [r if isinstance(r, Record) else Record(*r) for r in recs]
            cols = list(zip(*recs))
        keys, values, headers, timestamps, _, parts = cols
        return self.produce_batch(topic, values, keys=keys, headers=headers,
                                  timestamps=timestamps, partition=partition,
                                  partitions=parts, compression=compression)

    def produce_batch(self, topic: str, values: Sequence[bytes | None],
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
                      timestamps: Sequence[int | None] | int | None = None,
                      partition: int | None = None,
                      partitions: Sequence[int | None] | None = None,
                      compression: str | None = None) -> list[tuple[int, int]]:
        """Columnar produce: the fast path behind ``produce`` (no Record objects needed)."""
        self._writable()
        n = len(values)
        if n == 0:
            return []
        if keys is None:
            keys = [None] * n
        if len(keys) != n:
            raise InvalidArgument("keys and values must have the same length")
        meta, cached = self._produce_meta(topic)
        ts = self._timestamps(timestamps, n)
        if headers is not None and not any(headers):
            headers = None
        appended = [0]  # batches stored so far: a retry after the first would duplicate them
        try:
            acks = self._produce_to(meta, keys, values, headers, ts, partition, partitions,
                                    compression, n, appended)
        except (UnknownTopic, UnknownPartition):
            if not cached or appended[0]:
                raise
            # the cached catalog entry may be stale: another process deleted and recreated
            # the topic (its partition lock is gone) or added partitions; look again
            fresh = self._fresh_meta(topic)
            if fresh is meta:
                raise
            acks = self._produce_to(fresh, keys, values, headers, ts, partition, partitions,
                                    compression, n, appended)
        self._maybe_checkpoint()
        return acks

    def _produce_meta(self, topic: str) -> tuple[TopicMeta, bool]:
        """The topic's metadata for a produce; ``True`` when it came from the cache.

        Looking at topics.json costs a stat per call; a produce checks it at most every
        CATALOG_RECHECK_S. What changes meanwhile is still noticed: a deleted (or recreated)
        topic by its partition's unlinked lock file (PartitionLog._check_alive under the
        flock, then produce_batch looks again), added partitions by UnknownPartition, and
        changes made through this engine at once (they reload the catalog).
        """
        if time.monotonic() - self._catalog_checked < CATALOG_RECHECK_S:
            meta = self.catalog.topics.get(topic)
            if meta is not None:
                return meta, True
        return self._fresh_meta(topic), False

    def _fresh_meta(self, topic: str) -> TopicMeta:
        checked = time.monotonic()
        meta = self.topic(topic)
        self._catalog_checked = checked
        return meta

    def _produce_to(self, meta: TopicMeta, keys: Sequence, values: Sequence,
                    headers: Sequence | None, ts: Any, partition: int | None,
                    partitions: Sequence[int | None] | None, compression: str | None, n: int,
                    appended: list[int]) -> list[tuple[int, int]]:
        cfg = meta.typed
        codec = self._codec(cfg, compression)
        if cfg.compacted and None in keys:
            raise InvalidArgument(
                f"topic {meta.name!r} is compacted (cleanup.policy={cfg.cleanup_policy}): "
                "every record needs a key")
        groups = self._assign_partitions(meta, keys, partition, partitions)
        return self._produce_groups(meta, groups, keys, values, headers, ts, codec, cfg, n,
                                    appended)

    def _produce_groups(self, meta: TopicMeta, groups: dict, keys: Sequence, values: Sequence,
                        headers: Sequence | None, ts: Any, codec: int, cfg: TopicConfig, n: int,
                        appended: list[int]) -> list[tuple[int, int]]:
        acks: list[tuple[int, int]] = [None] * n if len(groups) > 1 else []  # type: ignore[list-item]
        for p, idx in groups.items():
            log = self._log(meta, p)
            if idx is None:
                base_offsets = self._append(log, keys, values, headers, ts, codec, cfg,
                                            appended)
                for base, count in base_offsets:
                    acks.extend(zip([p] * count, range(base, base + count)))
            else:
                def sub(seq: Sequence, idx: list[int] = idx) -> list:
                    return [seq[i] for i in idx]

                bases = self._append(log, sub(keys), sub(values),
                                     sub(headers) if headers is not None else None,
                                     ts if isinstance(ts, int) else sub(ts), codec, cfg,
                                     appended)
                it = iter(idx)
                for base, count in bases:
                    for off in range(base, base + count):
                        acks[next(it)] = (p, off)
        return acks

    def _codec(self, cfg: TopicConfig, compression: str | None) -> int:
        if compression is not None:
            return codecs.codec_id(compression)
        if cfg.compression_type in ("producer", "none"):
            return codecs.NONE
        return codecs.codec_id(cfg.compression_type)

    @staticmethod
    def _timestamps(timestamps: Any, n: int) -> int | list[int]:
        if timestamps is None or isinstance(timestamps, int):
            return now_ms() if timestamps is None else timestamps
        if len(timestamps) != n:
            raise InvalidArgument("timestamps and values must have the same length")
        nones = timestamps.count(None) if hasattr(timestamps, "count") else 0
        if nones == n:
            return now_ms()
        if nones:
            now = now_ms()
            timestamps = [now if t is None else t for t in timestamps]
        if not all(isinstance(t, int) and 0 <= t < 1 << 62 for t in timestamps):
            raise InvalidArgument("record timestamps must be non-negative integers (ms since epoch)")
        return list(timestamps)

    def _assign_partitions(self, meta: TopicMeta, keys: Sequence[bytes | None],
                           partition: int | None, partitions: Sequence[int | None] | None
                           ) -> dict[int, list[int] | None]:
        """Partition -> record indexes (None: every record)."""
        count = meta.partitions
        if partition is not None:
            self._check_partition(meta, partition)
            return {partition: None}
        if partitions is not None and partitions.count(None) != len(partitions):
            per = list(partitions)
        elif count == 1:
            return {0: None}
        else:
            per = [None] * len(keys)
        sticky = None
        groups: dict[int, list[int]] = defaultdict(list)
        for i, (k, p) in enumerate(zip(keys, per)):
            if p is None:
                if k is not None:
                    p = partition_for_key(k, count)
                else:
                    if sticky is None:
                        sticky = self._sticky[meta.name].next(count)
                    p = sticky
            else:
                self._check_partition(meta, p)
            groups[p].append(i)
        if len(groups) == 1:
            return {next(iter(groups)): None}
        return dict(groups)

    @staticmethod
    def _check_partition(meta: TopicMeta, p: Any) -> None:
        if not isinstance(p, int) or not 0 <= p < meta.partitions:
            raise UnknownPartition(f"partition {p} does not exist in topic {meta.name!r} "
                                   f"(it has partitions 0..{meta.partitions - 1})")

    def _append(self, log: PartitionLog, keys: Sequence, values: Sequence,
                headers: Sequence | None, ts: int | list[int], codec: int, cfg: TopicConfig,
                appended: list[int]) -> list[tuple[int, int]]:
        """Encode (splitting at max.message.bytes) and append; ``[(base_offset, count)]``."""
        if log.wal is None:
            self._writable()
            log.wal = self._wal_stream()
        limit = cfg.max_message_bytes
        batch = encode_batch(keys, values, ts, headers, codec)
        if len(batch) <= limit:
            base = log.append(batch)
            appended[0] += 1
            return [(base, batch.count)]
        chunks = self._split(keys, values, headers, limit)
        batches = []
        for a, b in chunks:
            t = ts if isinstance(ts, int) else ts[a:b]
            h = headers[a:b] if headers is not None else None
            enc = encode_batch(keys[a:b], values[a:b], t, h, codec)
            if len(enc) > limit:
                if b - a == 1:
                    err = RecordTooLarge(
                        f"record {a} is {len(enc)} bytes as a batch, over max.message.bytes="
                        f"{limit} of topic {log.topic!r}; raise it with 'rivven topic "
                        f"alter-config {log.topic} --set max.message.bytes=N'")
                    err.index = a  # type: ignore[attr-defined]
                    raise err
                mid = (a + b) // 2
                chunks.extend([(a, mid), (mid, b)])
                continue
            batches.append((a, enc))
        batches.sort(key=lambda x: x[0])
        out = []
        for _, enc in batches:
            out.append((log.append(enc), enc.count))
            appended[0] += 1
        return out

    @staticmethod
    def _split(keys: Sequence, values: Sequence, headers: Sequence | None, limit: int
               ) -> list[tuple[int, int]]:
        chunks = []
        start, size = 0, HEADER_SIZE + 64
        for i, (k, v) in enumerate(zip(keys, values)):
            rec = 24 + (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
            if headers is not None:
                rec += sum(12 + len(hk) + (len(hv) if hv is not None else 0)
                           for hk, hv in headers[i])
            if HEADER_SIZE + 64 + rec > limit:
                err = RecordTooLarge(
                    f"record {i} is about {rec} bytes, over max.message.bytes={limit}; raise "
                    "it with 'rivven topic alter-config TOPIC --set max.message.bytes=N'")
                err.index = i  # type: ignore[attr-defined]
                raise err
            if size + rec > limit and i > start:
                chunks.append((start, i))
                start, size = i, HEADER_SIZE + 64
            size += rec
        chunks.append((start, len(values)))
        return chunks

    # ---------------------------------------------------------------- read
    def read(self, topic: str, partition: int, offset: int, max_records: int = 1000
             ) -> list[Record]:
        """Up to ``max_records`` records from ``offset`` on (fewer at the end of the log)."""
        out: list[Record] = []
        # Records hold only bytes/ints/tuples (no cycles): pausing the cyclic GC while a batch
        # of them is made saves ~35% of read time.
        paused = gc.isenabled()
        try:
            if paused:
                gc.disable()
            return self._read(topic, partition, offset, max_records, out)
        finally:
            if paused:
                gc.enable()

    def _read(self, topic: str, partition: int, offset: int, max_records: int,
              out: list[Record]) -> list[Record]:
        for ref, body, lay in self._batches(topic, partition, offset, max_records):
            recs = decode_records(body, ref.header, lay, partition, self._where(ref))
            if recs and recs[0].offset < offset:
                recs = recs[bisect_left(recs, offset, key=_offset_of):]
            if recs:  # (segments overlap for a moment while a compaction swap installs)
                offset = recs[-1].offset + 1
            out.extend(recs)
            if len(out) >= max_records:
                del out[max_records:]
                break
        return out

    def read_columns(self, topic: str, partition: int, offset: int, max_records: int = 1000
                     ) -> Iterator[tuple[Any, Any, list, list, Any]]:
        """Per batch ``(offsets, timestamps, keys, values, headers)`` columns from ``offset``.

        The first batch may start before ``offset`` and the last may run past ``max_records``:
        the cheapest way to stream (used by ``rivven consume``).
        """
        for ref, body, lay in self._batches(topic, partition, offset, max_records):
            yield decode_columns(body, ref.header, lay, self._where(ref))

    def read_arrow(self, topic: str, partition: int, offset: int, max_records: int = 1 << 62
                   ) -> Any:
        """A ``pyarrow.Table`` (offset, timestamp, key, value, headers), zero-copy per batch."""
        parts = []
        count = skip = 0
        for ref, body, lay in self._batches(topic, partition, offset, max_records):
            h = ref.header
            cols = batch_columns(body, h, lay, self._where(ref))
            if not parts and h.base_offset < offset:
                if cols[0] is None:
                    skip = offset - h.base_offset
                else:
                    skip = bisect_left(cols[0].to_pylist(), offset - h.base_offset)
            parts.append((h.base_offset, h.record_count, cols))
            count += h.record_count
            if count - skip >= max_records:
                break
        result = arrow_table(parts)
        if skip or count - skip > max_records:
            result = result.slice(skip, max_records)
        return result

    def _batches(self, topic: str, partition: int, offset: int, max_records: int
                 ) -> Iterator[tuple[BatchRef, Any, Any]]:
        if not isinstance(offset, int) or offset < 0:
            raise InvalidArgument(f"offset must be a non-negative integer, not {offset!r}")
        if max_records <= 0:
            return
        log = self._log(self.topic(topic), partition)
        seen = 0
        for ref in log.batches(offset, max_bytes=1 << 62):
            h = ref.header
            where = self._where(ref)
            body = body_of(ref.buf, ref.start, h, where)
            lay = layout(body, h, where)
            yield ref, body, lay
            seen += h.next_offset - max(offset, h.base_offset)
            if seen >= max_records:
                return

    @staticmethod
    def _where(ref: BatchRef) -> str:
        return f" at position {ref.position} (offsets {ref.header.base_offset}.." \
               f"{ref.header.last_offset})"

    # ---------------------------------------------------------------- offsets
    def end_offsets(self, topic: str) -> dict[int, int]:
        meta = self.topic(topic)
        return {p: self._log(meta, p).offsets()[1] for p in range(meta.partitions)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        meta = self.topic(topic)
        return {p: self._log(meta, p).offsets()[0] for p in range(meta.partitions)}

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (None if none is),
        cold segments included."""
        log = self._log(self.topic(topic), partition)
        start = log.offsets()[0]
        for entry in log.cold_entries():
            if entry.max_timestamp >= timestamp and entry.next_offset > start:
                found = self._first_at(log.cold_segment(entry), timestamp, start)
                if found is not None:
                    return found
        for seg in log.all_segments():
            if log.segment_max_timestamp(seg) < timestamp:
                continue
            found = self._first_at(seg, timestamp, start)
            if found is not None:
                return found
        return None

    @staticmethod
    def _first_at(seg: Any, timestamp: int, start: int) -> int | None:
        """(In one segment.) The first offset >= ``start`` with a timestamp >= ``timestamp``."""
        for ref in seg.iter_batches(seg.position_for_time(timestamp), seg.size):
            h = ref.header
            if h.max_timestamp < timestamp or h.last_offset < start:
                continue
            body = body_of(ref.buf, ref.start, h)
            offsets, tss, *_ = decode_columns(body, h, layout(body, h))
            for off, t in zip(offsets, tss):
                if t >= timestamp and off >= start:
                    return off
        return None

    # ---------------------------------------------------------------- tiered storage
    def tier(self, topic: str | None = None, dry_run: bool = False, now: int | None = None
             ) -> dict[str, Any]:
        """One tiering pass in this process (no Spark): copy the segments past local
        retention of ``topic`` (default: every topic with remote.storage.enable) to the cold
        store, verify, record them in the tier manifest, delete the local copies."""
        if not dry_run:
            self._writable()
        return tiering.run(self, topic, (lambda tasks: None) if dry_run
                           else tiering.copy_in_process, dry_run, now)

    def tier_status(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per partition: cold and local ranges and bytes, hot cache bytes and hit rate."""
        metas = [self.topic(topic)] if topic is not None else self.topics()
        hot = self._hot_stats()
        return [tiering.status(self, self._log(meta, p, retain=False),
                               hot.get(f"{meta.name}/{p}", {}))
                for meta in metas for p in range(meta.partitions)]

    def tier_restore(self, topic: str, from_offset: int | None = None,
                     from_timestamp: int | None = None, partitions: Sequence[int] | None = None,
                     dry_run: bool = False) -> list[dict[str, Any]]:
        """Bring cold segments back to local disk, from the one holding ``from_offset`` (or
        the first offset at ``from_timestamp``) up to the local segments."""
        if not dry_run:
            self._writable()
        meta = self.topic(topic)
        out = []
        for p in (partitions if partitions is not None else range(meta.partitions)):
            log = self._log(meta, p)
            off = from_offset
            if from_timestamp is not None:
                off = self.offset_for_time(topic, p, from_timestamp)
                if off is None:
                    off = log.offsets()[1]
            if off is None or off < 0:
                raise InvalidArgument("give a non-negative offset or a timestamp to restore from")
            out.append(tiering.restore(log, off, dry_run))
        return out

    def verify_cold(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Read every cold object back and check it against its manifest entry. Rows per
        partition: objects checked, bytes, findings."""
        metas = [self.topic(topic)] if topic is not None else self.topics()
        out = []
        for meta in metas:
            for p in range(meta.partitions):
                log = self._log(meta, p, retain=False)
                entries = log.cold_entries() if log.tier or log.tier_error else []
                out.append({"topic": meta.name, "partition": p, "segments": len(log.tier),
                            "bytes": tiering.verified_bytes(log),
                            "findings": tiering.verify_cold(log) if entries or log.tier else []})
        return out

    def _hot_stats(self) -> dict[str, dict[str, int]]:
        """Hot cache figures by "topic/partition": this process's, plus those other live
        processes published at their last checkpoint."""
        out: dict[str, dict[str, int]] = {}

        def add(key: str, st: dict[str, int]) -> None:
            acc = out.setdefault(key, {"bytes": 0, "hits": 0, "misses": 0})
            for k in acc:
                acc[k] += int(st.get(k, 0))

        for (name, p), (_, log) in list(self._logs.items()):
            if self.hot is not None:
                add(f"{name}/{p}", self.hot.partition_stats(log))
        d = os.path.join(self.path, STATS_DIR)
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if not f.startswith("hot-") or f == f"hot-{os.getpid()}.json":
                continue
            path = os.path.join(d, f)
            try:
                pid = int(f[4:-5])
                os.kill(pid, 0)
                with open(path) as fh:
                    doc = json.load(fh)
                for key, st in doc["partitions"].items():
                    add(key, st)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.unlink(path)  # that process is gone, and its cache with it
            except (ValueError, OSError, KeyError, TypeError, AttributeError):
                pass
        return out

    def _publish_hot_stats(self) -> None:
        if self.hot is None or self.read_only:
            return
        parts = {f"{name}/{p}": self.hot.partition_stats(log)
                 for (name, p), (_, log) in list(self._logs.items())}
        d = os.path.join(self.path, STATS_DIR)
        try:
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, f".hot-{os.getpid()}.tmp")
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "at_ms": now_ms(), "partitions": parts}, f)
            os.replace(tmp, os.path.join(d, f"hot-{os.getpid()}.json"))
        except OSError:
            pass  # figures only

    # ---------------------------------------------------------------- log start, retention
    def delete_records(self, topic: str, before: dict[int, int], dry_run: bool = False
                       ) -> list[dict[str, Any]]:
        """Move each partition's log start offset forward to ``before[p]`` (never back;
        offsets above the log end are refused), deleting whole segments below it. Rows:
        partition, prior/new log start offset, deleted segments."""
        if not dry_run:
            self._writable()
        meta = self.topic(topic)
        plans = []
        for p, off in sorted(before.items()):
            log = self._log(meta, p)
            if not isinstance(off, int) or off < 0:
                raise InvalidArgument(f"offset must be a non-negative integer, not {off!r}")
            start, end = log.offsets()
            if off > end:
                raise OffsetOutOfRange(f"cannot delete records of {topic}-{p} before {off}: the "
                                       f"log ends at {end} (valid: {start}..{end})", start, end)
            plans.append((p, log, off, start))
        rows = []
        for p, log, off, start in plans:
            if dry_run:
                rows.append({"topic": topic, "partition": p, "prior_log_start_offset": start,
                             "new_log_start_offset": max(start, off), "deleted_segments": []})
                continue
            prior, new, gone = log.advance_start(off)
            if log.tier and log.tier[0].next_offset <= new:
                gone = tiering.drop_below(log, new) + gone
            rows.append({"topic": topic, "partition": p, "prior_log_start_offset": prior,
                         "new_log_start_offset": new, "deleted_segments": gone})
        return rows

    def apply_retention(self, topic: str | None = None, dry_run: bool = False,
                        now: int | None = None) -> list[dict[str, Any]]:
        """Delete the sealed segments past ``retention.ms``/``retention.bytes`` (or below the
        log start offset) of ``topic`` (default: every topic); one row per segment."""
        if not dry_run:
            self._writable()
        metas = [self.topic(topic)] if topic is not None else self.topics()
        t = now_ms() if now is None else now
        rows = []
        for meta in metas:
            for p in range(meta.partitions):
                rows += retention.apply(self._log(meta, p, retain=False), meta.typed, t, dry_run)
        return rows

    # ---------------------------------------------------------------- compaction
    def compaction_plan(self, topic: str, partitions: Sequence[int] | None = None,
                        force: bool = False) -> list[dict[str, Any]]:
        """What the next compaction pass would clean per partition, and why not the rest."""
        from .maintenance import compaction
        meta = self.topic(topic)
        now = now_ms()
        return [compaction.plan_partition(self._log(meta, p), meta.typed, now, force)
                for p in (partitions if partitions is not None else range(meta.partitions))]

    def explain_compaction(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: dirty ratio, cleanable range, what holds the rest back, and every
        tombstone's delete horizon."""
        from .maintenance import compaction
        meta = self.topic(topic)
        now = now_ms()
        return [compaction.explain_partition(self._log(meta, p), meta.typed, now)
                for p in range(meta.partitions)]

    def compact(self, topic: str, partitions: Sequence[int] | None = None, force: bool = False
                ) -> list[dict[str, Any]]:
        """One compaction pass in this process, without Spark (small topics; the reference
        for the Spark job: engine.spark.submit.compact)."""
        from .maintenance import compaction
        self._writable()
        meta = self.topic(topic)
        root = os.path.join(self.path, ".compaction")
        os.makedirs(root, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"local-{os.getpid()}-", dir=root)
        try:
            return [compaction.compact_partition(self._log(meta, p), meta.typed, staging,
                                                 force=force)
                    for p in (partitions if partitions is not None else range(meta.partitions))]
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # ---------------------------------------------------------------- consumer groups
    def consumer(self, group: str, topics: str | Iterable[str],
                 auto_offset_reset: str = "earliest", **options: Any) -> Any:
        """A group member reading ``topics`` from the group's committed offsets; see
        engine.consumer.Consumer for ``options`` (enable_auto_commit, member_id, ...)."""
        from .groups.consumer import Consumer
        return Consumer(self, group, topics, auto_offset_reset=auto_offset_reset, **options)

    def list_groups(self) -> list[dict[str, Any]]:
        return groups.list_groups(self)

    def describe_group(self, group: str) -> dict[str, Any]:
        return groups.describe(self, group)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return groups.committed(self, group)

    def reset_offsets(self, group: str, targets: dict[str, list[int] | None] | None, mode: str,
                      value: int | None = None, execute: bool = False, force: bool = False
                      ) -> list[dict[str, Any]]:
        """Plan (and with ``execute`` apply) a reset of the group's committed offsets; see
        engine.groups.plan_reset. Refused while the group has live consumers unless ``force``."""
        rows = groups.plan_reset(self, group, targets, mode, value)
        if execute:
            self._writable()
            groups.apply_reset(self, group, rows, force)
        return rows

    def delete_group(self, group: str) -> dict[str, Any]:
        self._writable()
        return groups.delete_group(self, group)

    def delete_group_offsets(self, group: str, topic: str) -> dict[str, Any]:
        self._writable()
        return groups.delete_offsets(self, group, topic)

    # ---------------------------------------------------------------- segment admin
    def segment_list(self, topic: str, partition: int | None = None) -> list[dict[str, Any]]:
        """Per segment: file, base/last offset, records, bytes, time range (header scan)."""
        return admin.segment_list(self, topic, partition)

    def recover(self, targets: Sequence[str], truncate_corrupt: bool = False,
                dry_run: bool = False) -> list[dict[str, Any]]:
        """Truncate torn tails (and with ``truncate_corrupt`` corrupt tails) and rebuild indexes
        of the targeted segments, each partition under its lock."""
        return admin.recover_segments(self, targets, truncate_corrupt, dry_run)

    def reindex(self, path: str) -> dict[str, Any]:
        """Rebuild the ``.index`` and ``.timeindex`` of one ``.log`` from its bytes."""
        return admin.reindex(self, path)

    def _forget_all(self) -> None:
        if self.wal is not None:
            self.checkpoint()  # nothing this process wrote may be dropped unsynced
        with self._logs_mutex:
            for _, log in self._logs.values():
                log.close()
            self._logs.clear()
