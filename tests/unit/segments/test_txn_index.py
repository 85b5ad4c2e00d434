"""The aborted-transaction index file and the read_committed filter (pure parts)."""

import os

import pytest

from engine.errors import DamagedMetadata, InvalidArgument
from engine.format import control
from engine.format.encode import encode_batch
from engine.format.records import ATTR_TRANSACTIONAL, read_header
from engine.segments import txn_index
from engine.segments.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex, read_entries
from engine.txn import isolation


def test_entries_round_trip_and_survive_reopening(tmp_path):
    p = str(tmp_path / "00000000000000000100.txnindex")
    ix = TxnIndex(p, 100)
    ix.append(AbortedTxn(7, 90, 105, 90))
    ix.append(AbortedTxn(8, 101, 120, 101))
    ix.append(AbortedTxn(7, 90, 105, 90))  # seen again while catching up: not twice
    ix.sync()
    ix.close()
    assert os.path.getsize(p) == 2 * ENTRY_SIZE
    assert read_entries(p, 100)[0] == [AbortedTxn(7, 90, 105, 90), AbortedTxn(8, 101, 120, 101)]
    assert read_entries(str(tmp_path / "none.txnindex"), 0) == ([], 0)


def test_a_torn_last_entry_is_ignored_by_readers_and_cut_by_a_writer(tmp_path):
    p = str(tmp_path / "x.txnindex")
    with open(p, "wb") as f:
        f.write(txn_index.encode(AbortedTxn(1, 0, 3, 0)) + b"\x01" * 17)
    assert read_entries(p, 0) == ([AbortedTxn(1, 0, 3, 0)], ENTRY_SIZE)
    TxnIndex(p, 0).close()
    assert os.path.getsize(p) == ENTRY_SIZE


@pytest.mark.parametrize("damage,problem", [
    (lambda b: b[:5] + bytes([b[5] ^ 1]) + b[6:], "CRC"),
    (lambda b: txn_index.encode(AbortedTxn(1, 9, 3, 0)), "out of range"),
    (lambda b: b + b, "not after the previous"),
    (lambda b: txn_index.encode(AbortedTxn(1, 0, 50, 0)), "inside the segment"),
])
def test_damage_is_reported_never_used(tmp_path, damage, problem):
    p = str(tmp_path / "x.txnindex")
    with open(p, "wb") as f:
        f.write(damage(txn_index.encode(AbortedTxn(1, 0, 3, 0))))
    with pytest.raises(DamagedMetadata, match=problem):
        read_entries(p, 0, next_offset=10)


def test_a_huge_file_is_not_read(tmp_path):
    p = str(tmp_path / "x.txnindex")
    with open(p, "wb") as f:
        f.truncate((txn_index.MAX_ENTRIES + 1) * ENTRY_SIZE)
    with pytest.raises(DamagedMetadata, match="more entries"):
        read_entries(p, 0)


class Ref:
    def __init__(self, buf):
        self.header = read_header(buf)


def data(base, pid=-1, epoch=0, seq=0, txn=True, n=1):
    kw = {} if pid < 0 else {"producer_id": pid, "producer_epoch": epoch, "base_sequence": seq,
                             "flags": ATTR_TRANSACTIONAL if txn else 0}
    return Ref(encode_batch([None] * n, [b"v"] * n, 1, **kw).assign(base))


def test_read_committed_skips_aborted_batches_markers_and_stops_at_the_lso():
    refs = [data(0), data(1, pid=5), data(2, pid=6), control_ref(3, 5, commit=False),
            data(4, pid=6, seq=1), control_ref(5, 6, commit=True), data(6, pid=7)]
    aborted = isolation.Aborted(txn_index.overlapping([AbortedTxn(5, 1, 3, 2)], 0, 7))
    # (the read path stops at the LSO itself: test_read_committed proves it end to end)
    seen = [r.header.base_offset for r in refs if not isolation.hidden(r.header, aborted)]
    assert seen == [0, 2, 4, 6]  # 1: aborted, 3 and 5: markers
    assert [r.header.base_offset for r in refs if not isolation.hidden(r.header, None)] == \
        [0, 1, 2, 4, 6]  # read_uncommitted: everything but markers
    with pytest.raises(InvalidArgument, match="read_committed"):
        isolation.check_level("serializable")


