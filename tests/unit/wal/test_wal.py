"""Write-ahead log in one process: zero-filled files and records cut short by zeros, clean
close, group commit sharing fsyncs, failing writes and fsyncs never acknowledged, wal.sync
modes, merging by offset, progress of a long scan. (Crashes, torn tails and the ``wal``
commands: tests/crash/test_wal_crash.py.)"""

import errno
import os
import threading
import time

import pytest

from engine import Engine, Record, StorageError
from engine import wal as wal_mod


def test_a_record_cut_short_by_zeros_is_incomplete_and_garbage_is_not(tmp_path):
    """In a zero-filled file a write in flight (or torn by a crash) is a frame whose bytes
    stop and zeros follow: incomplete, as a record running past the end of a plain file is.
    Garbage after it is damage."""
    from engine.format import encode_batch

    rec = wal_mod.encode_batch_record(bytes(16), 0, "t",
                                      encode_batch([b"k"], [b"\x07" * 200], 1).assign(0))
    for tail, incomplete in ((bytes(4096), True), (b"\x01" + bytes(4095), False)):
        path = tmp_path / "f.wal"
        path.write_bytes(rec + rec[:100] + bytes(len(rec) - 100) + tail)
        with pytest.raises(wal_mod.WalTail) as e:
            list(wal_mod.scan_file(str(path)))
        assert e.value.position == len(rec) and e.value.incomplete is incomplete


def test_close_removes_the_zero_filled_files(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        deadline = time.monotonic() + 30
        while eng.wal is None or (eng.wal.zeroed == 0 and time.monotonic() < deadline):
            eng.produce_batch("t", [b"v" * 500] * 20, partition=0)  # 10 KB per fsync
        assert eng.wal.zeroed > 0, "the stream never moved to a zero-filled file"
        stream_dir = eng.wal.dir
        while eng.wal.prepared is None and eng.wal.preparer is None:  # the next one too
            eng.produce_batch("t", [b"w" * 500] * 20, partition=0)
    assert not os.path.exists(stream_dir) and wal_mod.all_streams(data_dir) == []
    with Engine.open(data_dir) as eng:
        assert eng.end_offsets("t")[0] % 20 == 0 and eng.end_offsets("t")[0] > 500


def test_clean_close_leaves_no_wal(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"x")])
        assert len(wal_mod.all_streams(data_dir)) == 1
    assert wal_mod.all_streams(data_dir) == []
    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    assert os.path.exists(os.path.join(pdir, ".checkpoint"))


def test_group_commit_shares_fsyncs(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.create_topic("u", 4)
        eng.produce("t", [Record(value=b"warm")])
        before = eng.wal.fsyncs
        calls = 4 * 100

        def work(topic, p):
            for i in range(100):
                eng.produce(topic, [Record(value=b"%d" % i)] * 10, partition=p)

        threads = [threading.Thread(target=work, args=("t", 0)) for _ in range(4)]
        threads += [threading.Thread(target=work, args=("u", p)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        fsyncs = eng.wal.fsyncs - before
        assert eng.end_offsets("t") == {0: 4001}
        assert fsyncs < 2 * calls * 0.75, fsyncs  # 800 produce calls
        assert sorted(r.value for r in eng.read("t", 0, 1, 5000)) == sorted(
            [b"%d" % i for i in range(100)] * 40)


def test_failed_fsync_is_not_acknowledged_and_recovers(data_dir, monkeypatch):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"ok1")])
        real = os.fdatasync
        state = {"fail": True}

        def flaky(fd):
            if state["fail"]:
                raise OSError(errno.EIO, "Input/output error")
            return real(fd)

        monkeypatch.setattr(os, "fdatasync", flaky)
        with pytest.raises(StorageError, match="fsync"):
            eng.produce("t", [Record(value=b"lost")])
        assert eng.end_offsets("t") == {0: 1}  # nothing partial is visible
        with Engine.open(data_dir, read_only=True) as ro:
            assert [r.value for r in ro.read("t", 0, 0)] == [b"ok1"]
        state["fail"] = False
        assert eng.produce("t", [Record(value=b"ok2")]) == [(0, 1)]
    with Engine.open(data_dir) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [b"ok1", b"ok2"]


