"""Many processes on one data dir, through real subprocesses: producers side by side, a topic
deleted under its producer, an idle stdin producer, the partition flock kept only while
appending. (The same with kill -9: tests/crash/test_concurrency_crash.py.)"""

import os
import subprocess
import sys
import time

from helpers import RIVVEN, ROOT, run_rivven
from helpers.concurrency import PRODUCER

from engine import Engine


def env_for(data_dir):
    return dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))


def test_two_producer_processes_on_one_topic(data_dir, tmp_path):
    run_rivven(data_dir, "topic", "create", "t", "-p", "2", check=True)
    procs = []
    for name in ("a", "b"):
        f = tmp_path / f"{name}.txt"
        f.write_text("".join(f"{name}-{i}\n" for i in range(20000)))
        procs.append(subprocess.Popen([*RIVVEN, "produce", "t", "--file", str(f), "--print-offsets",
                                       "--batch-records", "500"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env_for(data_dir), cwd=ROOT))
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    acked = [tuple(map(int, line.split())) for o in outs for line in o[0].decode().splitlines()]
    assert len(acked) == 40000 and len(set(acked)) == 40000
    with Engine.open(data_dir, read_only=True) as ro:
        values = []
        for p, end in ro.end_offsets("t").items():
            recs = ro.read("t", p, 0, end)
            assert [r.offset for r in recs] == list(range(end))
            values += [r.value for r in recs]
    assert sorted(values) == sorted(f"{n}-{i}".encode() for n in "ab" for i in range(20000))


def test_deleting_a_topic_stops_its_producer_cleanly(data_dir):
    run_rivven(data_dir, "topic", "create", "app", check=True)
    app = subprocess.Popen([sys.executable, "-c", PRODUCER, data_dir], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env_for(data_dir), cwd=ROOT)
    app.stdout.readline()
    run_rivven(data_dir, "topic", "delete", "app", "--yes", check=True)
    _, err = app.communicate(timeout=30)
    assert app.returncode != 0 and b"UnknownTopic" in err
    run_rivven(data_dir, "topic", "create", "app", check=True)
    with Engine.open(data_dir) as eng:
        assert eng.end_offsets("app") == {0: 0}


def test_idle_stdin_producer_blocks_nobody(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    idle = subprocess.Popen([*RIVVEN, "produce", "t", "--print-offsets"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(data_dir),
                            cwd=ROOT)
    idle.stdin.write(b"first\n")
    idle.stdin.flush()
    assert idle.stdout.readline() == b"0 0\n"  # streamed: durable before stdin closes
    r = run_rivven(data_dir, "produce", "t", input=b"second\n", timeout=30)
    assert r.returncode == 0
    r = run_rivven(data_dir, "consume", "t", timeout=30)
    assert r.stdout == b"first\nsecond\n"
    idle.stdin.write(b"third\n")
    idle.stdin.close()
    assert idle.wait(timeout=30) == 0
    assert run_rivven(data_dir, "consume", "t").stdout == b"first\nsecond\nthird\n"


def _flock_free(data_dir: str, topic: str, partition: int) -> bool:
    import fcntl

    from engine.segments import filenames

    fd = os.open(os.path.join(filenames.partition_dir(data_dir, topic, partition), filenames.LOCK_FILE),
                 os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_idle_partition_flock_is_kept_only_while_the_engine_appends_elsewhere(data_dir):
    # a partition whose appends are done keeps its flock (FlockHolds) at most IDLE_HOLD_S,
    # whether other threads of the engine append or not; then every flock is free
    import threading

    from engine.storage.holds import IDLE_HOLD_S

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", partitions=2)
        stop = threading.Event()
        started = threading.Event()

        def busy() -> None:
            while not stop.is_set():
                eng.produce_batch("t", [b"x"] * 10, partition=1)
                started.set()

        th = threading.Thread(target=busy)
        th.start()
        try:
            started.wait(10)
            eng.produce_batch("t", [b"y"], partition=0)
            # another process waits at most about IDLE_HOLD_S for partition 0
            deadline = time.monotonic() + IDLE_HOLD_S + 2.0
            while not _flock_free(data_dir, "t", 0):
                assert time.monotonic() < deadline, "idle partition kept its flock"
                time.sleep(0.001)
            with Engine.open(data_dir) as other:  # another "process" appends meanwhile
                assert other.produce_batch("t", [b"z"], partition=0) == [(0, 1)]
        finally:
            stop.set()
            th.join()
        # nothing appends any more: every flock is free within about IDLE_HOLD_S
        free_soon(data_dir, IDLE_HOLD_S, 0, 1)
        assert eng.produce_batch("t", [b"w"], partition=0) == [(0, 2)]
        free_soon(data_dir, IDLE_HOLD_S, 0)


def free_soon(data_dir, idle_s, *partitions):
    deadline = time.monotonic() + idle_s + 2.0  # (a busy machine may run the reaper late)
    for p in partitions:
        while not _flock_free(data_dir, "t", p):
            assert time.monotonic() < deadline, f"partition {p} kept its flock"
            time.sleep(0.001)
