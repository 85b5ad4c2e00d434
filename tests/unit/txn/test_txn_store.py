"""A transactional id's state log (engine/txn/txn_store.py): every change appends the whole
state twice, the state is the last intact frame, a torn or lost tail (a crash) gives the state
before it, a damaged frame with intact ones after it is stepped over, the log is rewritten
once it grows, and what one store (process) writes another one reads, whatever it kept."""

import os

import pytest
import txn_view
from helpers import flip

from engine.errors import DamagedMetadata
from engine.fs import framelog
from engine.txn import txn_store
from engine.txn.txn_store import TxnPartition, TxnState, TxnStore

PART = TxnPartition("out", 0, "0" * 32, 0)



def change(store, tid, sync=True, **kw):
    """A change as the coordinator makes one: read under the lock, change, write."""
    with store.locked(tid):
        st = store.read(tid) or TxnState(tid, 7, 0)
        for k, v in kw.items():
            setattr(st, k, v)
        store.write(st, sync=sync)
        return st


@pytest.fixture
def store(data_dir):
    os.makedirs(data_dir)
    return TxnStore(data_dir)


def test_each_change_appends_the_whole_state_twice_and_the_last_is_the_state(store):
    change(store, "t", state="Empty")
    change(store, "t", state="Ongoing", partitions=[PART], started_ms=5)
    path = store.path("t")
    assert path.endswith(os.path.join("txn", "ids", "t.log"))
    fr = txn_view.frames(path)
    assert len(fr) == 4 and fr[-1][1] == os.path.getsize(path)
    raw = open(path, "rb").read()
    assert raw[fr[2][0]:fr[2][1]] == raw[fr[3][0]:fr[3][1]]  # the same frame, twice
    st = TxnStore(store.data_dir).read("t")  # (a store that kept nothing: read from disk)
    assert (st.state, st.partitions, st.started_ms) == ("Ongoing", [PART], 5)
    assert store.ids() == ["t"]


@pytest.mark.parametrize("cut", ["frame", "half", "header", "zeros"])
def test_a_tail_a_crash_cut_short_or_lost_gives_the_state_before_it(store, cut):
    change(store, "t", state="Ongoing", partitions=[PART])
    path = store.path("t")
    before = os.path.getsize(path)
    change(store, "t", state="PrepareCommit", epoch=1)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if cut == "frame":  # the whole append lost (it was never fdatasynced)
            f.truncate(before)
        elif cut == "half":  # part of its second copy reached the disk
            f.truncate(size - 40)
        elif cut == "header":
            f.truncate(before + 5)
        else:  # its blocks allocated, its bytes never written
            f.seek(before)
            f.write(bytes(size - before))
    for reader in (store, TxnStore(store.data_dir)):
        if cut == "half":  # its first copy is whole: that change survived
            assert reader.read("t").state == "PrepareCommit"
        else:
            assert reader.read("t").state == "Ongoing"
    # the next change cuts what is left of it and goes on from there
    change(store, "t", state="PrepareAbort", epoch=1)
    assert TxnStore(store.data_dir).read("t").state == "PrepareAbort"
    assert txn_view.frames(path)[-1][1] == os.path.getsize(path)


def test_a_damaged_frame_with_intact_ones_after_it_is_stepped_over(store):
    change(store, "t", state="Ongoing", partitions=[PART])
    change(store, "t", state="PrepareCommit", epoch=1, sync=False)  # a Complete, say
    change(store, "t", state="CompleteCommit", epoch=1, partitions=[], sync=False)
    path = store.path("t")
    fr = txn_view.frames(path)
    # a crash tore the unsynced frames under the fdatasync of the next change: both copies
    # of the PrepareCommit are damaged, the frames after them are whole
    flip(path, fr[2][0] + 20)
    flip(path, fr[3][0] + 20)
    assert TxnStore(store.data_dir).read("t").state == "CompleteCommit"
    # with nothing intact after them, damaged copies are a torn tail: the state before
    with open(path, "r+b") as f:
        f.truncate(fr[4][0])
    assert TxnStore(store.data_dir).read("t").state == "Ongoing"


