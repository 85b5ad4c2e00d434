"""Transactions on the command line: ``rivven produce --idempotent`` and ``--transactional-id
[--txn-size N]``, ``rivven consume``/``offsets --isolation``, and ``rivven txn list|describe|
producers|find-hanging|abort`` (Kafka's kafka-transactions.sh). Through CliRunner, and as real
processes where signals, pipes and other processes matter."""

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import txn_view
from helpers import ROOT, produce_into_head, run_rivven
from helpers.cli import run_in_process
from typer.testing import CliRunner

from engine import Engine, ProducerFenced, Record
from engine import clock as clock_mod
from engine.txn.txn_store import TxnStore
from rivven_cli.main import app

runner = CliRunner()
RIVVEN = [sys.executable, "-m", "rivven_cli"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


def ok(r):
    assert r.exit_code == 0, r.output
    return r


def env(data_dir):
    return dict(ENV, RIVVEN_DATA_DIR=data_dir)


def produce(data_dir, *args, input=b"", run=run_rivven):
    """``rivven produce`` as a real process, or ``run=run_in_process`` in this one (for input
    errors: its stdin is a real file there too)."""
    r = run(data_dir, "produce", *args, input=input)
    r.err = r.stderr.decode()
    return r


def lines(n, prefix="v"):
    return b"".join(b"%s%d\n" % (prefix.encode(), i) for i in range(n))


def values(data_dir, topic, level="read_committed", partitions=(0,)):
    with Engine.open(data_dir, read_only=True) as eng:
        return [r.value for p in partitions
                for r in eng.read(topic, p, 0, 1 << 20, isolation_level=level)]


def kinds(data_dir, topic, partition=0):
    """The kind of every batch of a partition: plain, idempotent, data, COMMIT, ABORT."""
    with Engine.open(data_dir, read_only=True) as eng:
        return [b[0] for b in txn_view.batches(eng, topic, partition)]


def end_offsets(data_dir, topic):
    with Engine.open(data_dir, read_only=True) as eng:
        return eng.end_offsets(topic)


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def t(data_dir):
    ok(cli(data_dir, "topic", "create", "t"))
    return data_dir


# ================================================================ produce --idempotent
def test_produce_idempotent_writes_as_one_producer(t):
    r = produce(t, "t", "--idempotent", "--batch-records", "4", input=lines(10))
    assert r.returncode == 0, r.err
    assert kinds(t, "t") == ["idempotent"] * 3
    with Engine.open(t, read_only=True) as eng:
        (row,) = eng.txn.producers("t")
    assert (row["last_sequence"], row["last_offset"]) == (9, 9)
    assert f"as idempotent producer {row['producer_id']}" in r.err
    r = produce(t, "t", "--idempotent", "--json", input=lines(2))
    doc = json.loads(r.err)
    assert doc["records"] == 2 and doc["retries"] == 0 and doc["producer_id"] != row["producer_id"]
    assert values(t, "t") == [b"v%d" % i for i in range(10)] + [b"v0", b"v1"]


def test_produce_idempotent_sends_a_failed_call_again_and_stores_it_once(t, tmp_path,
                                                                        monkeypatch):
    """The WAL's fdatasync fails once (EIO) after the batch was written: the call is sent
    again with the same sequences and its records are stored once (in process, so that the
    failure can be injected: CliRunner, input from --file)."""
    src = tmp_path / "in.txt"
    src.write_bytes(lines(5))
    real = os.fdatasync
    armed = {"on": True}

    def flaky(fd):
        if armed["on"] and "/wal/" in os.readlink(f"/proc/self/fd/{fd}"):
            armed["on"] = False
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)
    r = cli(t, "produce", "t", "--idempotent", "--file", str(src), "--json",
            "--print-offsets")
    assert r.exit_code == 0, r.output
    assert not armed["on"]  # (the failure did happen)
    assert [json.loads(x) for x in r.stdout.splitlines()] == [
        {"partition": 0, "offset": i} for i in range(5)]
    assert json.loads(r.stderr)["retries"] == 1
    monkeypatch.setattr(os, "fdatasync", real)
    assert values(t, "t") == [b"v%d" % i for i in range(5)]
    # the failing half: the same failure without --idempotent fails the command
    armed["on"] = True
    monkeypatch.setattr(os, "fdatasync", flaky)
    r = cli(t, "produce", "t", "--file", str(src))
    assert r.exit_code == 1 and not armed["on"], r.output


