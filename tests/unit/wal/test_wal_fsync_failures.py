"""Races and faults in the group-commit WAL, close, consumer groups and retention: each test
reproduces a bug found in review (fixed alongside)."""

import errno
import os
import threading

import pytest
from test_stress import HANG_S, fd_path, stored

from engine import Engine, StorageError
from engine import wal as wal_mod
from engine.errors import OffsetOutOfRange, RivvenError
from engine.groups import membership
from engine.maintenance import retention


def record(tag: bytes) -> bytes:
    return wal_mod.encode_batch_record(b"\0" * 16, 0, "t", tag * 64)


def failing_wal_fsync(monkeypatch, times=1, during=None):
    """os.fdatasync fails (EIO) for the next ``times`` WAL-file calls; ``during()`` runs inside
    the failing call first (a write racing the fsync)."""
    real = os.fdatasync
    state = {"left": times}

    def flaky(fd):
        if fd_path(fd).endswith(wal_mod.SUFFIX) and state["left"] > 0:
            state["left"] -= 1
            if during is not None:
                during()
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)
    return state


# ------------------------------------------------------------------------ WAL: failed fsyncs
def test_failed_rotation_fsync_never_acknowledges_its_records(tmp_path, monkeypatch):
    """WalStream._rotate: the fdatasync of the file being closed fails. The records in it that
    were not synced yet must never be reported durable: a retried fdatasync on Linux reports
    success once the error was consumed, although the dirty pages may be gone."""
    wal = wal_mod.WalStream(str(tmp_path), 1 << 20)
    pos = wal.append(record(b"a"))  # its thread is on its way into sync()
    failing_wal_fsync(monkeypatch)
    with pytest.raises(StorageError):
        wal.rotate()  # a checkpoint's rotation
    monkeypatch.undo()
    with pytest.raises(StorageError):
        wal.sync(pos)
    assert not wal.durable(pos)
    wal.close(delete=True)


