"""Engine.close and Engine.checkpoint racing the rest of the process: a closed engine refuses
a produce and writes nothing (not even into a file that took its old fd number), and a
checkpoint racing a topic delete skips the deleted partition. (A produce racing close, then
a crash: tests/crash/test_close_crash.py.)"""

import os
import threading

import pytest
from helpers.pipeline import HANG_S, fd_path

from engine import Engine
from engine.errors import RivvenError


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
