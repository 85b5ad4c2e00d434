"""Two-phase commit: a transaction its producer prepares (``tp.prepare()``) waits, durably
and never timed out, for ``eng.complete_transaction`` in any process — the Spark sink's
coordinator decides for many writers — or for an abort; a new producer of the id aborts it."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import ROOT

from engine import Engine, InvalidTxnState, PreparedTransaction, ProducerFenced, Record
from engine import clock as clock_mod
from engine.errors import DamagedMetadata, InvalidArgument
from engine.txn.txn_store import TxnStore

ENV = dict(os.environ, PYTHONPATH=str(ROOT))

PREPARE = """
import json, os, sys
from engine import Engine, Record
d, tid = sys.argv[1], sys.argv[2]
eng = Engine.open(d)
tp = eng.producer(transactional_id=tid, transaction_timeout_ms=1000)
tp.begin()
tp.produce("out", [Record(value=b"a%d" % i) for i in range(3)], partition=0)
tp.produce("out", [Record(value=b"b")], partition=1)
print(json.dumps(tp.prepare()), flush=True)
os.kill(os.getpid(), 9)  # the writer is gone: another process decides
"""


def committed(eng, partition):
    return [r.value for r in eng.read("out", partition, 0, 100, isolation_level="read_committed")]


def prepared_elsewhere(data_dir, tid="w-1"):
    proc = subprocess.run([sys.executable, "-c", PREPARE, data_dir, tid], env=ENV, cwd=ROOT,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    return PreparedTransaction(*json.loads(proc.stdout))


@pytest.fixture
def topics(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", partitions=2)
    return data_dir


def test_prepared_by_a_killed_writer_committed_by_another_process(topics, monkeypatch):
    prepared = prepared_elsewhere(topics)
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 3_600_000)  # an hour past timeout
    with Engine.open(topics) as eng:
        assert eng.last_recovery["transactions"] == []  # held: never timed out
        row = eng.txn.describe("w-1")
        assert row["state"] == "Ongoing" and row["prepared"] is True
        assert committed(eng, 0) == [] and committed(eng, 1) == []
        eng.txn.complete(prepared)
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] and committed(eng, 1) == [b"b"]
        eng.txn.complete(prepared)  # again: a no-op
        eng.txn.complete(list(prepared))  # (a JSON round trip gives a list)
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"]
        assert eng.txn.describe("w-1")["state"] == "CompleteCommit"


def test_an_unprepared_transaction_still_times_out(topics, monkeypatch):
    with Engine.open(topics) as eng:
        tp = eng.producer(transactional_id="w-2", transaction_timeout_ms=1000)
        tp.begin()
        tp.produce("out", [Record(value=b"x")], partition=0)
        held = eng.producer(transactional_id="w-3", transaction_timeout_ms=1000)
        held.begin()
        held.produce("out", [Record(value=b"y")], partition=1)
        prepared = held.prepare()
        now = clock_mod.now_ms()
        monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 5000)
        assert [(r["transactional_id"], r["action"]) for r in
                eng.txn.recover()] == [("w-2", "aborted")]
        eng.txn.complete(prepared)
        assert committed(eng, 0) == [] and committed(eng, 1) == [b"y"]


def test_abort_and_what_a_new_producer_of_the_id_does(topics):
    prepared = prepared_elsewhere(topics, "w-4")
    with Engine.open(topics) as eng:
        eng.txn.complete(prepared, commit=False)
        eng.txn.complete(prepared, commit=False)  # again: a no-op
        with pytest.raises(ProducerFenced):
            eng.txn.complete(prepared)  # aborted: it can never commit
        assert committed(eng, 0) == []
    prepared = prepared_elsewhere(topics, "w-5")
    with Engine.open(topics) as eng:
        eng.producer(transactional_id="w-5").close()  # a new instance aborts the held one
        with pytest.raises(ProducerFenced, match="taken over"):
            eng.txn.complete(prepared)
        eng.txn.complete(prepared, commit=False)  # (gone already: nothing to do)
        assert committed(eng, 0) == [] and committed(eng, 1) == []


def test_a_prepared_producer_is_done_with_its_transaction(topics):
    with Engine.open(topics) as eng:
        tp = eng.producer(transactional_id="w-6")
        tp.begin()
        tp.produce("out", [Record(value=b"z")], partition=0)
        prepared = tp.prepare()
        for call in (lambda: tp.produce("out", [Record(value=b"more")], partition=0),
                     tp.commit, tp.prepare, tp.begin):
            with pytest.raises(InvalidTxnState, match="prepared"):
                call()
        tp.close()  # does not abort it
        assert eng.txn.describe("w-6")["prepared"] is True
        eng.txn.complete(prepared)
        assert committed(eng, 0) == [b"z"]
        empty = eng.producer(transactional_id="w-7")
        empty.begin()
        nothing = empty.prepare()  # nothing written: completing it is a no-op
        eng.txn.complete(nothing)
        with pytest.raises(InvalidArgument, match="prepared transaction is"):
            eng.txn.complete(("w-7", "0", 0))


def test_the_held_flag_is_stored_and_checked(topics):
    with Engine.open(topics) as eng:
        tp = eng.producer(transactional_id="w-8")
        tp.begin()
        tp.produce("out", [Record(value=b"q")], partition=0)
        tp.prepare()
    store = TxnStore(topics)
    st = store.read("w-8")
    assert st.held and st.to_doc()["held"] is True
    doc = st.to_doc()
    doc["state"] = "Empty"  # only an Ongoing transaction is held
    with pytest.raises(DamagedMetadata, match="only an Ongoing transaction is held"):
        type(st).from_doc(doc, "x", "w-8")
    doc["state"], doc["held"] = "Ongoing", "yes"
    with pytest.raises(DamagedMetadata, match="held is"):
        type(st).from_doc(doc, "x", "w-8")
    del doc["held"]
    assert type(st).from_doc(doc, "x", "w-8").held is False  # (files from before it)


def test_txn_list_and_abort_show_and_end_a_prepared_transaction(topics):
    from conftest import run_rivven

    prepared_elsewhere(topics, "w-9")
    r = run_rivven(topics, "txn", "list")
    assert r.returncode == 0 and b"Ongoing (prepared)" in r.stdout
    assert b"is prepared (a two-phase commit): it never times out" in r.stderr
    r = run_rivven(topics, "txn", "abort", "w-9", "--yes")
    assert r.returncode == 0, r.stderr
    with Engine.open(topics) as eng:
        assert eng.txn.describe("w-9")["state"] == "CompleteAbort"
        assert committed(eng, 0) == [] and committed(eng, 1) == []


# ------------------------------------------------------------------ decisions: many as one
COORDINATE = """
import json, sys
from engine import Engine
d, key, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
prepared = json.loads(sys.stdin.read())
with Engine.open(d) as eng:
    print(eng.txn.commit_prepared(key, prepared, seq), flush=True)
