"""Two-phase commit: a transaction its producer prepares (``tp.prepare()``) waits, durably
and never timed out, for ``eng.complete_transaction`` in any process — the Spark sink's
coordinator decides for many writers — or for an abort; a new producer of the id aborts it.
(A coordinator killed mid-commit: tests/crash/test_txn_prepare_crash.py.)"""

import pytest
from helpers.txn_prepare import committed, coordinate, prepared_elsewhere, writers

from engine import Engine, InvalidTxnState, ProducerFenced, Record
from engine import clock as clock_mod
from engine.errors import DamagedMetadata, InvalidArgument
from engine.txn.txn_store import TxnStore


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
    from helpers import run_rivven

    prepared_elsewhere(topics, "w-9")
    r = run_rivven(topics, "txn", "list")
    assert r.returncode == 0 and b"Ongoing (prepared)" in r.stdout
    assert b"is prepared (a two-phase commit): it never times out" in r.stderr
    r = run_rivven(topics, "txn", "abort", "w-9", "--yes")
    assert r.returncode == 0, r.stderr
    with Engine.open(topics) as eng:
        assert eng.txn.describe("w-9")["state"] == "CompleteAbort"
        assert committed(eng, 0) == [] and committed(eng, 1) == []


def test_prepared_transactions_of_many_writers_commit_as_one_and_a_replay_is_a_no_op(topics):
    batch = writers(topics, 3, "b7")
    r = coordinate(topics, "sink-q1", batch, 7)
    assert r.returncode == 0 and r.stdout == b"True\n", r.stderr
    with Engine.open(topics) as eng:
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3 and committed(eng, 1) == [b"b"] * 3
        assert eng.txn.decision("sink-q1") == {"key": "sink-q1", "committed": 7, "pending": None,
                                             "ended": [], "aborts": {}}
    again = writers(topics, 3, "b7-again")  # the same batch written once more (a replay)
    r = coordinate(topics, "sink-q1", again, 7)
    assert r.returncode == 0 and r.stdout == b"False\n", r.stderr
    with Engine.open(topics) as eng:
        assert committed(eng, 0) == [b"a0", b"a1", b"a2"] * 3  # not twice
        assert {eng.txn.describe(t)["state"] for t, _, _ in again} == {"CompleteAbort"}
        assert eng.txn.list_transactions() == []  # nothing left open to hold back read_committed


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


def write_for(eng, tid, key, value):
    """A writer of ``key`` (a Spark task): a transaction with one record, not yet prepared."""
    tp = eng.producer(transactional_id=tid, decision_key=key)
    tp.begin()
    tp.produce("out", [Record(value=value)], partition=0)
    return tp


def test_a_writer_that_prepares_after_its_job_ended_aborts_itself(topics):
    with Engine.open(topics) as eng:
        early = write_for(eng, "job-0", "sink-j", b"early")
        early_prep = early.prepare("save-1")
        late = write_for(eng, "job-1", "sink-j", b"late")  # still writing when the job fails
        # the driver's abort: the job's end recorded first, then what it knows of aborted
        eng.txn.abort_prepared("sink-j", [early_prep], job="save-1")
        assert eng.txn.decision("sink-j")["ended"] == ["save-1"]
        with pytest.raises(InvalidTxnState, match="job 'save-1' of decision key 'sink-j' ended "
                           "before transactional id 'job-1' prepared: its transaction is "
                           "aborted"):
            late.prepare("save-1")  # (before: prepared, never timed out, decided by nobody)
        late.close()
        assert eng.txn.list_transactions() == []  # nothing left to hold back read_committed
        assert eng.txn.describe("job-1")["state"] == "CompleteAbort"
        assert committed(eng, 0) == []
        # a commit ends its job too: a straggling attempt that prepares afterwards aborts
        ok = write_for(eng, "job-2", "sink-j", b"ok")
        prepared = ok.prepare("save-2")
        straggler = write_for(eng, "job-3", "sink-j", b"twice")
        assert eng.txn.commit_prepared("sink-j", [prepared], job="save-2") is True
        with pytest.raises(InvalidTxnState, match="job 'save-2'"):
            straggler.prepare("save-2")
        assert eng.txn.list_transactions() == [] and committed(eng, 0) == [b"ok"]
        assert eng.txn.decision("sink-j")["ended"] == ["save-1", "save-2"]
        # another job of the key is not affected; a replay (a sequence committed) ends its job
        assert eng.txn.commit_prepared("sink-j", [write_for(eng, "job-4", "sink-j", b"b3")
                                                  .prepare("save-3")], 3, job="save-3")
        replay = write_for(eng, "job-5", "sink-j", b"b3-again").prepare("save-4")
        assert eng.txn.commit_prepared("sink-j", [replay], 3, job="save-4") is False
        with pytest.raises(InvalidTxnState, match="job 'save-4'"):
            write_for(eng, "job-6", "sink-j", b"late-replay").prepare("save-4")
        assert eng.txn.list_transactions() == [] and committed(eng, 0) == [b"ok", b"b3"]
        # a job needs a producer of a decision key, and a job's name is checked
        plain = eng.producer(transactional_id="job-7")
        plain.begin()
        with pytest.raises(InvalidArgument, match="needs a producer made with decision_key"):
            plain.prepare("save-5")
        with pytest.raises(InvalidArgument, match="a job is a printable string"):
            plain.prepare("")
        plain.abort()


