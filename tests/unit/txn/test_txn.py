"""Transactions in one process: the coordinator's state machine, markers, epochs, fencing,
timeouts, group offsets (KIP-447), recovery; the transactional producer's call order.
(Crashes and several processes: tests/crash/test_txn_crash.py.)"""

import json
import os

import pytest
import txn_view
from helpers import flip

from engine import (
    ConsumerFenced,
    Engine,
    InvalidArgument,
    InvalidTxnState,
    ProducerFenced,
    Record,
    RivvenError,
    StorageError,
)
from engine import clock as clock_mod
from engine.errors import DamagedMetadata
from engine.format.records import MAX_EPOCH
from engine.txn.txn_store import TxnStore


def recs(*values):
    return [Record(value=v) for v in values]


@pytest.fixture
def eng(data_dir):
    e = Engine.open(data_dir)
    e.create_topic("out", partitions=2)
    e.create_topic("audit", partitions=1)
    e.create_topic("in", partitions=2)
    yield e
    e.close()


def state_file(data_dir, tid):
    return TxnStore(data_dir).path(tid)


def test_commit_writes_format_2_batches_then_one_commit_marker_per_partition(eng):
    tp = eng.producer(transactional_id="billing-1")
    pid, epoch = tp.producer_id, tp.epoch
    tp.begin()
    assert tp.produce("out", recs(b"a", b"b"), partition=0) == [(0, 0), (0, 1)]
    tp.produce("out", recs(b"c"), partition=0)
    tp.produce("audit", recs(b"x"))
    tp.send_offsets("billing", {("in", 0): 42, ("in", 1): 7})
    # before the commit: the state names every partition and the offsets, durably
    (row,) = eng.txn.list_transactions()
    assert row["state"] == "Ongoing" and row["partitions"] == [["out", 0], ["audit", 0]]
    assert row["offsets"] == {"billing": [["in", 0, 42], ["in", 1, 7]]}
    assert row["age_ms"] >= 0 and row["producer_id"] == pid and row["epoch"] == epoch
    with pytest.raises(RivvenError):  # nothing committed yet
        eng.groups.committed("billing")
    tp.commit()
    assert txn_view.batches(eng, "out", 0) == [
        ("data", pid, epoch, 0, 1, 0), ("data", pid, epoch, 2, 2, 2),
        ("COMMIT", pid, epoch + 1, 3, 3, -1)]
    assert txn_view.batches(eng, "audit", 0) == [("data", pid, epoch, 0, 0, 0),
                                                 ("COMMIT", pid, epoch + 1, 1, 1, -1)]
    assert txn_view.batches(eng, "out", 1) == []  # never in the transaction: no marker
    assert eng.groups.committed("billing") == {("in", 0): 42, ("in", 1): 7}
    assert eng.txn.list_transactions() == []
    (row,) = eng.txn.list_transactions(all=True)
    assert row["state"] == "CompleteCommit" and row["partitions"] == [] and row["age_ms"] is None
    # KIP-890: the producer goes on with the markers' epoch, sequences from 0
    assert (tp.producer_id, tp.epoch) == (pid, epoch + 1)
    tp.begin()
    tp.produce("out", recs(b"d"), partition=0)
    tp.commit()
    assert txn_view.batches(eng, "out", 0)[-2:] == [("data", pid, epoch + 1, 4, 4, 0),
                                                    ("COMMIT", pid, epoch + 2, 5, 5, -1)]
    assert txn_view.committed_values(eng, "out", 0) == [b"a", b"b", b"c", b"d"]


def test_abort_writes_abort_markers_and_commits_no_offsets(eng):
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"a"), partition=1)
    tp.send_offsets("g", {("in", 0): 5})
    tp.abort()
    assert txn_view.markers(eng, "out", 1) == [("ABORT", tp.producer_id, tp.epoch)]
    assert txn_view.fates(eng, "out", 1) == {"aborted"}
    assert txn_view.committed_values(eng, "out", 1) == []
    assert "g" not in eng.groups.names()
    tp.begin()
    tp.produce("out", recs(b"b"), partition=1)
    tp.commit()
    assert txn_view.committed_values(eng, "out", 1) == [b"b"]


