"""Write-ahead log under crashes: kill -9 and a simulated machine crash lose nothing
acknowledged, torn WAL tails and cut segment tails at every byte, zero-filled WAL files of a
busy or live stream, the ``wal`` commands over a dead writer's stream."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, run_rivven

from engine import Engine, Record
from engine import wal as wal_mod
from engine.format.records import read_header

PRODUCER = """
import sys, threading
from engine import Engine, Record
eng = Engine.open(sys.argv[1])
threads = int(sys.argv[2])
tag = sys.argv[4].encode() if len(sys.argv) > 4 else b"t"
lock = threading.Lock()
def work(t):
    i = 0
    while True:
        vals = [b"%s%d-%d" % (tag, t, i + j) for j in range(20)]
        acks = eng.produce("t", [Record(value=v) for v in vals])
        i += 20
        with lock:
            sys.stdout.write("".join("%d %s\\n" % (o, v.decode()) for (_, o), v in zip(acks, vals)))
            sys.stdout.flush()
        if int(sys.argv[3]) and i >= int(sys.argv[3]):
            break
ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print("DONE", flush=True)
import os; os._exit(0)  # no close: the WAL stays, like a crash right after the last ack
"""


def env_for(data_dir):
    return dict(os.environ, PYTHONPATH=str(ROOT))


def start_producer(data_dir, out_path, threads=1, limit=0, tag="t"):
    args = [sys.executable, "-c", PRODUCER, data_dir, str(threads), str(limit), tag]
    return subprocess.Popen(args, stdout=open(out_path, "wb"), stderr=subprocess.DEVNULL,
                            env=env_for(data_dir), cwd=ROOT)


def acked(out_path):
    data = out_path.read_bytes()
    lines = data.decode().splitlines()
    if lines and not data.endswith(b"\n"):
        lines.pop()
    return [(int(a), b.encode()) for a, b in (x.split() for x in lines if x != "DONE")]


def check_all_acked(data_dir, acks):
    with Engine.open(data_dir) as eng:
        end = eng.end_offsets("t")[0]
        recs = eng.read("t", 0, 0, end)
        assert [r.offset for r in recs] == list(range(end))
        by_off = {r.offset: r.value for r in recs}
        for off, value in acks:
            assert by_off.get(off) == value, (off, value, by_off.get(off))
        assert len(set(by_off.values())) == len(by_off)  # each record stored once
        assert eng.produce("t", [Record(value=b"after")]) == [(0, end)]
    assert run_rivven(data_dir, "segment", "verify").returncode == 0


def lose_unsynced_segment_tail(data_dir):
    """What a machine crash does to segment bytes written after the last checkpoint: the active
    segment loses its unsynced tail (sealed segments were fsynced when they rolled)."""
    from engine.segments.checkpoint import read_checkpoint

    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    point = read_checkpoint(pdir)
    logs = sorted(f for f in os.listdir(pdir) if f.endswith(".log"))
    for name in logs[-1:]:
        base = int(name[:20])
        path = os.path.join(pdir, name)
        if point is None or base > point["segment"]:
            keep = 0
        elif base == point["segment"]:
            keep = point["position"]
        else:
            continue
        size = os.path.getsize(path)
        if size > keep:
            with open(path, "r+b") as f:
                f.truncate(keep + (size - keep) // 3)
                f.seek(keep + (size - keep) // 3)
                f.write(os.urandom(100))  # half-written garbage


@pytest.mark.parametrize("threads", [1, 4])
def test_kill_9_engine_producer_many_times(data_dir, tmp_path, threads):
    with Engine.open(data_dir, settings={"checkpoint.interval.bytes": "200000"}) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "100000"})
    rng = random.Random(threads)
    all_acks = []
    for round_ in range(5):
        out = tmp_path / f"out-{round_}"
        p = start_producer(data_dir, out, threads, tag=f"r{round_}t")
        time.sleep(rng.uniform(0.5, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait()
        all_acks += acked(out)
    assert len(all_acks) > 100
    check_all_acked(data_dir, all_acks)


def test_machine_crash_loses_nothing_acknowledged(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "50000"})
    out = tmp_path / "out"
    p = start_producer(data_dir, out, threads=2, limit=3000)
    assert p.wait(timeout=120) == 0
    acks = acked(out)
    assert len(acks) == 6000
    assert wal_mod.all_streams(data_dir)  # the dead process's stream
    lose_unsynced_segment_tail(data_dir)
    check_all_acked(data_dir, acks)
    assert not wal_mod.all_streams(data_dir)  # replayed, checkpointed, deleted


def test_wal_torn_at_every_byte_of_the_last_record(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    out = tmp_path / "out"
    assert start_producer(data_dir, out, threads=1, limit=60).wait(timeout=60) == 0
    acks = acked(out)
    lose_unsynced_segment_tail(data_dir)
    (stream_dir,) = wal_mod.all_streams(data_dir)
    stream = os.path.basename(stream_dir)
    (wal_file,) = wal_mod.stream_files(stream_dir)
    records = list(wal_mod.scan_file(wal_file))
    assert len(records) == 3
    last = records[-1].position
    size = os.path.getsize(wal_file)
    with open(wal_file, "rb") as f:
        f.seek(last)
        whole = last + wal_mod.FRAME_SIZE + wal_mod.FRAME.unpack(f.read(wal_mod.FRAME_SIZE))[0]
    base = tmp_path / "base"
    shutil.copytree(data_dir, base)
    for cut in list(range(last, size, 7)) + [size - 1, size]:
        d = tmp_path / "try"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        with open(os.path.join(d, "wal", stream, os.path.basename(wal_file)), "r+b") as f:
            f.truncate(cut)
        with Engine.open(str(d)) as eng:
            values = [r.value for r in eng.read("t", 0, 0, 100)]
        expect = 60 if cut >= whole else 40  # a record torn in the WAL is lost with its batch...
        assert values == [v for _, v in acks][:expect], cut  # ...every whole one comes back


def zero_filled_files(stream_dir):
    """WAL files of a stream that run on past their records (zero-filled ahead). The stream
    may be live: a file being written is read again until its last record is whole."""
    out = []
    for f in wal_mod.stream_files(stream_dir):
        for attempt in range(50):
            try:
                recs = list(wal_mod.scan_file(f))
                break
            except wal_mod.WalTail:  # a record being written, or zeros before bytes a later
                if attempt == 49:  # write put further on: both last microseconds
                    raise
                time.sleep(0.01)
            except FileNotFoundError:  # deleted by a checkpoint meanwhile
                recs = None
                break
        if recs is None:
            continue
        end = recs[-1].position + recs[-1].size if recs else 0
        try:
            if os.path.getsize(f) > end:
                out.append((f, recs))
        except FileNotFoundError:  # deleted by a checkpoint since it was read
            continue
    return out


def test_busy_stream_writes_into_zero_filled_files_and_recovers(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    tag = "x" * 500  # 20 records of 0.5 KB per call: busy, with small fsyncs
    out = tmp_path / "out"
    p = start_producer(data_dir, out, threads=2, limit=3000, tag=tag)
    assert p.wait(timeout=120) == 0
    acks = acked(out)
    assert len(acks) == 6000
    (stream_dir,) = wal_mod.all_streams(data_dir)
    filled = zero_filled_files(stream_dir)
    assert filled, "the stream never wrote into a zero-filled file"
    info = json.loads(run_rivven(data_dir, "wal", "list", "--json").stdout)[0]
    assert info["bytes"] == sum(r.size for f in wal_mod.stream_files(stream_dir)
                                for r in wal_mod.scan_file(f))  # records, not the zero fill
    assert run_rivven(data_dir, "wal", "verify").returncode == 0
    # a write torn inside a zero-filled file: the record's end is still zeros
    f, recs = filled[-1]
    last = recs[-1]
    base = tmp_path / "base"
    lose_unsynced_segment_tail(data_dir)
    shutil.copytree(data_dir, base)
    ordered = [v for _, v in sorted(acks)]
    kept = []
    torn_base = read_header(last.batch, 0).base_offset
    for cut in (last.position + 4, last.position + wal_mod.FRAME_SIZE + 40,
                last.position + last.size // 2, last.position + last.size - 8):
        d = tmp_path / "try"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        with open(os.path.join(d, os.path.relpath(f, data_dir)), "r+b") as fh:
            fh.seek(cut)
            fh.write(bytes(last.position + last.size - cut))
        assert run_rivven(str(d), "wal", "verify").returncode == 3  # a dead stream's torn tail
        with Engine.open(str(d)) as eng2:
            values = [r.value for r in eng2.read("t", 0, 0, 10_000)]
        # every record before the torn batch comes back; the torn batch only when its
        # segment bytes survived (a checkpoint came after it)
        assert values == ordered[:len(values)], cut
        assert len(values) in (torn_base, len(ordered)), (cut, len(values), torn_base)
        kept.append(len(values))
    assert torn_base in kept  # (the torn batch was past the checkpoint: really lost)
    check_all_acked(data_dir, acks)
    # kill -9 while the stream writes into zero-filled files
    out2 = tmp_path / "out2"
    p = start_producer(data_dir, out2, threads=2, tag=tag + "k")
    deadline = time.monotonic() + 60
    while len(acked(out2)) < 4000 and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    more = acked(out2)
    assert len(more) >= 4000
    streams = [s for s in wal_mod.all_streams(data_dir) if zero_filled_files(s)]
    assert streams, "the killed stream never wrote into a zero-filled file"
    lose_unsynced_segment_tail(data_dir)
    check_all_acked(data_dir, [(o, v) for o, v in acks] + more)


HOLDER = """
import sys, time
from engine import Engine
eng = Engine.open(sys.argv[1])
while eng.wal is None or eng.wal.zeroed == 0:  # until it writes into a zero-filled file
    eng.produce_batch("t", [b"v" * 500] * 20, partition=0)