# ================================================================ produce --transactional-id
def test_one_transaction_per_chunk_or_per_txn_size_records(t):
    r = produce(t, "t", "--transactional-id", "loader", "--batch-records", "4",
                input=lines(10))
    assert r.returncode == 0, r.err
    assert "in 3 transactions of loader" in r.err
    assert kinds(t, "t") == ["data", "COMMIT"] * 3
    r = produce(t, "t", "--transactional-id", "loader", "--txn-size", "3", "--json",
                input=lines(7, "w"))
    doc = json.loads(r.err)
    assert (doc["records"], doc["transactions"], doc["transactional_id"]) == (7, 3, "loader")
    # transactions of 3, 3 and 1 records, whatever the chunks (one chunk of 7 here)
    assert kinds(t, "t")[6:] == ["data", "COMMIT"] * 3
    with Engine.open(t, read_only=True) as eng:
        sizes = [b[4] - b[3] + 1 for b in txn_view.batches(eng, "t", 0)[6:] if b[0] == "data"]
        assert eng.txn.list_transactions() == []
    assert sizes == [3, 3, 1]
    assert values(t, "t") == [b"v%d" % i for i in range(10)] + [b"w%d" % i for i in range(7)]


def test_txn_size_spans_chunks(t):
    r = produce(t, "t", "--transactional-id", "loader", "--txn-size", "5", "--batch-records",
                "2", "--print-offsets", input=lines(12))
    assert r.returncode == 0, r.err
    assert r.stdout.decode().split("\n")[:-1] == [f"0 {o}" for o in (*range(0, 5),
                                                                        *range(6, 11), 12, 13)]
    with Engine.open(t, read_only=True) as eng:
        assert txn_view.markers(eng, "t", 0) == [("COMMIT", 0, e) for e in (1, 2, 3)]


def test_offsets_are_printed_only_once_committed(t):
    """--txn-size 5 over 7 records, the 7th malformed: the first transaction commits and its 5
    offsets are printed; the 6th record was written in the open transaction, which is aborted:
    its offset is never printed."""
    good = b"".join(b'{"value": "r%d"}\n' % i for i in range(6))
    r = produce(t, "t", "--input", "json", "--transactional-id", "loader", "--txn-size", "5",
                "--print-offsets", input=good + b"{oops\n", run=run_in_process)
    assert r.returncode == 1, r.err
    assert r.stdout.decode().split() == [x for o in range(5) for x in ("0", str(o))]
    err = " ".join(r.err.split())
    assert "line 7: malformed JSON" in err and "5 records" in err and "committed to t in 1 " \
        "transaction of loader before it; the open transaction (1 record) was aborted, none " \
        "after" in err, err
    assert values(t, "t") == [b"r%d" % i for i in range(5)]
    assert kinds(t, "t") == ["data", "COMMIT", "data", "ABORT"]


def test_a_record_too_large_aborts_its_transaction_and_names_its_line(data_dir):
    ok(cli(data_dir, "topic", "create", "t", "-c", "max.message.bytes=1000"))
    r = produce(data_dir, "t", "--transactional-id", "loader", "--txn-size", "2",
                "--batch-records", "1", input=b"a\nb\nc\n" + b"x" * 2000 + b"\nd\n",
                run=run_in_process)
    err = " ".join(r.err.split())
    assert r.returncode == 1 and "line 4:" in err and "record 0" not in err, err
    assert "2 records" in err and "the open transaction (1 record) was aborted" in err, err
    assert values(data_dir, "t") == [b"a", b"b"]
    assert values(data_dir, "t", "read_uncommitted") == [b"a", b"b", b"c"]


@pytest.mark.parametrize("args,option,why", [
    (["--txn-size", "3"], "--txn-size", "applies to --transactional-id"),
    (["--transaction-timeout-ms", "1000"], "--transaction-timeout-ms",
     "applies to --transactional-id"),
    (["--transactional-id", "x", "--txn-size", "0"], "--txn-size", "0"),
])
def test_options_that_cannot_apply_are_refused(t, args, option, why):
    r = produce(t, "t", *args, input=lines(3), run=run_in_process)
    assert r.returncode == 2, r.err
    assert option in r.err and why in " ".join(r.err.split()), r.err
    assert end_offsets(t, "t") == {0: 0}