def test_split_batches_carry_consecutive_sequences(eng):
    eng.alter_topic_config("out", set={"max.message.bytes": "2000"})
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", [Record(value=b"%03d" % i + b"x" * 200) for i in range(30)], partition=0)
    tp.produce("out", recs(b"last"), partition=0)
    tp.commit()
    data = [b for b in txn_view.batches(eng, "out", 0) if b[0] == "data"]
    assert len(data) > 3
    seq = 0
    for _, _, _, base, last, base_seq in data:
        assert base_seq == seq
        seq += last - base + 1
    assert seq == 31


def test_calls_out_of_order_are_invalid_txn_state(eng):
    tp = eng.producer(transactional_id="t")
    for call in (tp.commit, tp.abort, lambda: tp.produce("out", recs(b"a")),
                 lambda: tp.send_offsets("g", {("in", 0): 1})):
        with pytest.raises(InvalidTxnState, match="begin"):
            call()
    tp.begin()
    with pytest.raises(InvalidTxnState, match="open"):
        tp.begin()
    tp.commit()  # an empty transaction: nothing to write
    assert txn_view.batches(eng, "out", 0) == []
    tp.close()
    with pytest.raises(InvalidTxnState, match="closed"):
        tp.begin()


def test_a_failed_commit_is_finished_by_commit_again_and_nothing_twice(eng, data_dir):
    # a real failure after the commit was decided: the group's offsets log is damaged
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"a"), partition=0)
    tp.produce("out", recs(b"b"), partition=1)
    tp.send_offsets("g", {("in", 0): 3})
    gdir = os.path.join(data_dir, "groups", "g")
    os.makedirs(gdir)
    log = os.path.join(gdir, "offsets.log")
    with open(log, "wb") as f:
        f.write(b"\xff" * 64)
    with pytest.raises(DamagedMetadata):
        tp.commit()
    assert eng.txn.list_transactions()[0]["state"] == "PrepareCommit"
    with pytest.raises(InvalidTxnState, match="commit"):
        tp.produce("out", recs(b"c"))
    with pytest.raises(InvalidTxnState, match="prepared"):
        tp.abort()  # decided: it can only be completed
    os.unlink(log)
    tp.commit()
    for p in (0, 1):  # the markers the failed commit wrote are not written again
        assert txn_view.markers(eng, "out", p) == [("COMMIT", tp.producer_id, tp.epoch)]
        assert txn_view.fates(eng, "out", p) == {"committed"}
    assert eng.groups.committed("g") == {("in", 0): 3}
    tp.begin()
    tp.produce("out", recs(b"d"), partition=0)
    tp.commit()


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(eng):
    old = eng.producer(transactional_id="billing-1")
    old.begin()
    old.produce("out", recs(b"zombie"), partition=0)
    new = eng.producer(transactional_id="billing-1")
    assert (new.producer_id, new.epoch) > (old.producer_id, old.epoch)
    # the old transaction was aborted by the new instance's init
    assert txn_view.fates(eng, "out", 0) == {"aborted"}
    with pytest.raises(ProducerFenced, match="taken over"):
        old.produce("out", recs(b"late"), partition=1)  # a partition new to the transaction
    assert txn_view.batches(eng, "out", 1) == []  # nothing of it was written
    with pytest.raises(ProducerFenced):
        old.commit()
    with pytest.raises(ProducerFenced):
        old.begin()  # fenced for good
    new.begin()
    new.produce("out", recs(b"ok"), partition=1)
    new.commit()
    assert txn_view.committed_values(eng, "out", 1) == [b"ok"]


