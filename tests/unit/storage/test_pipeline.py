"""Stress tests of the pipelined group commit (PartitionLog.append): many threads, checkpoints
racing appends, and failures injected mid-pipeline. (Two processes on one partition, and a
checkpoint racing appends then a crash: tests/crash/test_pipeline_crash.py.)

What every test checks, through what the engine really stores:

- every acknowledged record is stored exactly once, at the offset its produce returned, and
  the offsets of a partition are contiguous;
- an acknowledged batch is durable at once: it is below its partition's durable point (the
  checkpoint's recovery point, or a sealed segment, both fsynced) or it is in a WAL file —
  otherwise a machine crash right then loses it;
- nothing whose produce failed is visible, no produce call hangs, and the partition flock is
  free again once nothing is being appended."""

import errno
import os
import threading
import time
from random import Random

import pytest
from helpers.pipeline import HANG_S, SETTINGS, check_stored, crash_image, fd_path, not_durable, stored, value

from engine import Engine, StorageError
from engine import wal as wal_mod
from engine.fs import durable
from engine.fs.locks import open_lock_file, try_lock
from engine.segments import filenames


def flock_free(data_dir, topic, p, wait=2.0):
    """Can another process take the partition flock (within ``wait`` seconds)?"""
    fd = open_lock_file(os.path.join(filenames.partition_dir(data_dir, topic, p), filenames.LOCK_FILE))
    try:
        deadline = time.monotonic() + wait
        while not try_lock(fd):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True
    finally:
        os.close(fd)


def run_threads(targets, timeout=HANG_S):
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = sum(t.is_alive() for t in threads)
    assert not hung, f"{hung} threads still inside produce after {timeout} s (hang)"


# ------------------------------------------------------------------------ threads
@pytest.mark.slow
def test_threads_with_a_checkpoint_loop(data_dir):
    """8 threads, random batch sizes, 3 partitions, small WAL files and segments, while another
    thread checkpoints in a loop: every ack is durable when returned and stored exactly once."""
    eng = Engine.open(data_dir, settings=SETTINGS)
    eng.create_topic("t", 3, {"segment.bytes": "30000"})
    acked: dict = {}
    batches: list = []
    problems: list = []
    lock = threading.Lock()
    stop = threading.Event()

    def producer(tid):
        rng = Random(tid)
        tag = b"t%d" % tid
        try:
            for i in range(150):
                p = rng.randrange(3)
                vals = [value(tag, i, j) for j in range(rng.choice((1, 1, 2, 7, 25, 60)))]
                acks = eng.produce_batch("t", vals, partition=p)
                offs = [o for _, o in acks]
                if {q for q, _ in acks} != {p} or offs != list(range(offs[0], offs[0] + len(vals))):
                    problems.append(("acks not one contiguous run", acks))
                batch = (p, offs[0], offs[-1])
                if not_durable(data_dir, "t", [batch]):
                    problems.append(("acknowledged but in no WAL file and not fsynced", batch))
                with lock:
                    acked.update(zip(acks, vals))
                    batches.append(batch)
        except BaseException as e:  # noqa: BLE001
            problems.append(("produce raised", repr(e)))

    def checkpointer():
        try:
            while not stop.is_set():
                with lock:
                    before = list(batches)
                eng.checkpoint()
                lost = not_durable(data_dir, "t", before)
                if lost:
                    problems.append(("after a checkpoint, not durable", lost[:3]))
                time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001
            problems.append(("checkpoint raised", repr(e)))

    ck = threading.Thread(target=checkpointer, daemon=True)
    ck.start()
    try:
        run_threads([lambda t=t: producer(t) for t in range(8)])
    finally:
        stop.set()
        ck.join(HANG_S)
    assert not ck.is_alive(), "checkpoint hung"
    assert not problems, problems[:5]
    eng.checkpoint()
    assert not not_durable(data_dir, "t", batches)
    assert all(flock_free(data_dir, "t", p) for p in range(3)), "idle, yet the flock is held"
    check_stored(stored(eng, "t"), acked)
    with Engine.open(data_dir, read_only=True) as ro:  # what another process sees
        check_stored(stored(ro, "t"), acked)
    eng.close()
    with Engine.open(data_dir) as eng:
        check_stored(stored(eng, "t"), acked)


