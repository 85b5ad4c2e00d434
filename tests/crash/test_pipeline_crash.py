"""The pipelined group commit (PartitionLog.append) across processes and crashes: two
processes appending to one partition, and a checkpoint that deletes only the WAL it covered
(a machine crash right then loses nothing acknowledged)."""

import json
import subprocess
import sys
import threading
import time

from helpers import ROOT
from helpers.pipeline import HANG_S, SETTINGS, check_stored, crash_image, not_durable, stored, value

from engine import Engine
from engine.fs import durable

# ------------------------------------------------------------------------ processes
CHILD = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from engine import Engine
def value(tag, i, j):
    return b"%s-%d-%d-" % (tag, i, j) + b"v" * ((i * 31 + j * 7) % 180)
data_dir, tag, threads, n, sizes = sys.argv[2], sys.argv[3].encode(), 4, int(sys.argv[4]), (1, 3, 10, 40)
eng = Engine.open(data_dir, settings=json.loads(sys.argv[5]))
eng.partition_offsets("t", 0)
lock = threading.Lock()
print("READY", flush=True)
sys.stdin.readline()
def work(t):
    for i in range(n):
        k = t * 1000 + i
        vals = [value(tag, k, j) for j in range(sizes[(k * 7) % 4])]
        acks = eng.produce_batch("t", vals, partition=0)
        with lock:
            print(json.dumps([time.monotonic(), k, [o for _, o in acks]]), flush=True)
ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
eng.close()
print("DONE", flush=True)
"""


def start_child(data_dir, tag, n):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT), data_dir, tag, str(n),
                             json.dumps(SETTINGS)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)


def child_acks(tag, out):
    acks, times = {}, []
    for line in out.decode().splitlines():
        try:
            t, k, offs = json.loads(line)
        except ValueError:
            continue  # READY, DONE, or a line cut by a kill
        times.append(t)
        acks.update({(0, o): value(tag.encode(), k, j) for j, o in enumerate(offs)})
    return acks, times


def test_two_processes_append_to_one_partition(data_dir):
    """Two processes, four threads each, append to one partition (each pipeline keeps the flock
    for a while) and a third one is killed with SIGKILL in the middle of its appends. No offset
    is handed out twice, nothing acknowledged is lost, and nobody is shut out for long."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "40000"})
    kids = {tag: start_child(data_dir, tag, n) for tag, n in (("a", 150), ("b", 150), ("c", 5000))}
    try:
        for p in kids.values():
            assert p.stdout.readline() == b"READY\n", p.stderr.read().decode()
        for p in kids.values():
            p.stdin.write(b"go\n")
            p.stdin.flush()
        time.sleep(0.7)
        kids["c"].kill()
        outs = {tag: p.communicate(timeout=45) for tag, p in kids.items()}
    finally:
        for p in kids.values():
            p.kill()
            p.wait()
    for tag in "ab":
        assert kids[tag].returncode == 0 and outs[tag][0].endswith(b"DONE\n"), (
            outs[tag][1].decode()[-2000:])
    acks = {tag: child_acks(tag, outs[tag][0]) for tag in "abc"}
    assert acks["c"][0], "the killed process acknowledged nothing before the kill"
    all_acks: dict = {}
    for tag in "abc":
        offsets = set(acks[tag][0])
        assert not offsets & set(all_acks), "an offset was acknowledged to two processes"
        all_acks.update(acks[tag][0])
    with Engine.open(data_dir) as eng:  # replays the killed process's WAL
        got = stored(eng, "t")
    # batches of the killed process that it never acknowledged may be there (at least once)
    check_stored(got, all_acks, extra_ok=True)
    assert all(got[k].startswith(b"c-") for k in got if k not in all_acks)
    # fairness: while both were running, neither waited long for the partition
    times_a, times_b = acks["a"][1], acks["b"][1]
    lo, hi = max(times_a[0], times_b[0]), min(times_a[-1], times_b[-1])
    for name, times in (("a", times_a), ("b", times_b)):
        inside = [t for t in times if lo <= t <= hi]
        gaps = [b - a for a, b in zip([lo, *inside], [*inside, hi])]
        assert max(gaps) < 3.0, f"process {name} made no progress for {max(gaps):.1f} s"


def test_checkpoint_deletes_only_the_wal_it_covered(data_dir, tmp_path, monkeypatch):
    """Appends to a partition the checkpoint already did, made while it works on another one,
    may fill the WAL file it rotated to and roll over to the next: that file is not covered by
    the checkpoint and must not be deleted with the older ones."""
    eng = Engine.open(data_dir, settings={"wal.segment.bytes": "4096"})
    eng.create_topic("t", 2)
    for p in (0, 1):
        eng.produce_batch("t", [b"before"], partition=p)
    real = durable.write_atomic
    inside = threading.Event()

    def slow_write_atomic(target, data, sync_dir=True):  # partition 1's .checkpoint, slow disk
        if "partition-1" in target:
            inside.set()
            time.sleep(0.3)
        return real(target, data, sync_dir)

    monkeypatch.setattr(durable, "write_atomic", slow_write_atomic)
    t = threading.Thread(target=eng.checkpoint, daemon=True)
    t.start()
    assert inside.wait(10)
    batches = []
    start = eng.wal.file_start
    for i in range(10):  # until an append rotates the WAL
        acks = eng.produce_batch("t", [value(b"late", i, j) for j in range(15)], partition=0)
        batches.append((0, acks[0][1], acks[-1][1]))
        if eng.wal.file_start != start:
            break
    t.join(HANG_S)
    monkeypatch.setattr(durable, "write_atomic", real)
    lost = not_durable(data_dir, "t", batches)
    image = crash_image(data_dir, str(tmp_path / "crashed"))
    eng.close()
    with Engine.open(image) as after:
        end = after.end_offsets("t")[0]
    assert not lost and end == batches[-1][2] + 1, (
        f"acknowledged {lost} are in no WAL file and not fsynced; after a machine crash "
        f"partition 0 ends at {end}, not {batches[-1][2] + 1}")