def test_an_old_instance_cannot_commit_even_without_new_partitions(eng):
    old = eng.producer(transactional_id="t")
    old.begin()
    old.send_offsets("g", {("in", 0): 9})
    eng.producer(transactional_id="t")
    with pytest.raises(ProducerFenced):
        old.commit()
    assert "g" not in eng.groups.names()


def test_a_timed_out_transaction_is_aborted_by_recovery_and_fences_its_producer(
        eng, monkeypatch):
    tp = eng.producer(transactional_id="slow", transaction_timeout_ms=1000)
    tp.begin()
    tp.produce("out", recs(b"a"), partition=0)
    assert eng.txn.recover() == []  # not timed out yet
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 1001)
    assert eng.txn.recover() == [
        {"transactional_id": "slow", "state": "Ongoing", "action": "aborted", "error": None}]
    assert txn_view.fates(eng, "out", 0) == {"aborted"}
    assert eng.txn.recover() == []  # nothing twice
    assert len(txn_view.markers(eng, "out", 0)) == 1
    with pytest.raises(ProducerFenced):
        tp.commit()


def test_a_commit_past_the_timeout_aborts_instead(eng, monkeypatch):
    tp = eng.producer(transactional_id="slow", transaction_timeout_ms=50)
    tp.begin()
    tp.produce("out", recs(b"a"), partition=0)
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 51)
    with pytest.raises(ProducerFenced, match="transaction.timeout.ms"):
        tp.commit()
    assert txn_view.fates(eng, "out", 0) == {"aborted"}
    assert eng.txn.list_transactions()[0:] == []


def test_a_writable_open_aborts_timed_out_transactions(eng, data_dir, monkeypatch):
    tp = eng.producer(transactional_id="slow", transaction_timeout_ms=1000)
    tp.begin()
    tp.produce("out", recs(b"a"), partition=0)
    with Engine.open(data_dir) as other:  # not timed out: left alone
        assert other.last_recovery["transactions"] == []
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 5000)
    with Engine.open(data_dir, read_only=True) as ro:  # a reader changes nothing
        assert ro.txn.list_transactions()[0]["state"] == "Ongoing"
    with Engine.open(data_dir) as other:
        assert [r["action"] for r in other.last_recovery["transactions"]] == ["aborted"]
        assert txn_view.fates(other, "out", 0) == {"aborted"}


def test_offsets_with_a_consumer_are_fenced_by_its_leases(eng):
    eng.produce("in", recs(b"1", b"2"), partition=0)
    c = eng.consumer("g", "in", enable_auto_commit=False)
    assert c.assignment() == [("in", 0), ("in", 1)]
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"x"), partition=0)
    tp.send_offsets("g", {("in", 0): 2}, consumer=c)
    with pytest.raises(InvalidArgument, match="group"):
        tp.send_offsets("other", {("in", 0): 2}, consumer=c)
    # another member joins and takes in-1 over: c lets it go at its next poll
    c2 = eng.consumer("g", "in", enable_auto_commit=False, member_id="zz-second")
    c.poll()
    for _ in range(500):  # (c2 retries the lease every LEASE_RETRY_S)
        c2.poll(timeout_ms=10)
        if c2.assignment():
            break
    assert c.assignment() == [("in", 0)] and c2.assignment() == [("in", 1)]
    with pytest.raises(ConsumerFenced, match="in-1"):
        tp.send_offsets("g", {("in", 1): 1}, consumer=c)
    with pytest.raises(InvalidTxnState, match="abort"):  # the transaction must be aborted
        tp.commit()
    tp.abort()
    assert txn_view.fates(eng, "out", 0) == {"aborted"}
    reset = {("in", 0): 0, ("in", 1): 0}  # (where the consumers started: committed at once)
    assert eng.groups.committed("g") == reset
    # the fence holds at commit too: c lets in-0 go after send_offsets
    tp.begin()
    tp.produce("out", recs(b"y"), partition=0)
    tp.send_offsets("g", {("in", 0): 2}, consumer=c)
    c.close()
    with pytest.raises(ConsumerFenced, match="in-0"):
        tp.commit()
    assert eng.txn.list_transactions()[0]["state"] == "Ongoing"  # nothing was decided
    tp.abort()
    assert eng.groups.committed("g") == reset
    # and a consumer that still holds its partitions commits with the transaction
    tp.begin()
    tp.produce("out", recs(b"z"), partition=0)
    tp.send_offsets("g", {("in", 1): 2}, consumer=c2)
    tp.commit()
    assert eng.groups.committed("g") == {("in", 0): 0, ("in", 1): 2}
    c2.close()