print(eng.wal.dir, flush=True)
time.sleep(600)
"""


def test_live_stream_verify_sees_damage_in_a_zero_filled_file_and_no_write_in_flight(
        data_dir, tmp_path):
    """A live stream's current file may end in a write in flight, and a reader of a zero-filled
    file can even see zeros before bytes a later write put further on: neither is damage. A
    flipped bit in an acknowledged record is, live or not."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    # 1. 4 threads keep writing into zero-filled files while verify reads them, again and again
    out = tmp_path / "out"
    p = start_producer(data_dir, out, threads=4, tag="x" * 500)
    try:
        deadline = time.monotonic() + 60
        while len(acked(out)) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        (stream_dir,) = wal_mod.all_streams(data_dir)
        scans = 0
        while scans < 60 or not zero_filled_files(stream_dir):
            assert wal_mod.verify_stream(stream_dir, live=True) == []
            scans += 1
            assert time.monotonic() < deadline + 60, "never saw a zero-filled file"
    finally:
        p.kill()
        p.wait()
    lose_unsynced_segment_tail(data_dir)
    with Engine.open(data_dir):
        pass  # replays and removes the dead stream
    # 2. a live process holds a zero-filled file; a bit flips in its last, acknowledged record
    h = subprocess.Popen([sys.executable, "-c", HOLDER, data_dir], stdout=subprocess.PIPE,
                         env=env_for(data_dir), cwd=ROOT)
    try:
        stream_dir = h.stdout.readline().decode().strip()
        f = wal_mod.stream_files(stream_dir)[-1]
        last = list(wal_mod.scan_file(f))[-1]
        assert wal_mod.verify_stream(stream_dir, live=True) == []
        assert run_rivven(data_dir, "wal", "verify").returncode == 0
        with open(f, "r+b") as fh:
            fh.seek(last.batch_position + 100)
            b = fh.read(1)
            fh.seek(last.batch_position + 100)
            fh.write(bytes([b[0] ^ 1]))
        found = wal_mod.verify_stream(stream_dir, live=True)
        assert [(x["file"], x["position"]) for x in found] == [(f, last.position)]
        r = run_rivven(data_dir, "wal", "verify", "--json")
        assert r.returncode == 3 and json.loads(r.stdout)["findings"][0]["position"] == last.position
    finally:
        h.kill()
        h.wait()


