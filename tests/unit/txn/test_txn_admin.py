"""engine/txn/hanging.py through the Engine: the producer state of partitions
(``describe_producers``), hanging transactions (``find_hanging_transactions``, KIP-664) and
aborting one no transactional id will end (``abort_hanging_transaction``). Real files, real
processes where a transaction must be left open or cut short."""

import os
import shutil
import subprocess
import sys

import pytest
import txn_view
from helpers import ROOT

from engine import Engine, InvalidArgument, ReadOnlyError, Record
from engine import clock as clock_mod
from engine.errors import UnknownPartition
from engine.txn import hanging
from engine.txn.txn_store import TxnStore

ENV = dict(os.environ, PYTHONPATH=str(ROOT))
T0 = 1_700_000_000_000

# a transaction of "billing-1" left open: the process dies (kill -9) with it, or at a failpoint
LEFT_OPEN = """
import os, sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1])
tp = eng.producer(transactional_id="billing-1")
tp.begin()
tp.produce("t", [Record(value=b"a"), Record(value=b"b")], partition=1)
tp.produce("u", [Record(value=b"c")])
if sys.argv[2] == "commit":
    tp.commit()
os.kill(os.getpid(), 9)
"""


def recs(*values, ts=None):
    return [Record(value=v, timestamp=ts) for v in values]


@pytest.fixture
def eng(data_dir):
    e = Engine.open(data_dir)
    e.create_topic("t", partitions=2)
    e.create_topic("u")
    yield e
    e.close()


def leave_open(data_dir, action="die", failpoint=None):
    env = dict(ENV, RIVVEN_FAILPOINT=failpoint) if failpoint else ENV
    r = subprocess.run([sys.executable, "-c", LEFT_OPEN, data_dir, action], env=env, cwd=ROOT,
                       capture_output=True, timeout=120)
    assert r.returncode == -9, r.stderr.decode()


# ---------------------------------------------------------------- describe_producers
def test_describe_producers_shows_each_producer_of_each_partition(eng, data_dir):
    eng.produce("t", recs(b"plain"), partition=0)  # format 1: no producer
    p = eng.producer()
    p.produce("t", recs(b"i0", b"i1", b"i2", ts=T0), partition=0)
    tp = eng.producer(transactional_id="billing-1")
    tp.begin()
    tp.produce("t", recs(b"x", ts=T0 + 5), partition=1)
    rows = eng.txn.producers("t")
    assert [(r["partition"], r["producer_id"], r["epoch"], r["last_sequence"], r["last_offset"],
             r["last_timestamp"], r["txn_start_offset"]) for r in rows] == [
        (0, p.producer_id, 0, 2, 3, T0, None),
        (1, tp.producer_id, tp.epoch, 0, 0, T0 + 5, 0)]
    assert all(r["topic"] == "t" and r["last_seen_ms"] >= r["last_timestamp"] for r in rows)
    assert eng.txn.producers("t", [0]) == rows[:1]
    # another process (read-only, no lock) sees the same from the log
    with Engine.open(data_dir, read_only=True) as ro:
        assert [{k: v for k, v in r.items() if k != "last_seen_ms"}
                for r in ro.txn.producers("t")] == \
               [{k: v for k, v in r.items() if k != "last_seen_ms"} for r in rows]
    tp.commit()  # the marker ends the transaction and forgets the batches (new epoch)
    (row,) = eng.txn.producers("t", [1])
    assert (row["epoch"], row["last_sequence"], row["last_offset"], row["last_timestamp"],
            row["txn_start_offset"]) == (tp.epoch, None, 1, None, None)


def test_describe_producers_of_a_partition_that_does_not_exist(eng):
    with pytest.raises(UnknownPartition, match="partition 5 does not exist"):
        eng.txn.producers("t", [5])


# ---------------------------------------------------------------- find_hanging_transactions
def test_nothing_hangs_while_a_transaction_is_known_and_young(eng):
    assert eng.txn.find_hanging() == []
    tp = eng.producer(transactional_id="billing-1")
    tp.begin()
    tp.produce("t", recs(b"x"), partition=1)
    tp.produce("u", recs(b"y"))
    assert eng.txn.find_hanging() == []
    tp.commit()
    assert eng.txn.find_hanging() == []


def test_a_transaction_open_past_its_timeout_hangs_until_aborted(eng, monkeypatch):
    tp = eng.producer(transactional_id="billing-1", transaction_timeout_ms=1000)
    tp.begin()
    tp.produce("t", recs(b"x", b"y"), partition=1)
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 1001)
    (row,) = eng.txn.find_hanging()
    assert {k: row[k] for k in ("topic", "partition", "producer_id", "epoch", "start_offset",
                                "transactional_id", "state", "timeout_ms", "reason")} == {
        "topic": "t", "partition": 1, "producer_id": tp.producer_id, "epoch": tp.epoch,
        "start_offset": 0, "transactional_id": "billing-1", "state": "Ongoing",
        "timeout_ms": 1000, "reason": "timed-out"}
    assert row["age_ms"] >= 1001
    assert eng.txn.find_hanging("u") == []  # (another topic)
    eng.txn.abort("billing-1")
    assert eng.txn.find_hanging() == []