def test_a_transaction_timeout_aborts_a_slow_transaction(t):
    """--transaction-timeout-ms is the producer's transaction.timeout.ms: a transaction open
    longer is aborted, and the command fails saying what was committed."""
    proc = subprocess.Popen([*RIVVEN, "produce", "t", "--transactional-id", "slow", "--txn-size",
                             "3", "--transaction-timeout-ms", "1"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(t), cwd=ROOT)
    proc.stdin.write(b"a\n")
    proc.stdin.flush()
    wait_for(lambda: end_offsets(t, "t") == {0: 1}, "the first record stored")
    time.sleep(0.01)  # (longer than the timeout: the next call finds it expired)
    _, err = proc.communicate(b"b\n", timeout=60)
    err = " ".join(err.decode().split())
    assert proc.returncode == 1, err
    assert "ran longer than its transaction.timeout.ms (1 ms) and was aborted" in err
    assert "0 records (0 B) committed to t in 0 transactions of slow before the error; the " \
        "open transaction (2 records) was aborted" in err, err
    # (b joined no new partition: it was written, and the commit at the end found the
    # transaction expired)
    assert values(t, "t") == [] and kinds(t, "t") == ["data", "data", "ABORT"]


def test_a_commit_that_fails_ends_the_command_saying_what_was_committed(t, tmp_path,
                                                                      monkeypatch):
    """One transaction per chunk; time runs 10 s per clock reading (in process), so the
    second transaction is past its 15 s timeout at its commit: it is aborted, and the command
    fails naming what the first committed."""
    src = tmp_path / "in.txt"
    src.write_bytes(lines(4))
    ok(cli(t, "produce", "t", "--transactional-id", "loader", "--file", str(src),
           "--batch-records", "2", "--transaction-timeout-ms", "600000"))  # (the id exists)
    ticks = iter(range(clock_mod.now_ms(), 1 << 62, 10_000))
    monkeypatch.setattr(clock_mod, "now_ms", lambda: next(ticks))
    r = cli(t, "produce", "t", "--transactional-id", "loader", "--file", str(src),
            "--batch-records", "2", "--transaction-timeout-ms", "15000", "--print-offsets")
    err = " ".join(r.stderr.split())
    assert r.exit_code == 1, r.output
    assert "ran longer than its transaction.timeout.ms (15000 ms)" in err, err
    assert "0 records (0 B) committed to t in 0 transactions of loader before the error; " \
        "the open transaction (2 records) was aborted" in err, err
    assert r.stdout == ""
    monkeypatch.undo()
    assert values(t, "t") == [b"v%d" % i for i in range(4)]  # (the first run's)


def test_a_newer_producer_of_the_id_fences_the_running_one(t):
    """Two processes with one transactional id: the second fences the first, whose open
    transaction is aborted; the first's next write fails with ProducerFenced and says what
    it had committed."""
    old = subprocess.Popen([*RIVVEN, "produce", "t", "--transactional-id", "loader",
                            "--txn-size", "2"], stdin=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env(t), cwd=ROOT)
    old.stdin.write(b"a\nb\nc\n")  # a, b committed; c in the open transaction
    old.stdin.flush()
    wait_for(lambda: end_offsets(t, "t") == {0: 4}, "a transaction and a record stored")
    new = produce(t, "t", "--transactional-id", "loader", input=b"n\n")
    assert new.returncode == 0, new.err
    _, err = old.communicate(b"d\n", timeout=60)
    err = " ".join(err.decode().split())
    assert old.returncode == 1, err
    assert "was fenced" in err and "2 records (2 B) committed to t in 1 transaction of " \
        "loader before the error; the open transaction (1 record) was aborted" in err, err
    assert values(t, "t") == [b"a", b"b", b"n"]


# ---------------------------------------------------------------- stopped: signals, pipes
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                      (signal.SIGHUP, 129)])
def test_a_signal_aborts_the_open_transaction_and_says_what_was_committed(t, sig, code):
    # (the signal's default disposition in the child: under nohup SIGHUP is ignored, and
    # rivven keeps an ignored signal ignored, as nohup asks)
    proc = subprocess.Popen([*RIVVEN, "produce", "t", "--transactional-id", "loader",
                             "--txn-size", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(t), cwd=ROOT,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    proc.stdin.write(b"a\nb\nc\n")
    proc.stdin.flush()
    # a, b and their COMMIT marker, then c in the open transaction: it waits for more input
    wait_for(lambda: end_offsets(t, "t") == {0: 4}, "a transaction and a record stored")
    proc.send_signal(sig)
    # (stdin stays open until it exits: communicate() would close it at once, and an end of
    # input that won the race against the signal would commit c instead)
    proc.wait(timeout=60)
    err = proc.stderr.read().decode()
    proc.stdin.close()
    assert proc.returncode == code, err
    assert f"stopped by {signal.Signals(sig).name}" in err and "2 records (2 B) committed " \
        "to t in 1 transaction of loader before it stopped; the open transaction (1 record) " \
        "was aborted" in " ".join(err.split()), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert values(t, "t") == [b"a", b"b"]
    assert kinds(t, "t") == ["data", "COMMIT", "data", "ABORT"]
    with Engine.open(t, read_only=True) as eng:
        assert eng.txn.list_transactions() == []


def test_a_stopped_transactional_produce_reports_as_json(t):
    proc = subprocess.Popen([*RIVVEN, "produce", "t", "--transactional-id", "loader",
                             "--txn-size", "10", "--json", "-q"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(t), cwd=ROOT)
    proc.stdin.write(b"a\nb\n")
    proc.stdin.flush()
    wait_for(lambda: end_offsets(t, "t") == {0: 2}, "2 records stored")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)  # (stdin open until then: see above)
    err = proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 143
    doc = json.loads(err)
    assert {k: doc[k] for k in ("records", "transactions", "aborted", "unsettled", "stopped",
                                "in_flight", "transactional_id")} == {
        "records": 0, "transactions": 0, "aborted": 2, "unsettled": None, "stopped": "SIGTERM",
        "in_flight": False, "transactional_id": "loader"}


def test_a_closed_pipe_leaves_only_what_was_printed_and_committed(t):
    """seq | rivven produce --transactional-id --print-offsets | head -2: the records of every
    committed transaction are visible, none of the one open when the pipe closed."""
    shown, code, err = produce_into_head(t, "t", "--transactional-id", "loader", "--txn-size",
                                         "1000", "--print-offsets")
    assert shown == b"0 0\n0 1\n"
    assert code == 141, err
    assert "broken pipe" in err and "Traceback" not in err, err
    n = int(re.search(r"([\d,]+) records? \(", err).group(1).replace(",", ""))
    assert n > 0 and n % 1000 == 0, err  # whole transactions only
    assert values(t, "t") == [b"%d" % i for i in range(1, n + 1)]
    with Engine.open(t, read_only=True) as eng:
        assert eng.txn.list_transactions() == [] and txn_view.batches(eng, "t", 0)[-1][0] in (
            "COMMIT", "ABORT")


# ================================================================ consume / offsets --isolation
@pytest.fixture
def mixed(data_dir):
    """Topic t (2 partitions) and u: an aborted transaction, a committed one, then one left
    open in t-0 followed by a plain record; the open producer is returned (to commit)."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", partitions=2)
    eng.create_topic("u")
    tp = eng.producer(transactional_id="billing-1")
    for vals, end in (([b"aborted"], tp.abort), ([b"c1", b"c2"], tp.commit)):
        tp.begin()
        tp.produce("t", [Record(value=v) for v in vals], partition=0)
        tp.produce("u", [Record(value=v) for v in vals])
        end()
    tp.begin()
    tp.produce("t", [Record(value=b"open")], partition=0)
    eng.produce("t", [Record(value=b"plain")], partition=0)
    eng.produce("t", [Record(value=b"p1")], partition=1)
    yield data_dir, eng, tp
    eng.close()


def test_consume_isolation_reads_committed_records_up_to_the_lso(mixed):
    d, _, tp = mixed
    r = ok(cli(d, "consume", "t", "u", "--isolation", "read_committed", "-f", "%t-%p %v\\n"))
    assert r.stdout.splitlines() == ["t-0 c1", "t-0 c2", "t-1 p1", "u-0 c1", "u-0 c2"]
    r = ok(cli(d, "consume", "t", "-p", "0"))  # the default: read_uncommitted, no markers
    assert r.stdout.split() == ["aborted", "c1", "c2", "open", "plain"]
    r = ok(cli(d, "consume", "t", "-p", "0", "--isolation", "read_uncommitted"))
    assert r.stdout.split() == ["aborted", "c1", "c2", "open", "plain"]
    r = ok(cli(d, "consume", "t", "-p", "0", "-o", "0:4", "--isolation", "read_committed"))
    assert r.stdout.split() == ["c1", "c2"]
    r = ok(cli(d, "consume", "t", "-p", "0", "-o", "end", "--isolation", "read_committed",
               "--json"))
    assert r.stdout == ""
    r = cli(d, "consume", "t", "--isolation", "committed")
    assert r.exit_code == 2 and "--isolation" in r.output
    tp.commit()
    r = ok(cli(d, "consume", "t", "-p", "0", "--isolation", "read_committed"))
    assert r.stdout.split() == ["c1", "c2", "open", "plain"]


def test_offsets_isolation_ends_at_the_last_stable_offset(mixed):
    d, _, tp = mixed
    # t-0: aborted 0, ABORT 1, c1 c2 2-3, COMMIT 4, open 5, plain 6: the LSO is 5
    rows = json.loads(ok(cli(d, "offsets", "t", "--isolation", "read_committed",
                             "--json")).stdout)
    assert [(r["partition"], r["end_offset"]) for r in rows] == [(0, 5), (1, 1)]
    rows = json.loads(ok(cli(d, "offsets", "t", "--json")).stdout)
    assert [(r["partition"], r["end_offset"]) for r in rows] == [(0, 7), (1, 1)]
    r = ok(cli(d, "offsets", "t", "--isolation", "read_committed", "--time", "end"))
    assert r.stdout.splitlines()[1].split() == ["0", "0", "5", "5"]
    tp.commit()
    rows = json.loads(ok(cli(d, "offsets", "t", "--isolation", "read_committed",
                             "--json")).stdout)
    assert [r["end_offset"] for r in rows] == [8, 1]


def test_a_group_consumer_reads_committed_and_commits_up_to_the_lso(mixed):
    d, eng, tp = mixed
    r = ok(cli(d, "consume", "t", "-g", "g", "--isolation", "read_committed"))
    assert sorted(r.stdout.split()) == ["c1", "c2", "p1"]
    # t-0: past c2 (3) and its COMMIT marker (4), up to the open transaction (the LSO, 5)
    assert eng.groups.committed("g") == {("t", 0): 5, ("t", 1): 1}
    tp.commit()
    r = ok(cli(d, "consume", "t", "-g", "g", "--isolation", "read_committed"))
    assert r.stdout.split() == ["open", "plain"]
    # past the last COMMIT marker (7): no lag is left
    assert eng.groups.committed("g") == {("t", 0): 8, ("t", 1): 1}
    row = [x for x in json.loads(ok(cli(d, "group", "describe", "g", "--json")).stdout)
           ["partitions"] if x["topic"] == "t" and x["partition"] == 0]
    assert row[0]["lag"] == 0


def test_follow_read_committed_waits_at_the_lso_until_the_commit(data_dir):
    """A follower in another process never shows an aborted record, and shows the records of
    an open transaction (and the plain ones after it) only once it commits."""
    eng = Engine.open(data_dir)
    eng.create_topic("t")
    follower = subprocess.Popen([*RIVVEN, "consume", "t", "--follow", "--isolation",
                                 "read_committed"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env(data_dir), cwd=ROOT)
    try:
        tp = eng.producer(transactional_id="billing-1")
        tp.begin()
        tp.produce("t", [Record(value=b"aborted")])
        tp.abort()
        tp.begin()
        tp.produce("t", [Record(value=b"c1")])
        tp.commit()
        tp.begin()
        tp.produce("t", [Record(value=b"open")])
        eng.produce("t", [Record(value=b"plain")])
        assert follower.stdout.readline() == b"c1\n"
        tp.commit()
        assert follower.stdout.readline() == b"open\n"
        assert follower.stdout.readline() == b"plain\n"
    finally:
        follower.send_signal(signal.SIGINT)
        follower.communicate(timeout=60)
        eng.close()


# ================================================================ rivven txn
@pytest.fixture
def txns(data_dir):
    """billing-1 with a transaction open in t-0 and u-0 and group offsets; done-1 with none."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", partitions=2)
    eng.create_topic("u")
    done = eng.producer(transactional_id="done-1")
    done.begin()
    done.produce("t", [Record(value=b"d")], partition=1)
    done.commit()
    tp = eng.producer(transactional_id="billing-1", transaction_timeout_ms=3_600_000)
    tp.begin()
    tp.produce("t", [Record(value=b"x"), Record(value=b"y")], partition=0)
    tp.produce("u", [Record(value=b"z")])
    tp.send_offsets("g", {("u", 0): 7})
    yield data_dir, eng, tp
    eng.close()


def test_txn_list_shows_open_transactions_and_all_with_all(txns):
    d, eng, tp = txns
    rows = json.loads(ok(cli(d, "txn", "list", "--json")).stdout)
    assert [r | {"age_ms": 0} for r in rows] == [r | {"age_ms": 0} for r in eng.txn.list_transactions()]
    assert [(r["transactional_id"], r["state"], r["partitions"]) for r in rows] == [
        ("billing-1", "Ongoing", [["t", 0], ["u", 0]])]
    assert set(rows[0]) == {"transactional_id", "producer_id", "epoch", "state", "partitions",
                            "offsets", "fences", "timeout_ms", "started_ms", "age_ms",
                            "updated_ms", "prepared"}
    r = ok(cli(d, "txn", "list"))
    head, row = r.stdout.splitlines()
    assert head.split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "PARTITIONS",
                            "AGE", "TIMEOUT", "STARTED"]
    assert row.split()[:5] == ["billing-1", str(tp.producer_id), str(tp.epoch), "Ongoing", "2"]
    assert row.split()[6] == "1h00m"
    r = ok(cli(d, "txn", "list", "--all"))
    assert [line.split()[:4] for line in r.stdout.splitlines()[1:]] == [
        ["billing-1", str(tp.producer_id), str(tp.epoch), "Ongoing"],
        ["done-1", "0", "1", "CompleteCommit"]]
    tp.commit()
    r = ok(cli(d, "txn", "list"))
    assert r.stdout == "" and "no open transactions" in r.stderr