def test_wal_commands(data_dir, tmp_path):

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    out = tmp_path / "out"
    assert start_producer(data_dir, out, threads=1, limit=40).wait(timeout=60) == 0
    streams = json.loads(run_rivven(data_dir, "wal", "list", "--json").stdout)
    assert len(streams) == 1 and not streams[0]["live"] and streams[0]["records"] == 2
    rows = [json.loads(x) for x in
            run_rivven(data_dir, "wal", "inspect", "--json").stdout.decode().splitlines()]
    assert [(r["base_offset"], r["count"]) for r in rows] == [(0, 20), (20, 20)]
    wal_file = rows[0]["file"]
    with open(wal_file, "ab") as f:
        f.write(b"\x05" * 20)  # a torn tail of the dead stream
    assert run_rivven(data_dir, "wal", "verify").returncode == 3
    r = run_rivven(data_dir, "wal", "recover", "--dry-run", "--json")
    assert json.loads(r.stdout)[0]["bytes_removed"] == 20
    lose_unsynced_segment_tail(data_dir)
    r = run_rivven(data_dir, "wal", "replay", "--dry-run", "--json")
    assert json.loads(r.stdout)["applied"] >= 1
    r = run_rivven(data_dir, "wal", "replay", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["partitions"][0]["topic"] == "t"
    assert json.loads(run_rivven(data_dir, "wal", "list", "--json").stdout) == []
    assert run_rivven(data_dir, "wal", "verify").returncode == 0
    r = run_rivven(data_dir, "wal", "checkpoint", "--json")
    assert json.loads(r.stdout)["checkpoints"][0]["recovery_point"] == 40
    assert run_rivven(data_dir, "consume", "t").stdout.count(b"\n") == 40


@pytest.mark.slow
def test_flipped_bits_in_wal_are_found(data_dir, tmp_path):

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    assert start_producer(data_dir, tmp_path / "out", threads=1, limit=100).wait(timeout=60) == 0
    (stream_dir,) = wal_mod.all_streams(data_dir)
    (wal_file,) = wal_mod.stream_files(stream_dir)
    data = open(wal_file, "rb").read()
    starts = [r.position for r in wal_mod.scan_file(wal_file)]
    rng = random.Random(5)
    for pos in rng.sample(range(len(data)), 25) + [s - 1 for s in starts[1:]]:
        bad = bytearray(data)
        bad[pos] ^= 1 << rng.randrange(8)
        with open(wal_file, "wb") as f:
            f.write(bad)
        r = run_rivven(data_dir, "wal", "verify", "--json")
        assert r.returncode == 3, pos
        found = json.loads(r.stdout)["findings"][0]
        assert found["position"] == max(s for s in starts if s <= pos), (pos, found)
    with open(wal_file, "wb") as f:
        f.write(data)
    assert run_rivven(data_dir, "wal", "verify").returncode == 0


def test_two_producer_processes_killed_together(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "100000"})
    rng = random.Random(11)
    all_acks = []
    for round_ in range(4):
        outs = [tmp_path / f"out-{round_}-{k}" for k in range(2)]
        procs = [start_producer(data_dir, o, threads=2, tag=f"r{round_}p{k}t")
                 for k, o in enumerate(outs)]
        time.sleep(rng.uniform(0.5, 1.5))
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()
        lose_unsynced_segment_tail(data_dir)  # and the machine went down with them
        for o in outs:
            all_acks += acked(o)
    assert len(all_acks) > 100
    check_all_acked(data_dir, all_acks)


