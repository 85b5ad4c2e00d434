"""Prepared transactions in other processes and a coordinator: shared by
tests/unit/txn/test_txn_prepare.py and tests/crash/test_txn_prepare_crash.py."""

import json
import os
import signal
import subprocess
import sys

from engine import PreparedTransaction
from helpers import ROOT

ENV = dict(os.environ, PYTHONPATH=str(ROOT))

PREPARE = """
import json, os, sys
from engine import Engine, Record
d, tid = sys.argv[1], sys.argv[2]
eng = Engine.open(d)
tp = eng.producer(transactional_id=tid, transaction_timeout_ms=1000)
tp.begin()
tp.produce("out", [Record(value=b"a%d" % i) for i in range(3)], partition=0)
tp.produce("out", [Record(value=b"b")], partition=1)
print(json.dumps(tp.prepare()), flush=True)
os.kill(os.getpid(), 9)  # the writer is gone: another process decides
"""


def committed(eng, partition):
    return [r.value for r in eng.read("out", partition, 0, 100, isolation_level="read_committed")]


def prepared_elsewhere(data_dir, tid="w-1"):
    proc = subprocess.run([sys.executable, "-c", PREPARE, data_dir, tid], env=ENV, cwd=ROOT,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    return PreparedTransaction(*json.loads(proc.stdout))


# ------------------------------------------------------------------ decisions: many as one
COORDINATE = """
import json, sys
from engine import Engine
d, key, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
prepared = json.loads(sys.stdin.read())
with Engine.open(d) as eng:
    print(eng.txn.commit_prepared(key, prepared, seq), flush=True)
"""


def coordinate(data_dir, key, prepared, seq, failpoint=None):
    env = dict(ENV, RIVVEN_FAILPOINT=failpoint) if failpoint else ENV
    return subprocess.run([sys.executable, "-c", COORDINATE, data_dir, key, str(seq)],
                          input=json.dumps(prepared).encode(), env=env, cwd=ROOT,
                          capture_output=True, timeout=60)


def writers(data_dir, n, tag):
    return [prepared_elsewhere(data_dir, f"{tag}-{i}") for i in range(n)]