def test_a_transaction_no_id_knows_is_found_in_another_process(eng, data_dir):
    """Its transactional id's state file is lost: nothing will end the transaction, and
    read_committed readers stop at its first offset for good."""
    eng.produce("t", recs(b"before"), partition=1)
    tp = eng.producer(transactional_id="billing-1")
    tp.begin()
    tp.produce("t", recs(b"x"), partition=1)
    os.remove(TxnStore(data_dir).path("billing-1"))
    with Engine.open(data_dir, read_only=True) as ro:
        (row,) = ro.txn.find_hanging("t", [1])
        assert (row["producer_id"], row["start_offset"], row["transactional_id"], row["state"],
                row["reason"]) == (tp.producer_id, 1, None, None, "unknown-producer")
        assert ro.end_offsets("t", "read_committed") == {0: 0, 1: 1}


def test_a_transaction_its_id_no_longer_has_open_is_found(eng, data_dir):
    """The id's state went back (a backup restored): the id is Empty, the partition still has
    the transaction open."""
    tp = eng.producer(transactional_id="billing-1")
    path = TxnStore(data_dir).path("billing-1")
    shutil.copy(path, path + ".bak")
    tp.begin()
    tp.produce("u", recs(b"x"))
    os.replace(path + ".bak", path)
    (row,) = eng.txn.find_hanging()
    assert (row["topic"], row["transactional_id"], row["state"], row["reason"]) == (
        "u", "billing-1", "Empty", "not-in-transaction")


def test_a_prepared_transaction_is_known_not_hanging(data_dir):
    """Killed after its PrepareCommit: the id's state has it (with the markers' epoch): it is
    known, and recovery finishes it."""
    with Engine.open(data_dir) as e:
        e.create_topic("t", partitions=2)
        e.create_topic("u")
    leave_open(data_dir, "commit", failpoint="txn.after_prepare")
    with Engine.open(data_dir, read_only=True) as ro:
        assert ro.txn.list_transactions()[0]["state"] == "PrepareCommit"
        assert len(ro.txn.producers("t", [1])) == 1
        assert ro.txn.find_hanging() == []


def test_a_transaction_that_ends_between_the_two_looks_is_not_reported(eng):
    """The states are read after the partitions: a commit in between makes the transaction
    look unknown to the states read before it; the second look at the partition shows it
    ended, so it is not reported."""
    tp = eng.producer(transactional_id="billing-1")
    tp.begin()
    tp.produce("t", recs(b"x"), partition=1)
    logs = [eng._find.partition("t", 1)]

    def states_then_commit():
        rows = [dict(r, state="Empty") for r in eng.txn.list_transactions(all=True)]  # (stale)
        tp.commit()
        return rows

    assert hanging.find_hanging(logs, states_then_commit, clock_mod.now_ms()) == []
    # the failing half: the same stale look without the commit in between is reported
    tp.begin()
    tp.produce("t", recs(b"y"), partition=1)
    (row,) = hanging.find_hanging(logs, lambda: [dict(r, state="Empty")
                                               for r in eng.txn.list_transactions(all=True)],
                                clock_mod.now_ms())
    assert row["reason"] == "not-in-transaction"


# ---------------------------------------------------------------- abort_hanging_transaction
def test_a_hanging_transaction_is_aborted_by_a_marker(data_dir):
    with Engine.open(data_dir) as e:
        e.create_topic("t", partitions=2)
        e.create_topic("u")
        e.produce("t", recs(b"before"), partition=1)
    leave_open(data_dir)  # killed with its transaction open in t-1 and u-0
    os.remove(TxnStore(data_dir).path("billing-1"))  # ... and its state lost
    with Engine.open(data_dir) as e:
        e.produce("t", recs(b"after"), partition=1)
        assert {(r["topic"], r["partition"]) for r in e.txn.find_hanging()} == {
            ("t", 1), ("u", 0)}
        assert e.end_offsets("t", "read_committed")[1] == 1  # stuck at the open transaction
        row = e.txn.abort_hanging("t", 1, 1)
        assert (row["reason"], row["start_offset"], row["marker_offset"]) == (
            "unknown-producer", 1, 4)
        assert txn_view.markers(e, "t", 1) == [("ABORT", row["producer_id"], row["epoch"] + 1)]
        assert [r.value for r in e.read("t", 1, 0, isolation_level="read_committed")] == [
            b"before", b"after"]
        assert e.end_offsets("t", "read_committed")[1] == 5
        assert [(r["topic"], r["partition"]) for r in e.txn.find_hanging()] == [
            ("u", 0)]
        with pytest.raises(InvalidArgument, match="no hanging transaction starts at offset 1"):
            e.txn.abort_hanging("t", 1, 1)  # (not twice)
    with Engine.open(data_dir, read_only=True) as ro:
        assert [r.value for r in ro.read("t", 1, 0, isolation_level="read_committed")] == [
            b"before", b"after"]
        with pytest.raises(ReadOnlyError):
            ro.txn.abort_hanging("u", 0, 0)


def test_a_transaction_its_id_knows_is_aborted_through_the_id(eng, monkeypatch):
    tp = eng.producer(transactional_id="billing-1", transaction_timeout_ms=1000)
    tp.begin()
    tp.produce("t", recs(b"x"), partition=1)
    with pytest.raises(InvalidArgument, match="no hanging transaction starts at offset 0 in "
                                              r"t-1 \(open there: 0\)"):
        eng.txn.abort_hanging("t", 1, 0)  # young and known: not hanging
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 1001)
    with pytest.raises(InvalidArgument, match="abort it through its id"):
        eng.txn.abort_hanging("t", 1, 0)  # timed out: its id aborts it everywhere
    assert txn_view.markers(eng, "t", 1) == []