def test_active_segment_cut_at_every_byte_of_the_last_batch(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    assert start_producer(data_dir, tmp_path / "out", threads=1, limit=60).wait(timeout=60) == 0
    acks = acked(tmp_path / "out")
    log = os.path.join(data_dir, "topics", "t", "partition-0", "00000000000000000000.log")
    size = os.path.getsize(log)
    from engine.tools.verify import scan_segment

    last = scan_segment(log, 0).batch_starts[-1]
    base = tmp_path / "base"
    shutil.copytree(data_dir, base)
    for cut in range(last, size + 1, 3):
        d = tmp_path / "try"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        with open(os.path.join(d, "topics", "t", "partition-0", "00000000000000000000.log"),
                  "r+b") as f:
            f.truncate(cut)
        with Engine.open(str(d)) as eng:
            assert [(r.offset, r.value) for r in eng.read("t", 0, 0, 100)] == acks, cut


def test_replayed_partitions_are_checkpointed_before_the_stream_goes(data_dir, tmp_path):
    from engine.segments.checkpoint import read_checkpoint

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    assert start_producer(data_dir, tmp_path / "out", threads=1, limit=100).wait(timeout=60) == 0
    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    with Engine.open(data_dir) as eng:  # the kill -9 case: every batch is already in the log
        assert eng.last_recovery["skipped"] == 5 and eng.last_recovery["applied"] == 0
        point = read_checkpoint(pdir)
        assert point["recovery_point"] == 100
        assert point["position"] == os.path.getsize(os.path.join(pdir, "00000000000000000000.log"))
        own = eng.wal.dir if eng.wal is not None else None
        assert [d for d in wal_mod.all_streams(data_dir) if d != own] == []  # dead one gone


def test_segment_recover_before_replay(data_dir, tmp_path):
    from engine.tools.verify import scan_segment

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        for i in range(5):
            eng.produce("t", [Record(value=b"v%d" % i)] * 10)
    assert start_producer(data_dir, tmp_path / "out", threads=1, limit=60).wait(timeout=60) == 0
    log = os.path.join(data_dir, "topics", "t", "partition-0", "00000000000000000000.log")
    starts = scan_segment(log, 0).batch_starts
    with open(log, "r+b") as f:  # damage inside the checkpointed part
        f.seek(starts[2] + 90)
        b = f.read(1)
        f.seek(starts[2] + 90)
        f.write(bytes([b[0] ^ 0xFF]))
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")  # (damage stays local: issue 29)
    assert r.returncode == 0 and b"CRC mismatch" not in r.stderr, r.stderr
    with Engine.open(data_dir, read_only=True) as eng:  # not cut: reported by verify
        end = eng.end_offsets("t")[0]
    assert run_rivven(data_dir, "segment", "verify").returncode == 3
    r = run_rivven(data_dir, "segment", "recover", "--truncate-corrupt", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert run_rivven(data_dir, "segment", "verify").returncode == 0
    with Engine.open(data_dir) as eng:  # only the damaged batch's offsets are gone
        assert eng.end_offsets("t") == {0: end} and end == 50 + 60 + 1
        got = [r.offset for r in eng.read("t", 0, 0, 1000)]
    assert got == [*range(20), *range(30, end)]


def test_cut_tails_are_reported(data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
    assert start_producer(data_dir, tmp_path / "out", threads=1, limit=60).wait(timeout=60) == 0
    lose_unsynced_segment_tail(data_dir)  # leaves 100 bytes of garbage past the checkpoint
    r = run_rivven(data_dir, "consume", "t", "-n", "1")  # read-only: repairs nothing
    assert b"repaired" not in r.stderr
    r = run_rivven(data_dir, "produce", "t", input=b"x\n")
    assert r.returncode == 0, r.stderr
    assert b"repaired: cut" in r.stderr and b"00000000000000000000.log" in r.stderr
    check_all_acked(data_dir, acked(tmp_path / "out"))