def test_txn_describe(txns):
    d, eng, tp = txns
    doc = json.loads(ok(cli(d, "txn", "describe", "billing-1", "--json")).stdout)
    assert doc == eng.txn.describe("billing-1") | {"age_ms": doc["age_ms"]}
    assert doc["offsets"] == {"g": [["u", 0, 7]]}
    out = ok(cli(d, "txn", "describe", "billing-1")).stdout.splitlines()
    assert out[0] == f"transactional id: billing-1  producer id: {tp.producer_id}  epoch: " \
                     f"{tp.epoch}  state: Ongoing"
    assert out[1].startswith("timeout: 1h00m  started: 20")
    assert [line.split() for line in out[2:]] == [
        ["TOPIC", "PARTITION"], ["t", "0"], ["u", "0"],
        ["GROUP", "TOPIC", "PARTITION", "OFFSET", "MEMBER"], ["g", "u", "0", "7", "-"]]
    r = cli(d, "txn", "describe", "nope")
    assert r.exit_code == 1 and "no transactional id 'nope'" in r.stderr


def test_txn_producers(txns):
    d, eng, tp = txns
    rows = json.loads(ok(cli(d, "txn", "producers", "t", "--json")).stdout)
    assert [{k: v for k, v in r.items() if k != "last_seen_ms"} for r in rows] == \
           [{k: v for k, v in r.items() if k != "last_seen_ms"}
            for r in eng.txn.producers("t")]
    assert [(r["partition"], r["producer_id"], r["txn_start_offset"]) for r in rows] == [
        (0, tp.producer_id, 0), (1, 0, None)]
    assert set(rows[0]) == {"topic", "partition", "producer_id", "epoch", "last_sequence",
                            "last_offset", "last_timestamp", "last_seen_ms",
                            "txn_start_offset"}
    out = ok(cli(d, "txn", "producers", "t", "-p", "0")).stdout.splitlines()
    assert out[0].split() == ["PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE",
                              "LAST-OFFSET", "LAST-TIMESTAMP", "LAST-SEEN",
                              "TXN-START-OFFSET"]
    cells = out[1].split()
    assert len(out) == 2 and cells[:5] + cells[-1:] == ["0", str(tp.producer_id),
                                                         str(tp.epoch), "1", "1", "0"]
    out = ok(cli(d, "txn", "producers", "t", "-p", "1")).stdout.splitlines()
    assert out[1].split()[:5] == ["1", "0", "1", "-", "1"] and out[1].split()[-1] == "-"


