"""What ``rivven serve``'s transaction APIs call (``eng.txn.init_producer``, ``add_partitions``,
``add_group``, ``commit_offsets``, ``end_transaction``, ``writing``, ``pending_offsets``),
alone: Kafka's coordinator semantics with its classic epoch rule — an instance keeps its
epoch across transactions, its markers carry it — and everything still fenced that Kafka
fences (docs/TRANSACTIONS.md, "Kafka's classic epochs")."""

import time

import pytest

from engine import Engine, InvalidArgument, InvalidTxnState, ProducerFenced, RivvenError, StorageError
from engine import clock as clock_mod
from engine.errors import InvalidProducerIdMapping, UnknownPartition, UnknownTopic
from engine.txn import markers as markers_mod
from engine.txn.txn_store import TxnStore

NOW = clock_mod.now_ms()


@pytest.fixture
def eng(data_dir):
    e = Engine.open(data_dir)
    e.create_topic("out", partitions=2)
    e.create_topic("in", partitions=1)
    yield e
    e.close()


class Client:
    """What a Kafka client does through rivven serve, on the engine's calls."""

    def __init__(self, eng, tid="k1", timeout_ms=60000):
        self.eng, self.tid = eng, tid
        self.pid, self.epoch = eng.txn.init_producer(tid, timeout_ms)
        self.seq = {}

    def add(self, *tps):
        self.eng.txn.add_partitions(self.tid, self.pid, self.epoch, list(tps))

    def send(self, topic, partition, *values, epoch=None):
        epoch = self.epoch if epoch is None else epoch
        seq = self.seq.get((topic, partition), 0)
        with self.eng.txn.writing(self.tid, self.pid, epoch, topic, partition):
            base = self.eng.produce_wire(topic, partition, [None] * len(values), list(values),
                                         None, [NOW] * len(values), (self.pid, epoch, seq), True)
        self.seq[(topic, partition)] = seq + len(values)
        return base

    def end(self, commit=True):
        return self.eng.txn.end_transaction(self.tid, self.pid, self.epoch, commit)


def committed(eng, topic, partition):
    return [r.value for r in eng.read(topic, partition, 0, isolation_level="read_committed")]


def epochs(eng, topic, partition):
    return {r["producer_id"]: r["epoch"] for r in eng.txn.producers(topic, [partition])}


def test_a_classic_instance_keeps_its_epoch_and_sequences_across_transactions(eng):
    c = Client(eng)
    assert c.epoch == 0
    c.add(("out", 0), ("out", 1))
    assert c.send("out", 0, b"a", b"b") == 0 and c.send("out", 1, b"c") == 0
    assert eng.txn.describe("k1")["state"] == "Ongoing"
    assert committed(eng, "out", 0) == []
    assert c.end(commit=True) == (c.pid, 0)  # the same epoch goes on
    assert committed(eng, "out", 0) == [b"a", b"b"] and committed(eng, "out", 1) == [b"c"]
    assert epochs(eng, "out", 0) == {c.pid: 0}  # the marker carried the data's epoch
    # the next transaction: the same epoch, its sequences following on
    c.add(("out", 0))
    assert c.send("out", 0, b"d") == 3  # (2 is the commit marker)
    assert c.end(commit=False) == (c.pid, 0)
    c.add(("out", 0))
    c.send("out", 0, b"e")
    c.end(commit=True)
    assert committed(eng, "out", 0) == [b"a", b"b", b"e"]
    assert [r.value for r in eng.read("out", 0, 0)] == [b"a", b"b", b"d", b"e"]
    row = eng.txn.describe("k1")
    assert row["state"] == "CompleteCommit" and row["epoch"] == 0


def test_the_state_remembers_the_rule_and_an_in_process_producer_of_the_id_goes_back(eng, data_dir):
    c = Client(eng)
    st = TxnStore(data_dir).read("k1")
    assert st.classic and st.last_epoch == -1
    tp = eng.producer(transactional_id="k1")  # fences the Kafka client's instance
    assert (tp.producer_id, tp.epoch) == (c.pid, 1) and not TxnStore(data_dir).read("k1").classic
    tp.begin()
    tp.produce("out", [], partition=0)
    tp.commit()
    with pytest.raises(ProducerFenced):
        c.add(("out", 0))