def test_the_jobs_ended_under_a_key_are_bounded_and_a_file_without_them_is_read(topics):
    from engine.fs import jsondoc
    from engine.txn.decisions import MAX_ENDED

    with Engine.open(topics) as eng:
        for i in range(MAX_ENDED + 3):
            eng.txn.abort_prepared("sink-b", [], job=f"j{i}")
        assert eng.txn.decision("sink-b")["ended"] == [f"j{i}" for i in range(3, MAX_ENDED + 3)]
        path = eng._decisions.path("sink-c")
        eng.txn.commit_prepared("sink-c", [], 4)
    # a file an earlier release wrote (no "ended")
    open(path, "wb").write(jsondoc.seal({"key": "sink-c", "committed": 4, "pending": None}))
    with Engine.open(topics) as eng:
        assert eng.txn.decision("sink-c") == {"key": "sink-c", "committed": 4, "pending": None,
                                             "ended": [], "aborts": {}}
        eng.txn.abort_prepared("sink-c", [], job="j")
        assert eng.txn.decision("sink-c")["ended"] == ["j"]
    open(path, "wb").write(jsondoc.seal({"key": "sink-c", "committed": 4, "pending": None,
                                         "ended": ["ok", 7]}))
    with Engine.open(topics) as eng:
        with pytest.raises(DamagedMetadata, match="ended: a job is a printable string"):
            eng.txn.decision("sink-c")


def test_a_writer_of_a_micro_batch_aborted_after_it_began_aborts_itself(topics):
    """A streaming query's batch id runs again after a restart, so it cannot be recorded
    ended: its aborts are counted, and a writer that began before one aborts itself."""
    with Engine.open(topics) as eng:
        seen = eng.txn.batch_seen("sink-s", 5)  # a task of batch 5 begins
        assert seen == (5, 0)
        eng.txn.abort_prepared("sink-s", [], batch=5)  # the batch fails, its ids fenced
        assert eng.txn.decision("sink-s")["aborts"] == {"5": 1}
        late = write_for(eng, "s-0", "sink-s", b"late")  # its producer made after the abort
        with pytest.raises(InvalidTxnState, match="micro-batch 5 of decision key 'sink-s' was "
                           "aborted after transactional id 's-0' began writing it: its "
                           "transaction is aborted"):
            late.prepare(batch=seen)  # (before: prepared, never timed out, decided by nobody)
        late.close()
        assert eng.txn.list_transactions() == []
        assert eng.txn.describe("s-0")["state"] == "CompleteAbort"
        # the run after the restart began after the abort: it prepares and commits
        rerun = eng.txn.batch_seen("sink-s", 5)
        assert rerun == (5, 1)
        other = eng.txn.batch_seen("sink-s", 6)  # (another batch's count is its own)
        again = write_for(eng, "s-0", "sink-s", b"rerun").prepare(batch=rerun)
        assert eng.txn.commit_prepared("sink-s", [again], 5) is True
        assert committed(eng, 0) == [b"rerun"] and eng.txn.list_transactions() == []
        # a second failure of the same batch is counted again; other batches unaffected
        eng.txn.abort_prepared("sink-s", [], batch=5)
        assert eng.txn.decision("sink-s")["aborts"] == {"5": 2}
        with pytest.raises(InvalidTxnState, match="micro-batch 5"):
            write_for(eng, "s-1", "sink-s", b"x").prepare(batch=rerun)
        six = write_for(eng, "s-1", "sink-s", b"six").prepare(batch=other)
        assert eng.txn.commit_prepared("sink-s", [six], 6) is True
        assert committed(eng, 0) == [b"rerun", b"six"] and eng.txn.list_transactions() == []
        # a job and a batch checked together; a batch needs a producer of a decision key
        with pytest.raises(InvalidArgument, match="takes what eng.txn.batch_seen"):
            write_for(eng, "s-2", "sink-s", b"y").prepare(batch=(5, 2))
        plain = eng.producer(transactional_id="s-3")
        plain.begin()
        with pytest.raises(InvalidArgument, match=r"prepare\(batch=...\) needs a producer made "
                           "with decision_key"):
            plain.prepare(batch=rerun)
        plain.abort()
        for bad in (-1, "5", True, 1 << 63):
            with pytest.raises(InvalidArgument, match="a batch id is an integer"):
                eng.txn.batch_seen("sink-s", bad)
            with pytest.raises(InvalidArgument, match="a batch id is an integer"):
                eng.txn.abort_prepared("sink-s", [], batch=bad)


