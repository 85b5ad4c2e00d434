"""Idempotent producers (``Engine.producer()``): a call that failed ambiguously — a failed
fsync of the WAL, a failed write after the WAL record — is retried and stored once, in order;
across restarts and threads. Real files, real processes; failures injected into the OS calls
of the test process. (Killed -9: tests/crash/test_idempotence_crash.py.)"""

import errno
import os
import subprocess
import sys
import threading

import pytest
from helpers import ROOT

from engine import (
    Engine,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerFenced,
    ReadOnlyError,
    Record,
    StorageError,
)
from engine.errors import DamagedMetadata
from engine.segments import filenames
from engine.txn import pids


def values(eng, topic="t", partition=0):
    return [r.value for r in eng.read(topic, partition, 0, 1 << 20)]


def recs(prefix, n, start=0):
    return [Record(value=b"%s%d" % (prefix, i)) for i in range(start, start + n)]


def fd_path(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


# ---------------------------------------------------------------- the API
def test_an_idempotent_producer_answers_as_produce_does(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 3)
        p = eng.producer()
        q = eng.producer()
        assert p.producer_id != q.producer_id and p.epoch == 0
        rs = [Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(50)]
        acks = p.produce("t", rs)
        assert len(acks) == 50
        for (part, off), r in zip(acks, rs):
            assert eng.read("t", part, off, 1)[0].value == r.value
        assert p.retry_last() == acks  # all acknowledged: the same answer, nothing sent again
        cols = p.produce_batch("t", [b"a", b"b"], keys=[b"x", b"y"], partitions=[2, 0])
        assert [c[0] for c in cols] == [2, 0]
        assert p.produce("t", []) == []
        assert sum(len(values(eng, "t", i)) for i in range(3)) == 52
        log = eng._path.log_for(eng.topic("t"), 0)
        seg = log.segs.active
        heads = [h for _, h in seg.iter_headers(0, seg.size)]
        assert {(h.magic, h.producer_id) for h in heads} == {(2, p.producer_id)}
        eng.produce("t", [Record(value=b"plain")], partition=0)
        seg = log.segs.active
        last = [h for _, h in seg.iter_headers(0, seg.size)][-1]
        assert (last.magic, last.producer_id) == (1, -1)  # plain produce stays format 1
    with Engine.open(data_dir, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.producer()


def test_a_call_is_split_at_max_message_bytes_with_sequences_in_order(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"max.message.bytes": "2000"})
        p = eng.producer()
        rs = [Record(value=bytes([65 + i % 26]) * 300) for i in range(20)]
        acks = p.produce("t", rs)
        assert [o for _, o in acks] == list(range(20))
        assert p.next_sequence("t", 0) == 20
        assert p.produce("t", rs[:3]) == [(0, 20), (0, 21), (0, 22)]
        assert values(eng) == [r.value for r in rs] + [r.value for r in rs[:3]]


def test_producer_ids_are_durable_unique_across_processes_and_damage_is_refused(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        first = eng.producer().producer_id
    code = ("import sys; from engine import Engine\n"
            "eng = Engine.open(sys.argv[1])\n"
            "print(' '.join(str(eng.producer().producer_id) for _ in range(20)))\n"
            "import os; os._exit(0)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, data_dir], stdout=subprocess.PIPE,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
             for _ in range(4)]
    got = [int(x) for p in procs for x in p.communicate(timeout=120)[0].split()]
    assert len(got) == 80 and len(set(got)) == 80 and min(got) > first
    assert pids.allocate(data_dir) == max(got) + 1  # (the next id: none handed out twice)
    p = pids.path(data_dir)
    with open(p, "r+b") as f:
        raw = f.read()
        f.seek(0)
        f.write(raw.replace(b'"next": ', b'"next": 1'))
    with Engine.open(data_dir) as eng:
        with pytest.raises(DamagedMetadata, match="producer-id file"):
            eng.producer()
        eng.produce("t", [Record(value=b"plain produce is not concerned")])


def test_out_of_order_and_fenced_calls_write_nothing(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        p = eng.producer()
        p.produce("t", recs(b"a", 3))
        gap = eng.producer(producer_id=p.producer_id, sequences={("t", 0): 5})
        with pytest.raises(OutOfOrderSequence, match="expected 3"):
            gap.produce("t", recs(b"x", 2))
        assert eng.end_offsets("t") == {0: 3}
        newer = eng.producer(producer_id=p.producer_id, epoch=1)
        assert newer.produce("t", recs(b"b", 1)) == [(0, 3)]
        with pytest.raises(ProducerFenced):
            p.produce("t", recs(b"late", 1))
        assert eng.end_offsets("t") == {0: 4}
        resumed = eng.producer(producer_id=p.producer_id, epoch=1)  # goes on where it stands
        assert resumed.produce("t", recs(b"c", 1)) == [(0, 4)]
        assert values(eng) == [b"a0", b"a1", b"a2", b"b0", b"c0"]


# ---------------------------------------------------------------- failures in this process
@pytest.mark.parametrize("where", ["wal-fsync", "segment-write"])
def test_a_failed_call_is_retried_and_stored_once_in_order(data_dir, monkeypatch, where):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
        p = eng.producer()
        p.produce("t", recs(b"a", 10), partition=0)
        fail = {"on": True}
        if where == "wal-fsync":  # the WAL's fdatasync fails (EIO)
            real = os.fdatasync

            def flaky(fd):
                if fail["on"] and "/wal/" in fd_path(fd):
                    fail["on"] = False
                    raise OSError(errno.EIO, "Input/output error")
                return real(fd)

            monkeypatch.setattr(os, "fdatasync", flaky)
        else:  # the WAL record is written, then the segment write fails
            real_w, real_wv = os.pwrite, os.pwritev

            def bad(fd):
                if fail["on"] and fd_path(fd).endswith(".log") and "/topics/" in fd_path(fd):
                    fail["on"] = False
                    raise OSError(errno.EIO, "Input/output error")

            def pwrite(fd, data, pos):
                bad(fd)
                return real_w(fd, data, pos)

            def pwritev(fd, bufs, pos):
                bad(fd)
                return real_wv(fd, bufs, pos)

            monkeypatch.setattr(os, "pwrite", pwrite)
            monkeypatch.setattr(os, "pwritev", pwritev)
        rs = [Record(key=b"k%d" % (i % 2), value=b"b%d" % i) for i in range(20)]
        with pytest.raises(StorageError):
            p.produce("t", rs, partition=1)
        assert not fail["on"]
        with pytest.raises(InvalidTxnState, match="retry_last"):
            p.produce("t", recs(b"c", 1), partition=1)  # its sequences are spent
        acks = p.retry_last()
        assert acks == [(1, i) for i in range(20)]
        assert p.retry_last() == acks
        p.produce("t", recs(b"c", 2), partition=1)
        assert values(eng, "t", 1) == [r.value for r in rs] + [b"c0", b"c1"]
    with Engine.open(data_dir) as eng:  # and after a restart
        assert values(eng, "t", 1) == [r.value for r in rs] + [b"c0", b"c1"]
        assert values(eng, "t", 0) == [b"a%d" % i for i in range(10)]


def test_a_call_over_several_partitions_resumes_where_it_failed(data_dir, monkeypatch):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 4)
        p = eng.producer()
        real = os.fdatasync
        calls = {"n": 0}

        def flaky(fd):
            if "/wal/" in fd_path(fd):
                calls["n"] += 1
                if calls["n"] == 3:  # the third partition's batch
                    raise OSError(errno.EIO, "Input/output error")
            return real(fd)

        monkeypatch.setattr(os, "fdatasync", flaky)
        rs = [Record(key=b"key-%d" % i, value=b"v%d" % i) for i in range(200)]
        with pytest.raises(StorageError):
            p.produce("t", rs)
        acks = p.retry_last()
    by_part: dict[int, list] = {}
    for (part, off), r in zip(acks, rs):
        by_part.setdefault(part, []).append((off, r.value))
    with Engine.open(data_dir) as eng:
        for part, rows in by_part.items():
            assert [(r.offset, r.value) for r in eng.read("t", part, 0, 1000)] == rows


# ---------------------------------------------------------------- restarts and kill -9
def test_a_restarted_process_resending_the_same_sequences_stores_nothing_twice(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        p = eng.producer()
        p.produce("t", recs(b"a", 5))
        before = p.next_sequence("t", 0)
        acks = p.produce("t", recs(b"b", 5))
        pid = p.producer_id
    for checkpointed in (True, False):  # (a snapshot, then only the log)
        with Engine.open(data_dir) as eng:
            again = eng.producer(producer_id=pid, sequences={("t", 0): before})
            assert again.produce("t", recs(b"b", 5)) == acks
            assert values(eng) == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]
            if not checkpointed:
                for f in os.listdir(filenames.partition_dir(data_dir, "t", 0)):
                    if f.endswith(".snapshot"):
                        os.unlink(os.path.join(filenames.partition_dir(data_dir, "t", 0), f))


def test_threads_share_a_producer_one_call_at_a_time(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        p = eng.producer()
        errors = []

        def work(t):
            try:
                for i in range(30):
                    p.produce("t", [Record(value=b"%d-%d" % (t, i))])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        got = values(eng)
        assert len(got) == 120 and len(set(got)) == 120
        assert p.next_sequence("t", 0) == 120