def test_a_batch_is_written_only_into_a_partition_added_to_the_ongoing_transaction(eng):
    c = Client(eng)
    with pytest.raises(InvalidTxnState, match="not added"):
        c.send("out", 0, b"x")  # nothing added yet
    c.add(("out", 0))
    with pytest.raises(InvalidTxnState, match="out-1 was not added"):
        c.send("out", 1, b"x")
    with pytest.raises(ProducerFenced):
        c.send("out", 0, b"x", epoch=1)
    with pytest.raises(InvalidProducerIdMapping):
        with eng.txn.writing("k1", c.pid + 1, 0, "out", 0):
            pass
    with pytest.raises(InvalidProducerIdMapping):
        with eng.txn.writing("never-made", c.pid, 0, "out", 0):
            pass
    c.send("out", 0, b"x")
    c.end()
    with pytest.raises(InvalidTxnState, match="not added"):
        c.send("out", 0, b"late")  # its transaction ended: added again first
    assert [r.value for r in eng.read("out", 0, 0)] == [b"x"]


def test_no_end_comes_between_the_check_and_the_append(eng):
    """The id's lock is held across ``writing``: an end waits for the append, so no batch
    ever lands after its transaction's marker (a hanging transaction)."""
    import threading

    c = Client(eng)
    c.add(("out", 0))
    ended = threading.Event()
    with eng.txn.writing("k1", c.pid, c.epoch, "out", 0):
        t = threading.Thread(target=lambda: (c.end(), ended.set()))
        t.start()
        time.sleep(0.3)
        assert not ended.is_set()
        eng.produce_wire("out", 0, [None], [b"in-time"], None, [NOW], (c.pid, 0, 0), True)
    t.join(30)
    assert ended.is_set() and committed(eng, "out", 0) == [b"in-time"]


def test_ends_retried_are_no_ops_and_ends_out_of_order_are_refused(eng):
    c = Client(eng)
    with pytest.raises(InvalidTxnState, match="no transaction"):
        c.end()  # Empty
    c.add(("out", 0))
    c.send("out", 0, b"a")
    c.end(commit=True)
    assert c.end(commit=True) == (c.pid, 0)  # the response was lost: retried
    with pytest.raises(InvalidTxnState, match="CompleteCommit"):
        c.end(commit=False)
    c.add(("out", 0))
    c.end(commit=False)
    c.end(commit=False)
    with pytest.raises(InvalidTxnState, match="CompleteAbort"):
        c.end(commit=True)
    with pytest.raises(ProducerFenced):
        eng.txn.end_transaction("k1", c.pid, 1, True)
    with pytest.raises(InvalidProducerIdMapping):
        eng.txn.end_transaction("k1", c.pid + 7, 0, True)
    assert committed(eng, "out", 0) == [b"a"]


def test_an_end_cut_short_after_its_decision_is_finished_by_its_retry(eng, monkeypatch):
    c = Client(eng)
    c.add(("out", 0), ("out", 1))
    c.send("out", 0, b"a")
    c.send("out", 1, b"b")
    real = markers_mod.write

    def fail(*a, **k):
        raise StorageError("disk gone (test)")

    monkeypatch.setattr(markers_mod, "write", fail)
    with pytest.raises(StorageError):
        c.end(commit=True)
    assert eng.txn.describe("k1")["state"] == "PrepareCommit"  # decided, durably
    monkeypatch.setattr(markers_mod, "write", real)
    with pytest.raises(InvalidTxnState, match="PrepareCommit"):
        c.end(commit=False)  # a decided commit cannot abort
    assert c.end(commit=True) == (c.pid, 0)
    assert committed(eng, "out", 0) == [b"a"] and committed(eng, "out", 1) == [b"b"]
    # finished where still open only: one marker per partition
    assert eng.end_offsets("out") == {0: 2, 1: 2}
    c.add(("out", 0))
    c.send("out", 0, b"next")
    c.end()
    assert committed(eng, "out", 0) == [b"a", b"next"]


