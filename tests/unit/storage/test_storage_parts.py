"""The parts of a partition, each on its own: the loader returns what it loaded, the append
pipeline and reads need only their narrow interfaces (``AppendOwner``, ``ReadSource``), the
producer state's files go through the log, and storage's modules import one another without
a circle."""

from __future__ import annotations

import ast
import os
from types import SimpleNamespace

import pytest
from helpers import ROOT

from engine import Engine, Record, clock
from engine.errors import OffsetOutOfRange
from engine.format.encode import encode_batch
from engine.segments import checkpoint, filenames, snapshot_files
from engine.segments.segment_set import SegmentSet
from engine.segments.tier_manifest import Home
from engine.segments.txn_index import AbortedTxn, read_entries
from engine.storage import loader, reader
from engine.storage.config import TopicConfig
from engine.storage.loader import LoadedLog
from engine.storage.log import PartitionLog
from engine.storage.partition_lock import PartitionLock
from engine.storage.pipeline import AppendPipeline
from engine.storage.ports import UNCOUNTED
from engine.storage.tier_view import TierView


def pdir(data_dir: str) -> str:
    return filenames.partition_dir(data_dir, "t", 0)


def parts(directory: str, writable: bool) -> tuple[SegmentSet, PartitionLock, TierView]:
    segs = SegmentSet(directory, "t", 0, writable, [], None)
    lock = PartitionLock(directory, "t", 0, writable)
    tier = TierView(directory, lambda: Home("t", "", 0, ""))
    return segs, lock, tier


def test_the_loader_returns_the_persisted_start_and_fills_the_views_it_is_handed(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "200"})
        for i in range(10):
            eng.produce("t", [Record(value=b"v%d" % i)], partition=0)
        eng.delete_records("t", {0: 4})
    d = pdir(data_dir)
    for writable in (False, True):
        segs, lock, tier = parts(d, writable)
        try:
            got = loader.load(d, segs, lock, tier, "", writable)
            assert got == LoadedLog(4, checkpoint.stamp(d))
            assert segs.active.next_offset == 10 and segs.bases[0] <= 4
        finally:
            segs.close()
            lock.close()
    with pytest.raises(AttributeError):
        got.log_start = 0  # type: ignore[misc]  # (frozen: the log applies it, nobody edits it)
    os.unlink(checkpoint.path(d))
    segs, lock, tier = parts(d, True)
    try:
        assert loader.load(d, segs, lock, tier, "", True) == LoadedLog(0, None)
    finally:
        segs.close()
        lock.close()


class Owner:
    """The least an append pipeline may be handed: its AppendOwner members and nothing else
    (no WAL: each batch is fsynced in its segment)."""

    def __init__(self, segs: SegmentSet, lock: PartitionLock) -> None:
        self.topic, self.partition, self.topic_id = "t", 0, b"\0" * 16
        self.config = TopicConfig.from_overrides({"segment.bytes": "300"})
        self.wal = None
        self.wal_sync = "always"
        self.holds = self.hot = self.producers = None
        self.counts = UNCOUNTED
        self.segs, self.lock = segs, lock
        self.dirty = self.took = 0

    def mark_dirty(self) -> None:
        self.dirty += 1

    def flock_taken(self) -> int:
        self.took += 1
        return self.segs.active.next_offset

    def sealer(self) -> None:
        return None

    def sealing(self, sealed: bool, offset: int) -> None:
        assert not sealed  # (nothing sealed: a plaintext topic's ranges stay empty)

    def roll(self):
        return self.segs.roll()