def test_transactional_ids_are_checked_and_percent_encoded(eng, data_dir):
    for bad in ("", ".", "..", "a\nb", "x" * 250, "é" * 40):
        with pytest.raises(InvalidArgument, match="transactional id"):
            eng.producer(transactional_id=bad)
    tp = eng.producer(transactional_id="a/b é.")
    tp.begin()
    tp.produce("out", recs(b"v"), partition=0)
    assert os.path.isfile(os.path.join(data_dir, "txn", "ids", "a%2Fb%20%C3%A9..log"))
    assert [r["transactional_id"] for r in eng.txn.list_transactions()] == ["a/b é."]
    tp.commit()
    with pytest.raises(InvalidArgument, match="transaction.timeout.ms"):
        eng.producer(transactional_id="t", transaction_timeout_ms=0)



def test_a_damaged_state_file_is_reported_never_acted_on(eng, data_dir):
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"v"), partition=0)
    path = state_file(data_dir, "t")
    # both copies of the newest state damaged, and a frame length no writer writes: damage
    for start, _ in txn_view.frames(path)[-2:]:
        flip(path, start + 20)
    with open(path, "ab") as f:
        f.write(b"\xff" * 12)
    with pytest.raises(DamagedMetadata, match="frame length"):
        tp.commit()
    (row,) = eng.txn.list_transactions()
    assert row["state"] == "Damaged" and "frame length" in row["error"]
    with Engine.open(data_dir) as other:  # the open goes on, and says why it did nothing
        (r,) = other.last_recovery["transactions"]
        assert r["action"] == "failed" and "frame length" in r["error"]
    with pytest.raises(DamagedMetadata):
        eng.producer(transactional_id="t")
    assert txn_view.fates(eng, "out", 0) == {"open"}


def test_a_state_that_passes_its_crc_but_not_its_checks_is_damage(eng, data_dir):
    from engine.fs import framelog

    tp = eng.producer(transactional_id="t")
    path = state_file(data_dir, "t")
    doc = json.loads(open(path, "rb").read()[8:txn_view.frames(path)[0][1]])
    doc["epoch"] = -1
    with open(path, "ab") as f:
        f.write(framelog.frame(json.dumps(doc).encode()))
    tp.begin()
    with pytest.raises(DamagedMetadata, match="epoch is -1"):
        tp.produce("out", recs(b"v"), partition=0)
    assert txn_view.batches(eng, "out", 0) == []  # (joining came first, and failed)


def test_one_damaged_copy_of_a_state_changes_nothing(eng, data_dir):
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"v"), partition=0)
    path = state_file(data_dir, "t")
    store = TxnStore(data_dir)
    want = store.read("t")
    (a, b), (c, d) = txn_view.frames(path)[-2:]
    assert b == c and d == os.path.getsize(path)  # the newest state, twice
    for at in (c + 30, a + 30):  # the last copy (a torn append, by its look), then the first
        flip(path, at)
        assert store.read("t") == want
        flip(path, at)
    flip(path, a + 30)
    tp.commit()  # (its writes go after the damaged copy, which is stepped over)
    assert txn_view.fates(eng, "out", 0) == {"committed"}
    assert store.read("t").state == "CompleteCommit"


