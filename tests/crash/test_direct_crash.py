"""Direct appends (written once, straight to the segment) behind the durable end, across
kill -9: writers killed between the segment write, its fdatasync and the publication, and at
random, while readers in other processes read on. After each kill the test does what a
machine crash may do to bytes that were never fsynced: it cuts the segments back to the
published durable end. No reader may ever have returned a record that this loses, and
nothing acknowledged is lost (docs/DURABILITY.md, "Direct appends")."""

import os
import random
import subprocess
import sys
import time
import zlib

from helpers import ROOT

from engine import Engine
from engine.segments import durable_end, filenames

PER_BATCH = 600  # records of ~200 bytes: a batch well over append.direct.bytes (64 KiB)

WRITER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from engine import Engine, Record
data_dir, run, acks = sys.argv[2], int(sys.argv[3]), open(sys.argv[4], "a")
with Engine.open(data_dir) as eng:
    for k in range(10 ** 6):
        small = k % 5 == 4  # (a small one now and then: through the WAL, in between)
        n = 3 if small else PER_BATCH
        vals = [b"%d-%d-%d-" % (run, k, j) + b"v" * 190 for j in range(n)]
        got = eng.produce_batch("t", vals, partition=0)
        acks.write("%d %d %d\n" % (run, k, got[0][1]))
        acks.flush()
""".replace("PER_BATCH", str(PER_BATCH))

READER = r"""
import sys, time, zlib
sys.path.insert(0, sys.argv[1])
from engine import Engine
data_dir, out = sys.argv[2], open(sys.argv[3], "a")
with Engine.open(data_dir, read_only=True) as eng:
    offset = 0
    while True:
        recs = eng.read("t", 0, offset, 2000)
        if recs:
            out.write("".join("%d %d\n" % (r.offset, zlib.crc32(r.value)) for r in recs))
            out.flush()
            offset = recs[-1].offset + 1
        else:
            time.sleep(0.002)
"""


def _start(code, *args, env=None):
    return subprocess.Popen([sys.executable, "-c", code, str(ROOT), *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                            env=env)


def _published(pdir):
    return durable_end.read_published(pdir)


def _lose_unsynced(pdir):
    """What a machine crash may do: every byte past the published durable end is gone."""
    pub = _published(pdir)
    assert pub is not None, "a writer that appended left no durable end"
    base, position, _ = pub
    for b in filenames.segment_bases(pdir):
        if b == base:
            os.truncate(filenames.path(pdir, b, filenames.LOG), position)
        elif b > base:  # rolled after the publication: nothing in it was fsynced
            os.truncate(filenames.path(pdir, b, filenames.LOG), 0)
    return pub


def _seen(path):
    seen = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:  # (a line cut by the end of the test is no record)
                seen[int(parts[0])] = int(parts[1])
    return seen


def test_no_reader_returns_a_record_a_crash_then_loses(tmp_path):
    data = str(tmp_path / "d")
    with Engine.open(data) as eng:
        eng.create_topic("t", partitions=1, config={"segment.bytes": str(4 << 20)})
    pdir = filenames.partition_dir(data, "t", 0)
    acks = tmp_path / "acks"
    logs = [tmp_path / f"reader{i}" for i in range(2)]
    readers = [_start(READER, data, p) for p in logs]
    rng = random.Random(34)
    points = ["append.direct.after_write", "append.direct.after_sync",
              "append.direct.after_write", None, "append.direct.after_sync", None,
              "append.direct.after_write", None, "append.after_wal_sync", None]
    cut_after_write = 0
    try:
        for run, point in enumerate(points):
            env = dict(os.environ)
            if point is not None:
                env["RIVVEN_FAILPOINT"] = f"{point}@{rng.randint(3, 12)}"
            w = _start(WRITER, data, run, acks, env=env)
            if point is None:
                time.sleep(rng.uniform(0.3, 1.0))
                w.kill()
            assert w.wait(timeout=120) == -9, w.stderr.read().decode()[-2000:]
            time.sleep(0.3)  # readers read on meanwhile: they must stop at the durable end
            before = os.path.getsize(filenames.path(pdir, _published(pdir)[0], filenames.LOG))
            base, position, _ = _lose_unsynced(pdir)
            if point == "append.direct.after_write" and before > position:
                cut_after_write += 1  # (the killed batch was in the file, never fsynced)
            for r in readers:
                assert r.poll() is None, r.stderr.read().decode()[-2000:]
    finally:
        for r in readers:
            r.kill()
            r.wait()
    assert cut_after_write >= 2, "the failpoints never left an unsynced batch to lose"

    # what survives: every acknowledged record, and every record any reader returned
    with Engine.open(data, read_only=True) as eng:
        final = {}
        offset = 0
        while True:
            recs = eng.read("t", 0, offset, 5000)
            if not recs:
                break
            final.update({r.offset: r.value for r in recs})
            offset = recs[-1].offset + 1
    acked = 0
    for line in acks.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        run, k, base = map(int, parts)
        n = 3 if k % 5 == 4 else PER_BATCH
        for j in range(n):
            assert final.get(base + j) == b"%d-%d-%d-" % (run, k, j) + b"v" * 190, \
                f"acknowledged record {base + j} (writer run {run}, call {k}) was lost"
        acked += n
    assert acked > 10 * PER_BATCH
    for p in logs:
        seen = _seen(p)
        assert seen, "a reader returned nothing"
        for off, crc in seen.items():
            assert off in final and zlib.crc32(final[off]) == crc, \
                f"a reader returned offset {off}, which the crash then lost or changed"