def test_failed_rotation_fsync_fails_the_produce(data_dir, monkeypatch):
    """The same through the engine: a checkpoint's WAL rotation fails its fdatasync while a
    produce's record is written but not yet synced; that produce must not be acknowledged."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"before"], partition=0)
    wal = eng.wal
    real_sync = wal.sync
    logged, go = threading.Event(), threading.Event()

    def slow_sync(position):
        logged.set()
        go.wait(10)
        return real_sync(position)

    wal.sync = slow_sync
    out = {}

    def produce():
        try:
            out["acks"] = eng.produce_batch("t", [b"racing"], partition=0)
        except StorageError as e:
            out["error"] = e

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    assert logged.wait(10)
    failing_wal_fsync(monkeypatch)
    with pytest.raises(RivvenError):
        eng.checkpoint()
    monkeypatch.undo()
    go.set()
    t.join(HANG_S)
    wal.sync = real_sync
    assert "error" in out, f"acknowledged {out.get('acks')} although its WAL fsync failed"
    eng.close()


def test_records_written_during_a_failed_fsync_are_never_acknowledged(tmp_path, monkeypatch):
    """WalStream._rotate of a poisoned file: a record written while the failing fdatasync ran
    (past the fsync's target) is in the poisoned file, which is closed without a sync. A later
    fsync of the *next* file moves ``synced`` past its position: it must not count as durable."""
    wal = wal_mod.WalStream(str(tmp_path), 1 << 20)
    p1 = wal.append(record(b"a"))
    late = {}
    failing_wal_fsync(monkeypatch, during=lambda: late.setdefault("pos", wal.append(record(b"b"))))
    with pytest.raises(StorageError):
        wal.sync(p1)
    monkeypatch.undo()
    p3 = wal.append(record(b"c"))  # rotates away from the poisoned file, unsynced
    wal.sync(p3)
    p2 = late["pos"]
    assert p1 < p2 < p3
    with pytest.raises(StorageError):
        wal.sync(p2)  # its bytes were never fdatasynced
    wal.close(delete=True)


def test_produce_racing_a_failed_fsync_is_not_acknowledged(data_dir, monkeypatch):
    """The same through the engine: thread B logs its batch while A's fdatasync runs and fails;
    a third produce rotates the WAL and syncs the new file; B must not be acknowledged."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 3)
    for p in range(3):
        eng.produce_batch("t", [b"before"], partition=p)
    wal = eng.wal
    real_sync = wal.sync
    b_logged, b_go = threading.Event(), threading.Event()
    ids = {}

    def hooked_sync(position):
        if threading.get_ident() == ids.get("b"):
            b_logged.set()
            b_go.wait(10)
        return real_sync(position)

    wal.sync = hooked_sync
    out = {}

    def producer_b():
        ids["b"] = threading.get_ident()
        try:
            out["acks"] = eng.produce_batch("t", [b"B"], partition=1)
        except StorageError as e:
            out["error"] = e

    tb = threading.Thread(target=producer_b, daemon=True)

    def during():  # B logs its batch while A's fsync is in flight
        tb.start()
        assert b_logged.wait(10)

    failing_wal_fsync(monkeypatch, during=during)
    with pytest.raises(StorageError):
        eng.produce_batch("t", [b"A"], partition=0)
    monkeypatch.undo()
    eng.produce_batch("t", [b"C"], partition=2)  # rotates (poisoned file) and syncs the new one
    b_go.set()
    tb.join(HANG_S)
    wal.sync = real_sync
    assert "error" in out, (f"acknowledged {out.get('acks')}: its WAL record sits in a file "
                            "whose only fsync failed and that was closed without a sync")
    eng.close()


# ------------------------------------------------------------------------ Engine.close
def test_produce_after_close_raises_and_writes_nothing(data_dir, tmp_path):
    """A closed Engine refuses produce. It used to reopen the partition (leaking its four fds)
    and write the WAL record to the closed stream's fd number, which may by then be any other
    file of the process."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"a"], partition=0)
    stale = eng.wal.fd
    eng.close()
    held = []
    victim = str(tmp_path / "victim")
    while True:  # the application opens files; one gets the WAL's old fd number
        fd = os.open(victim, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        held.append(fd)
        if fd >= stale or len(held) > 50:
            break
    try:
        with pytest.raises(RivvenError):
            eng.produce_batch("t", [b"after close" * 10], partition=0)
        assert os.path.getsize(victim) == 0, "a WAL record was written into another file"
        leaked = [f for f in os.listdir("/proc/self/fd") if fd_path(int(f)).startswith(data_dir)]
        assert not leaked, f"closed engine left {len(leaked)} fds open in the data dir"
    finally:
        for fd in held:
            os.close(fd)


@pytest.mark.crash
def test_produce_racing_close_survives_a_crash(data_dir, tmp_path, monkeypatch):
    """A produce that gets in after close()'s checkpoint passed its partition but before the
    partition is closed is acknowledged; close() then deletes the WAL holding it although its
    segment bytes were never fsynced: a machine crash loses it."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 1)
    eng.produce_batch("t", [b"before"] * 3, partition=0)
    real_apply = retention.apply
    out = {}

    def apply_and_race(log, cfg, now, dry_run=False):  # runs right after log.checkpoint()
        rows = real_apply(log, cfg, now, dry_run)
        if "acks" not in out:
            out["acks"] = None

            def produce():
                try:
                    out["acks"] = eng.produce_batch("t", [b"late-%d" % i for i in range(3)],
                                                    partition=0)
                except RivvenError as e:
                    out["error"] = e

            t = threading.Thread(target=produce, daemon=True)
            t.start()
            t.join(HANG_S)
        return rows

    monkeypatch.setattr(retention, "apply", apply_and_race)
    image = tmp_path / "crashed"
    from test_stress import crash_image

    eng.close()
    monkeypatch.undo()
    if out.get("acks") is None:
        return  # refused: fine
    acks = out["acks"]
    crash_image(data_dir, str(image))
    with Engine.open(str(image)) as after:
        got = stored(after, "t")
    assert all(got.get(a) == b"late-%d" % i for i, a in enumerate(acks)), (
        f"acknowledged {acks} lost by a machine crash after close(): partition holds "
        f"{sorted(got)}")


# ------------------------------------------------------------------------ consumer groups
def test_failed_consumer_construction_leaves_no_live_member(data_dir):
    """Consumer.__init__ raising (auto_offset_reset='none' and no committed offset) must not
    leave its member file locked and its leases held until the engine closes: the caller has
    no object to close, and the other members lose those partitions."""
    eng = Engine.open(data_dir)
    eng.create_topic("t", 2)
    eng.produce_batch("t", [b"x"] * 4, partition=0)
    with pytest.raises(OffsetOutOfRange):
        eng.consumer("g", "t", auto_offset_reset="none")
    gdir = membership.group_dir(data_dir, "g")
    assert membership.live_members(gdir) == [], "a failed consumer is still a live member"
    assert membership.lease_owners(gdir) == {}, "a failed consumer still holds leases"
    eng.close()


# ------------------------------------------------------------------------ log start
def test_checkpoint_never_moves_the_log_start_back(data_dir, monkeypatch):
    """PartitionLog._read_log_start trusts (inode, mtime, size) of .checkpoint. ext4 reuses
    the inode of the file a rename replaced, and on a file system with coarse timestamps two
    rewrites of equal size in one tick look the same. A writer in another process that read
    the old file then checkpoints with its stale log start: the start moves back and records
    deleted by delete-records are readable again."""
    from engine.fs import durable
    from engine.segments import filenames
    from engine.segments.checkpoint import read_checkpoint

    real = durable.write_atomic

    def coarse_write_atomic(target, data, sync_dir=True):  # mtime with one-second granularity
        real(target, data, sync_dir)
        os.utime(target, ns=(1_700_000_000 * 10**9, 1_700_000_000 * 10**9))

    monkeypatch.setattr(durable, "write_atomic", coarse_write_atomic)
    a = Engine.open(data_dir)
    a.create_topic("t", 1)
    a.produce_batch("t", [b"v%d" % i for i in range(100)], partition=0)
    a.maintenance.delete_records("t", {0: 10})
    pdir = filenames.partition_dir(data_dir, "t", 0)
    ino1 = os.stat(os.path.join(pdir, filenames.CHECKPOINT)).st_ino
    b = Engine.open(data_dir)  # another process, say
    assert b.partition_offsets("t", 0) == (10, 100)
    a.recovery.checkpoint_all()  # .checkpoint rewritten twice, the same size as b saw it
    a.maintenance.delete_records("t", {0: 50})
    if os.stat(os.path.join(pdir, filenames.CHECKPOINT)).st_ino != ino1:
        pytest.skip("the file system did not reuse the inode")
    assert read_checkpoint(pdir)["log_start_offset"] == 50
    b.recovery.checkpoint_all()
    start = read_checkpoint(pdir)["log_start_offset"]
    a.close()
    b.close()
    assert start == 50, f"log start moved back from 50 to {start}"


# ------------------------------------------------------------------------ membership
def test_cleaning_a_dead_member_never_removes_a_live_one(data_dir, monkeypatch):
    """membership.live_members: it opens a dead member's file, takes its lock and unlinks the
    *path*. A consumer restarted with the same --member-id may have renamed its own (locked)
    file onto that path meanwhile: the live member's file is removed, it becomes invisible to
    the group (and, computing its share without itself, reads nothing)."""
    gdir = membership.group_dir(data_dir, "g")
    mdir = os.path.join(gdir, membership.MEMBERS)
    os.makedirs(mdir)
    with open(os.path.join(mdir, "m1.json"), "w") as f:  # left by a member that died
        f.write('{"member_id": "m1"}')
    real = membership.try_lock
    opened, go = threading.Event(), threading.Event()
    scanner = {}

    def slow_try_lock(fd):
        if threading.get_ident() == scanner.get("id") and not opened.is_set():
            opened.set()  # the scan has the dead member's file open
            go.wait(10)
        return real(fd)

    monkeypatch.setattr(membership, "try_lock", slow_try_lock)

    def scan():
        scanner["id"] = threading.get_ident()
        membership.live_members(gdir)

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    assert opened.wait(10)
    m = membership.Member(gdir, "m1", {"topics": ["t"]})  # the restarted consumer
    go.set()
    t.join(HANG_S)
    try:
        ids = [x["member_id"] for x in membership.live_members(gdir)]
        assert ids == ["m1"], f"live member m1 was removed by a scan (members: {ids})"
    finally:
        m.close()


# ------------------------------------------------------------------------ checkpoint vs delete
def test_checkpoint_racing_a_topic_delete(data_dir, monkeypatch):
    """Engine.checkpoint walks a snapshot of the open partitions; a topic deleted meanwhile
    (another thread) has its PartitionLog closed (lock_fd -1). Checkpointing that log must be
    skipped like any deleted partition, not raise OSError(EBADF) out of the checkpoint, and so
    out of an acknowledged produce (_maybe_checkpoint catches only RivvenError) or close()."""
    from engine.fs import durable

    eng = Engine.open(data_dir)
    eng.create_topic("u", 1)
    eng.create_topic("t", 1)
    eng.produce_batch("u", [b"u"], partition=0)
    eng.produce_batch("t", [b"t"], partition=0)
    real = durable.write_atomic
    done = {}

    def write_atomic(target, data, sync_dir=True):  # u's checkpoint: meanwhile t is deleted
        real(target, data, sync_dir)
        if "/u/" in target and not done:
            done["x"] = True
            th = threading.Thread(target=eng.delete_topic, args=("t",), daemon=True)
            th.start()
            th.join(HANG_S)

    monkeypatch.setattr(durable, "write_atomic", write_atomic)
    eng.checkpoint()
    monkeypatch.undo()
    assert done
    eng.close()
