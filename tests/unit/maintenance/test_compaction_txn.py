"""Compaction of a transactional topic, by Kafka's cleaner rules (docs/COMPACTION.md,
"Transactions"): aborted records go, a marker stays until its delete horizon (and while it
is its producer's last batch), each cleaned segment's ``.txnindex`` names only markers it
keeps, and ``segment verify`` agrees with all of it. (The Spark job under the same rules:
tests/spark/test_spark.py.)"""

import pytest
from helpers import run_rivven
from helpers.compaction import transactions

from engine import Engine, Record
from engine import clock as clock_mod
from engine.segments import filenames
from engine.segments.txn_index import read_entries

RC, RU = "read_committed", "read_uncommitted"
HOUR = 3600_000
CFG = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}


def headers(eng, topic="t"):
    log = eng._path.log_for(eng.topic(topic), 0)
    return [h for h, _ in log.headers(log.start_offset(), log.end_offset(), lambda h: False)]


def markers(eng):
    return [h.base_offset for h in headers(eng) if h.is_control]


def findings(eng):
    rep = eng.segments.verify([])
    return [f["message"] for f in rep["findings"]]


def txnindex_entries(data_dir):
    pdir = filenames.partition_dir(data_dir, "t", 0)
    bases = filenames.segment_bases(pdir)
    return {b: read_entries(filenames.path(pdir, b, filenames.TXNINDEX), b)[0] for b in bases}


def check_reads(eng, want):
    got = {r.key: r.value for r in eng.read("t", 0, 0, 10_000, isolation_level=RC)}
    assert got == want
    # aborted records are gone from the log, not just hidden
    assert {r.key: r.value for r in eng.read("t", 0, 0, 10_000, isolation_level=RU)} == want


@pytest.fixture
def now(monkeypatch):
    t = [clock_mod.now_ms()]
    monkeypatch.setattr(clock_mod, "now_ms", lambda: t[0])
    return t


def test_verify_finds_nothing_wrong_after_passes_over_a_transactional_topic(data_dir):
    """The issue's reproduction: 40 transactions, every third aborted, three passes."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**CFG, "delete.retention.ms": "0"})
        want = transactions(eng)
        for _ in range(3):
            eng.maintenance.compact("t", force=True)
            assert findings(eng) == []
            check_reads(eng, want)
    r = run_rivven(data_dir, "segment", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    with Engine.open(data_dir, read_only=True) as eng:
        check_reads(eng, want)


def test_markers_stay_until_delete_retention_ms_after_the_pass_that_cleaned_them(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**CFG, "delete.retention.ms": str(HOUR)})
        want = transactions(eng)
        before = markers(eng)
        assert len(before) == 40
        batches = headers(eng)  # (one record each)
        out = eng.maintenance.compact("t")[0]
        end = out["plan"]["cleanable_end"]
        assert before[-1] < end  # every marker is in the cleaned range
        # markers are counted apart from records
        assert (out["markers_in"], out["markers_kept"]) == (40, 40)
        assert out["records_in"] == sum(1 for h in batches if h.base_offset < end) - 40
        # the first pass leaves no data of any transaction, and every marker
        assert not [h for h in headers(eng) if h.is_transactional and not h.is_control]
        assert markers(eng) == before
        # each kept ABORT marker keeps its .txnindex entry, beside it
        entries = txnindex_entries(data_dir)
        aborts = sorted(e.last_offset for es in entries.values() for e in es)
        assert aborts == before[2::3] and findings(eng) == []
        check_reads(eng, want)
        assert eng.maintenance.explain_compaction("t")[0]["markers"] == {
            "count": 40, "removable_now": 0, "kept_as_last": 1}
        r = run_rivven(data_dir, "compaction", "explain", "t")
        assert b"transaction markers: 40; 0 past their delete horizon" in r.stdout, r.stdout
        now[0] += HOUR // 2
        eng.maintenance.compact("t", force=True)  # before the horizon: all still there
        assert markers(eng) == before and findings(eng) == []
        now[0] += HOUR // 2
        # past the horizon: the pass runs although nothing is dirty, and removes every
        # marker but the producer's last batch (its epoch fences the producer's zombies)
        assert not eng.maintenance.compaction_plan("t")[0]["skip"]
        assert eng.maintenance.explain_compaction("t")[0]["markers"] == {
            "count": 40, "removable_now": 39, "kept_as_last": 1}
        eng.maintenance.compact("t")
        assert markers(eng) == [before[-1]]
        assert all(not es for es in txnindex_entries(data_dir).values())
        assert findings(eng) == []
        check_reads(eng, want)
        # once the producer expired, its last marker goes too
        eng.alter_topic_config("t", {"producer.id.expiration.ms": "1000"})
        now[0] += 2000
        eng.produce("t", [Record(key=b"late", value=b"1")], partition=0)
        eng.checkpoint()  # (expires the producer)
        eng.maintenance.compact("t", force=True)
        assert markers(eng) == [] and findings(eng) == []
    with Engine.open(data_dir, read_only=True) as eng:
        check_reads(eng, {**want, b"late": b"1"})


def test_a_marker_is_kept_when_its_data_lies_in_an_uncleaned_segment(data_dir, now):
    """A pass never removes a marker it does not cover, and the marker's .txnindex entry stays
    where it is: read_committed readers still skip the aborted records after it."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**CFG, "delete.retention.ms": "0"})
        p = eng.producer(transactional_id="y")
        p.begin()
        p.produce("t", [Record(key=b"a", value=b"aborted")], partition=0)
        eng.checkpoint()
        for i in range(12):  # a plain producer seals segments after the open transaction
            eng.produce("t", [Record(key=b"z%d" % i, value=b"." * 100)], partition=0)
        plan = eng.maintenance.compaction_plan("t", force=True)[0]
        assert plan["held_by_transaction"] is not None  # nothing from the open txn on
        p.abort()
        p.close()
        eng.produce("t", [Record(key=b"a", value=b"committed")], partition=0)
        eng.checkpoint()
        for _ in range(2):
            eng.maintenance.compact("t", force=True)
            assert findings(eng) == []
            assert [r.value for r in eng.read("t", 0, 0, 100, isolation_level=RC)
                    if r.key == b"a"] == [b"committed"]


def test_the_spark_launcher_accepts_a_range_whose_every_transaction_aborted(data_dir, tmp_path):
    """Its sanity check expects the range's last record to survive; the records of aborted
    transactions never do, so a range of aborted transactions leaves none (and is right)."""
    from engine.maintenance.cleaner import TxnRules, write_group
    from engine.spark import submit

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**CFG, "delete.retention.ms": "0"})
        p = eng.producer(transactional_id="x")
        for _ in range(20):
            p.begin()
            p.produce("t", [Record(key=b"k", value=b"." * 60)], partition=0)
            p.abort()
        p.begin()  # open: the cleanable range ends before it
        p.produce("t", [Record(key=b"k", value=b"open")], partition=0)
        eng.checkpoint()
        (plan,) = eng.maintenance.compaction_plan("t", force=True)
        assert plan["segments"] and not plan["skip"]
        rows = [write_group(g, lambda offs: [False] * len(offs), str(tmp_path / "out"),
                            txn=TxnRules.of_plan(plan)) for g in plan["groups"]]
        assert sum(r["records_out"] for r in rows) == 0 < sum(r["markers_kept"] for r in rows)
        submit._sanity(plan, rows)
        p.abort()
        p.close()