# ------------------------------------------------------------------------ checkpoints racing appends
def assert_batch_survives_a_crash(eng, data_dir, tmp_path, acks, pattern):
    """The acknowledged batch ``acks`` (values ``pattern % i``) is in a WAL file or fsynced,
    and a machine crash now leaves it in partition 0. Closes ``eng``."""
    batch = (0, acks[0][1], acks[-1][1])
    lost = not_durable(data_dir, "t", [batch])
    image = crash_image(data_dir, str(tmp_path / "crashed"))
    eng.close()
    with Engine.open(image) as after:
        got = stored(after, "t")
    assert not lost and all(got.get(a) == pattern % i for i, a in enumerate(acks)), (
        f"acknowledged {batch} is in no WAL file and not fsynced; after a machine crash the "
        f"partition holds offsets 0..{len(got) - 1}")


def test_checkpoint_while_a_group_is_being_logged(data_dir, tmp_path):
    """A checkpoint that starts after a group's WAL records are written but before the group
    is numbered must still wait for it: else it deletes the WAL file holding the records
    before they reach the segment, and records the recovery point without them."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"before"] * 10, partition=0)
    eng.checkpoint()
    wal = eng.wal
    real_append, real_sync = wal.append, wal.sync
    logged = threading.Event()
    me = {}

    def slow_append(record, *rest):  # a leader busy logging a large group
        pos = real_append(record, *rest)
        if threading.get_ident() == me.get("id"):
            logged.set()
            time.sleep(0.3)
        return pos

    def slow_sync(position):  # an fdatasync on a slow disk
        if threading.get_ident() == me.get("id"):
            time.sleep(0.3)
        return real_sync(position)

    wal.append, wal.sync = slow_append, slow_sync
    result = {}

    def produce():
        me["id"] = threading.get_ident()
        result["acks"] = eng.produce_batch("t", [b"racing-%d" % i for i in range(5)], partition=0)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    assert logged.wait(10)
    eng.checkpoint()
    t.join(HANG_S)
    wal.append, wal.sync = real_append, real_sync
    acks = result["acks"]
    assert_batch_survives_a_crash(eng, data_dir, tmp_path, acks, b"racing-%d")


def test_checkpoint_does_not_forget_an_append_it_held_up(data_dir, tmp_path, monkeypatch):
    """An append that marks the partition dirty while a checkpoint holds the mutex, then logs
    its batch, must leave the partition dirty: the next checkpoint fsyncs it before it deletes
    the WAL file holding the batch."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"before"] * 10, partition=0)
    real = durable.write_atomic
    inside = threading.Event()
    ck = {}

    def slow_write_atomic(target, data, sync_dir=True):  # the .checkpoint write, on a slow disk
        if threading.get_ident() == ck.get("id"):
            inside.set()
            time.sleep(0.3)
        return real(target, data, sync_dir)

    monkeypatch.setattr(durable, "write_atomic", slow_write_atomic)

    def checkpoint():
        ck["id"] = threading.get_ident()
        eng.checkpoint()

    t = threading.Thread(target=checkpoint, daemon=True)
    t.start()
    assert inside.wait(10)
    acks = eng.produce_batch("t", [b"held-up-%d" % i for i in range(5)], partition=0)
    t.join(HANG_S)
    monkeypatch.setattr(durable, "write_atomic", real)
    eng.checkpoint()  # the next checkpoint (a timer, the interval, or close)
    assert_batch_survives_a_crash(eng, data_dir, tmp_path, acks, b"held-up-%d")


# ------------------------------------------------------------------------ injected failures
def produce_outcomes(eng, threads, n, partitions, rng_seed):
    """Threads producing; ``(acked, failed, problems)``; fails the test on a hang."""
    acked, failed, problems = {}, [], []
    lock = threading.Lock()

    def worker(tid):
        rng = Random(rng_seed * 100 + tid)
        tag = b"w%d" % tid
        for i in range(n):
            p = rng.randrange(partitions)
            vals = [value(tag, i, j) for j in range(rng.choice((1, 4, 15)))]
            try:
                acks = eng.produce_batch("t", vals, partition=p)
            except StorageError as e:
                with lock:
                    failed.append(str(e))
                continue
            except BaseException as e:  # noqa: BLE001
                problems.append(repr(e))
                continue
            with lock:
                acked.update(zip(acks, vals))

    run_threads([lambda t=t: worker(t) for t in range(threads)])
    return acked, failed, problems


