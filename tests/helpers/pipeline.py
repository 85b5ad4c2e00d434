"""What the engine really stores and what a machine crash would leave (WAL batches, durable
points, a crash image), and the file behind a descriptor: shared by the pipeline, WAL, close
and membership tests and their crash tests."""

import os
import shutil

from engine import wal as wal_mod
from engine.format.records import read_header
from engine.segments import filenames
from engine.segments.checkpoint import read_checkpoint

SETTINGS = {"wal.segment.bytes": "8192", "checkpoint.interval.bytes": "20000"}
HANG_S = 30  # a produce call that takes this long is hung


# ------------------------------------------------------------------------ helpers
def wal_batches(data_dir, topic):
    """``(partition, base, last)`` of every batch of ``topic`` in a WAL file right now."""
    out = set()
    for stream in wal_mod.all_streams(data_dir):
        try:
            paths = wal_mod.stream_files(stream)
        except FileNotFoundError:
            continue
        for path in paths:
            try:
                for rec in wal_mod.scan_file(path):
                    if rec.topic == topic:
                        h = read_header(rec.batch, 0)
                        out.add((rec.partition, h.base_offset, h.last_offset))
            except (FileNotFoundError, wal_mod.WalTail):
                pass  # deleted by a checkpoint meanwhile, or a record being written
    return out


def durable_end(data_dir, topic, p):
    """Offsets below this are in fsynced segment bytes: before the checkpoint's recovery point
    or in a sealed segment (a roll fsyncs the old segment before the new file exists)."""
    pdir = filenames.partition_dir(data_dir, topic, p)
    point = read_checkpoint(pdir)
    bases = filenames.segment_bases(pdir)
    return max(point["recovery_point"] if point else 0, bases[-1] if bases else 0)


def not_durable(data_dir, topic, batches):
    """The acknowledged batches ``(partition, base, last)`` a machine crash now could lose.

    The WAL is read first: a correct checkpoint writes its recovery point before it deletes
    WAL files, so a batch missing from the WAL must then be below the durable point."""
    in_wal = wal_batches(data_dir, topic)
    ends = {p: durable_end(data_dir, topic, p) for p in {b[0] for b in batches}}
    return [b for b in batches if b not in in_wal and b[2] >= ends[b[0]]]


def crash_image(data_dir, dst):
    """A copy of the data dir as a machine crash now could leave it: each partition's active
    segment keeps only what its checkpoint says was fsynced; WAL files are kept whole."""
    shutil.copytree(data_dir, dst)
    for topic in os.listdir(os.path.join(dst, "topics")):
        tdir = os.path.join(dst, "topics", topic)
        for part in os.listdir(tdir):
            pdir = os.path.join(tdir, part)
            point = read_checkpoint(pdir)
            base = filenames.segment_bases(pdir)[-1]
            keep = 0
            if point is not None and point["segment"] == base:
                keep = point["position"]
            elif point is not None and point["segment"] > base:
                continue
            path = filenames.path(pdir, base, filenames.LOG)
            if os.path.getsize(path) > keep:
                os.truncate(path, keep)
    return dst


def stored(eng, topic):
    """``{(partition, offset): value}``, asserting each partition's offsets are contiguous."""
    out = {}
    for p, end in eng.end_offsets(topic).items():
        recs = eng.read(topic, p, 0, max(end, 1))
        assert [r.offset for r in recs] == list(range(end)), f"partition {p}: offsets have holes"
        out.update({(p, r.offset): r.value for r in recs})
    return out


def check_stored(got, acked, extra_ok=False):
    wrong = sorted((k, v, got.get(k)) for k, v in acked.items() if got.get(k) != v)
    assert not wrong, f"{len(wrong)} acknowledged records missing or wrong, e.g. {wrong[:3]}"
    values = list(got.values())
    assert len(set(values)) == len(values), "a record is stored twice"
    if not extra_ok:
        extra = sorted(k for k in got if k not in acked)
        assert not extra, f"{len(extra)} records whose produce failed are visible: {extra[:5]}"


def value(tag, i, j):  # (the same in CHILD)
    return b"%s-%d-%d-" % (tag, i, j) + b"v" * ((i * 31 + j * 7) % 180)


def fd_path(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""