def test_txn_find_hanging(txns, monkeypatch):
    d, eng, tp = txns
    r = ok(cli(d, "txn", "find-hanging"))
    assert r.stdout == "" and "no hanging transactions" in r.stderr
    assert json.loads(ok(cli(d, "txn", "find-hanging", "--json")).stdout) == []
    # billing-1 past its timeout; a transaction whose id's state is lost
    lost = eng.producer(transactional_id="lost-1")
    lost.begin()
    lost.produce("t", [Record(value=b"l")], partition=1)
    os.remove(TxnStore(d).path("lost-1"))
    now = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: now + 3_600_001)
    rows = json.loads(ok(cli(d, "txn", "find-hanging", "--json")).stdout)
    assert [(r["topic"], r["partition"], r["start_offset"], r["transactional_id"],
             r["reason"]) for r in rows] == [
        ("t", 0, 0, "billing-1", "timed-out"), ("t", 1, 2, None, "unknown-producer"),
        ("u", 0, 0, "billing-1", "timed-out")]
    assert set(rows[0]) == {"topic", "partition", "producer_id", "epoch", "start_offset",
                            "last_seen_ms", "transactional_id", "state", "timeout_ms",
                            "age_ms", "reason"}
    r = ok(cli(d, "txn", "find-hanging", "--topic", "t", "-p", "1"))
    head, row = r.stdout.splitlines()
    assert head.split() == ["TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET",
                            "TRANSACTIONAL-ID", "STATE", "AGE", "REASON"]
    assert row.split() == ["t", "1", str(lost.producer_id), "0", "2", "-", "-", "-",
                           "unknown-producer"]
    assert "rivven txn abort --topic T --partition P --start-offset O" in r.stderr
    r = cli(d, "txn", "find-hanging", "-p", "1")
    assert r.exit_code == 2 and "--topic" in r.stderr


