"""Each of the Engine's services built from its collaborators alone, with no Engine in sight,
and doing its job (docs/ARCHITECTURE.md, "The façade and its services"): the parts are the
storage ones an engine hands them — the catalog, the open partitions, a LogFinder."""

from __future__ import annotations

import pytest

from engine import Engine, Record
from engine.counters.meter import Meter
from engine.crypto.topic import OffsetMetadata, Vault
from engine.errors import ReadOnlyError
from engine.fetch.offsets import Offsets
from engine.fetch.positions import Position
from engine.fs.locks import LockWait
from engine.groups.admin import GroupAdmin
from engine.maintenance.admin import Maintenance
from engine.maintenance.keys import Keys
from engine.storage.finder import LogFinder
from engine.storage.partitions import Partitions
from engine.storage.topics import Topics
from engine.tools.admin import Segments
from engine.topic_admin import TopicAdmin
from engine.txn.coordinator import Coordinator
from engine.txn.decisions import Decisions
from engine.txn.hook import PartitionProducers
from engine.txn.transactions import Transactions
from engine.wal.owner import WalOwner
from engine.wal.recovery import Recovery


@pytest.fixture
def filled(data_dir):
    """A data dir with a topic of 2 partitions (30 records each), a group's committed offsets
    and a committed transaction, written by an Engine that is closed again."""
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", 2, {"segment.bytes": "1024"})
        for p in (0, 1):
            for j in range(0, 30, 5):  # (batches of 5: several segments of 1 KiB)
                eng.produce("t", [Record(key=b"k%d" % i, value=b"v" * 100)
                                  for i in range(j, j + 5)], p)
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.commit({("t", 0): 10, ("t", 1): 20})
        c.close()
        tp = eng.producer(transactional_id="tx")
        tp.begin()
        tp.produce("t", [Record(value=b"in a transaction")], partition=0)
        tp.commit()
        tp.close()
    return data_dir


class Parts:
    """The storage parts of an open data dir (what Engine.__init__ builds for its services)."""

    def __init__(self, data_dir: str, writable: bool = False) -> None:
        self.vault = Vault(None)
        self.topics = Topics(data_dir, LockWait(), self.vault)
        self.vault.lookup = self.topics.catalog.get
        self.partitions = Partitions(data_dir, writable, "none", producers=PartitionProducers)
        self.find = LogFinder(self.topics, self.partitions, lambda log: None)

    def close(self) -> None:
        self.partitions.forget_all()


@pytest.fixture
def parts(filled):
    p = Parts(filled)
    yield p
    p.close()


def refuse() -> None:
    raise ReadOnlyError("read-only")


def test_offsets_alone(parts):
    offsets = Offsets(parts.find)
    rows = offsets.list_offsets("t")
    assert [(r["partition"], r["start_offset"]) for r in rows] == [(0, 0), (1, 0)]
    assert offsets.end("t") == {0: 32, 1: 30}  # (partition 0: the record and its marker)
    assert offsets.end("t", "read_committed") == {0: 32, 1: 30}
    assert offsets.resolve("t", 1, Position("from_end", 5)) == 25
    assert offsets.unopened("t") == {0: (0, 32), 1: (0, 30)}


def test_groups_alone(parts):
    offsets = Offsets(parts.find)
    groups = GroupAdmin(parts.find.topics.data_dir, True, offsets.of_topic, offsets.for_time,
                        metadata=OffsetMetadata(parts.vault.metadata_keys), writable=refuse)
    assert groups.names() == ["g"]
    d = groups.describe("g")
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in d["partitions"]] == \
        [(0, 10, 22), (1, 20, 10)]
    assert groups.list_groups()[0]["total_lag"] == 32
    plan = groups.reset_offsets("g", {"t": [1]}, Position("beginning"))
    assert [(r["prior"], r["new"]) for r in plan["partitions"]] == [(20, 0)]
    with pytest.raises(ReadOnlyError):  # a change asks the writable() it was handed
        groups.reset_offsets("g", {"t": [1]}, "to-earliest", execute=True)


