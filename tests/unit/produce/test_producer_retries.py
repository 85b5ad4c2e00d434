"""The idempotent producer's retry policy (engine.produce.idempotent: ``retries``,
``retry_backoff_ms``, as Kafka's producer settings): a call that fails with a StorageError
is sent again by the producer itself and stored once; when the retries run out the error says
how often the call was sent. Failures are injected into the WAL's fdatasync of this process."""

import errno
import os
import threading

import pytest

from engine import Engine, InvalidArgument, InvalidTxnState, Record, StorageError
from engine.produce import idempotent


def values(eng, topic="t", partition=0):
    return [r.value for r in eng.read(topic, partition, 0, 1 << 20)]


def recs(prefix, n):
    return [Record(value=b"%s%d" % (prefix, i)) for i in range(n)]


@pytest.fixture
def failing_wal_syncs(monkeypatch):
    """``fail(n)``: the next ``n`` fdatasyncs of a WAL file fail with EIO (after the bytes
    were written: stored or not, the caller cannot know); returns how many are left."""
    real = os.fdatasync
    left = {"n": 0}

    def flaky(fd):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if left["n"] and "/wal/" in path:
            left["n"] -= 1
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)

    def fail(n):
        left["n"] = n
        return left

    return fail


@pytest.fixture
def sleeps(monkeypatch):
    """The backoffs the producer slept, in seconds (not slept for real). Only this thread's:
    ``time.sleep`` is the module's, and a thread an earlier test left in this process (a
    pytest-xdist worker runs many files) would otherwise fill the list, not sleeping."""
    slept = []
    real, me = idempotent.time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:
        if threading.get_ident() == me:
            slept.append(seconds)
        else:
            real(seconds)

    monkeypatch.setattr(idempotent.time, "sleep", sleep)
    return slept


def test_by_default_a_failed_call_raises_at_once_and_waits_for_retry_last(
        data_dir, failing_wal_syncs, sleeps):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        p = eng.producer()
        assert (p.retries, p.retry_backoff_ms, p.retried) == (0, 100, 0)
        left = failing_wal_syncs(1)
        with pytest.raises(StorageError) as e:
            p.produce("t", recs(b"a", 3))
        assert left["n"] == 0 and "sent" not in str(e.value)
        assert p.retried == 0 and sleeps == []
        with pytest.raises(InvalidTxnState, match="retry_last"):
            p.produce("t", recs(b"b", 1))
        assert p.retry_last() == [(0, 0), (0, 1), (0, 2)]
        assert values(eng) == [b"a0", b"a1", b"a2"]


def test_retries_send_a_failed_call_again_and_store_it_once(data_dir, failing_wal_syncs,
                                                             sleeps):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
        p = eng.producer(retries=3, retry_backoff_ms=50)
        assert p.produce("t", recs(b"a", 2), partition=1) == [(1, 0), (1, 1)]
        left = failing_wal_syncs(2)
        acks = p.produce_batch("t", [b"b0", b"b1", b"b2"], partition=1)
        assert left["n"] == 0  # (both failures happened)
        assert acks == [(1, 2), (1, 3), (1, 4)]
        assert p.retried == 2 and sleeps == [0.05, 0.05]
        p.produce("t", recs(b"c", 1), partition=1)  # the producer goes on
        assert values(eng, partition=1) == [b"a0", b"a1", b"b0", b"b1", b"b2", b"c0"]
    with Engine.open(data_dir) as eng:  # and after a restart: stored once
        assert values(eng, partition=1) == [b"a0", b"a1", b"b0", b"b1", b"b2", b"c0"]


def test_when_the_retries_run_out_the_error_says_how_often_the_call_was_sent(
        data_dir, failing_wal_syncs, sleeps):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        p = eng.producer(retries=2, retry_backoff_ms=0)
        left = failing_wal_syncs(5)
        with pytest.raises(StorageError) as e:
            p.produce("t", recs(b"a", 4))
        assert left["n"] == 2 and p.retried == 2 and sleeps == [0, 0]
        assert (f"(the call was sent 3 times, as idempotent producer {p.producer_id}: its "
                "records may be stored in part; those of the calls before it are)") in str(e.value)
        assert "Input/output error" in str(e.value)
        left["n"] = 0
        assert p.retry_last() == [(0, i) for i in range(4)]  # still the caller's to finish
        assert values(eng) == [b"a0", b"a1", b"a2", b"a3"]


@pytest.mark.parametrize("kw", [{"retries": -1}, {"retries": True}, {"retries": "3"},
                                {"retry_backoff_ms": -5}, {"retry_backoff_ms": 0.5}])
def test_a_retry_policy_must_be_whole_numbers(data_dir, kw):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidArgument, match="must be an integer >= 0"):
            eng.producer(**kw)


def test_a_transactional_producer_refuses_retries(data_dir):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidArgument, match="retries apply to an idempotent producer"):
            eng.producer(transactional_id="x", retries=3)