def control_ref(base, pid, commit):
    return Ref(control.encode_marker(pid, 1, commit, 1).assign(base))


def test_a_txnindex_goes_with_its_segment(tmp_path):
    """Retention (delete-records here) deletes a segment's .txnindex with it, and a writer
    removes one whose segment is gone (a deletion a crash cut short)."""
    from engine import Engine, Record
    from engine.segments import filenames

    d = str(tmp_path / "d")
    with Engine.open(d) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "1024"})
        for _ in range(40):
            eng.produce("t", [Record(value=b"x" * 100)])
        pdir = filenames.partition_dir(d, "t", 0)
        bases = filenames.segment_bases(pdir)
        assert len(bases) > 3
        for b in bases[:2]:
            TxnIndex(filenames.path(pdir, b, filenames.TXNINDEX), b).close()
        orphan = filenames.path(pdir, 10**9, filenames.TXNINDEX)
        TxnIndex(orphan, 10**9).close()
        eng.maintenance.delete_records("t", {0: bases[2]})
        assert not os.path.exists(filenames.path(pdir, bases[0], filenames.TXNINDEX))
        assert not os.path.exists(filenames.path(pdir, bases[1], filenames.TXNINDEX))
    with Engine.open(d) as eng:
        eng.produce("t", [Record(value=b"y")])
    assert not os.path.exists(orphan)


def test_verify_checks_markers_against_the_txnindex(tmp_path):
    from engine import Engine
    from engine.segments import filenames
    from engine.tools.verify import verify_partition

    d = str(tmp_path / "d")
    with Engine.open(d) as eng:
        eng.create_topic("t", 1)
        log = eng._path.log_for(eng.topic("t"), 0)

        def append(batch):
            eng._path.append_encoded(log, batch)

        append(encode_batch([None], [b"a"], 1, producer_id=5, producer_epoch=0,
                            base_sequence=0, flags=ATTR_TRANSACTIONAL))  # 0: txn of 5
        append(control.encode_marker(5, 1, False, 1))  # an ABORT at offset 1
        append(control.encode_marker(6, 1, True, 1))  # a COMMIT at offset 2 (a no-op)
        append(control.encode_marker(7, 1, False, 1))  # an ABORT ending nothing: no entry
    pdir = filenames.partition_dir(d, "t", 0)

    def findings():
        return [f.message for r in verify_partition(pdir) for f in r.findings]

    ix = filenames.path(pdir, 0, filenames.TXNINDEX)
    assert read_entries(ix, 0)[0] == [AbortedTxn(5, 0, 1, 2)]  # written at the close's snapshot
    assert findings() == []
    os.unlink(ix)
    assert any("ABORT marker of producer 5 at offset 1 has no entry" in m for m in findings())
    from engine.segments import snapshot_files
    from engine.txn import snapshot
    from engine.txn.state import ProducerState

    for off in snapshot_files.offsets(pdir):
        os.unlink(filenames.path(pdir, off, ".snapshot"))
    assert findings() == []  # no snapshot vouches for the entry: known from the log
    ix_ = TxnIndex(ix, 0)
    ix_.append(AbortedTxn(5, 0, 1, 0))
    ix_.sync()
    ix_.close()
    assert findings() == []
    with open(ix, "wb") as f:
        f.write(txn_index.encode(AbortedTxn(6, 0, 2, 0)))  # names the COMMIT
    assert any("names no ABORT marker" in m for m in findings())
    state = ProducerState("t-0", 0)
    state.advance(4)
    # a snapshot vouches again: the entry of 5 must be there
    snapshot_files.write(pdir, 4, snapshot.encode(state))
    got = findings()
    assert any("has no entry" in m for m in got) and any("names no ABORT marker" in m for m in got)
    with open(ix, "wb") as f:
        f.write(b"\x00" * 40)  # CRC of zeros does not match
    assert any("CRC does not match" in m for m in findings())
