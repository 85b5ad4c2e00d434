"""Many processes on one data dir, some killed -9: admin commands while an application
produces, producers killed at random moments, a writer killed holding the partition lock."""

import os
import random
import signal
import subprocess
import sys
import time

from helpers import RIVVEN, ROOT, run_rivven
from helpers.concurrency import PRODUCER

from engine import Engine, Record


def env_for(data_dir):
    return dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))


def test_admin_commands_while_an_application_produces(data_dir):
    run_rivven(data_dir, "topic", "create", "app", check=True)
    app = subprocess.Popen([sys.executable, "-c", PRODUCER, data_dir], stdout=subprocess.PIPE,
                           env=env_for(data_dir), cwd=ROOT)
    try:
        app.stdout.readline()
        for args in (["topic", "create", "other", "-p", "3"],
                     ["topic", "alter-config", "app", "--set", "segment.bytes=65536"],
                     ["topic", "add-partitions", "other", "--total", "4"],
                     ["topic", "delete", "other", "--yes"],
                     ["topic", "describe", "app"]):
            t = time.monotonic()
            r = run_rivven(data_dir, *args, timeout=30)
            assert r.returncode == 0, r.stderr
            assert time.monotonic() - t < 20
        time.sleep(0.5)  # the producer picks up segment.bytes and rolls
        assert len([f for f in os.listdir(os.path.join(data_dir, "topics/app/partition-0"))
                    if f.endswith(".log")]) > 1
    finally:
        app.kill()
        app.wait()
    with Engine.open(data_dir) as eng:
        end = eng.end_offsets("app")[0]
        assert [r.value for r in eng.read("app", 0, 0, end)] == [b"%d" % i for i in range(end)]


def test_kill_9_producer_at_random_moments(data_dir, tmp_path):
    run_rivven(data_dir, "topic", "create", "t", "-c", "segment.bytes=20000", check=True)
    rng = random.Random(7)
    acked: list[tuple[int, bytes]] = []
    for round_ in range(6):
        src = tmp_path / f"in-{round_}.txt"
        src.write_bytes(b"".join(b"r%d-%d\n" % (round_, i) for i in range(200000)))
        out_path = tmp_path / f"out-{round_}.txt"
        with open(src, "rb") as stdin, open(out_path, "wb") as stdout:
            p = subprocess.Popen([*RIVVEN, "produce", "t", "--print-offsets",
                                  "--batch-records", "100"], stdin=stdin, stdout=stdout,
                                 stderr=subprocess.DEVNULL, env=env_for(data_dir), cwd=ROOT)
            time.sleep(rng.uniform(0.3, 1.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
        out = out_path.read_bytes()
        got = out.decode().splitlines()
        if got and not out.endswith(b"\n"):
            got.pop()  # a line cut by the kill was never fully acknowledged
        for i, line in enumerate(got):
            acked.append((int(line.split()[1]), b"r%d-%d" % (round_, i)))
    assert acked
    with Engine.open(data_dir) as eng:
        end = eng.end_offsets("t")[0]
        recs = {r.offset: r.value for r in eng.read("t", 0, 0, end)}
        assert list(recs) == list(range(end))
        for off, value in acked:
            assert recs[off] == value
        assert eng.produce("t", [Record(value=b"after")]) == [(0, end)]


LOCK_AND_DIE = """
import fcntl, os, sys, time
from engine.format import encode_batch
d = sys.argv[1]
fd = os.open(os.path.join(d, ".lock"), os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
with open(os.path.join(d, "00000000000000000000.log"), "ab") as f:
    f.write(bytes(encode_batch([b"k"], [b"half"], 1).assign(3))[:40])
print("locked", flush=True)
time.sleep(60)
"""


def test_writer_killed_holding_the_lock(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"a")] * 3)
    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    holder = subprocess.Popen([sys.executable, "-c", LOCK_AND_DIE, pdir], stdout=subprocess.PIPE,
                              env=env_for(data_dir), cwd=ROOT)
    assert holder.stdout.readline() == b"locked\n"
    with Engine.open(data_dir, read_only=True) as ro:  # readers never wait for the lock
        assert ro.end_offsets("t") == {0: 3}
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    r = run_rivven(data_dir, "produce", "t", "--print-offsets", input=b"b\n", timeout=30)
    assert r.stdout == b"0 3\n"
    assert run_rivven(data_dir, "consume", "t").stdout == b"a\na\na\nb\n"