"""


def coordinate(data_dir, key, prepared, seq, failpoint=None):
    env = dict(ENV, RIVVEN_FAILPOINT=failpoint) if failpoint else ENV
    return subprocess.run([sys.executable, "-c", COORDINATE, data_dir, key, str(seq)],
                          input=json.dumps(prepared).encode(), env=env, cwd=ROOT,
                          capture_output=True, timeout=60)


def writers(data_dir, n, tag):
    return [prepared_elsewhere(data_dir, f"{tag}-{i}") for i in range(n)]


def test_prepared_transactions_of_many_writers_commit_as_one_and_a_replay_is_a_no_op(topics):
    batch = writers(topics, 3, "b7")
    r = coordinate(topics, "sink-q1", batch, 7)
    assert r.returncode == 0 and r.stdout == b"True\n", r.stderr
    with Engine.open(topics) as eng:
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3 and committed(eng, 1) == [b"b"] * 3
        assert eng.txn.decision("sink-q1") == {"key": "sink-q1", "committed": 7, "pending": None}
    again = writers(topics, 3, "b7-again")  # the same batch written once more (a replay)
    r = coordinate(topics, "sink-q1", again, 7)
    assert r.returncode == 0 and r.stdout == b"False\n", r.stderr
    with Engine.open(topics) as eng:
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3  # not twice
        assert {eng.txn.describe(t)["state"] for t, _, _ in again} == {"CompleteAbort"}
        assert eng.txn.list_transactions() == []  # nothing left open to hold back read_committed


@pytest.mark.crash
@pytest.mark.parametrize("point", ["decision.after_decide", "decision.after_complete_one"])
def test_a_coordinator_killed_mid_commit_leaves_a_decision_the_next_open_finishes(topics, point):
    batch = writers(topics, 3, "c")
    r = coordinate(topics, "sink-q2", batch, 0, failpoint=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    with Engine.open(topics, recover=False) as eng:  # (no recovery yet: the state as left)
        assert eng.txn.decision("sink-q2")["pending"]["sequence"] == 0
        assert len(committed(eng, 1)) < 3  # not all visible yet
    with Engine.open(topics) as eng:
        assert eng.last_recovery["decisions"] == [
            {"key": "sink-q2", "action": "committed", "error": None}]
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3 and committed(eng, 1) == [b"b"] * 3
        assert eng.txn.decision("sink-q2") == {"key": "sink-q2", "committed": 0, "pending": None}


@pytest.mark.crash
def test_a_producer_of_the_key_finishes_the_pending_decision_before_taking_up_its_id(topics):
    """The next batch's writer of an id must not abort the transaction a decision commits:
    taking up its id under the key's lock finishes the decision first."""
    batch = writers(topics, 2, "d")
    r = coordinate(topics, "sink-q3", batch, 4, failpoint="decision.after_decide")
    assert r.returncode == -signal.SIGKILL
    with Engine.open(topics, recover=False) as eng:
        tp = eng.producer(transactional_id="d-0", decision_key="sink-q3")
        tp.close()
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 2
        assert eng.txn.decision("sink-q3")["committed"] == 4
        abort_me = writers(topics, 1, "e")
        eng.txn.abort_prepared("sink-q3", abort_me)
        assert eng.txn.describe("e-0")["state"] == "CompleteAbort"
        with pytest.raises(InvalidArgument, match="decision key"):
            eng.txn.commit_prepared("", abort_me)


def test_a_damaged_decision_file_is_reported_not_acted_on(topics):
    with Engine.open(topics) as eng:
        assert eng.txn.commit_prepared("sink-q4", [], 1) is True
        path = eng._decisions.path("sink-q4")
    raw = open(path, "rb").read()
    open(path, "wb").write(raw.replace(b'"committed": 1', b'"committed": 9'))
    with Engine.open(topics) as eng:
        with pytest.raises(DamagedMetadata, match="checksum mismatch"):
            eng.txn.decision("sink-q4")
        with pytest.raises(DamagedMetadata):
            eng.txn.commit_prepared("sink-q4", [], 2)
    open(path, "wb").write(b"{}")
    with Engine.open(topics) as eng:
        [row] = eng.last_recovery["decisions"]  # reported; the open goes on
        assert row["action"] == "failed" and "transaction decision" in row["error"]
