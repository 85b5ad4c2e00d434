"""Failed WAL fsyncs (WalStream): records of a rotation whose fdatasync failed, or written
while a failing fdatasync ran, are never acknowledged, and the produce fails; through the
stream and through the engine."""

import errno
import os
import threading

import pytest
from helpers.pipeline import HANG_S, fd_path

from engine import Engine, StorageError
from engine import wal as wal_mod
from engine.errors import RivvenError


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
