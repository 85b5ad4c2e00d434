"""Background maintenance, as a Kafka broker runs it (``rivven serve``, ``rivven maintain``),
from the topics' own configs:

- **retention** of every partition every ``log.retention.check.interval.ms``, written to or
  not (a writer also applies it when it opens a partition and after its checkpoints);
- **compaction** of a compacted topic's partition once ``compaction.plan_partition`` finds it
  due (its dirty ratio at or past ``min.cleanable.dirty.ratio``, or a tombstone or marker past
  its horizon), looked for every ``log.cleaner.backoff.ms``: in this process, or by the Spark
  job it is handed when the cleanable bytes pass ``log.cleaner.spark.threshold.bytes``;
- **tiering** of a ``remote.storage.enable`` topic's partition once a sealed segment is past
  ``local.retention.ms``/``.bytes``, looked for every ``remote.log.manager.task.interval.ms``.

Each kind runs on a thread of its own; a round looks at every partition once, plans cheaply
(the plan functions of each kind, no lock) and runs a pass only where one is due.

**One pass per partition at a time.** A pass holds its partition's lock file in
``DATA/.maintenance/`` (a flock, tried without waiting): a partition whose lock another pass
holds — this scheduler's other kind, another server or ``rivven maintain`` on the same data
dir — is left to the next round (outcome ``busy``), and the plan is made again under the
lock, so two schedulers never do the same work twice. Processes that do not take that lock
(``rivven spark compact``, ``rivven tier run``, a writer's own retention) are kept apart by the
engine's: the tier lock, and the compaction swap that refuses a partition changed since its
plan (``CompactionConflict``: ``busy`` too).

**A failing pass backs off**, per partition and kind: ``maintenance.retry.backoff.ms``,
doubled after each failure in a row up to ``maintenance.retry.backoff.max.ms``; each failure
is a warning in the log naming the partition, the error and the next try, and counted
(``rivven_maintenance_passes_total{outcome="failed"}``,
``rivven_maintenance_backoff_partitions``). A success resets it.

**Stopping** (``stop``): no new pass starts; the pass in progress finishes (each kind's
thread checks between partitions), waited for up to ``timeout``. One still running then (a
long Spark job) is abandoned: the process exits under it, which is as harmless as a kill -9
— a compaction's or tier pass's change to a partition is one swap (a manifest renamed into
place, finished by whoever opens the partition next, or never begun), the staging folder of
a dead process is cleared by the next pass, a Spark job dies with its launcher, and copies a
tier pass left unreferenced are collected by the next one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

from .. import clock
from ..errors import InvalidConfig, RivvenError, UnknownTopic, plural
from ..fs import guard
from ..fs.locks import open_lock_file, try_lock
from ..storage.catalog import TopicMeta
from ..storage.log import PartitionLog
from ..tiering import tier_pass
from . import compaction, retention
from .admin import Maintenance
from .cleaner import CompactionConflict
from .results import CompactionPlan, MaintenancePass

LOCKS = ".maintenance"  # in the data dir: one lock file per partition, <topic id>-<n>.lock
KINDS = ("retention", "compaction", "tier")
INITIAL_DELAY_S = 30.0  # a server's first round of a kind: after this (or its interval if less)
STOP_WAIT_S = 30.0  # how long stop() waits for the pass in progress

# a compaction too big for this process: (topic, partition) -> engine.spark.submit.compact's
# result (its "partitions" rows)
SparkCompact = Callable[[str, int], dict[str, Any]]

# name: (default, minimum, what it is)
INTS: dict[str, tuple[int, int, str]] = {
    "log.retention.check.interval.ms": (300000, 1000, "how often retention runs over every "
                                                      "partition, written to or not"),
    "log.cleaner.backoff.ms": (15000, 100, "how often the cleaner looks for a compacted "
                                           "partition whose dirty ratio passed "
                                           "min.cleanable.dirty.ratio"),
    "log.cleaner.spark.threshold.bytes": (1073741824, -1, "a partition whose cleanable bytes "
                                                          "pass this is compacted by a Spark "
                                                          "job, a smaller one in process (-1: "
                                                          "never Spark)"),
    "remote.log.manager.task.interval.ms": (30000, 100, "how often tiering looks for segments "
                                                        "past local.retention.ms/.bytes"),
    "maintenance.retry.backoff.ms": (30000, 100, "wait after a failed pass before the next "
                                                 "one on that partition (doubled each time, "
                                                 "per partition and kind)"),
    "maintenance.retry.backoff.max.ms": (3600000, 100, "the longest wait after failed passes"),
}
BOOLS: dict[str, tuple[bool, str]] = {
    "maintenance.enable": (True, "run retention, compaction and tiering in the background "
                                 "(rivven serve --no-maintenance: false)"),
    "log.cleaner.enable": (True, "compact compacted topics in the background"),
    "remote.log.storage.system.enable": (True, "tier topics with remote.storage.enable in the "
                                               "background"),
}
STRS: dict[str, tuple[str, str]] = {
    "log.cleaner.spark.master": ("local[*]", "the Spark master of compactions past "
                                             "log.cleaner.spark.threshold.bytes"),
}
NAMES = (*INTS, *BOOLS, *STRS)


def setting_value(key: str, text: object, ints: dict[str, tuple], bools: dict[str, tuple]
                  ) -> int | bool:
    """``text`` of ``key`` as an integer at or above its minimum (``ints[key][1]``) or a
    boolean (``bools``): InvalidConfig naming the key and what to give (the serve settings
    use it too)."""
    if key in ints:
        lo = ints[key][1]
        try:
            n = int(str(text).strip())
        except ValueError:
            n = lo - 1
        if n < lo:
            raise InvalidConfig(f"invalid {key}={text!r}: use an integer >= {lo}")
        return n
    v = str(text).strip().lower()
    if v not in ("true", "false"):
        raise InvalidConfig(f"invalid {key}={text!r}: use true or false")
    return v == "true"


@dataclass(frozen=True)
class MaintenanceConfig:
    """The background maintenance's settings (Kafka's broker config names where Kafka has
    one)."""

    maintenance_enable: bool = True
    log_retention_check_interval_ms: int = 300000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_spark_threshold_bytes: int = 1073741824
    log_cleaner_spark_master: str = "local[*]"
    remote_log_storage_system_enable: bool = True
    remote_log_manager_task_interval_ms: int = 30000
    maintenance_retry_backoff_ms: int = 30000
    maintenance_retry_backoff_max_ms: int = 3600000

    @classmethod
    def parse(cls, values: dict[str, str] | None) -> MaintenanceConfig:
        """From ``{name: text}``; unknown names and bad values refused (InvalidConfig naming
        the key and the fix)."""
        out: dict[str, object] = {}
        for k, text in (values or {}).items():
            attr = k.replace(".", "_")
            if k in INTS or k in BOOLS:
                out[attr] = setting_value(k, text, INTS, BOOLS)
            elif k in STRS:
                if not str(text).strip():
                    raise InvalidConfig(f"invalid {k}={text!r}: give a value, e.g. "
                                        f"{STRS[k][0]}")
                out[attr] = str(text).strip()
            else:
                raise InvalidConfig(f"unknown maintenance setting {k!r}; valid: "
                                    f"{', '.join(sorted(NAMES))}")
        cfg = cls(**out)  # type: ignore[arg-type]
        if cfg.maintenance_retry_backoff_ms > cfg.maintenance_retry_backoff_max_ms:
            raise InvalidConfig("maintenance.retry.backoff.ms is above maintenance.retry."
                                "backoff.max.ms: lower the first or raise the second")
        return cfg

    def as_kafka(self) -> dict[str, str]:
        """Every setting under its name."""
        return {f.name.replace("_", "."): str(getattr(self, f.name)).lower()
                if not isinstance(getattr(self, f.name), str) else getattr(self, f.name)
                for f in fields(self)}

    def kinds(self) -> list[str]:
        """The kinds of pass these settings run."""
        if not self.maintenance_enable:
            return []
        return ["retention", *(["compaction"] if self.log_cleaner_enable else []),
                *(["tier"] if self.remote_log_storage_system_enable else [])]

    def interval_s(self, kind: str) -> float:
        ms = {"retention": self.log_retention_check_interval_ms,
              "compaction": self.log_cleaner_backoff_ms,
              "tier": self.remote_log_manager_task_interval_ms}[kind]
        return ms / 1000


def lock_path(data_dir: str, topic_id: str, partition: int) -> str:
    """The lock file a background pass over this partition holds."""
    return os.path.join(data_dir, LOCKS, f"{topic_id}-{partition}.lock")


@dataclass
class _Failing:
    failures: int  # in a row
    until: float  # time.monotonic() before which no pass of this kind runs here
    error: str


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


class Scheduler:
    """Retention, compaction and tiering of ``maint``'s data dir in the background (``start``,
    ``stop``) or one round now (``run_once``). ``spark`` runs a compaction past the size
    threshold (None: every compaction in this process); ``on_pass`` sees every pass row."""

    def __init__(self, maint: Maintenance, cfg: MaintenanceConfig,
                 spark: SparkCompact | None = None, log: logging.Logger | None = None,
                 on_pass: Callable[[MaintenancePass], None] | None = None) -> None:
        self.maint = maint
        self.cfg = cfg
        self.spark = spark
        self.log = log or logging.getLogger("rivven.maintenance")
        self.on_pass = on_pass
        self.data_dir = maint.data_dir
        self.meter = maint.counters
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._mutex = threading.Lock()  # _failing and _running (a thread per kind)
        self._failing: dict[tuple[str, str, int], _Failing] = {}
        self._running: dict[str, str] = {}  # kind -> the partition its pass is on now
        self._locks_made = False

    # ---------------------------------------------------------------- running
    def start(self, initial_delay_s: float | None = None) -> None:
        """A thread per kind: its first round after ``initial_delay_s`` (default: its
        interval, at most INITIAL_DELAY_S, as Kafka's broker waits before its first), then
        one every interval, counted from the end of the round before."""
        self.maint.writable()
        for kind in self.cfg.kinds():
            delay = (min(self.cfg.interval_s(kind), INITIAL_DELAY_S)
                     if initial_delay_s is None else initial_delay_s)
            t = threading.Thread(target=self._loop, args=(kind, delay), daemon=True,
                                 name=f"rivven-maintenance-{kind}")
            self._threads.append(t)
            t.start()
        self.log.info("background maintenance: %s", ", ".join(
            f"{k} every {self.cfg.interval_s(k):g} s" for k in self.cfg.kinds()) or "off")

    def request_stop(self) -> None:
        """No new pass starts (returns at once; ``stop`` waits)."""
        self._stop.set()

    def stop(self, timeout: float = STOP_WAIT_S) -> bool:
        """Stop: the passes in progress finish, waited for up to ``timeout`` s; False when
        one was still running then (abandoned with the process: harmless, see the module)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._mutex:
            left = [f"{k} of {where}" for k, where in self._running.items()]
        if left:
            self.log.warning("background maintenance stopped without waiting for the %s in "
                             "progress: it is abandoned with this process, which is harmless "
                             "(the partition changes in one swap, finished or never begun)",
                             " and the ".join(left))
        return not left

    def _loop(self, kind: str, delay: float) -> None:
        wait = delay
        while not self._stop.wait(wait):
            try:
                self.round(kind)
            except Exception as e:  # (the catalog unreadable, a bug: the thread goes on)
                self.log.error("background %s round failed: %s; next round in %g s", kind,
                               _error_line(e), self.cfg.interval_s(kind))
            wait = self.cfg.interval_s(kind)

    def run_once(self, kinds: list[str] | None = None) -> list[MaintenancePass]:
        """One round of each kind (default: those the settings run), in this thread."""
        self.maint.writable()
        return [row for kind in (self.cfg.kinds() if kinds is None else kinds)
                for row in self.round(kind)]

    def round(self, kind: str) -> list[MaintenancePass]:
        """Every partition of the topics ``kind`` covers looked at once: a pass where one is
        due and the partition is not backing off."""
        t0 = time.monotonic()
        rows: list[MaintenancePass] = []
        metas = self.maint.find.all()
        for meta in metas:
            if not self._covers(kind, meta):
                continue
            for p in range(meta.partitions):
                if self._stop.is_set():
                    break
                row = self._one(kind, meta, p)
                if row is not None:
                    rows.append(row)
        covered = {(m.id, p) for m in metas if self._covers(kind, m) for p in range(m.partitions)}
        with self._mutex:  # (a topic deleted, or no longer of this kind: its failures go)
            for key in [k for k in self._failing if k[0] == kind and k[1:] not in covered]:
                del self._failing[key]
        self._gauge(kind)
        ok = not any(r["outcome"] == "failed" for r in rows)
        self.meter.get("rivven_maintenance_round", kind=kind).record(ok, time.monotonic() - t0)
        if kind == "retention":
            self._clear_stale_locks({m.id for m in metas})
        return rows

    def backing_off(self) -> list[dict[str, Any]]:
        """The partitions whose passes are backing off: kind, topic id, partition, failures,
        seconds to the next try, the last error."""
        now = time.monotonic()
        with self._mutex:
            return [{"kind": k, "topic_id": tid, "partition": p, "failures": f.failures,
                     "retry_in_s": max(0.0, f.until - now), "error": f.error}
                    for (k, tid, p), f in sorted(self._failing.items())]

    # ---------------------------------------------------------------- one partition
    @staticmethod
    def _covers(kind: str, meta: TopicMeta) -> bool:
        if kind == "compaction":
            return meta.typed.compacted
        if kind == "tier":
            return meta.typed.remote_storage_enable
        return True

    def _one(self, kind: str, meta: TopicMeta, p: int) -> MaintenancePass | None:
        key = (kind, meta.id, p)
        with self._mutex:
            failing = self._failing.get(key)
        if failing is not None and failing.until > time.monotonic():
            return None
        row: MaintenancePass = {"kind": kind, "topic": meta.name, "partition": p,
                                "started_ms": clock.now_ms(), "reclaimed_bytes": 0}
        t0 = time.monotonic()
        try:
            log = self.maint.find.log(meta, p, retain=False)
            plan = self._due(kind, meta, log)
            if plan is None:
                self._succeeded(key, None)  # (what failed is not due any more)
                return None
            with self._locked(meta.id, p) as held:
                if not held:
                    row["outcome"] = "busy"
                    row["detail"] = ("another pass holds the partition "
                                     f"({lock_path(self.data_dir, meta.id, p)}); tried next round")
                else:
                    row["started_ms"], t0 = clock.now_ms(), time.monotonic()  # (lock taken)
                    with self._mutex:
                        self._running[kind] = f"{meta.name}-{p}"
                    try:
                        done = self._run(kind, meta, log, plan, row)
                    finally:
                        with self._mutex:
                            self._running.pop(kind, None)
                    if not done:
                        return None  # (nothing left to do under the lock: another did it)
                    row["outcome"] = "ok"
        except UnknownTopic:
            return None  # (deleted meanwhile)
        except (CompactionConflict, tier_pass.TierBusy) as e:
            row["outcome"], row["detail"] = "busy", str(e)
        except Exception as e:  # noqa: BLE001 (any failure of a pass backs off, reported)
            row["outcome"], row["detail"] = "failed", _error_line(e)
        row["seconds"] = round(time.monotonic() - t0, 6)
        self._account(key, row)
        return row

    def _due(self, kind: str, meta: TopicMeta, log: PartitionLog) -> Any:
        """What a pass would do now (cheap, no lock), or None when none is due."""
        now = clock.now_ms()
        cfg = log.config
        if kind == "retention":
            rows = retention.plan(log, cfg, now)
            cold_below = bool(log.tier) and log.tier[0].next_offset <= log.start_offset()
            return rows if rows or cold_below else None
        if kind == "compaction":
            plan = compaction.plan_partition(log, cfg, now)
            return plan if plan["skip"] is None else None
        pre = tier_pass.home(self.data_dir, meta, log.partition).prefix
        tp = tier_pass.plan_partition(log, cfg, now, pre)
        return tp if tp["upload"] or tp["drop"] else None

    def _run(self, kind: str, meta: TopicMeta, log: PartitionLog, plan: Any,
             row: MaintenancePass) -> bool:
        """The pass (its lock held): fills ``row``; False when nothing was left to do."""
        if kind == "retention":
            self.maint.writable()
            start = log.start_offset()
            gone = retention.apply(log, log.config, clock.now_ms())
            if not gone and log.start_offset() == start:
                return False
            freed = sum(r["bytes"] for r in gone)
            row["reclaimed_bytes"] = freed
            row["detail"] = (f"deleted {plural(len(gone), 'segment')} ({_human(freed)}); log "
                             f"start offset {start} -> {log.start_offset()}")
            return True
        if kind == "compaction":
            return self._compact(meta, log, plan, row)
        out = self.maint.tier(meta.name, partitions=[log.partition])
        part = next(iter(out["partitions"]), None)
        if part is None or not (part.get("uploaded") or part.get("local_deleted")):
            return False
        freed = sum(int(g.get("bytes", 0)) for g in part.get("local_deleted", []))
        row["reclaimed_bytes"] = freed
        row["detail"] = (f"copied {plural(len(part.get('uploaded', [])), 'segment')} "
                         f"({_human(part.get('bytes', 0))}) to the cold store, deleted "
                         f"{plural(len(part.get('local_deleted', [])), 'local segment')} "
                         f"({_human(freed)})")
        return True

    def _compact(self, meta: TopicMeta, log: PartitionLog, plan: CompactionPlan,
                 row: MaintenancePass) -> bool:
        size = sum(int(s["bytes"]) for s in plan["segments"])
        threshold = self.cfg.log_cleaner_spark_threshold_bytes
        if self.spark is not None and 0 <= threshold < size:
            row["via"] = "spark"
            parts = self.spark(meta.name, log.partition).get("partitions", [])
            res: dict[str, Any] | None = parts[0] if parts else None
        else:
            row["via"] = "in process"
            done = self.maint.compact(meta.name, [log.partition])
            res = None if not done or done[0].get("skipped") else dict(done[0])
        if res is None:
            return False
        b_in, b_out = int(res.get("bytes_in", 0)), int(res.get("bytes_out", 0))
        row["reclaimed_bytes"] = max(0, b_in - b_out)
        row["detail"] = (f"{row['via']}: dirty ratio {plan['dirty_ratio']:.2f} "
                         f"(min.cleanable.dirty.ratio {log.config.min_cleanable_dirty_ratio}), "
                         f"{res.get('segments_before', 0)} -> "
                         f"{plural(int(res.get('segments_after', 0)), 'segment')}, "
                         f"{res.get('records_in', 0)} -> "
                         f"{plural(int(res.get('records_out', 0)), 'record')}, "
                         f"{_human(b_in)} -> {_human(b_out)}")
        return True

    # ---------------------------------------------------------------- bookkeeping
    def _account(self, key: tuple[str, str, int], row: MaintenancePass) -> None:
        kind, outcome = row["kind"], row["outcome"]
        where = f"{row['topic']}-{row['partition']}"
        self.meter.get("rivven_maintenance_passes_total", kind=kind, outcome=outcome).inc()
        if outcome == "failed":
            with self._mutex:
                before = self._failing.get(key)
                n = before.failures + 1 if before else 1
                delay = min(self.cfg.maintenance_retry_backoff_max_ms,
                            self.cfg.maintenance_retry_backoff_ms * 2 ** min(n - 1, 40)) / 1000
                self._failing[key] = _Failing(n, time.monotonic() + delay, row["detail"])
            row["failures"], row["retry_in_s"] = n, delay
            self.log.warning("background %s of %s failed (%s in a row): %s; next try in %g s",
                             kind, where, n, row["detail"], delay)
        else:
            row["failures"] = 0
            if outcome == "ok":
                self.meter.get("rivven_maintenance_reclaimed_bytes_total",
                               kind=kind).inc(row["reclaimed_bytes"])
                self.log.info("background %s of %s: %s in %.2f s", kind, where, row["detail"],
                              row["seconds"])
                self._succeeded(key, where)
            else:
                self.log.info("background %s of %s skipped: %s", kind, where, row["detail"])
        self._gauge(kind)
        if self.on_pass is not None:
            self.on_pass(row)

    def _succeeded(self, key: tuple[str, str, int], where: str | None) -> None:
        with self._mutex:
            before = self._failing.pop(key, None)
        if before is not None:
            self._gauge(key[0])
            if where is not None:
                self.log.info("background %s of %s succeeded after %s", key[0], where,
                              plural(before.failures, "failure"))

    def _gauge(self, kind: str) -> None:
        with self._mutex:
            n = sum(1 for k in self._failing if k[0] == kind)
        self.meter.get("rivven_maintenance_backoff_partitions", kind=kind).set(n)

    @contextlib.contextmanager
    def _locked(self, topic_id: str, partition: int) -> Iterator[bool]:
        """The partition's maintenance lock, tried once: yields whether it is held."""
        if not self._locks_made:
            guard.make_dirs(self.data_dir, os.path.join(self.data_dir, LOCKS))
            self._locks_made = True
        fd = open_lock_file(lock_path(self.data_dir, topic_id, partition))
        try:
            yield try_lock(fd)
        finally:
            os.close(fd)  # (drops the flock)

    def _clear_stale_locks(self, ids: set[str]) -> None:
        """Lock files of topics no longer in the catalog (deleted), unless held."""
        root = os.path.join(self.data_dir, LOCKS)
        try:
            names = os.listdir(root) if guard.real_dir(root) else []
        except OSError:
            return
        for name in names:
            tid = name.rpartition("-")[0]
            if not name.endswith(".lock") or tid in ids:
                continue
            with contextlib.suppress(OSError):
                fd = guard.open_file(os.path.join(root, name), os.O_RDWR)
                try:
                    if try_lock(fd):
                        os.unlink(os.path.join(root, name))
                finally:
                    os.close(fd)


def _error_line(e: BaseException) -> str:
    """An error as one line: rivven's own say what and the fix; another names its type."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if isinstance(e, RivvenError) else f"{type(e).__name__}: {text}"