def test_transactions_alone(parts):
    coordinator = Coordinator(parts.find.topics.data_dir, parts.find.txn_log_of)
    txn = Transactions(coordinator, Decisions(parts.find.topics.data_dir, coordinator),
                       parts.find, writable=refuse)
    (row,) = txn.list_transactions(all=True)
    assert row["transactional_id"] == "tx" and row["state"] == "CompleteCommit"
    assert txn.ids() == ["tx"]
    assert {r["partition"] for r in txn.producers("t")} == {0}
    assert txn.find_hanging("t") == []
    assert txn.decision("k") == {"key": "k", "committed": None, "pending": None, "ended": [],
                                 "aborts": {}}
    with pytest.raises(ReadOnlyError):
        txn.abort("tx")


def test_maintenance_and_keys_alone(parts):
    data_dir = parts.find.topics.data_dir
    m = Maintenance(data_dir, parts.find, Meter(None, enabled=False), writable=refuse)
    (plan,) = m.compaction_plan("t", [0])
    assert plan["partition"] == 0 and plan["skip"].startswith("cleanup.policy is 'delete'")
    assert [r["partition"] for r in m.tier_status("t")] == [0, 1]
    assert m.apply_retention("t", dry_run=True) == []
    with pytest.raises(ReadOnlyError):
        m.delete_records("t", {0: 5})
    offsets = Offsets(parts.find)
    groups = GroupAdmin(data_dir, True, offsets.of_topic, offsets.for_time)
    keys = Keys(data_dir, parts.topics, parts.vault, parts.find, groups, writable=refuse)
    assert keys.status() == []  # no topic ever encrypted
    with pytest.raises(ReadOnlyError):
        keys.rotate("t")


def test_segments_and_topic_admin_alone(parts):
    data_dir = parts.find.topics.data_dir
    segments = Segments(data_dir, parts.find, parts.vault, LockWait(), writable=refuse)
    rows = segments.list_segments("t", 1)
    assert len(rows) > 1 and sum(r["records"] for r in rows) == 30
    report = segments.verify()
    assert report["ok"] and report["records"] == 62  # (60, the transaction's and its marker)
    topics = TopicAdmin(data_dir, parts.topics, parts.find, writable=refuse)
    d = topics.describe("t")
    assert [p["end_offset"] for p in d["partition_info"]] == [32, 30]
    with pytest.raises(ReadOnlyError):
        topics.delete("t")


def test_recovery_alone(filled):
    parts = Parts(filled, writable=True)
    try:
        from engine.settings import Settings

        wal = WalOwner(filled, Settings.parse({"wal.sync": "none"}), parts.partitions, False)
        recovery = Recovery(filled, wal, parts.find)
        assert recovery.streams() == []  # (the engine closed cleanly: its WAL is gone)
        assert recovery.replay()["streams"] == []
        assert recovery.repairs() == []
        done = recovery.checkpoint_all()
        assert {(c["topic"], c["partition"]) for c in done["checkpoints"]} == {("t", 0), ("t", 1)}
        wal.close(delete=True)
    finally:
        parts.close()


def test_every_earlier_name_on_the_engine_reaches_its_service(data_dir):
    """Engine's Forwards (names earlier releases documented) each resolve to the service's
    own bound method, and the façade's copies of lower layers' constants agree with them."""
    import engine.engine as facade
    from engine.descriptors import Forward
    from engine.txn import coordinator, isolation

    assert facade.READ_UNCOMMITTED == isolation.READ_UNCOMMITTED
    assert facade.DEFAULT_TIMEOUT_MS == coordinator.DEFAULT_TIMEOUT_MS
    names = {n: f for n, f in vars(Engine).items() if isinstance(f, Forward)}
    assert len(names) >= 30
    with Engine.open(data_dir) as eng:
        for name, f in names.items():
            got = getattr(eng, name)
            service = getattr(eng, f.service)
            assert callable(got) and got.__self__ is service, name
            assert got.__func__ is getattr(type(service), f.name), name