def test_epochs_run_out_into_a_new_producer_id(eng, data_dir):
    tp = eng.producer(transactional_id="t")
    store = TxnStore(data_dir)
    st = store.read("t")
    st.epoch = MAX_EPOCH - 2
    with store.locked("t"):
        store.write(st)
    tp = eng.producer(transactional_id="t")  # the bump: the last epoch that leaves room
    assert tp.epoch == MAX_EPOCH - 1
    pid = tp.producer_id
    tp.begin()
    tp.produce("out", recs(b"v"), partition=0)
    tp.commit()
    assert txn_view.markers(eng, "out", 0) == [("COMMIT", pid, MAX_EPOCH)]
    assert tp.producer_id != pid and tp.epoch == 0
    tp.begin()
    tp.produce("out", recs(b"w"), partition=0)
    tp.commit()
    assert txn_view.committed_values(eng, "out", 0) == [b"v", b"w"]


def test_engine_close_aborts_an_open_transaction(data_dir):
    with Engine.open(data_dir) as e:
        e.create_topic("out")
        tp = e.producer(transactional_id="t")
        tp.begin()
        tp.produce("out", recs(b"v"))
    with Engine.open(data_dir) as e:
        assert txn_view.fates(e, "out", 0) == {"aborted"}
        assert e.txn.list_transactions() == []


def test_abort_transaction_by_hand_and_a_topic_deleted_meanwhile(eng):
    tp = eng.producer(transactional_id="t")
    tp.begin()
    tp.produce("out", recs(b"v"), partition=0)
    tp.produce("audit", recs(b"w"))
    eng.delete_topic("audit")
    assert eng.txn.abort("t") == {"transactional_id": "t", "state": "Ongoing",
                                          "action": "aborted"}
    assert txn_view.fates(eng, "out", 0) == {"aborted"}
    assert eng.txn.abort("t")["action"] is None
    with pytest.raises(ProducerFenced):
        tp.commit()
    with pytest.raises(InvalidArgument, match="no transactional id"):
        eng.txn.abort("nope")


def test_one_producer_call_gives_both_kinds(eng):
    from engine import InvalidArgument
    from engine.produce.idempotent import IdempotentProducer as Producer

    assert isinstance(eng.producer(), Producer)
    with pytest.raises(InvalidArgument, match="transactional id"):
        eng.producer(transactional_id="x", producer_id=5)


def test_a_produce_refused_before_writing_leaves_the_transaction_usable(eng, data_dir):
    tp = eng.producer(transactional_id="t")
    tp.begin()
    with pytest.raises(RivvenError, match="does not exist"):
        tp.produce("nope", recs(b"a"))
    with pytest.raises(RivvenError, match="partition 7"):
        tp.produce("out", recs(b"a"), partition=7)
    tp.produce("out", recs(b"b"), partition=0)
    tp.commit()
    assert txn_view.committed_values(eng, "out", 0) == [b"b"]
    with Engine.open(data_dir, read_only=True) as ro, pytest.raises(RivvenError, match="read-only"):
        ro.producer(transactional_id="t")


def test_a_transaction_joins_the_partitions_of_the_last_one_ahead(eng, data_dir):
    tp = eng.producer(transactional_id="t")
    pid = tp.producer_id
    tp.begin()
    for t, p in (("out", 0), ("out", 1), ("audit", 0)):
        tp.produce(t, recs(b"1"), partition=p)
    tp.commit()
    path = state_file(data_dir, "t")
    before = len(txn_view.frames(path))
    tp.begin()
    tp.produce("out", recs(b"2"), partition=0)
    # one state write (two frames) joined all three: the next calls there join nothing
    assert len(txn_view.frames(path)) == before + 2
    (row,) = eng.txn.list_transactions()
    assert row["partitions"] == [["out", 0], ["out", 1], ["audit", 0]]
    tp.produce("audit", recs(b"2"))
    assert len(txn_view.frames(path)) == before + 2
    tp.commit()
    # the partition joined ahead and never written left the transaction at its Prepare: no
    # marker there
    assert txn_view.markers(eng, "out", 1) == [("COMMIT", pid, 1)]
    assert txn_view.markers(eng, "out", 0) == [("COMMIT", pid, 1), ("COMMIT", pid, 2)]
    assert txn_view.markers(eng, "audit", 0) == [("COMMIT", pid, 1), ("COMMIT", pid, 2)]
    # the next one brings along the two this one wrote
    tp.begin()
    tp.produce("out", recs(b"3"), partition=1)
    assert eng.txn.list_transactions()[0]["partitions"] == [["out", 1], ["out", 0], ["audit", 0]]
    tp.abort()
    assert txn_view.markers(eng, "out", 1)[-1] == ("ABORT", pid, 3)
    assert len(txn_view.markers(eng, "out", 0)) == 2
    assert txn_view.committed_values(eng, "out", 0) == [b"1", b"2"]


