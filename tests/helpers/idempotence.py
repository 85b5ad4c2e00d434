"""The idempotent producer process (failpoints, its log of calls): shared by
tests/unit/produce/test_idempotence.py and tests/crash/test_idempotence_crash.py."""

import os
import subprocess
import sys

from helpers import ROOT

PRODUCER = r"""
import json, os, sys
from engine import Engine, Record
data_dir, log_path, prefix, arm_at = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
failpoint = sys.argv[5]
eng = Engine.open(data_dir, settings={"checkpoint.interval.bytes": "100000"})
p = eng.producer()
out = open(log_path, "a")
i = call = 0
while True:
    if call == arm_at and failpoint:
        os.environ["RIVVEN_FAILPOINT"] = failpoint
    if call == arm_at and failpoint == "fsync-ok-then-eio":
        real = os.fdatasync
        def flaky(fd):
            real(fd)  # the bytes are on disk, the call says they are not
            if "/wal/" in os.readlink(f"/proc/self/fd/{fd}"):
                raise OSError(5, "Input/output error")
        os.fdatasync = flaky
    n = 1 + (call * 7) % 40
    seq = p.next_sequence("t", 0) or 0
    out.write(json.dumps({"pid": p.producer_id, "seq": seq, "first": i, "n": n}) + "\n")
    out.flush()
    try:
        acks = p.produce("t", [Record(value=b"%s%d" % (prefix, i + j)) for j in range(n)],
                         partition=0)
    except Exception as e:
        out.write(json.dumps({"failed": str(e)}) + "\n")
        out.flush()
        os.kill(os.getpid(), 9)
    out.write(json.dumps({"acked": [o for _, o in acks]}) + "\n")
    out.flush()
    i += n
    call += 1
"""


def start(data_dir, log_path, prefix="r", arm_at=-1, failpoint=""):
    return subprocess.Popen([sys.executable, "-c", PRODUCER, data_dir, str(log_path), prefix,
                             str(arm_at), failpoint], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
