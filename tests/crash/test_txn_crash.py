"""Transactions across kill -9 and processes: a kill at each step of a commit or abort (the
failpoints), fencing between two processes with one transactional id, consumers settling a
commit cut short, and Kafka's TransactionsTest shape (consume, transform, produce and commit
offsets in one transaction, killed at random) — after which every transaction is wholly
committed or wholly aborted and the group's offsets match."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import txn_view
from helpers import ROOT

from engine import Engine, Record
from engine import clock as clock_mod
from engine.txn.txn_store import TxnStore

ENV = dict(os.environ, PYTHONPATH=str(ROOT))
TXN_PARTS = [("out", 0), ("out", 1), ("audit", 0)]

ONE_TXN = """
import os, sys
from engine import Engine, Record
d, action, timeout, offsets = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
eng = Engine.open(d)
tp = eng.producer(transactional_id="billing-1", transaction_timeout_ms=timeout)
tp.begin()
tp.produce("out", [Record(value=b"a%d" % i) for i in range(3)], partition=0)
tp.produce("out", [Record(value=b"b")], partition=1)
tp.produce("audit", [Record(value=b"c")])
if offsets:
    tp.send_offsets("g", {("in", 0): 42, ("in", 1): 7})
print("PRODUCED", flush=True)
if action == "commit":
    tp.commit()
elif action == "abort":
    tp.abort()
else:  # die with the transaction open
    os.kill(os.getpid(), 9)
print("DONE", flush=True)
os._exit(0)
"""


def setup_topics(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("out", partitions=2)
        eng.create_topic("audit")
        eng.create_topic("in", partitions=2)


def run_one(data_dir, action, failpoint=None, timeout_ms=60000, offsets=True):
    env = dict(ENV, RIVVEN_FAILPOINT=failpoint) if failpoint else ENV
    return subprocess.run([sys.executable, "-c", ONE_TXN, data_dir, action, str(timeout_ms),
                           "1" if offsets else "0"],
                          capture_output=True, env=env, cwd=ROOT, timeout=120)


def check_whole(eng, fate, offsets):
    for t, p in TXN_PARTS:
        assert txn_view.fates(eng, t, p) == {fate}, (t, p, txn_view.batches(eng, t, p))
        assert len(txn_view.markers(eng, t, p)) == 1, (t, p, txn_view.batches(eng, t, p))
    committed = eng.groups.committed("g") if "g" in eng.groups.names() else {}
    assert committed == offsets
    values = {(t, p): txn_view.committed_values(eng, t, p) for t, p in TXN_PARTS}
    if fate == "committed":
        assert values == {("out", 0): [b"a0", b"a1", b"a2"], ("out", 1): [b"b"],
                          ("audit", 0): [b"c"]}
    else:
        assert not any(values.values())


def ends(eng):
    return [eng.end_offsets(t)[p] for t, p in TXN_PARTS]


@pytest.mark.parametrize("action,point", [
    ("commit", "txn.after_prepare"), ("commit", "append.each_logged"),
    ("commit", "txn.after_marker"), ("commit", "txn.after_offsets"),
    ("commit", "txn.after_complete"),
    ("abort", "txn.after_prepare"), ("abort", "append.each_logged"),
    ("abort", "txn.after_marker"), ("abort", "txn.after_complete"),
])
def test_killed_at_each_step_the_transaction_is_whole_after_reopen(data_dir, action, point):
    setup_topics(data_dir)
    proc = run_one(data_dir, action, point)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert b"PRODUCED" in proc.stdout and b"DONE" not in proc.stdout
    fate, offsets = (("committed", {("in", 0): 42, ("in", 1): 7}) if action == "commit"
                     else ("aborted", {}))
    with Engine.open(data_dir) as eng:
        acted = [(r["action"], r["error"]) for r in eng.last_recovery["transactions"]]
        # (killed after Complete: nothing left to do)
        assert acted == ([] if point == "txn.after_complete" else
                         [("committed" if action == "commit" else "aborted", None)])
        check_whole(eng, fate, offsets)
        before = ends(eng)
        assert eng.txn.list_transactions() == []
    with Engine.open(data_dir) as eng:  # recovering again writes nothing again
        assert eng.last_recovery["transactions"] == []
        assert ends(eng) == before
        check_whole(eng, fate, offsets)
        goes_on(eng)  # the id goes on where it was


def goes_on(eng):
    """The id's next transaction commits."""
    tp = eng.producer(transactional_id="billing-1")
    tp.begin()
    tp.produce("out", [Record(value=b"next")], partition=1)
    tp.commit()
    assert txn_view.committed_values(eng, "out", 1)[-1] == b"next"