def test_txn_abort_an_id_asks_first(txns):
    d, eng, tp = txns
    r = cli(d, "txn", "abort", "billing-1")  # (CliRunner's stdin is not a terminal)
    assert r.exit_code == 1 and "pass --yes" in r.stderr
    assert eng.txn.list_transactions()[0]["state"] == "Ongoing"
    r = ok(cli(d, "txn", "abort", "billing-1", "--yes", "--json"))
    assert json.loads(r.stdout) == {"transactional_id": "billing-1", "state": "Ongoing",
                                    "action": "aborted"}
    assert eng.txn.list_transactions() == []
    assert txn_view.markers(eng, "u", 0) == [("ABORT", tp.producer_id, tp.epoch + 1)]
    r = ok(cli(d, "txn", "abort", "billing-1", "--yes"))
    assert "billing-1 has no open transaction (state CompleteAbort): nothing was aborted" \
        in r.stderr
    assert cli(d, "txn", "abort", "nope", "--yes").exit_code == 1


def test_txn_abort_says_what_it_did_and_fences_the_producer(txns):
    d, eng, tp = txns
    r = subprocess.run([*RIVVEN, "txn", "abort", "billing-1"], input=b"y\n",
                       capture_output=True, env=env(d), cwd=ROOT)
    assert r.returncode == 1 and b"pass --yes" in r.stderr  # (not a terminal)
    r = ok(cli(d, "txn", "abort", "billing-1", "-y"))
    assert r.stdout == ("aborted the transaction of billing-1 (it was Ongoing); its producer "
                        "is fenced\n")  # (on stdout, as Kafka's tools print what they did)
    with pytest.raises(ProducerFenced):
        tp.produce("t", [Record(value=b"late")], partition=0)
    assert values(d, "t") == []


