"""engine.fs.locks: every lock wait gives up naming the holder (another user's read-only
flock too), a contended lock is handed over when released, and the lock timeout setting is
checked. (A stopped holder: tests/crash/test_locks_crash.py.)"""

import fcntl
import os
import shutil
import signal
import tempfile
import time

import pytest
from helpers import run_rivven
from helpers.fs import IS_ROOT, NOBODY, holder, no_internal_error, produce

from engine import Engine, Record
from engine.errors import LockTimeout
from engine.fs import locks
from engine.segments import filenames


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="needs root to run a process as nobody")
def test_a_read_only_flock_of_another_user_is_named(tmp_path):
    """Any user who can open partition-N/.lock read-only can flock it: with the default
    modes nobody cannot open it (previous test); where the files are made readable to
    others on purpose, the wait names that user's process and gives up."""
    base = tempfile.mkdtemp(prefix="rivven-nobody-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        data = os.path.join(base, "data")
        run_rivven(data, "topic", "create", "t", check=True)
        lock = os.path.join(data, "topics", "t", "partition-0", filenames.LOCK_FILE)
        for d in (data, os.path.join(data, "topics"), os.path.join(data, "topics", "t"),
                  os.path.dirname(lock)):
            os.chmod(d, 0o711)
        os.chmod(lock, 0o644)
        with holder(lock, NOBODY, "/usr/bin/python3") as h:
            r = run_rivven(data, "--lock-timeout-ms", "2000", "produce", "t", input=b"x\n",
                           timeout=60)
            err = r.stderr.decode()
            no_internal_error(r)
            assert r.returncode == 1, err
            assert f"held by pid {h.pid}" in err.split("\n")[0]  # the waiting line
            assert "gave up after 2 s" in err and f"pid {h.pid}" in err.split("\n")[-2]
        assert produce(data, "t", ["y"]).returncode == 0
    finally:
        shutil.rmtree(base)


@pytest.mark.slow
@pytest.mark.parametrize("lock, command", [
    ("catalog.lock", ["topic", "create", "u"]),
    ("wal/recovery.lock", ["topic", "list"]),  # (read-only: no wait) ...
    ("wal/recovery.lock", ["offsets", "t"]),
    ("wal/recovery.lock", ["delete-records", "t", "--before", "0", "--yes"]),
    ("groups/g/offsets.lock", ["group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                               "--execute"]),
])
def test_every_lock_wait_gives_up(data_dir, lock, command):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    with Engine.open(data_dir) as eng:
        eng.produce("t", [Record(value=b"v")])
        c = eng.consumer("g", "t")
        c.poll(timeout_ms=300)
        c.commit()
        c.close()
    path = os.path.join(data_dir, lock)
    with holder(path):
        r = run_rivven(data_dir, "--lock-timeout-ms", "1000", *command, timeout=60)
    no_internal_error(r)
    if command[0] in ("topic", "offsets") and command[1:2] != ["create"]:
        assert r.returncode == 0  # readers take no lock
        return
    assert r.returncode == 1, r.stderr.decode()
    assert f"waiting for the lock {path}" in r.stderr.decode() or \
        f"the lock {path}" in r.stderr.decode()
    assert "gave up after 1 s" in r.stderr.decode()


def test_a_contended_lock_is_handed_over_when_released(tmp_path):
    """The wait blocks in the kernel (in a helper) and the caller's fd ends up holding the
    lock; after a timeout, the abandoned wait takes nothing for good."""
    path = str(tmp_path / "x.lock")
    fd = locks.open_lock_file(path)
    told = []
    with holder(path) as h:
        wait = locks.LockWait(0.5, told.append)
        with pytest.raises(LockTimeout, match=f"pid {h.pid}"):
            locks.acquire(fd, path, wait)
        assert told and f"pid {h.pid}" in told[0]
        h.stdin.close()  # it exits: the lock is free
        h.wait()
        other = os.open(path, os.O_RDONLY)  # the abandoned helper took nothing for good
        deadline = time.monotonic() + 5
        while not locks.try_lock(other):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.close(other)
    with holder(path) as h:
        got = []

        def release_soon():
            time.sleep(0.3)
            os.kill(h.pid, signal.SIGKILL)

        import threading

        threading.Thread(target=release_soon).start()
        locks.acquire(fd, path, locks.LockWait(30, got.append))
        other = os.open(path, os.O_RDONLY)
        assert not locks.try_lock(other)  # ours now, through the caller's fd
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert locks.try_lock(other)
        os.close(other)
        assert got == []  # (no notice before 3 s)
    os.close(fd)


def test_lock_timeout_setting_is_checked():
    from engine.errors import InvalidConfig
    from engine.settings import Settings

    assert Settings.parse({}).lock_timeout_ms == 30000
    assert Settings.parse({"lock.timeout.ms": "-1"}).lock_timeout_ms == -1
    for bad in ("0", "-2", "soon"):
        with pytest.raises(InvalidConfig, match="lock.timeout.ms"):
            Settings.parse({"lock.timeout.ms": bad})