def test_segment_write_fails_mid_pipeline(data_dir, monkeypatch):
    """A segment write torn by ENOSPC while groups are in flight: that batch and the groups
    numbered after it fail, nobody hangs, nothing failed is visible, appends go on."""
    eng = Engine.open(data_dir, settings=SETTINGS)
    eng.create_topic("t", 1)
    real = os.pwrite
    state = {"n": 0, "torn": None}
    lock = threading.Lock()

    def flaky(fd, data, position):
        if fd_path(fd).endswith(".log"):
            with lock:
                state["n"] += 1
                n = state["n"]
                torn = state["torn"] == fd
                state["torn"] = None
            if torn:
                raise OSError(errno.ENOSPC, "No space left on device")
            if n in (40, 120):  # half the batch reaches the file, then the disk is full
                real(fd, bytes(data)[: len(data) // 2], position)
                state["torn"] = fd
                return len(data) // 2
        return real(fd, data, position)

    def flaky_v(fd, buffers, position):  # a group's batches, written with one pwritev
        return flaky(fd, b"".join(buffers), position)

    real_v = os.pwritev
    monkeypatch.setattr(os, "pwrite", flaky)
    monkeypatch.setattr(os, "pwritev", flaky_v)
    acked, failed, problems = produce_outcomes(eng, threads=6, n=40, partitions=1, rng_seed=1)
    monkeypatch.setattr(os, "pwrite", real)
    monkeypatch.setattr(os, "pwritev", real_v)
    assert not problems, problems[:3]
    assert failed and acked
    assert all("disk full" in f for f in failed), failed[:3]
    after = eng.produce_batch("t", [b"after"], partition=0)
    acked[after[0]] = b"after"
    assert flock_free(data_dir, "t", 0), "idle, yet the flock is held"
    check_stored(stored(eng, "t"), acked)
    with Engine.open(data_dir, read_only=True) as ro:
        check_stored(stored(ro, "t"), acked)
    eng.close()
    with Engine.open(data_dir) as eng:
        check_stored(stored(eng, "t"), acked)


def test_wal_fsync_fails_mid_pipeline(data_dir, monkeypatch):
    """A failing WAL fdatasync while several partitions' groups share it: no waiter hangs,
    the failed groups are not visible, later produces work."""
    eng = Engine.open(data_dir, settings=SETTINGS)
    eng.create_topic("t", 3)
    real = os.fdatasync
    state = {"n": 0}
    lock = threading.Lock()

    def flaky(fd):
        if fd_path(fd).endswith(wal_mod.SUFFIX):
            with lock:
                state["n"] += 1
                n = state["n"]
            if n in (15, 16, 60):
                raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)
    acked, failed, problems = produce_outcomes(eng, threads=6, n=30, partitions=3, rng_seed=2)
    monkeypatch.setattr(os, "fdatasync", real)
    assert not problems, problems[:3]
    assert failed and acked
    for p in range(3):
        after = eng.produce_batch("t", [b"after-%d" % p], partition=p)
        acked[after[0]] = b"after-%d" % p
    assert all(flock_free(data_dir, "t", p) for p in range(3)), "idle, yet the flock is held"
    check_stored(stored(eng, "t"), acked)
    with Engine.open(data_dir, read_only=True) as ro:
        check_stored(stored(ro, "t"), acked)
    eng.close()
    with Engine.open(data_dir) as eng:
        check_stored(stored(eng, "t"), acked)


def test_failed_wal_rotation_releases_the_flock(data_dir, monkeypatch):
    """An error that is not a StorageError (here: EIO fsyncing the WAL directory when a new WAL
    file is made) must not leave the pipeline holding the partition flock: another process
    appending to the partition would wait for as long as this one stays idle."""
    eng = Engine.open(data_dir, settings={"wal.segment.bytes": "4096"})
    eng.create_topic("t", 1)
    acked = {}
    acked.update(zip(eng.produce_batch("t", [b"first"], partition=0), [b"first"]))
    real = durable.fsync_dir
    state = {"armed": True}

    def flaky(directory):
        if state["armed"] and directory == eng.wal.dir:
            state["armed"] = False
            raise OSError(errno.EIO, "Input/output error")
        return real(directory)

    monkeypatch.setattr(durable, "fsync_dir", flaky)
    for i in range(40):
        vals = [value(b"r", i, j) for j in range(5)]
        try:
            acked.update(zip(eng.produce_batch("t", vals, partition=0), vals))
        except Exception:  # noqa: BLE001
            break
    assert not state["armed"], "no WAL rotation happened"
    free = flock_free(data_dir, "t", 0)
    other = {}

    def other_process():  # another Engine has its own open file description, like a process
        with Engine.open(data_dir) as o:
            other["acks"] = o.produce_batch("t", [b"other"], partition=0)

    t = threading.Thread(target=other_process, daemon=True)
    t.start()
    t.join(5)
    waited = t.is_alive()
    eng.close()  # (closing the lock fd lets the other engine through)
    t.join(HANG_S)
    assert free and not waited, "no produce is running, yet the partition flock is still held"
    acked[other["acks"][0]] = b"other"
    with Engine.open(data_dir) as eng:
        check_stored(stored(eng, "t"), acked)


def test_failed_wal_file_open_is_not_fatal(data_dir, monkeypatch):
    """A transient EMFILE opening the next WAL file fails that produce; the next ones must
    work (the stream must not keep using the descriptor it already closed)."""
    eng = Engine.open(data_dir, settings={"wal.segment.bytes": "4096"})
    eng.create_topic("t", 1)
    acked = {}
    acked.update(zip(eng.produce_batch("t", [b"first"], partition=0), [b"first"]))
    real = os.open
    state = {"armed": True}

    def flaky(path, flags, mode=0o777, **kw):
        if state["armed"] and str(path).endswith(wal_mod.SUFFIX):
            state["armed"] = False
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", flaky)
    errors = []
    for i in range(40):
        vals = [value(b"o", i, j) for j in range(5)]
        try:
            acked.update(zip(eng.produce_batch("t", vals, partition=0), vals))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
            if len(errors) > 3:
                break
    monkeypatch.setattr(os, "open", real)
    assert not state["armed"], "no WAL rotation happened"
    assert len(errors) <= 1, f"produce keeps failing after one failed WAL open: {errors}"
    eng.close()
    with Engine.open(data_dir) as eng:
        check_stored(stored(eng, "t"), acked)


def test_admin_reindex_while_threads_produce(data_dir):
    """``Engine.reindex`` (like ``segment recover``) forgets every open partition while other
    threads of the process append to it: their produce calls may fail, but must return."""
    eng = Engine.open(data_dir, settings=SETTINGS)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"first"], partition=0)
    seg = filenames.path(filenames.partition_dir(data_dir, "t", 0), 0, filenames.LOG)
    acked = {}
    lock = threading.Lock()
    stop = threading.Event()

    def worker(tid):
        for i in range(100000):
            if stop.is_set():
                return
            vals = [value(b"x%d" % tid, i, j) for j in range(3)]
            try:
                acks = eng.produce_batch("t", vals, partition=0)
            except Exception:  # noqa: BLE001 - failing is allowed here, hanging is not
                continue
            with lock:
                acked.update(zip(acks, vals))

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(8):
            time.sleep(0.05)
            eng.segments.reindex(seg)
    finally:
        stop.set()
        deadline = time.monotonic() + 10
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    hung = sum(t.is_alive() for t in threads)
    assert not hung, f"{hung} produce calls never returned after the partition was reopened"
    assert flock_free(data_dir, "t", 0), "idle, yet the flock is held"
    eng.close()
    with Engine.open(data_dir) as eng:
        got = stored(eng, "t")
    check_stored(got, acked, extra_ok=True)
