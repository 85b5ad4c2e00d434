"""The durable end (``.end``, engine.segments.durable_end) and direct appends
(engine.storage.pipeline): readers in other processes stop at what was published, whatever
the segment file holds past it; writers rebuild it from the files; large batches skip the WAL
and their segment gets blocks reserved ahead (engine.fs.prealloc)."""

import os
import struct

import pytest

from engine import Engine, Record
from engine.errors import InvalidConfig
from engine.format.encode import encode_batch
from engine.segments import durable_end, filenames
from engine.settings import Settings

BIG = [Record(b"k%04d" % i, b"v" * 120) for i in range(1000)]  # ~130 KB: a direct append


def _pdir(data_dir):
    return filenames.partition_dir(data_dir, "t", 0)


def _log(data_dir):
    return filenames.path(_pdir(data_dir), 0, filenames.LOG)


def _forge_unsynced(data_dir, base, n=5):
    """Bytes a writer has written but not yet fsynced and published: a valid batch."""
    buf = bytes(encode_batch([b"x"] * n, [b"late"] * n, 0).assign(base))
    with open(_log(data_dir), "ab") as f:
        f.write(buf)
    return len(buf)


def test_a_reader_stops_at_the_published_end_and_follows_it(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
    pub = durable_end.read_published(_pdir(data_dir))
    assert pub == (0, os.path.getsize(_log(data_dir)), 1000)
    with Engine.open(data_dir, read_only=True) as reader:
        assert reader.read("t", 0, 0, 5000)[-1].offset == 999
        n = _forge_unsynced(data_dir, 1000)
        assert len(reader.read("t", 0, 0, 5000)) == 1000  # past the end: not read
        assert reader.offsets.unopened("t") == {0: (0, 1000)}  # (topic list's quick path)
        w = durable_end.DurableEnd(_pdir(data_dir), writable=True)
        w.publish(0, pub[1] + n, 1005)  # (what the writer does once it is fsynced)
        w.close()
        got = reader.read("t", 0, 995, 100)
        assert [r.offset for r in got] == list(range(995, 1005)) and got[-1].value == b"late"
    with Engine.open(data_dir, read_only=True) as fresh:  # (a load stops there too)
        assert len(fresh.read("t", 0, 0, 5000)) == 1005


def test_a_new_reader_stops_at_the_end_too(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
    _forge_unsynced(data_dir, 1000)
    with Engine.open(data_dir, read_only=True) as reader:
        assert len(reader.read("t", 0, 0, 5000)) == 1000
        assert reader.partition_offsets("t", 0) == (0, 1000)


def test_an_end_from_another_boot_is_ignored_the_files_are_the_truth(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
    _forge_unsynced(data_dir, 1000)
    path = os.path.join(_pdir(data_dir), ".end")
    with open(path, "r+b") as f:
        raw = bytearray(f.read())
        for at in (0, 64):  # another boot id, the CRC made right for it
            raw[at + 32:at + 48] = b"\x01" * 16
            raw[at + 56:at + 60] = struct.pack("<I", durable_end.crc.crc32c(bytes(raw[at:at + 56])))
        f.seek(0)
        f.write(raw)
    assert durable_end.read_published(_pdir(data_dir)) is None
    with Engine.open(data_dir, read_only=True) as reader:
        assert len(reader.read("t", 0, 0, 5000)) == 1005


def test_a_torn_copy_is_read_from_its_twin(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
    want = durable_end.read_published(_pdir(data_dir))
    path = os.path.join(_pdir(data_dir), ".end")
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")  # the first copy torn (a writer killed in the middle of it)
    assert durable_end.read_published(_pdir(data_dir)) == want
    end = durable_end.DurableEnd(_pdir(data_dir), writable=False)
    assert end.read() == want
    end.close()
    with open(path, "r+b") as f:
        f.seek(84)
        f.write(b"\xff")  # both torn: nothing trusted, the last good one kept
    end = durable_end.DurableEnd(_pdir(data_dir), writable=False)
    assert end.read() is None
    end.last = want
    assert end.read() == want
    end.close()


def test_a_writer_fsyncs_and_publishes_what_a_killed_writer_left_unpublished(data_dir,
                                                                             monkeypatch):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
    _forge_unsynced(data_dir, 1000)  # (written, not fsynced, not published: then killed)
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    with Engine.open(data_dir) as eng:
        assert eng.produce("t", [Record(b"a", b"b")]) == [(0, 1005)]
        # the segment was fsynced before the end that shows the forged batch was published
        assert synced and synced[0] == _log(data_dir)
    monkeypatch.undo()
    assert durable_end.read_published(_pdir(data_dir))[2] == 1006
    with Engine.open(data_dir, read_only=True) as reader:
        assert [r.value for r in reader.read("t", 0, 1000, 10)] == [b"late"] * 5 + [b"b"]


def test_big_batches_skip_the_wal_small_ones_do_not(data_dir):
    with Engine.open(data_dir, settings={"checkpoint.interval.bytes": str(1 << 30)}) as eng:
        eng.create_topic("t")
        eng.produce("t", [Record(b"k", b"small")])
        before = eng._wal.stream.written
        eng.produce("t", BIG)
        assert eng._wal.stream.written == before  # written once: the segment only
        assert eng._wal.stream.direct_written > 100_000
        eng.produce("t", [Record(b"k", b"small")] * 3)
        assert eng._wal.stream.written > before
        assert [r.offset for r in eng.read("t", 0, 0, 2000)] == list(range(1004))
    with Engine.open(data_dir, settings={"append.direct.bytes": "-1"}) as eng:
        eng.produce("t", BIG)
        assert eng._wal.stream.written > 100_000 and eng._wal.stream.direct_written == 0


def test_append_direct_bytes_is_checked():
    assert Settings.parse({"append.direct.bytes": "0"}).append_direct_bytes == 0
    assert Settings.parse({"append.direct.bytes": "-1"}).append_direct_bytes == -1
    assert Settings.parse(None).append_direct_bytes == 64 << 10
    for bad in ("-2", "x", "1.5"):
        with pytest.raises(InvalidConfig, match="append.direct.bytes"):
            Settings.parse({"append.direct.bytes": bad})


def test_a_direct_append_reserves_blocks_ahead_and_a_roll_gives_them_back(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", config={"segment.bytes": str(1 << 20)})
        for _ in range(3):
            eng.produce("t", BIG)
        act = eng._partitions.get(eng.topic("t"), 0).segs.active
        st = os.stat(act.path)
        if act.reserved >= 1 << 62:
            pytest.skip("this filesystem cannot reserve blocks (fallocate KEEP_SIZE)")
        assert st.st_size == act.size  # the file's size is its data's end, as ever
        assert st.st_blocks * 512 >= act.size + (512 << 10)  # blocks reserved past it
        for _ in range(10):
            eng.produce("t", BIG)
        segs = eng._partitions.get(eng.topic("t"), 0).segs
        assert len(segs.bases) > 1
        for base in segs.bases[:-1]:  # sealed: nothing reserved past their end
            st = os.stat(filenames.path(_pdir(data_dir), base, filenames.LOG))
            assert st.st_blocks * 512 < st.st_size + (64 << 10)
        assert len(eng.read("t", 0, 0, 20000)) == 13000


def test_a_failed_fsync_of_a_direct_append_leaves_nothing_behind(data_dir, monkeypatch):
    from engine.errors import StorageError

    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        eng.produce("t", BIG)
        size = os.path.getsize(_log(data_dir))
        real = os.fdatasync
        failed = []

        def eio(fd):
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".log") and not failed:
                failed.append(fd)
                raise OSError(5, "Input/output error")
            real(fd)

        monkeypatch.setattr(os, "fdatasync", eio)
        with pytest.raises(StorageError):
            eng.produce("t", BIG)
        monkeypatch.undo()
        assert failed and os.path.getsize(_log(data_dir)) == size  # cut off the file again
        assert durable_end.read_published(_pdir(data_dir))[1:] == (size, 1000)
        with Engine.open(data_dir, read_only=True) as reader:
            assert len(reader.read("t", 0, 0, 5000)) == 1000
        assert eng.produce("t", BIG)[0] == (0, 1000)  # the offsets it would have had
        assert len(eng.read("t", 0, 0, 5000)) == 2000