def test_enospc_on_write(data_dir, monkeypatch):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"a")])
        real = os.pwrite

        def full(fd, data, pos):  # the WAL and the segments write with pwrite
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "pwrite", full)
        with pytest.raises(StorageError, match="disk full"):
            eng.produce("t", [Record(value=b"b" * 1000)])
        monkeypatch.setattr(os, "pwrite", real)
        assert eng.produce("t", [Record(value=b"c")]) == [(0, 1)]
    with Engine.open(data_dir) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [b"a", b"c"]


def test_rotation_under_concurrent_group_commit(data_dir):
    with Engine.open(data_dir, settings={"wal.segment.bytes": "4096"}) as eng:
        eng.create_topic("t", 3)
        errors = []

        def work(p):
            try:
                for _ in range(150):
                    eng.produce("t", [Record(value=b"x" * 100)] * 3, partition=p)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(p % 3,)) for p in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sum(eng.end_offsets("t").values()) == 6 * 150 * 3


def test_wal_sync_modes(data_dir):
    from engine import InvalidConfig

    with Engine.open(data_dir, settings={"wal.sync": "interval:20"}) as eng:
        eng.create_topic("t", 1)
        for _ in range(5):
            eng.produce("t", [Record(value=b"x")])
        assert eng.wal.fsyncs == 0  # nobody waited for one
        time.sleep(0.3)
        assert eng.wal.fsyncs >= 1  # the background syncer did
    with Engine.open(data_dir, sync=False) as eng:
        eng.produce("t", [Record(value=b"y")])
        assert eng.wal.fsyncs == 0
    with Engine.open(data_dir) as eng:
        assert [r.value for r in eng.read("t", 0, 0)] == [b"x"] * 5 + [b"y"]
    for bad in ({"wal.sync": "sometimes"}, {"wal.sync": "interval:x"}, {"nope": "1"},
                {"wal.segment.bytes": "10"}):
        with pytest.raises(InvalidConfig):
            Engine.open(data_dir, settings=bad)


def test_merge_by_offset_later_write_wins():
    recs = [(1, 0, 10, 9, 0, b"old"), (5, 0, 5, 4, 0, b"new1"), (6, 5, 8, 7, 0, b"new2"),
            (7, 13, 1, 0, 0, b"next"), (2, 20, 2, 1, 0, b"lone")]
    assert [r[4] for r in wal_mod.merge_by_offset(recs)] == [b"new1", b"new2", b"next", b"lone"]
    many = [(i, i * 10, 10, 9, 0, b"") for i in range(100_000)]
    assert len(wal_mod.merge_by_offset(many)) == 100_000  # no quadratic pass


def test_a_long_scan_without_checkpoint_reports_progress(data_dir, monkeypatch):
    import engine.segments.segment as segmod

    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        for _ in range(50):
            eng.produce_batch("t", [b"x" * 1000] * 100, partition=0)
    pdir = os.path.join(data_dir, "topics", "t", "partition-0")
    os.unlink(os.path.join(pdir, ".checkpoint"))  # as after a crash before any checkpoint
    monkeypatch.setattr(segmod, "SCAN_REPORT_BYTES", 400_000)
    calls = []
    with Engine.open(data_dir, progress=lambda what, total, done: calls.append(
            (what, total, done))) as eng:
        assert eng.end_offsets("t") == {0: 5000}
    assert calls and all("no checkpoint covers it" in w for w, _, _ in calls)
    total = calls[-1][1]
    assert calls[-1][2] == total and total > 4_000_000
    assert [d for _, _, d in calls] == sorted(d for _, _, d in calls)


def test_a_record_written_while_an_fsync_fails_is_never_acknowledged(tmp_path, monkeypatch):
    """After a failed fdatasync the kernel may have dropped the file's dirty pages, so a record
    written before the failure was handled is lost even if a later fdatasync 'succeeds'."""
    import errno

    from engine.errors import StorageError
    from engine.wal.stream import WalStream

    w = WalStream(str(tmp_path), 1 << 20)
    first = w.append(b"a" * 100)
    during: list[int] = []
    real = os.fdatasync

    def flaky(fd):
        if not during:  # the first fsync: another record lands while it runs, then it fails
            during.append(w.append(b"b" * 100))
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", flaky)
    with pytest.raises(StorageError):
        w.sync(first)
    with pytest.raises(StorageError, match="lost an fsync"):
        w.sync(during[0])
    later = w.append(b"c" * 100)  # a new file: durable as usual
    w.sync(later)
    assert w.durable(later) and not w.durable(during[0])
    w.close(delete=True)