def test_a_new_instance_fences_the_partitions_joined_ahead_too(eng):
    """The partitions of an open transaction get the ABORT marker (of the bumped epoch) when
    another instance ends it, written or not: the marker is what refuses the old instance's
    late writes there (a zombie writing to a partition it joined ahead)."""
    old = eng.producer(transactional_id="t")
    old.begin()
    old.produce("out", recs(b"a"), partition=0)
    old.produce("out", recs(b"b"), partition=1)
    old.commit()
    old.begin()
    old.produce("out", recs(b"c"), partition=0)  # out-1 joined ahead, not written
    new = eng.producer(transactional_id="t")  # aborts the open transaction
    assert [m[0] for m in txn_view.markers(eng, "out", 1)] == ["COMMIT", "ABORT"]
    with pytest.raises(ProducerFenced):
        old.produce("out", recs(b"late"), partition=1)
    assert txn_view.committed_values(eng, "out", 1) == [b"b"]
    assert txn_view.outcomes(eng, "out", 1) == {0: "committed"}
    new.begin()
    new.produce("out", recs(b"d"), partition=1)
    new.commit()
    assert txn_view.committed_values(eng, "out", 1) == [b"b", b"d"]


def test_a_commit_without_offsets_costs_one_fsync_the_wal_s(eng, data_dir, monkeypatch):
    """A commit of no group offsets fdatasyncs one file: the WAL, once, for every marker.
    Its Prepare and Complete become durable with the id's next change (the markers decide it
    meanwhile). A commit of offsets fdatasyncs its Prepare before the markers (the offsets
    are only in it) and its Complete before it returns (recovery must never commit them
    again over newer ones)."""
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    tp = eng.producer(transactional_id="t")
    tp.begin()
    for t, p in (("out", 0), ("out", 1), ("audit", 0)):
        tp.produce(t, recs(b"v"), partition=p)
    monkeypatch.setattr(os, "fdatasync", recording)
    tp.commit()
    assert [f[-4:] for f in synced] == [".wal"]
    assert [len(txn_view.markers(eng, t, p)) for t, p in
            (("out", 0), ("out", 1), ("audit", 0))] == [1, 1, 1]
    synced.clear()
    tp.begin()
    tp.produce("out", recs(b"w"), partition=0)  # the join: Complete durable with it
    assert "t.log" in synced
    tp.send_offsets("g", {("in", 0): 5})
    synced.clear()
    tp.commit()
    assert [f for f in synced if not f.endswith(".wal")] == ["t.log", "offsets.log", "t.log"]


def test_markers_of_one_commit_logged_together_when_one_partition_refuses(eng):
    from engine.format.control import encode_marker
    from engine.storage.log import append_each

    logs = [eng._find.partition("out", 0), eng._find.partition("out", 1), eng._find.partition("audit", 0)]
    logs[2].pipeline.stop()  # ("audit" goes first: partitions are taken in name order)
    with pytest.raises(RivvenError, match="closed"):
        append_each([(log, encode_marker(9, 1, True, 0)) for log in logs])
    assert [len(txn_view.markers(eng, t, p)) for t, p in (("out", 0), ("out", 1))] == [0, 0]
    logs = logs[:2]
    logs[1].pipeline.stop()
    with pytest.raises(RivvenError, match="closed"):
        append_each([(log, encode_marker(9, 1, True, 0)) for log in logs])
    # the one logged before the refusal is durable all the same
    assert txn_view.markers(eng, "out", 0) == [("COMMIT", 9, 1)]
    assert txn_view.markers(eng, "out", 1) == []