@pytest.mark.parametrize("action", ["commit", "abort"])
@pytest.mark.parametrize("loss", ["lost", "torn", "zeros"])
def test_a_complete_a_machine_crash_took_is_finished_again_writing_nothing_twice(
        data_dir, action, loss):
    """Without group offsets, Complete is not fdatasynced (the id's next change does it):
    a machine crash may take it away, whole or in part. What is left is the Prepare, every
    marker durable: recovery completes it again, writing no marker twice."""
    setup_topics(data_dir)
    proc = run_one(data_dir, action, "txn.after_complete", offsets=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    path = TxnStore(data_dir).path("billing-1")
    first, size = txn_view.frames(path)[-2][0], os.path.getsize(path)
    with open(path, "r+b") as f:  # the Complete's two frames, as the crash left them
        if loss == "lost":
            f.truncate(first)
        elif loss == "torn":
            f.truncate(first + 30)
        else:
            f.seek(first)
            f.write(bytes(size - first))
    with Engine.open(data_dir, read_only=True) as ro:
        assert [r["state"] for r in ro.txn.list_transactions()] == [
            "PrepareCommit" if action == "commit" else "PrepareAbort"]
        before = ends(ro)
    fate = "committed" if action == "commit" else "aborted"
    with Engine.open(data_dir) as eng:
        assert [(r["action"], r["error"]) for r in eng.last_recovery["transactions"]] == [
            (fate, None)]
        assert ends(eng) == before  # no marker written again
        check_whole(eng, fate, {})
        assert eng.txn.list_transactions() == []
    with Engine.open(data_dir) as eng:
        assert eng.last_recovery["transactions"] == []
        goes_on(eng)


@pytest.mark.parametrize("action", ["commit", "abort"])
@pytest.mark.parametrize("point,found", [("txn.after_marker", "rebooted"),
                                         ("append.each_logged", "rebooted"),
                                         ("txn.after_marker", "timed out")])
def test_a_prepare_a_machine_crash_took_is_decided_by_the_markers(
        data_dir, monkeypatch, action, point, found):
    """Without group offsets, the Prepare is not fdatasynced before the markers: a machine
    crash may take it (and the Complete) while markers are durable, all of them or (killed
    between two being logged) some. The state left is Ongoing, and its markers decide it:
    recovery finishes it as they say, at the next open when the state predates the boot,
    else when it times out."""
    setup_topics(data_dir)
    proc = run_one(data_dir, action, point, offsets=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    path = TxnStore(data_dir).path("billing-1")
    with open(path, "r+b") as f:  # the Prepare's two frames (the last ones) never reached
        f.truncate(txn_view.frames(path)[-2][0])  # the disk
    fate = "committed" if action == "commit" else "aborted"
    now = clock_mod.now_ms()
    if found == "rebooted":
        monkeypatch.setattr(clock_mod, "boot_ms", lambda: now + 1)
    else:
        with Engine.open(data_dir) as eng:  # not after a reboot: left to its timeout
            assert eng.last_recovery["transactions"] == []
            assert [r["state"] for r in eng.txn.list_transactions()] == ["Ongoing"]
        monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 60001)
    with Engine.open(data_dir) as eng:
        assert [(r["state"], r["action"], r["error"])
                for r in eng.last_recovery["transactions"]] == [("Ongoing", fate, None)]
        check_whole(eng, fate, {})
        assert eng.txn.list_transactions() == []
    with Engine.open(data_dir) as eng:
        assert eng.last_recovery["transactions"] == []
        check_whole(eng, fate, {})


def test_killed_with_the_transaction_open_it_is_aborted_at_its_timeout(data_dir, monkeypatch):
    setup_topics(data_dir)
    proc = run_one(data_dir, "die", timeout_ms=5000)
    assert proc.returncode == -signal.SIGKILL and b"PRODUCED" in proc.stdout
    with Engine.open(data_dir) as eng:
        assert eng.last_recovery["transactions"] == []  # not yet
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 5001)
    with Engine.open(data_dir) as eng:
        assert [r["action"] for r in eng.last_recovery["transactions"]] == ["aborted"]
        check_whole(eng, "aborted", {})


