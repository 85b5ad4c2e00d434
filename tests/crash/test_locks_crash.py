"""Lock waits with a stopped process: a SIGSTOPped process holding a partition's flock is
named, and the wait gives up instead of hanging every producer."""

import os
import signal
import time

import pytest
from helpers import run_rivven
from helpers.fs import consume_all, holder, no_internal_error, produce

from engine.segments import filenames


@pytest.mark.slow
def test_a_stopped_lock_holder_is_named_and_the_wait_gives_up(data_dir, monkeypatch):
    """A SIGSTOPped process holding a partition's flock hung every producer for ever."""
    run_rivven(data_dir, "topic", "create", "t", check=True)
    lock = os.path.join(data_dir, "topics", "t", "partition-0", filenames.LOCK_FILE)
    monkeypatch.setenv("RIVVEN_LOCK_TIMEOUT_MS", "2500")  # (= rivven --lock-timeout-ms 2500)
    with holder(lock) as h:
        os.kill(h.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        r = run_rivven(data_dir, "produce", "t", input=b"x\n", timeout=30)
        waited = time.monotonic() - t0
        err = r.stderr.decode()
        no_internal_error(r)
        assert r.returncode == 1, err
        assert f"waiting: waiting 1 s for the lock {lock}, held by pid {h.pid}" in err
        assert "gave up after 2.5 s" in err and lock in err and f"pid {h.pid}" in err
        assert "lock.timeout.ms" in err
        assert waited >= 2.5
    assert produce(data_dir, "t", ["y"]).returncode == 0  # the holder is gone: all is well
    assert consume_all(data_dir, "t") == ["y"]  # (the timed-out produce stored nothing)
