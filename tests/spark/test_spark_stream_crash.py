"""A streaming query ``in`` -> upper(value) -> ``out`` whose driver (its whole process group:
Python, the JVM, the Python workers) is killed with -9 at random moments, five times, while a
producer keeps appending to ``in``; restarted from its checkpoint each time. Read with
read_committed, ``out`` then holds each input record's transform exactly once, each key's in
its input order."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT

from engine import Engine

pytestmark = [pytest.mark.crash, pytest.mark.slow]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1",
           PYSPARK_PYTHON=sys.executable)
DRIVER = str(ROOT / "tests" / "stream_driver.py")
KEYS = 40

PRODUCER = """
import os, random, sys, time
from engine import Engine
d, stop, nkeys = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng, seq = random.Random(1), [0] * nkeys
with Engine.open(d) as eng:
    while not os.path.exists(stop):
        keys, vals = [], []
        for _ in range(50):
            k = rng.randrange(nkeys)
            keys.append(b"k%d" % k)
            vals.append(b"k%d:%d" % (k, seq[k]))
            seq[k] += 1
        eng.produce_batch("in", vals, keys=keys)
        time.sleep(0.02)
"""


def driver(data_dir, ckpt, mode):
    return subprocess.Popen([sys.executable, DRIVER, data_dir, ckpt, mode], env=ENV, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_driver_killed_at_random_the_output_is_exactly_once_in_order(data_dir, tmp_path):
    rng = random.Random(int(os.environ.get("RIVVEN_SEED", time.time())))
    ckpt, stop = str(tmp_path / "ckpt"), str(tmp_path / "stop")
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 3)
        eng.create_topic("out", 2)
    prod = subprocess.Popen([sys.executable, "-c", PRODUCER, data_dir, stop, str(KEYS)], env=ENV,
                            cwd=ROOT, stderr=subprocess.PIPE)
    kills = 0
    try:
        for _ in range(5):
            d = driver(data_dir, ckpt, "run")
            line = d.stdout.readline()
            assert line == b"STARTED\n", d.stderr.read()[-3000:]
            time.sleep(rng.uniform(1.0, 9.0))
            assert d.poll() is None, d.stderr.read()[-3000:]  # (running until killed)
            os.killpg(d.pid, signal.SIGKILL)
            d.wait()
            kills += 1
    finally:
        open(stop, "w").close()
        prod.wait(timeout=60)
    assert prod.returncode == 0, prod.stderr.read()
    d = driver(data_dir, ckpt, "drain")
    out, err = d.communicate(timeout=600)
    assert out.strip().endswith(b"DONE"), err[-3000:]
    with Engine.open(data_dir) as eng:
        want = []
        for p in range(3):
            want += [r.value.upper() for r in eng.read("in", p, 0, 10**9)]
        got = {}
        for p in range(2):
            for r in eng.read("out", p, 0, 10**9, isolation_level="read_committed"):
                got.setdefault(r.key, []).append(r.value)
        assert kills == 5 and len(want) > 1000
        assert sorted(v for vs in got.values() for v in vs) == sorted(want)  # exactly once
        for k, vs in got.items():  # in each key's input order
            assert [int(v.split(b":")[1]) for v in vs] == list(range(len(vs))), k
        assert eng.txn.list_transactions() == []