@pytest.mark.parametrize("lost", ["zeros", "garbage"])
def test_an_append_a_machine_crash_lost_under_a_later_one_is_stepped_over(store, lost):
    """Pages of an unsynced append lost (they read as zeros) while a later append's reached
    the disk: the scan goes on to the next intact frame, not to DamagedMetadata. Bytes no
    crash leaves (a length no writer writes) stay damage."""
    change(store, "t", state="Ongoing", partitions=[PART])
    change(store, "t", state="PrepareCommit", epoch=1, sync=False)
    change(store, "t", state="CompleteCommit", epoch=1, partitions=[], sync=False)
    path = store.path("t")
    fr = txn_view.frames(path)
    with open(path, "r+b") as f:
        f.seek(fr[2][0])
        n = fr[4][0] - fr[2][0]  # both copies of the Prepare
        f.write(bytes(n) if lost == "zeros" else (bytes(range(7, 207)) * n)[:n])
    if lost == "garbage":
        with pytest.raises(DamagedMetadata, match="frame length"):
            TxnStore(store.data_dir).read("t")
        return
    assert TxnStore(store.data_dir).read("t").state == "CompleteCommit"
    change(store, "t", state="Empty", epoch=2)  # appended after the intact frames
    assert TxnStore(store.data_dir).read("t").state == "Empty"


def test_what_cannot_be_told_apart_is_damage_never_an_older_state(store):
    change(store, "t", state="Ongoing", partitions=[PART])
    path = store.path("t")
    fresh = TxnStore(store.data_dir)
    for start, _ in txn_view.frames(path):  # every frame damaged, one more frame after them
        flip(path, start + 20)
    with open(path, "ab") as f:
        f.write(b"\0" * 7 + b"x")  # not a zero-filled tail: a length no writer writes
    with pytest.raises(DamagedMetadata, match="frame length"):
        fresh.read("t")
    with open(path, "r+b") as f:
        f.truncate(txn_view.frames(path)[-1][0])  # (those bytes gone): nothing intact, and after
        f.seek(0, os.SEEK_END)  # the damaged frames one CRC-valid frame that is no state
        f.write(framelog.frame(b"{}"))
    with pytest.raises(DamagedMetadata, match="version is None"):
        fresh.read("t")
    with open(path, "r+b") as f:
        f.truncate(txn_view.frames(path)[-1][0])  # damaged frames and nothing else
    with pytest.raises(DamagedMetadata, match="no intact state"):
        fresh.read("t")
    with open(path, "wb") as f:
        f.write(framelog.frame(b'{"x": 1') * 2)  # CRC-valid, not JSON
    with pytest.raises(DamagedMetadata):
        fresh.read("t")


def test_a_log_grown_past_its_limit_is_rewritten_as_its_state(store, monkeypatch):
    monkeypatch.setattr(txn_store, "COMPACT_MIN", 4096)
    path = store.path("t")
    debris = path + ".tmp.999999"  # a rewrite some crash cut short
    change(store, "t", state="Empty")
    open(debris, "wb").write(b"junk")
    counts = []
    for i in range(40):
        change(store, "t", state="Ongoing", started_ms=i, partitions=[PART])
        assert os.path.getsize(path) <= 2 * 4096
        counts.append(len(txn_view.frames(path)))
    assert 2 in counts  # rewritten: the state alone, twice
    assert max(counts) < 4096 // 200
    assert not os.path.exists(debris)
    assert TxnStore(store.data_dir).read("t").started_ms == 39


def test_another_store_sees_every_change_whatever_this_one_kept(store, monkeypatch):
    monkeypatch.setattr(txn_store, "COMPACT_MIN", 2048)
    other = TxnStore(store.data_dir)  # another process
    change(store, "t", state="Ongoing", epoch=0, partitions=[PART])
    assert other.read("t").epoch == 0
    for epoch in range(1, 30):  # appends, and rewrites (a new inode, the same length)
        change(other, "t", state="Ongoing", epoch=epoch % 10, partitions=[PART])
        assert store.read("t").epoch == epoch % 10
        change(store, "t", state="Ongoing", epoch=(epoch + 5) % 10, partitions=[PART])
        assert other.read("t").epoch == (epoch + 5) % 10


def test_a_write_from_a_state_read_before_another_change_never_cuts_that_change(store):
    st = change(store, "t", state="Ongoing", partitions=[PART])
    change(TxnStore(store.data_dir), "t", state="PrepareCommit", epoch=1)  # another process
    with store.locked("t"):
        st.state = "PrepareAbort"  # (the coordinator never does this: it reads under the lock)
        store.write(st)
    path = store.path("t")
    assert len(txn_view.frames(path)) == 6  # appended after the other store's frames, not over them
    assert TxnStore(store.data_dir).read("t").state == "PrepareAbort"