def test_a_prepared_end_is_finished_by_the_instances_next_call(eng, monkeypatch):
    c = Client(eng)
    c.add(("out", 0))
    c.send("out", 0, b"a")
    monkeypatch.setattr(markers_mod, "write", lambda *a, **k: (_ for _ in ()).throw(
        StorageError("disk gone (test)")))
    with pytest.raises(StorageError):
        c.end(commit=False)
    monkeypatch.undo()
    c.add(("out", 0))  # finishes the abort first, then starts the next transaction
    c.send("out", 0, b"b")
    c.end()
    assert committed(eng, "out", 0) == [b"b"]


def test_a_new_instance_aborts_the_open_transaction_and_fences_the_old_one(eng):
    old = Client(eng)
    old.add(("out", 0))
    old.send("out", 0, b"zombie")
    new = Client(eng)
    assert (new.pid, new.epoch) == (old.pid, 2)  # the abort's markers took epoch 1 (a fence)
    assert epochs(eng, "out", 0) == {old.pid: 1}
    for call in (lambda: old.end(), lambda: old.add(("out", 1)),
                 lambda: old.send("out", 0, b"late")):
        with pytest.raises(ProducerFenced):
            call()
    # the old instance's late batch, even written past the coordinator, is fenced
    with pytest.raises(ProducerFenced):
        eng.produce_wire("out", 0, [None], [b"late"], None, [NOW], (old.pid, 0, 1), True)
    new.add(("out", 0))
    new.send("out", 0, b"fresh")
    new.end()
    assert committed(eng, "out", 0) == [b"fresh"]
    assert eng.txn.describe("k1")["epoch"] == 2


def test_a_bump_asked_for_with_the_producers_own_id_and_epoch(eng):
    """InitProducerId v3+ (KIP-360): after its transaction was aborted for an error, the
    producer asks for the next epoch with its own id and epoch; that call retried gets the
    same answer; any other instance is fenced."""
    c = Client(eng)
    c.add(("out", 0))
    c.send("out", 0, b"a")
    c.end(commit=False)
    assert eng.txn.init_producer("k1", 60000, expected=(c.pid, 0)) == (c.pid, 1)
    assert eng.txn.init_producer("k1", 60000, expected=(c.pid, 0)) == (c.pid, 1)  # retried
    with pytest.raises(ProducerFenced):
        eng.txn.init_producer("k1", 60000, expected=(c.pid, 5))
    with pytest.raises(InvalidProducerIdMapping):
        eng.txn.init_producer("k1", 60000, expected=(c.pid + 1, 1))
    c.epoch, c.seq = 1, {}
    c.add(("out", 0))
    c.send("out", 0, b"b")  # a new epoch: sequences from 0
    c.end()
    # once the new epoch's transaction is done, the old epoch's retry is fenced
    with pytest.raises(ProducerFenced):
        eng.txn.init_producer("k1", 60000, expected=(c.pid, 0))
    # asked for with the transaction still open: it is aborted, and the producer fenced
    c.add(("out", 0))
    c.send("out", 0, b"c")
    with pytest.raises(ProducerFenced):
        eng.txn.init_producer("k1", 60000, expected=(c.pid, 1))
    assert eng.txn.describe("k1")["state"] == "CompleteAbort"
    assert committed(eng, "out", 0) == [b"b"]
    # a new id asked for with an expected id gets a new producer
    pid, epoch = eng.txn.init_producer("k2", 60000, expected=(12345, 3))
    assert epoch == 0 and pid != c.pid


