"""Idempotent producers across kill -9: a process killed at the worst moment (after the
append, after the WAL fsync, before its answer) or at random, its last call retried by a new
process with the same producer id and sequences: stored once, in order; two processes with
their own producers on one partition."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT
from helpers.idempotence import start

from engine import (
    Engine,
    Record,
)


def settle(eng, log_path, prefix=b"r"):
    """Retry the last call of a dead producer process with its producer id and sequences, as
    its owner would; return (the records each call wrote in order, the acks seen)."""
    lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.endswith("}")]
    acked: dict[int, int] = {}
    intent = None
    for x in lines:
        if "pid" in x:
            intent = x
        elif "acked" in x:
            for j, off in enumerate(x["acked"]):
                acked[intent["first"] + j] = off
            intent = None
    total = max(acked) + 1 if acked else 0
    settle.duplicate = None
    if intent is not None:  # the call whose answer never came: sent again, same sequences
        end = eng.end_offsets("t")[0]
        again = eng.producer(producer_id=intent["pid"], sequences={("t", 0): intent["seq"]})
        acks = again.produce("t", [Record(value=b"%s%d" % (prefix, intent["first"] + j))
                                   for j in range(intent["n"])], partition=0)
        for j, (_, off) in enumerate(acks):
            assert acked.setdefault(intent["first"] + j, off) == off
        total = intent["first"] + intent["n"]
        settle.duplicate = eng.end_offsets("t")[0] == end  # it was there already
    return total, acked


def check_once_in_order(eng, total, acked, prefix=b"r"):
    rows = eng.read("t", 0, 0, 1 << 20)
    mine = [r for r in rows if r.value.startswith(prefix)]
    assert [r.value for r in mine] == [b"%s%d" % (prefix, i) for i in range(total)]
    for i, off in acked.items():
        assert mine[i].offset == off


@pytest.mark.parametrize("failpoint", ["producer.after_append", "append.after_wal_sync",
                                       "fsync-ok-then-eio"])
def test_killed_at_the_worst_moment_then_retried_by_a_new_process(data_dir, tmp_path, failpoint):
    """Killed once the batch is stored but before the answer (after_append), once it is only
    in the WAL (after_wal_sync: the replay puts it back), or after a WAL fsync that reported
    EIO though the bytes were written: a new process sending the call again with the same
    producer id and sequences gets the original offsets, and nothing is stored twice."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    out = tmp_path / "calls"
    proc = start(data_dir, out, arm_at=7, failpoint=failpoint)
    assert proc.wait(timeout=120) == -signal.SIGKILL
    with Engine.open(data_dir) as eng:
        total, acked = settle(eng, out)
        assert settle.duplicate is True  # the killed call was in the log: found, not stored
        assert total >= 7
        check_once_in_order(eng, total, acked)
        assert eng.end_offsets("t")[0] == total


def test_kill_9_at_random_moments_many_times(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "20000"})
    rng = random.Random(15)
    for round_ in range(6):
        out = tmp_path / f"calls-{round_}"
        prefix = b"r%d-" % round_
        proc = start(data_dir, out, prefix.decode())
        deadline = time.monotonic() + 60
        while (not out.exists() or b"acked" not in out.read_bytes()) and \
                time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)  # (started and producing: then a random moment)
        time.sleep(rng.uniform(0.0, 0.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Engine.open(data_dir) as eng:
            total, acked = settle(eng, out, prefix)
            assert total > 0
            check_once_in_order(eng, total, acked, prefix)
    with Engine.open(data_dir) as eng:
        rows = eng.read("t", 0, 0, 1 << 20)
        assert [r.offset for r in rows] == list(range(len(rows)))


def test_two_processes_with_their_own_producers_share_a_partition(data_dir, tmp_path):
    code = r"""
import json, sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1])
p = eng.producer()
tag = sys.argv[2].encode()
out = open(sys.argv[3], "w")
for call in range(60):
    seq = p.next_sequence("t", 0) or 0
    acks = p.produce("t", [Record(value=b"%s%d" % (tag, call * 5 + j)) for j in range(5)])
    out.write(json.dumps({"pid": p.producer_id, "seq": seq, "acked": [o for _, o in acks]}) + "\n")
    out.flush()
eng.close()
"""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    outs = [tmp_path / "a", tmp_path / "b"]
    procs = [subprocess.Popen([sys.executable, "-c", code, data_dir, tag, str(o)],
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
             for tag, o in zip(("A", "B"), outs)]
    for pr in procs:
        assert pr.wait(timeout=180) == 0
    with Engine.open(data_dir) as eng:
        rows = eng.read("t", 0, 0, 10_000)
        assert len(rows) == 600 and len({r.value for r in rows}) == 600
        for tag, o in zip((b"A", b"B"), outs):
            mine = [r for r in rows if r.value.startswith(tag)]
            assert [r.value for r in mine] == [b"%s%d" % (tag, i) for i in range(300)]
            calls = [json.loads(x) for x in o.read_text().splitlines()]
            assert [off for c in calls for off in c["acked"]] == [r.offset for r in mine]
            # any call of either, sent again from here: its original offsets, nothing new
            for c in random.Random(1).sample(calls[-5:], 3):
                again = eng.producer(producer_id=c["pid"], sequences={("t", 0): c["seq"]})
                first = c["seq"]
                vals = [Record(value=b"%s%d" % (tag, first + j)) for j in range(5)]
                assert [off for _, off in again.produce("t", vals)] == c["acked"]
        assert eng.end_offsets("t") == {0: 600}