def test_markers_are_fsynced_whatever_wal_sync_says(data_dir, monkeypatch):
    """With ``wal.sync=none`` records and offsets are not fsynced, but a transaction's markers
    are: a marker a machine crash took while the id's Complete survived (made durable by its
    next change) would leave the transaction open in that partition for good."""
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    with Engine.open(data_dir, sync=False) as e:
        e.create_topic("out", partitions=2)
        tp = e.producer(transactional_id="t")
        tp.begin()
        tp.produce("out", recs(b"a"), partition=0)
        tp.produce("out", recs(b"b"), partition=1)
        monkeypatch.setattr(os, "fdatasync", recording)
        e.produce("out", recs(b"plain"), partition=0)
        assert synced == []  # (wal.sync=none indeed)
        tp.commit()
        assert [f[-4:] for f in synced] == [".wal"]


@pytest.mark.parametrize("mode", ["none", "interval:600000"])
def test_a_marker_is_seen_only_once_durable_so_a_retried_commit_writes_it_again(
        data_dir, monkeypatch, mode):
    """Records of a wal.sync other than always reach the segment before the WAL fsync; a
    marker must not: when the markers' fsync fails, a marker left in a segment (but in no
    durable file) would make the retried commit take it for done and return, and a machine
    crash then aborts what commit() said was committed."""
    import errno
    real = os.fdatasync
    armed = [True]

    def flaky(fd):
        if armed[0] and os.readlink(f"/proc/self/fd/{fd}").endswith(".wal"):
            armed[0] = False
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    with Engine.open(data_dir, settings={"wal.sync": mode}) as e:
        e.create_topic("out", partitions=2)
        tp = e.producer(transactional_id="t")
        tp.begin()
        tp.produce("out", recs(b"a"), partition=0)
        tp.produce("out", recs(b"b"), partition=1)
        monkeypatch.setattr(os, "fdatasync", flaky)
        with pytest.raises(StorageError):
            tp.commit()
        assert not armed[0]
        assert [txn_view.markers(e, "out", p) for p in (0, 1)] == [[], []]  # none seen
        synced = []
        monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(
            os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
        tp.commit()  # finishes it: the markers written again, and fsynced
        assert any(f.endswith(".wal") for f in synced)
        assert [txn_view.markers(e, "out", p) for p in (0, 1)] == \
            [[("COMMIT", tp.producer_id, tp.epoch)]] * 2
        assert [txn_view.committed_values(e, "out", p) for p in (0, 1)] == [[b"a"], [b"b"]]


def test_commits_of_threads_over_the_same_partitions_all_land(eng):
    """Ends of four producers in four threads of one engine, their markers logged together
    and sharing WAL fsyncs, whatever order the transactions wrote the partitions in (between
    processes: tests/crash/test_txn_crash.py)."""
    import threading

    parts = [("out", 0), ("out", 1), ("audit", 0)]
    errors = []

    def work(n):
        try:
            tp = eng.producer(transactional_id=f"w{n}")
            for i in range(30):
                tp.begin()
                for t, p in (parts if n % 2 else parts[::-1]):
                    tp.produce(t, recs(b"%d-%d" % (n, i)), partition=p)
                (tp.abort if i % 5 == 4 else tp.commit)()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for t, p in parts:
        assert "open" not in txn_view.fates(eng, t, p)
        assert sorted(txn_view.committed_values(eng, t, p)) == sorted(
            b"%d-%d" % (n, i) for n in range(4) for i in range(30) if i % 5 != 4)