LEFT_OPEN = """
import os, sys
from engine import Engine, ProducerFenced, Record
eng = Engine.open(sys.argv[1])
tp = eng.producer(transactional_id=sys.argv[2], transaction_timeout_ms=int(sys.argv[4]))
tp.begin()
tp.produce(sys.argv[3], [Record(value=b"x")], partition=0)
os.kill(os.getpid(), 9)
"""


def leave_open(data_dir, tid, topic, timeout_ms):
    """A process that dies (kill -9) with a transaction of ``tid`` open in ``topic``-0."""
    r = subprocess.run([sys.executable, "-c", LEFT_OPEN, data_dir, tid, topic, str(timeout_ms)],
                       env=ENV, cwd=ROOT, capture_output=True, timeout=120)
    assert r.returncode == -9, r.stderr


def test_txn_abort_reports_what_the_open_itself_finished(data_dir):
    """A transaction past its timeout is aborted by the writable open of 'txn abort' itself:
    the command says so, rather than that nothing was open."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
    leave_open(data_dir, "slow-1", "t", timeout_ms=1)
    time.sleep(0.01)  # (past its 1 ms timeout)
    r = ok(cli(data_dir, "txn", "abort", "slow-1", "--yes", "--json"))
    assert json.loads(r.stdout) == {"transactional_id": "slow-1", "state": "Ongoing",
                                    "action": "aborted"}


def test_txn_abort_a_hanging_transaction_by_its_partition(txns):
    d, eng, tp = txns
    lost = eng.producer(transactional_id="lost-1")
    lost.begin()
    lost.produce("t", [Record(value=b"l")], partition=1)
    os.remove(TxnStore(d).path("lost-1"))
    assert eng.end_offsets("t", "read_committed")[1] == 2
    r = cli(d, "txn", "abort", "--topic", "t", "-p", "1")
    assert r.exit_code == 2 and "--start-offset" in r.stderr
    r = cli(d, "txn", "abort", "billing-1", "--topic", "t")
    assert r.exit_code == 2 and "not both" in r.stderr
    r = cli(d, "txn", "abort")
    assert r.exit_code == 2 and "rivven txn find-hanging" in r.stderr
    r = cli(d, "txn", "abort", "--topic", "t", "-p", "1", "--start-offset", "2")
    assert r.exit_code == 1 and "pass --yes" in r.stderr
    r = cli(d, "txn", "abort", "--topic", "t", "-p", "0", "--start-offset", "0", "--yes")
    assert r.exit_code == 1 and "no hanging transaction starts at offset 0" in r.stderr
    r = ok(cli(d, "txn", "abort", "--topic", "t", "-p", "1", "--start-offset", "2", "--yes",
               "--json"))
    doc = json.loads(r.stdout)
    assert (doc["producer_id"], doc["reason"], doc["marker_offset"]) == (
        lost.producer_id, "unknown-producer", 3)
    assert eng.end_offsets("t", "read_committed")[1] == 4
    assert values(d, "t", partitions=(1,)) == [b"d"]
    assert eng.txn.find_hanging() == []


def test_a_damaged_state_file_is_reported_with_exit_3(txns):
    d, eng, tp = txns
    path = TxnStore(d).path("done-1")
    with open(path, "ab") as f:  # a frame length no writer writes: damage, not a torn tail
        f.write(b"\xff" * 12)
    r = cli(d, "txn", "list", "--all")
    assert r.exit_code == 3 and "warning: transactional id done-1:" in r.stderr
    assert "billing-1" in r.stdout
    r = cli(d, "txn", "list", "--json")
    assert r.exit_code == 3 and json.loads(r.stdout)[1]["state"] == "Damaged"
    r = cli(d, "txn", "describe", "done-1")
    assert r.exit_code == 3


# ---------------------------------------------------------------- tables on a terminal
LONG_ID = "payments-eu-west-1-ledger-writer-instance-0042-primary"  # 53 characters


@pytest.mark.parametrize("args", [["txn", "list"], ["txn", "find-hanging"],
                                  ["txn", "producers", "{topic}"]])
def test_txn_tables_never_cut_a_value(data_dir, args, monkeypatch):
    from test_cli_tables import LONG, on_terminal, parse

    with Engine.open(data_dir) as eng:
        eng.create_topic(LONG, partitions=2)
    leave_open(data_dir, LONG_ID, LONG, timeout_ms=1)
    args = [a.replace("{topic}", LONG) for a in args]
    time.sleep(0.01)  # (past its timeout: find-hanging lists it)
    want = json.loads(run_rivven(data_dir, *args, "--json", check=True).stdout)
    assert want
    for columns in (80, 120):
        text, _ = on_terminal(data_dir, args, columns)
        assert "…" not in text
        assert all(len(line) <= columns for line in text.splitlines()), text
        first = text.split()[0]
        headers, rows = parse(text, first, "PRODUCER-ID")
        assert len(rows) == len(want), text
        for row, w in zip(rows, want):
            for h, key in (("TRANSACTIONAL-ID", "transactional_id"), ("TOPIC", "topic"),
                           ("PRODUCER-ID", "producer_id"), ("START-OFFSET", "start_offset"),
                           ("TXN-START-OFFSET", "txn_start_offset")):
                if h in headers:
                    assert row[h] == str(w[key]), f"{h}: {row[h]!r}\n{text}"


def test_transactional_ids_complete(txns):
    """``rivven txn describe b<TAB>`` and ``produce --transactional-id``: the ids of the data
    dir (the completion protocol click's scripts use)."""
    d, _, _ = txns
    for words in ("rivven txn describe b", "rivven produce t --transactional-id b"):
        r = subprocess.run([*RIVVEN], env=dict(env(d), _RIVVEN_COMPLETE="complete_bash",
                                               COMP_WORDS=words, COMP_CWORD="3"
                                               if words.count(" ") == 3 else "4"),
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.stdout.split() == ["billing-1"], (words, r.stdout, r.stderr)
