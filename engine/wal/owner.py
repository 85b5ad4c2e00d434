"""An engine's WAL: its own stream (made with the first append), the interval syncer,
checkpoints, and the recovery of streams whose process died.

A checkpoint rotates the stream, fsyncs every partition written since the last one (recording
its recovery point), and then deletes the WAL files wholly before the rotation. Recovery —
replaying dead streams, cutting their torn tails — holds ``wal/recovery.lock``: a process
opening the data dir meanwhile waits, so nobody appends to a partition before the
acknowledged batches of a crashed writer are back in it, and a dead stream never looks live.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ..counters.meter import Meter
from ..errors import RivvenError, UnknownTopic
from ..fs import guard
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path
from ..progress import Progress
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog, RecoveryPointNotWritten
from ..storage.partitions import Partitions
from . import replay
from .results import Checkpointed, ReplayReport, TailCut
from .stream import RECOVERY_LOCK, WalStream

CHECKPOINT_THREADS = 16  # partitions fsynced at once by a checkpoint
PER_PARTITION_BYTES = 256 << 10  # WAL bytes a checkpoint waits for per partition it syncs


class WalSettings(Protocol):
    """What the WAL's owner reads of the engine's settings (engine.settings.Settings)."""

    @property
    def wal_sync(self) -> str: ...
    @property
    def wal_sync_interval_ms(self) -> int: ...
    @property
    def wal_segment_bytes(self) -> int: ...
    @property
    def checkpoint_bytes(self) -> int: ...
    @property
    def checkpoint_ms(self) -> int: ...


class WalOwner:
    def __init__(self, data_dir: str, settings: WalSettings, partitions: Partitions,
                 read_only: bool,
                 after_checkpoint: Callable[[PartitionLog], None] | None = None,
                 after_checkpoints: Callable[[], None] | None = None,
                 lock_wait: LockWait = DEFAULT_WAIT, meter: Meter | None = None) -> None:
        self.data_dir = data_dir
        self.meter = meter if meter is not None else Meter(None, enabled=False)
        self.checkpoints = self.meter.get("rivven_checkpoints_total")
        self.lock_wait = lock_wait
        self.settings = settings
        self.partitions = partitions
        self.read_only = read_only
        self.after_checkpoint = after_checkpoint  # per partition checkpointed (retention)
        self.after_checkpoints = after_checkpoints  # once per checkpoint (published figures)
        self.stream: WalStream | None = None
        self.checkpoint_error: RivvenError | None = None  # of the last background checkpoint
        self._mutex = threading.Lock()
        self._ckpt_lock = threading.Lock()
        self._ckpt_at = 0
        self._ckpt_time = time.monotonic()
        self._need: tuple[int, int] | None = None  # (checkpoint it is for, WAL bytes due)
        self._syncer: threading.Thread | None = None
        self._recovery_mutex = threading.Lock()
        self._recovery_owner: int | None = None
        # set when dead streams could not be replayed (a full disk): no appends until they are
        self.replay_pending: RivvenError | None = None

    # ---------------------------------------------------------------- the stream
    def attach(self, log: PartitionLog) -> None:
        """Give ``log`` this engine's stream (created on first use)."""
        if log.wal is None:
            log.wal = self._stream()

    def _stream(self) -> WalStream:
        if self.stream is None:
            if self.replay_pending is not None:
                raise self.replay_pending
            with self.recovery_lock(), self._mutex:  # same order as recovery takes them
                if self.stream is None:
                    self.stream = WalStream(self.data_dir, self.settings.wal_segment_bytes,
                                            self.meter)
                    if self.settings.wal_sync == "interval":
                        self._syncer = threading.Thread(target=self._sync_loop, daemon=True,
                                                        name="rivven-wal-sync")
                        self._syncer.start()
        return self.stream

    def _sync_loop(self) -> None:
        wal = self.stream
        while wal is not None and not wal.closed:
            time.sleep(self.settings.wal_sync_interval_ms / 1000)
            try:
                if not wal.closed:
                    wal.sync(wal.written)
            except (RivvenError, OSError):
                pass  # the next produce or checkpoint reports it

    def close(self, delete: bool) -> None:
        if self.stream is not None:
            self.stream.close(delete=delete)

    # ---------------------------------------------------------------- checkpoints
    def checkpoint(self) -> list[Checkpointed]:
        """fsync every partition this process wrote, record recovery points, and delete the
        WAL files wholly below them. (On a full disk a recovery point that cannot be written
        does not keep the WAL: the segments are fsynced; ``checkpoint_error`` says so.)"""
        with self._ckpt_lock:
            done = []
            wal = self.stream
            boundary = wal.rotate() if wal is not None else 0
            dirty = [(name, p, log) for name, p, log in self.partitions.open_logs()
                     if log.dirty and log.writable]
            if len(dirty) > 1:  # fsyncs of many partitions overlap (3x at 16 here)
                with ThreadPoolExecutor(min(CHECKPOINT_THREADS, len(dirty)),
                                        thread_name_prefix="rivven-checkpoint") as ex:
                    points = list(ex.map(self._checkpoint_one, dirty))
            else:
                points = [self._checkpoint_one(d) for d in dirty]
            done = [pt for pt in points if pt is not None]
            if wal is not None:
                # only files before *this* rotation: a later one (the WAL rotates by size)
                # may hold records of partitions checkpointed before they were written
                for f in wal.files_before(boundary):
                    os.unlink(f)
                self._ckpt_at = wal.written + wal.direct_written
            self._ckpt_time = time.monotonic()
            self.checkpoints.inc()
            if self.after_checkpoints is not None:
                self.after_checkpoints()
            return done

    def _checkpoint_one(self, item: tuple[str, int, PartitionLog]) -> Checkpointed | None:
        name, p, log = item
        try:
            point: Checkpointed = {"topic": name, "partition": p, **log.checkpoint()}
            if self.after_checkpoint is not None:
                self.after_checkpoint(log)
            return point
        except UnknownTopic:
            return None  # deleted meanwhile: its WAL records are moot
        except RecoveryPointNotWritten as e:
            self.checkpoint_error = e  # (synced: the WAL is not needed for it)
            return None

    def checkpoint_logs(self, logs: list[PartitionLog]) -> list[Checkpointed]:
        """Checkpoint each of ``logs`` whether written or not (a topic deleted meanwhile is
        skipped)."""
        done: list[Checkpointed] = []
        for log in logs:
            try:
                done.append({"topic": log.topic, "partition": log.partition, **log.checkpoint()})
            except UnknownTopic:
                pass
            except RecoveryPointNotWritten as e:  # (a full disk: synced, point not written)
                done.append({"topic": log.topic, "partition": log.partition,
                             "not_written": str(e)})
        return done

    def reopen_partitions(self) -> None:
        """Files were mended behind the open logs' back (``rivven segment recover``): checkpoint
        what this process wrote (nothing may be dropped unsynced), then forget every open log
        (each opens afresh on its next use)."""
        if self.stream is not None:
            self.checkpoint()
        self.partitions.forget_all()

    def maybe_checkpoint(self) -> None:
        """Checkpoint when enough WAL bytes or time went by (after a produce)."""
        wal = self.stream
        if wal is None:
            return
        st = self.settings
        due = wal.written + wal.direct_written - self._ckpt_at >= st.checkpoint_bytes \
            and self._enough_bytes(wal)
        if due or (time.monotonic() - self._ckpt_time) * 1000 >= st.checkpoint_ms:
            if not self._ckpt_lock.locked():  # one already running covers this one
                try:
                    self.checkpoint()
                except RivvenError as e:
                    # the produce itself succeeded; the WAL keeps everything until a later
                    # checkpoint (or close) succeeds
                    self.checkpoint_error = e

    def _enough_bytes(self, wal: WalStream) -> bool:
        """A checkpoint fsyncs every partition written since the last: with many written in
        turn, it waits for PER_PARTITION_BYTES of WAL per such partition (else a thousand
        partitions would pay a thousand fsyncs every checkpoint.interval.bytes)."""
        if self._need is None or self._need[0] != self._ckpt_at:
            n = sum(1 for _, _, log in self.partitions.open_logs() if log.dirty)
            self._need = (self._ckpt_at, n * PER_PARTITION_BYTES)
        return wal.written + wal.direct_written - self._ckpt_at >= self._need[1]

    # ---------------------------------------------------------------- dead streams
    def replay(self, topics: Callable[[], list[TopicMeta]],
               log_for: Callable[[TopicMeta, int], PartitionLog],
               progress: Progress | None,
               dry_run: bool = False) -> ReplayReport:
        """Replay the streams whose process is gone (engine.wal.replay)."""
        with self.recovery_lock():
            return replay.replay_dead_streams(self.data_dir, self._own(), topics, log_for,
                                              progress, dry_run)

    def recover_tails(self, dry_run: bool = False) -> list[TailCut]:
        """Cut torn tails of dead streams' WAL files (a live stream is left alone)."""
        with self.recovery_lock():
            return replay.cut_dead_tails(self.data_dir, self._own(), dry_run)

    def _own(self) -> str | None:
        return self.stream.id if self.stream is not None else None

    @contextlib.contextmanager
    def recovery_lock(self) -> Iterator[None]:
        """Held by whoever takes dead streams' locks or creates a stream, so a dead stream never
        looks live to a process opening the data dir (re-entrant within this engine)."""
        if self._recovery_owner == threading.get_ident():
            yield
            return
        with self._recovery_mutex:
            self._recovery_owner = threading.get_ident()
            try:
                root = os.path.join(self.data_dir, "wal")
                if not guard.real_dir(root):  # (a link: UnexpectedLink, never followed)
                    if self.read_only:
                        yield
                        return
                    guard.make_dir(root)
                with lock_path(os.path.join(root, RECOVERY_LOCK), self.lock_wait):
                    yield
            finally:
                self._recovery_owner = None