def test_the_pipeline_appends_through_its_narrow_owner_alone(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    d = pdir(data_dir)
    segs, lock, tier = parts(d, True)
    loader.load(d, segs, lock, tier, "", True)
    owner = Owner(segs, lock)
    pipe = AppendPipeline(owner, lock, segs)  # type: ignore[arg-type]  # (a stand-in)
    try:
        now = clock.now_ms()  # (recent: retention leaves them when the engine opens them)
        bases = [pipe.append(encode_batch([None] * 3, [b"x" * 40] * 3, now)) for _ in range(6)]
        assert bases == [0, 3, 6, 9, 12, 15]
        assert owner.dirty == 6 and owner.took >= 1
        assert len(segs.bases) > 1  # rolled by the owner, at the limit its config set
        view = reader.View(0, segs.active.next_offset, list(segs.bases), segs.active, [], [])
        source = SimpleNamespace(topic="t", partition=0, hot=None, counts=UNCOUNTED,
                                 tier_error=None, view=lambda: view, reload_view=lambda: view,
                                 sealed=segs.sealed, cold_segment=None)
        got = [r.header.base_offset for r in reader.batches(source, 4)]  # type: ignore[arg-type]
        assert got == [3, 6, 9, 12, 15]
        with pytest.raises(OffsetOutOfRange, match="out of range for t-0: valid offsets are 0..18"):
            next(reader.batches(source, 19))  # type: ignore[arg-type]
    finally:
        segs.close()
        lock.close()
    with Engine.open(data_dir) as eng:
        assert [r.offset for r in eng.read("t", 0, 0, 100)] == list(range(18))


def test_the_producer_state_files_are_written_through_the_log(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "200"})
        meta = eng.topic("t")
    d = pdir(data_dir)
    log = PartitionLog(d, "t", 0, meta.typed, writable=True, topic_id=bytes.fromhex(meta.id))
    try:
        for _ in range(6):
            log.append(encode_batch([None] * 2, [b"y" * 30] * 2, clock.now_ms()))
        bases = log.view().bases
        assert len(bases) > 2
        log.write_snapshot(5, b"state at 5")
        log.write_snapshot(9, b"state at 9")
        assert log.snapshots() == [5, 9] == snapshot_files.offsets(d)
        assert log.read_snapshot(9) == (b"state at 9", snapshot_files.path(d, 9))
        log.delete_snapshots([5, 7])  # (a missing one is fine)
        assert log.snapshots() == [9]
        # each abort goes to the segment holding its marker; those at or past ``end`` wait
        aborts = [AbortedTxn(1, 0, 1, 0), AbortedTxn(2, 1, bases[1], 2),
                  AbortedTxn(3, 4, 11, 4)]
        log.index_aborts(aborts, end=11)
        assert read_entries(filenames.path(d, bases[0], filenames.TXNINDEX), bases[0])[0] == \
            aborts[:1]
        assert read_entries(filenames.path(d, bases[1], filenames.TXNINDEX), bases[1])[0] == \
            aborts[1:2]
        assert list(log.aborted_txns(0)) == aborts[:2]
        assert list(log.aborted_txns(bases[1])) == aborts[1:2]
    finally:
        log.close()


def storage_imports() -> dict[str, set[str]]:
    """``{module: the engine.storage modules it imports}`` (inside functions and under
    TYPE_CHECKING too), read with ``ast``."""
    files = sorted((ROOT / "engine" / "storage").glob("*.py"))
    known = {f"engine.storage.{f.stem}" for f in files} | {"engine.storage"}
    graph: dict[str, set[str]] = {}
    for f in files:
        mod = "engine.storage" if f.stem == "__init__" else f"engine.storage.{f.stem}"
        found = graph[mod] = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    pkg = ["engine", "storage"][: 3 - node.level]
                    base = ".".join(pkg + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                names = [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for target in names:
                while target not in known and "." in target:  # a name from a module
                    target = target.rpartition(".")[0]
                if target in known and target != mod:
                    found.add(target)
    return graph


def test_storage_has_no_import_circle_and_txn_names_no_partition_file():
    graph = storage_imports()
    # (the walk sees real edges: the log composes the others, the engine's set opens logs)
    assert {"engine.storage.loader", "engine.storage.pipeline", "engine.storage.reader"} <= \
        graph["engine.storage.log"] and "engine.storage.log" in graph["engine.storage.partitions"]

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        for n in graph.get(a, ()):
            if n == b:
                return True
            if n not in seen:
                seen.add(n)
                if reaches(n, b, seen):
                    return True
        return False

    circles = sorted(m for m in graph if reaches(m, m, set()))
    assert circles == [], f"modules of engine/storage in an import circle: {circles}"
    # the producer state keeps its files through the log's calls, never by path
    for name in ("hook.py", "isolation.py", "snapshot.py"):
        src = (ROOT / "engine" / "txn" / name).read_text()
        for word in ("log.dir", "filenames", "durable", "TxnIndex(", "os.unlink", "open("):
            assert word not in src, f"engine/txn/{name} names a partition file ({word})"