def test_killed_with_the_transaction_open_the_next_instance_aborts_it(data_dir):
    setup_topics(data_dir)
    proc = run_one(data_dir, "die")
    assert proc.returncode == -signal.SIGKILL and b"PRODUCED" in proc.stdout
    with Engine.open(data_dir) as eng:
        assert eng.last_recovery["transactions"] == []  # not timed out: still open
        assert [r["state"] for r in eng.txn.list_transactions()] == ["Ongoing"]
        for t, p in TXN_PARTS:
            assert txn_view.fates(eng, t, p) == {"open"}
        eng.producer(transactional_id="billing-1")  # init aborts it
        check_whole(eng, "aborted", {})


ZOMBIE = """
import sys
from engine import Engine, Record, ProducerFenced
eng = Engine.open(sys.argv[1])
tp = eng.producer(transactional_id="f")
tp.begin()
tp.produce("out", [Record(value=b"old")], partition=0)
print("READY", flush=True)
sys.stdin.readline()
for what, call in (("produce", lambda: tp.produce("out", [Record(value=b"late")], partition=1)),
                   ("commit", tp.commit)):
    try:
        call()
        print(what, "OK", flush=True)
    except ProducerFenced as e:
        print(what, "ProducerFenced", flush=True)
eng.close()
"""


def test_two_processes_with_one_transactional_id_the_older_is_fenced(data_dir):
    setup_topics(data_dir)
    old = subprocess.Popen([sys.executable, "-c", ZOMBIE, data_dir], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=ENV, cwd=ROOT)
    try:
        assert old.stdout.readline() == b"READY\n"
        with Engine.open(data_dir) as eng:
            new = eng.producer(transactional_id="f")
            old.stdin.write(b"go\n")
            old.stdin.flush()
            out = old.communicate(timeout=60)[0].decode().split("\n")
            assert out[:2] == ["produce ProducerFenced", "commit ProducerFenced"]
            assert txn_view.fates(eng, "out", 0) == {"aborted"}  # by the new one's init
            assert txn_view.batches(eng, "out", 1) == []  # nothing of the old one there
            new.begin()
            new.produce("out", [Record(value=b"new")], partition=1)
            new.commit()
            assert txn_view.committed_values(eng, "out", 0) == []
            assert txn_view.committed_values(eng, "out", 1) == [b"new"]
    finally:
        old.kill()


CROSSED = """
import sys
from engine import Engine, Record
d, n = sys.argv[1], int(sys.argv[2])
eng = Engine.open(d, settings={"lock.timeout.ms": "5000"})
parts = [("audit", 0), ("out", 0), ("out", 1)]
tp = eng.producer(transactional_id="x%d" % n)
for i in range(150):
    tp.begin()
    for t, p in (parts if n else parts[::-1]):  # the two write them in opposite orders
        tp.produce(t, [Record(value=b"%d-%d" % (n, i))], partition=p)
    tp.commit()
eng.close()
print("DONE", flush=True)
"""