def test_group_offsets_commit_with_the_transaction_and_only_after_add_group(eng):
    c = Client(eng)
    with pytest.raises(InvalidTxnState, match="AddOffsetsToTxn"):
        eng.txn.commit_offsets("k1", c.pid, 0, "g", {("in", 0): 5})
    eng.txn.add_group("k1", c.pid, 0, "g")
    assert eng.txn.describe("k1")["state"] == "Ongoing"
    eng.txn.commit_offsets("k1", c.pid, 0, "g", {("in", 0): 5}, member_id="m-1")
    eng.txn.commit_offsets("k1", c.pid, 0, "g", {("in", 0): 7})  # later ones win
    assert eng.txn.pending_offsets("g") == {("in", 0): "k1"}
    assert eng.txn.pending_offsets("other") == {}
    assert eng.txn.describe("k1")["fences"] == {"g": "m-1"}
    c.end(commit=False)
    assert eng.txn.pending_offsets("g") == {}
    with pytest.raises(RivvenError):
        eng.groups.committed("g")  # aborted: nothing committed
    eng.txn.add_group("k1", c.pid, 0, "g")
    eng.txn.commit_offsets("k1", c.pid, 0, "g", {("in", 0): 9})
    c.add(("out", 0))
    c.send("out", 0, b"x")
    c.end(commit=True)
    assert eng.groups.committed("g") == {("in", 0): 9}
    with pytest.raises(InvalidArgument):
        eng.txn.commit_offsets("k1", c.pid, 0, "g", {("in", 0): -1})


def test_a_timed_out_transaction_is_aborted_by_recovery_and_its_producer_fenced(eng):
    c = Client(eng, timeout_ms=200)
    c.add(("out", 0))
    c.send("out", 0, b"slow")
    time.sleep(0.4)
    rows = eng.txn.recover()
    assert [(r["transactional_id"], r["action"]) for r in rows] == [("k1", "aborted")]
    with pytest.raises(ProducerFenced):
        c.end()
    assert committed(eng, "out", 0) == [] and eng.txn.describe("k1")["epoch"] == 1
    # noticed by the producer's own call first: aborted there
    d = Client(eng, "k2", timeout_ms=200)
    d.add(("out", 1))
    time.sleep(0.4)
    with pytest.raises(ProducerFenced, match="transaction.timeout.ms"):
        d.send("out", 1, b"late")
    assert eng.txn.describe("k2")["state"] == "CompleteAbort"


def test_bad_arguments(eng):
    with pytest.raises(InvalidArgument, match="transaction.timeout.ms"):
        eng.txn.init_producer("k1", 0)
    with pytest.raises(InvalidArgument):
        eng.txn.init_producer("", 1000)
    c = Client(eng)
    with pytest.raises(UnknownTopic):
        c.add(("nope", 0))
    with pytest.raises(UnknownPartition):
        c.add(("out", 0), ("out", 9))
    assert eng.txn.describe("k1")["state"] == "Empty"  # nothing joined
    with pytest.raises(InvalidArgument):
        eng.txn.add_group("k1", c.pid, 0, "")
    with pytest.raises(InvalidProducerIdMapping):  # a name that cannot have a state
        eng.txn.add_partitions("x" * 300, c.pid, 0, [("out", 0)])
    with pytest.raises(InvalidProducerIdMapping):
        eng.txn.end_transaction("bad\x00id", c.pid, 0, True)


def test_a_group_added_with_no_offsets_yet_survives_a_restart(data_dir):
    """AddOffsetsToTxn, the server killed, TxnOffsetCommit to the next one: the group is
    still in the transaction (a state read back from disk, not from this process)."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", partitions=1)
        c = Client(eng)
        eng.txn.add_group("k1", c.pid, 0, "g")
        pid = c.pid
    with Engine.open(data_dir) as eng:
        assert eng.txn.describe("k1")["offsets"] == {"g": []}
        eng.txn.commit_offsets("k1", pid, 0, "g", {("in", 0): 3})
        eng.txn.end_transaction("k1", pid, 0, True)
        assert eng.groups.committed("g") == {("in", 0): 3}


def test_a_reopened_engine_keeps_the_rule(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", partitions=1)
        c = Client(eng)
        c.add(("out", 0))
        c.send("out", 0, b"a")
        c.end()
        pid = c.pid
    with Engine.open(data_dir) as eng:
        c = Client.__new__(Client)
        c.eng, c.tid, c.pid, c.epoch, c.seq = eng, "k1", pid, 0, {("out", 0): 1}
        c.add(("out", 0))
        c.send("out", 0, b"b")  # sequences go on across the restart too
        assert c.end() == (pid, 0)
        assert committed(eng, "out", 0) == [b"a", b"b"]