def test_the_aborts_counted_under_a_key_are_bounded_checked_and_optional(topics):
    from engine.fs import jsondoc
    from engine.txn.decisions import MAX_ABORTS

    with Engine.open(topics) as eng:
        for i in reversed(range(MAX_ABORTS + 3)):  # (in any order: the highest ids are kept)
            eng.txn.abort_prepared("sink-a", [], batch=i)
        eng.txn.abort_prepared("sink-a", [], batch=MAX_ABORTS + 2)
        aborts = eng.txn.decision("sink-a")["aborts"]
        assert sorted(map(int, aborts)) == list(range(3, MAX_ABORTS + 3))
        assert aborts[str(MAX_ABORTS + 2)] == 2 and aborts["3"] == 1
        assert eng.txn.batch_seen("sink-a", 0) == (0, 0)  # (dropped: as never aborted)
        path = eng._decisions.path("sink-c")
        eng.txn.commit_prepared("sink-c", [], 4)
    # a file an earlier release wrote (no "aborts", with or without "ended")
    for old in ({"key": "sink-c", "committed": 4, "pending": None},
                {"key": "sink-c", "committed": 4, "pending": None, "ended": ["j"]}):
        open(path, "wb").write(jsondoc.seal(old))
        with Engine.open(topics) as eng:
            assert eng.txn.decision("sink-c") == {"ended": [], **old, "aborts": {}}
            assert eng.txn.batch_seen("sink-c", 4) == (4, 0)
    with Engine.open(topics) as eng:
        eng.txn.abort_prepared("sink-c", [], batch=7)
        assert eng.txn.decision("sink-c")["aborts"] == {"7": 1}
    base = {"key": "sink-c", "committed": 4, "pending": None, "ended": []}
    for aborts, why in [([7], "aborts is not a map"),
                        ({str(i): 1 for i in range(MAX_ABORTS + 1)}, "aborts is not a map"),
                        ({"07": 1}, "batch id '07' is not a decimal integer"),
                        ({"-1": 1}, "batch id '-1'"), ({"x": 1}, "batch id 'x'"),
                        ({"9" * 30: 1}, "batch id '9999"), ({str(1 << 63): 1}, "batch id"),
                        ({"7": 0}, "batch 7's count is 0"), ({"7": True}, "count is True"),
                        ({"7": 1.5}, "count is 1.5"), ({"7": 1 << 63}, "count is")]:
        open(path, "wb").write(jsondoc.seal(dict(base, aborts=aborts)))
        with Engine.open(topics) as eng:
            with pytest.raises(DamagedMetadata, match=why):
                eng.txn.decision("sink-c")
            with pytest.raises(DamagedMetadata, match=why):  # a writer as it begins too
                eng.txn.batch_seen("sink-c", 7)