def test_two_processes_ending_transactions_over_the_same_partitions_never_wait_on_each_other(
        data_dir):
    """A logged marker keeps its partition's flock until it reaches the segment; the markers
    of an end are taken in (topic, partition) order whatever order the transaction wrote
    them in, so two processes ending transactions at once never hold what the other waits
    for (which would end in a LockTimeout)."""
    setup_topics(data_dir)
    procs = [subprocess.Popen([sys.executable, "-c", CROSSED, data_dir, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
             for n in range(2)]
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0 and out == b"DONE\n", err.decode()[-2000:]
    finally:
        for p in procs:
            p.kill()
    with Engine.open(data_dir) as eng:
        for t, p in TXN_PARTS:
            assert txn_view.fates(eng, t, p) == {"committed"}
            assert len(txn_view.committed_values(eng, t, p)) == 300


CUT_SHORT = """
import sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1])
c = eng.consumer("g", "in", enable_auto_commit=False)
recs = c.poll(timeout_ms=1000, max_records=100)
tp = eng.producer(transactional_id="w")
tp.begin()
tp.produce("out", [Record(value=b"out:" + r.value) for r in recs], partition=0)
tp.send_offsets("g", {("in", r.partition): r.offset + 1 for r in recs}, consumer=c)
tp.commit()  # killed after the decision, before the markers and the offsets
"""


def test_a_consumer_taking_over_settles_a_commit_cut_short_first(data_dir):
    setup_topics(data_dir)
    with Engine.open(data_dir) as eng:  # open before the crash: its open recovers nothing
        eng.produce("in", [Record(value=b"v%d" % i) for i in range(5)], partition=0)
        env = dict(ENV, RIVVEN_FAILPOINT="txn.after_prepare")
        proc = subprocess.run([sys.executable, "-c", CUT_SHORT, data_dir], env=env, cwd=ROOT,
                              capture_output=True, timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
        assert eng.txn.list_transactions()[0]["state"] == "PrepareCommit"
        c = eng.consumer("g", "in", enable_auto_commit=False)
        # it starts where the transaction that read v0..v4 left off, not from the start
        assert c.position("in", 0) == 5
        assert eng.txn.list_transactions() == []
        assert txn_view.committed_values(eng, "out", 0) == [b"out:v%d" % i for i in range(5)]
        c.close()


WORKER = """
import os, random, sys
from engine import ConsumerFenced, Engine, InvalidArgument, Record
d, slot = sys.argv[1], sys.argv[2]
rng = random.Random()
eng = Engine.open(d)
tp = eng.producer(transactional_id="ctp-" + slot)
c = eng.consumer("g", "in", enable_auto_commit=False, member_id="m%s-%d" % (slot, os.getpid()))
total = sum(eng.end_offsets("in").values())
while True:
    recs = c.poll(timeout_ms=50, max_records=rng.randint(1, 15))
    if not recs:
        done = eng.groups.committed("g")
        if sum(done.get(("in", p), 0) for p in range(2)) >= total:
            break
        continue
    offsets = {}
    for r in recs:
        offsets[("in", r.partition)] = r.offset + 1
    tp.begin()
    tp.produce("out", [Record(key=r.key, value=b"out:" + r.value) for r in recs])
    try:
        tp.send_offsets("g", offsets, consumer=c)
        if rng.random() < 0.25:
            raise ConsumerFenced("(an abort at random)")
        tp.commit()
    except ConsumerFenced:
        tp.abort()
        for (t, p) in offsets:  # read them again from the committed offsets
            try:
                c.seek(t, p, c.committed(t, p) or 0)
            except InvalidArgument:
                pass  # not ours any more
c.close()
eng.close()
print("FINISHED", flush=True)
"""


def start_worker(data_dir, slot):
    return subprocess.Popen([sys.executable, "-c", WORKER, data_dir, str(slot)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)


def test_consume_transform_produce_killed_at_random_is_exactly_once(data_dir):
    rng = random.Random(15)
    n = 20000  # (more than two workers get through while they are killed 20 times)
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", partitions=2)
        eng.create_topic("out", partitions=3)
        eng.produce("in", [Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(n)])
    workers = {slot: start_worker(data_dir, slot) for slot in range(2)}
    kills = 0
    try:
        while kills < 20:
            time.sleep(rng.uniform(0.3, 1.0))
            slot = rng.randrange(2)
            w = workers[slot]
            if w.poll() is None:
                w.kill()
                w.wait()
                kills += 1
            else:
                assert w.returncode == 0, w.stderr.read().decode()
                break  # (the work ran out first: the assertion below says so)
            workers[slot] = start_worker(data_dir, slot)
        assert kills >= 20
        for w in workers.values():  # now let them finish
            out, err = w.communicate(timeout=300)
            assert w.returncode == 0 and out == b"FINISHED\n", err.decode()
    finally:
        for w in workers.values():
            w.kill()
    with Engine.open(data_dir) as eng:
        assert eng.txn.list_transactions() == []
        got = [v for p in range(3) for v in txn_view.committed_values(eng, "out", p)]
        assert sorted(got) == sorted(b"out:v%d" % i for i in range(n))  # each exactly once
        for p in range(3):
            assert "open" not in txn_view.fates(eng, "out", p)
            # what read_committed returns is what the markers decided, in offset order
            assert [r.value for r in eng.read("out", p, 0, 10**6,
                                              isolation_level="read_committed")] == \
                txn_view.committed_values(eng, "out", p)
            assert eng.end_offsets("out", isolation_level="read_committed")[p] == \
                eng.end_offsets("out")[p]
        assert eng.groups.committed("g") == {("in", p): e
                                              for p, e in eng.end_offsets("in").items()}
        aborted = sum(f == "aborted" for p in range(3)
                      for f in txn_view.outcomes(eng, "out", p).values())
        assert aborted > 0  # the aborts (and the kills) really happened
