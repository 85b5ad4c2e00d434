"""The producer state of a partition (engine.txn.state, hook, snapshot): real format-2 batches
and markers appended through the real pipeline, snapshots on disk, expiry, rolls and
retention (docs/TRANSACTIONS.md, "Producer state of a partition")."""

import os
import random

import pytest

from engine import (
    Engine,
    InvalidArgument,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerFenced,
    Record,
)
from engine import clock as clock_mod
from engine.errors import DamagedMetadata
from engine.format import control
from engine.format.encode import encode_batch
from engine.format.records import ATTR_TRANSACTIONAL
from engine.segments import filenames, snapshot_files
from engine.storage.log import PartitionLog
from engine.storage.topics import Topics
from engine.txn import snapshot
from engine.txn.hook import producers_of
from engine.txn.state import AbortedTxn, BatchMeta, ProducerEntry, ProducerState

NOW = clock_mod.now_ms()  # (batches older than retention.ms would be deleted)


def data(pid, epoch, seq, n=1, txn=False, ts=NOW, tag=b"v"):
    """A format-2 data batch of ``n`` records, sequences from ``seq``."""
    return encode_batch([None] * n, [b"%s%d" % (tag, seq + i) for i in range(n)], ts,
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        flags=ATTR_TRANSACTIONAL if txn else 0)


def marker(pid, epoch, commit, ts=NOW):
    return control.encode_marker(pid, epoch, commit, ts)


def log_of(eng, topic="t", partition=0):
    return eng._path.log_for(eng.topic(topic), partition)


def state_of(log):
    return producers_of(log).state()


def append(eng, batch, topic="t", partition=0):
    """Append an encoded batch through the real pipeline, as the coordinator appends markers."""
    return eng._path.append_encoded(log_of(eng, topic, partition), batch)


def end(eng, topic="t", partition=0):
    return eng.end_offsets(topic)[partition]


@pytest.fixture
def eng(data_dir):
    with Engine.open(data_dir) as e:
        e.create_topic("t", 1)
        yield e


# ---------------------------------------------------------------- sequences and epochs
def test_sequences_duplicates_and_gaps(eng):
    assert append(eng, data(7, 0, 0, 3)) == 0
    assert append(eng, data(7, 0, 3, 2)) == 3
    assert append(eng, data(7, 0, 0, 3)) == 0  # a duplicate: its original offset, nothing new
    assert append(eng, data(7, 0, 3, 2)) == 3
    assert end(eng) == 5
    with pytest.raises(OutOfOrderSequence, match="expected 5"):
        append(eng, data(7, 0, 6))  # a gap
    with pytest.raises(OutOfOrderSequence):
        append(eng, data(7, 0, 1, 2))  # overlaps, but is not one of the batches sent
    assert end(eng) == 5  # refused batches took no offsets
    assert append(eng, data(7, 0, 5)) == 5
    assert [r.value for r in eng.read("t", 0, 0)] == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v5"]


def test_only_the_last_five_batches_are_duplicates(eng):
    bases = [append(eng, data(1, 0, i)) for i in range(7)]
    assert bases == list(range(7))
    for i in range(2, 7):
        assert append(eng, data(1, 0, i)) == i
    for i in (0, 1):  # older than the window: refused, never stored twice
        with pytest.raises(OutOfOrderSequence):
            append(eng, data(1, 0, i))
    assert end(eng) == 7


def test_sequences_wrap(eng):
    top = (1 << 31) - 1
    assert append(eng, data(2, 0, top - 1, 2)) == 0  # (an unknown producer: any sequence)
    assert append(eng, data(2, 0, 0, 2)) == 2  # after 2^31-1 comes 0
    assert append(eng, data(2, 0, top - 1, 2)) == 0  # (still a duplicate)
    with pytest.raises(OutOfOrderSequence):
        append(eng, data(2, 0, 3))


def test_epochs_fence_and_restart_sequences(eng):
    append(eng, data(3, 0, 0, 2))
    with pytest.raises(OutOfOrderSequence, match="starts at sequence 0"):
        append(eng, data(3, 1, 2))
    assert append(eng, data(3, 1, 0)) == 2  # a new epoch starts again at 0
    with pytest.raises(ProducerFenced, match="epoch 1 took over"):
        append(eng, data(3, 0, 2))
    with pytest.raises(ProducerFenced):
        append(eng, data(3, 0, 0, 2))  # not even a duplicate of the old epoch's
    assert end(eng) == 3
    assert append(eng, data(3, 1, 1)) == 3


def test_producers_are_independent(eng):
    assert append(eng, data(1, 0, 0)) == 0
    assert append(eng, data(2, 0, 0)) == 1
    assert append(eng, data(1, 0, 0)) == 0
    assert append(eng, data(2, 0, 0)) == 1
    assert append(eng, data(2, 0, 1)) == 2


# ---------------------------------------------------------------- transactions
def test_a_transaction_opens_and_a_commit_ends_it(eng):
    log = log_of(eng)
    eng.produce("t", [Record(value=b"plain")])
    assert append(eng, data(5, 0, 0, 2, txn=True)) == 1
    assert append(eng, data(5, 0, 2, 1, txn=True)) == 3
    st = state_of(log)
    assert st.open_transactions() == {5: (1, 0)}
    assert st.last_stable_offset(end(eng)) == 1
    with pytest.raises(InvalidTxnState, match="transaction open"):
        append(eng, data(5, 0, 3))  # non-transactional while its transaction is open
    assert append(eng, marker(5, 1, commit=True)) == 4  # KIP-890: the next epoch
    st = state_of(log)
    assert st.open_transactions() == {} and st.last_stable_offset(5) == 5
    with pytest.raises(ProducerFenced):
        append(eng, data(5, 0, 3, txn=True))  # a late batch of the ended transaction
    assert append(eng, data(5, 1, 0, txn=True)) == 5  # the next one, epoch + 1, from 0
    assert state_of(log).open_transactions() == {5: (5, 1)}
    assert [r.value for r in eng.read("t", 0, 0)] == [b"plain", b"v0", b"v1", b"v2", b"v0"]


def test_kafkas_classic_rule_a_marker_at_the_data_epoch_and_sequences_go_on(eng):
    """A Kafka client (before KIP-890's EndTxn v5) keeps its epoch across transactions: its
    markers carry the data's epoch and its next transaction's sequences follow on; a
    marker or batch below the epoch is still fenced, a gap is still out of order."""
    log = log_of(eng)
    assert append(eng, data(6, 2, 0, 2, txn=True)) == 0
    with pytest.raises(ProducerFenced):
        append(eng, marker(6, 1, commit=True))  # below the producer's epoch
    assert append(eng, marker(6, 2, commit=False)) == 2  # ends it at the data's epoch
    assert log.producers.recent_aborts() == [AbortedTxn(6, 0, 2, 3)]
    with pytest.raises(OutOfOrderSequence):
        append(eng, data(6, 2, 0, txn=True))  # the same epoch: sequences go on, not from 0
    assert append(eng, data(6, 2, 0, 2, txn=True)) == 0  # a retry: its first offset
    assert append(eng, data(6, 2, 2, txn=True)) == 3  # the next transaction
    assert state_of(log).open_transactions() == {6: (3, 2)}
    assert append(eng, marker(6, 2, commit=True)) == 4
    assert state_of(log).open_transactions() == {}
    assert append(eng, marker(6, 3, commit=False)) == 5  # a fence: the epoch after
    with pytest.raises(ProducerFenced):
        append(eng, data(6, 2, 3, txn=True))  # the fenced instance's late batch
    assert [r.value for r in eng.read("t", 0, 0, isolation_level="read_committed")] == [b"v2"]


def test_an_abort_yields_the_aborted_entry_and_the_lso_follows_the_oldest(eng):
    log = log_of(eng)
    append(eng, data(1, 0, 0, 2, txn=True))  # 0-1: producer 1 opens at 0
    append(eng, data(2, 4, 0, 1, txn=True))  # 2: producer 2 opens at 2
    assert state_of(log).last_stable_offset(end(eng)) == 0
    assert append(eng, marker(1, 1, commit=False)) == 3
    aborted = log.producers.recent_aborts()
    assert aborted == [AbortedTxn(1, 0, 3, 2)]  # data 0..3 (the marker); LSO then 2
    assert state_of(log).last_stable_offset(end(eng)) == 2
    assert append(eng, marker(2, 5, commit=False)) == 4
    aborted = log.producers.recent_aborts()
    assert aborted[-1] == AbortedTxn(2, 2, 4, 5)
    assert state_of(log).last_stable_offset(end(eng)) == 5
    # a marker where nothing is open is written and ends nothing (recovery may send one)
    assert append(eng, marker(9, 0, commit=False)) == 5
    assert len(log.producers.recent_aborts()) == 2 and state_of(log).open_transactions() == {}


def test_markers_are_never_read(eng):
    eng.produce("t", [Record(value=b"a")])
    append(eng, data(4, 0, 0, 2, txn=True))
    append(eng, marker(4, 1, commit=True))  # offset 3
    eng.produce("t", [Record(value=b"b")])  # offset 4
    assert end(eng) == 5
    values = [b"a", b"v0", b"v1", b"b"]
    assert [r.value for r in eng.read("t", 0, 0)] == values
    assert [r.offset for r in eng.read("t", 0, 3)] == [4]  # reading from the marker's offset
    assert eng.read("t", 0, 3, 1)[0].value == b"b"
    assert eng.read_arrow("t", 0, 0).column("value").to_pylist() == values
    assert eng.read_arrow("t", 0, 2).column("offset").to_pylist() == [2, 4]
    assert [v for cols in eng.read_columns("t", 0, 0) for v in cols[3]] == values
    assert [v for b in eng.stream("t") for v in b.values] == values
    assert eng.offset_for_time("t", 0, NOW + 1) is not None
    c = eng.consumer("g", "t")
    try:
        assert [r.value for r in c.poll(100)] == values
    finally:
        c.close()


def test_a_log_without_producer_state_refuses_format_2(eng, data_dir):
    eng.produce("t", [Record(value=b"a")])
    eng.close()
    topics = Topics(data_dir)
    meta = topics.get("t")
    log = PartitionLog(filenames.partition_dir(data_dir, "t", 0), "t", 0, meta.typed,
                       writable=True, topic_id=bytes.fromhex(meta.id))
    try:
        with pytest.raises(InvalidArgument, match="without producer state"):
            log.append(data(1, 0, 0))
        assert log.append(encode_batch([None], [b"plain"], NOW)) == 1  # format 1 still goes
    finally:
        log.close()


# ---------------------------------------------------------------- across processes and restarts
def test_state_catches_up_with_another_engine(data_dir, eng):
    assert append(eng, data(1, 0, 0)) == 0
    with Engine.open(data_dir) as other:
        assert append(other, data(2, 0, 0, 2)) == 1
        assert append(other, data(1, 0, 1)) == 3  # knows producer 1's batch (a catch-up)
        other.produce("t", [Record(value=b"x")])
    assert append(eng, data(2, 0, 0, 2)) == 1  # the other engine's batch: a duplicate here
    assert append(eng, data(1, 0, 1)) == 3
    with pytest.raises(OutOfOrderSequence):
        append(eng, data(1, 0, 1 + 1 + 1))
    assert append(eng, data(1, 0, 2)) == 5


def test_state_survives_a_restart_with_and_without_a_snapshot(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        append(eng, data(1, 0, 0, 2))
        eng.checkpoint()  # a snapshot at 2
        append(eng, data(1, 0, 2, 2))  # only in the log
        append(eng, data(6, 0, 0, 1, txn=True))
    with Engine.open(data_dir) as eng:
        assert append(eng, data(1, 0, 0, 2)) == 0  # (the 5-batch window survived)
        assert append(eng, data(1, 0, 2, 2)) == 2
        st = state_of(log_of(eng))
        assert st.open_transactions() == {6: (4, 0)}
        assert st.last_stable_offset(end(eng)) == 4


# ---------------------------------------------------------------- snapshots
def pdir(data_dir):
    return filenames.partition_dir(data_dir, "t", 0)


def test_snapshots_are_written_at_checkpoints_and_the_newest_two_kept(data_dir, eng):
    d = pdir(data_dir)
    assert snapshot_files.offsets(d) == []
    eng.checkpoint()
    assert snapshot_files.offsets(d) == []  # nobody used producer state here: nothing to write
    for i in range(4):
        append(eng, data(1, 0, i))
        eng.checkpoint()
    assert snapshot_files.offsets(d) == [3, 4]
    eng.checkpoint()  # nothing new: nothing rewritten
    assert snapshot_files.offsets(d) == [3, 4]
    st = snapshot.decode(*snapshot_files.read(d, 4), 4, "t-0")
    assert st.end == 4 and [b.first_offset for b in st.producers[1].batches] == [0, 1, 2, 3]


def test_the_newest_snapshot_is_what_a_load_starts_from(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        append(eng, data(1, 0, 0))
        eng.checkpoint()
    d = pdir(data_dir)
    st = snapshot.decode(*snapshot_files.read(d, 1), 1)
    st.add(42, ProducerEntry(3, [BatchMeta(10, 10, 0, 0, NOW)], last_offset=0, last_timestamp=NOW))
    with open(snapshot_files.path(d, 1), "wb") as f:  # a state only the snapshot knows
        f.write(snapshot.encode(st))
    with Engine.open(data_dir) as eng:
        assert append(eng, data(42, 3, 10)) == 0  # its duplicate: the snapshot was read
        with pytest.raises(ProducerFenced):
            append(eng, data(42, 2, 0))


def two_snapshots(data_dir):
    """Producer 1's batches at offsets 0 and 1, a snapshot after each: the partition's dir."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        append(eng, data(1, 0, 0))
        eng.checkpoint()
        append(eng, data(1, 0, 1))
        eng.checkpoint()
    d = pdir(data_dir)
    assert snapshot_files.offsets(d) == [1, 2]
    return d


def test_a_damaged_snapshot_is_ignored_reported_and_an_older_one_used(data_dir):
    d = two_snapshots(data_dir)
    with open(snapshot_files.path(d, 2), "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 4]))
    with Engine.open(data_dir) as eng:
        assert append(eng, data(1, 0, 1)) == 1  # rebuilt from the snapshot at 1 and the log
        assert append(eng, data(1, 0, 0)) == 0
        ignored = [r for r in eng.recovery.repairs() if r["action"] == "ignored"]
        assert len(ignored) == 1 and ignored[0]["file"] == snapshot_files.path(d, 2)
        assert "checksum mismatch" in ignored[0]["reason"]
        eng.checkpoint()
        assert append(eng, data(1, 0, 2)) == 2
        eng.checkpoint()
    assert snapshot_files.offsets(d) == [2, 3]  # the damaged one was replaced, never read again
    snapshot.decode(*snapshot_files.read(d, 2), 2)


def test_every_damaged_snapshot_is_refused_as_damage(tmp_path):
    """Bit flips and cuts anywhere, and valid seals over bad fields: DamagedMetadata, never
    another exception, never a state built from them."""
    st = ProducerState("t-0", 100)
    st.add(1, ProducerEntry(0, [BatchMeta(0, 4, 0, 4, NOW), BatchMeta(5, 9, 10, 14, NOW)],
                            last_offset=14, last_timestamp=NOW))
    st.add(7, ProducerEntry(2, [BatchMeta(0, 0, 20, 20, NOW)], 20, 2, 20, NOW))
    good = snapshot.encode(st)
    assert snapshot.decode(good, "x", 100).producers == st.producers
    rng = random.Random(5)
    for _ in range(300):
        bad = bytearray(good)
        if rng.random() < 0.3:
            bad = bad[:rng.randrange(len(bad))]
        else:
            i = rng.randrange(len(bad))
            bad[i] ^= 1 << rng.randrange(8)
        with pytest.raises(DamagedMetadata):
            snapshot.decode(bytes(bad), "x", 100)
    with pytest.raises(DamagedMetadata, match="name says"):
        snapshot.decode(good, "x", 99)
    # sealed, yet impossible: every field is checked, not only the checksum
    import struct

    from engine.format.crc import crc32c

    def resealed(mutate):
        b = bytearray(good)
        mutate(b)
        struct.pack_into("<I", b, 8, crc32c(memoryview(b)[12:], crc32c(b[:8])))
        return bytes(b)

    cases = {
        "producer count": lambda b: struct.pack_into("<i", b, 24, 1 << 30),
        "ascending": lambda b: struct.pack_into("<q", b, 32, 9),  # ids out of order
        "epoch": lambda b: struct.pack_into("<h", b, 32 + 32, -3),
        "batch count": lambda b: struct.pack_into("<i", b, 32 + 36, 6),
        "last offset": lambda b: struct.pack_into("<q", b, 32 + 8, 100),
        "out of order": lambda b: struct.pack_into("<q", b, 72, 15),  # first batch's offset
    }
    for what, mutate in cases.items():
        with pytest.raises(DamagedMetadata, match=what):
            snapshot.decode(resealed(mutate), "x", 100)


def test_snapshots_below_the_log_start_go_and_producers_there_expire(data_dir, eng):
    eng.alter_topic_config("t", {"segment.bytes": "300"})
    for i in range(6):
        append(eng, data(1, 0, i))
    append(eng, data(2, 0, 0))
    eng.checkpoint()
    d = pdir(data_dir)
    assert len(filenames.segment_bases(d)) > 2
    assert snapshot_files.offsets(d) == [7]
    eng.maintenance.delete_records("t", {0: 6})  # producer 1's last batch now lies below the log start
    eng.checkpoint()
    st = snapshot.decode(*snapshot_files.read(d, 7), 7)
    assert set(st.producers) == {2}
    assert snapshot_files.offsets(d) == [7]
    with pytest.raises(OutOfOrderSequence):
        append(eng, data(2, 0, 5))
    assert append(eng, data(1, 0, 5)) == 7  # forgotten: a retry is stored again (as Kafka)
    eng.checkpoint()
    eng.maintenance.delete_records("t", {0: 8})
    assert snapshot_files.offsets(d) == [8]  # those below the new start are removed


def test_idle_producers_expire(data_dir, eng, monkeypatch):
    eng.alter_topic_config("t", {"producer.id.expiration.ms": "60000"})
    t0 = clock_mod.now_ms()
    monkeypatch.setattr(clock_mod, "now_ms", lambda: t0)  # (last seen: when taken in)
    append(eng, data(1, 0, 0, ts=t0))
    append(eng, data(2, 0, 0, ts=t0 + 50_000))
    append(eng, data(3, 0, 0, txn=True, ts=t0))
    monkeypatch.setattr(clock_mod, "now_ms", lambda: t0 + 70_000)
    eng.checkpoint()
    st = state_of(log_of(eng))
    assert set(st.producers) == {2, 3}  # 3 has a transaction open: kept
    assert set(snapshot.decode(*snapshot_files.read(pdir(data_dir), 3), 3).producers) == {2, 3}
    assert append(eng, data(1, 0, 0, ts=t0)) == 3  # expired: its retry is stored again
    assert append(eng, data(2, 0, 0, ts=t0)) == 1


def test_state_follows_rolled_segments(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "400"})
        bases = [append(eng, data(1, 0, 2 * i, 2)) for i in range(10)]
        assert len(filenames.segment_bases(pdir(data_dir))) >= 4
        assert append(eng, data(1, 0, 16, 2)) == bases[8]
    with Engine.open(data_dir) as eng:  # no snapshot: rebuilt over every segment
        assert append(eng, data(1, 0, 18, 2)) == bases[9]
        assert append(eng, data(1, 0, 20, 2)) == 20


def test_a_failed_write_is_forgotten_by_the_state(eng, monkeypatch):
    """A batch the state counted but the disk never got (its fsync failed): the state is
    rebuilt, so the retry is stored, not taken for a duplicate of what is not there."""
    import errno

    append(eng, data(1, 0, 0))
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(
        OSError(errno.EIO, "Input/output error")))
    with pytest.raises(Exception, match="fsync"):
        append(eng, data(1, 0, 1))
    monkeypatch.setattr(os, "fdatasync", real)
    assert end(eng) == 1
    assert append(eng, data(1, 0, 1)) == 1
    assert [r.value for r in eng.read("t", 0, 0)] == [b"v0", b"v1"]


def test_the_worked_example_of_format_md_is_what_encode_writes():
    st = ProducerState("t-0", 5)
    st.add(7, ProducerEntry(0, [BatchMeta(0, 2, 0, 2, 1700000000000),
                                BatchMeta(3, 4, 3, 4, 1700000000000)],
                            last_offset=4, last_timestamp=1700000000000))
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "FORMAT.md")).read()
    start = text.rindex("```\n", 0, text.index('"RVPS", version 1')) + 4
    example = text[start:text.index("136 (end", start)]
    # each line: a 3-column position, the bytes, then (after a wide gap) a comment
    hexed = "".join(line[4:].split(" " * 10)[0] for line in example.splitlines())
    assert snapshot.encode(st) == bytes.fromhex(hexed)


def test_a_failed_write_is_forgotten_even_when_another_writer_filled_its_offsets(
        data_dir, eng, monkeypatch):
    """The offsets of the batch that failed are taken by another writer's batch before the
    retry: the state must not count the failed one there (it would answer the retry with
    the other writer's offset and store nothing)."""
    import errno

    append(eng, data(1, 0, 0))
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (_ for _ in ()).throw(
        OSError(errno.EIO, "Input/output error")))
    with pytest.raises(Exception, match="fsync"):
        append(eng, data(1, 0, 1))
    monkeypatch.setattr(os, "fdatasync", real)
    with Engine.open(data_dir) as other:
        other.produce("t", [Record(value=b"other")])  # offset 1, where the failed one was
    assert append(eng, data(1, 0, 1)) == 2
    assert [r.value for r in eng.read("t", 0, 0)] == [b"v0", b"other", b"v1"]


@pytest.mark.parametrize("fsync_fails", [False, True])
def test_a_duplicate_of_a_batch_still_in_flight_waits_for_it(eng, monkeypatch, fsync_fails):
    """A retry that arrives while the first try waits for its WAL fsync gets the first try's
    fate: its offset once it is durable, its error when the fsync fails — never an offset
    for a batch a crash could still take away."""
    import errno
    import threading
    import time

    append(eng, data(1, 0, 0))
    gate, entered = threading.Event(), threading.Event()
    real = os.fdatasync

    def slow(fd):
        if "/wal/" in os.readlink(f"/proc/self/fd/{fd}"):
            entered.set()
            gate.wait(30)
            if fsync_fails:
                raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    results = {}

    def send(name):
        try:
            results[name] = append(eng, data(1, 0, 1))
        except Exception as e:  # noqa: BLE001
            results[name] = e

    first = threading.Thread(target=send, args=("first",))
    first.start()
    assert entered.wait(30)
    retry = threading.Thread(target=send, args=("retry",))
    retry.start()
    deadline = time.monotonic() + 30
    while eng.wal.waiting < 2 and time.monotonic() < deadline:  # the retry waits on the WAL
        time.sleep(0.001)
    gate.set()
    first.join(30)
    retry.join(30)
    monkeypatch.setattr(os, "fdatasync", real)
    if fsync_fails:
        assert isinstance(results["first"], Exception) and isinstance(results["retry"], Exception)
        assert end(eng) == 1
        assert append(eng, data(1, 0, 1)) == 1
    else:
        assert results == {"first": 1, "retry": 1}
    assert [r.value for r in eng.read("t", 0, 0)] == [b"v0", b"v1"]


def test_a_repair_cut_removes_the_snapshots_past_it(data_dir):
    d = two_snapshots(data_dir)
    seg = filenames.path(d, 0, filenames.LOG)
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:  # damage the last batch (past the first snapshot)
        f.seek(size - 9)
        b = f.read(1)
        f.seek(size - 9)
        f.write(bytes([b[0] ^ 1]))
    with Engine.open(data_dir) as eng:
        eng.segments.recover([seg], truncate_corrupt=True)
        assert snapshot_files.offsets(d) == [1]  # the one past the cut would describe batch 1
        assert end(eng) == 1
        eng.produce("t", [Record(value=b"p1"), Record(value=b"p2")])  # the log grows past 2
        assert append(eng, data(1, 0, 1, tag=b"w")) == 3  # seq 1 is new again
        assert [r.value for r in eng.read("t", 0, 0)] == [b"v0", b"p1", b"p2", b"w1"]


def test_the_spark_source_never_returns_a_marker(data_dir, eng):
    """(The Spark source's executor-side reader, without starting Spark.)"""
    pytest.importorskip("pyspark")
    from engine.spark.source import Piece, read_piece

    eng.produce("t", [Record(value=b"a")])
    append(eng, data(4, 0, 0, 2, txn=True))
    append(eng, marker(4, 1, commit=False))
    eng.produce("t", [Record(value=b"b")])
    seg = filenames.path(pdir(data_dir), 0, filenames.LOG)
    piece = Piece("t", 0, seg, 0, 0, os.path.getsize(seg), None)
    rows = [row for b in read_piece(piece, ["offset", "value"])
            for row in zip(b.column(0).to_pylist(), b.column(1).to_pylist())]
    assert rows == [(0, b"a"), (1, b"v0"), (2, b"v1"), (4, b"b")]


def test_the_readers_view_of_the_state(data_dir, eng):
    from engine.txn.hook import producers_of

    append(eng, data(3, 2, 0, 4))
    append(eng, data(5, 0, 0, 1, txn=True))
    hook = producers_of(log_of(eng))
    assert hook.last_stable_offset() == (4, 5)
    assert hook.open_transactions() == {5: (4, 0)}
    assert hook.last_sequence(3, 2) == 3 and hook.last_sequence(3, 1) is None
    rows = hook.producers()
    assert [(r["producer_id"], r["epoch"], r["last_sequence"], r["txn_first_offset"])
            for r in rows] == [(3, 2, 3, None), (5, 0, 0, 4)]
    with Engine.open(data_dir, read_only=True) as ro:  # a reader builds it from the log
        ro_hook = producers_of(ro._path.log_for(ro.topic("t"), 0))
        assert ro_hook.last_stable_offset() == (4, 5)
        append(eng, marker(5, 1, commit=True))
        assert ro_hook.last_stable_offset() == (6, 6)  # and follows the log


def test_old_record_timestamps_do_not_expire_their_producer(data_dir):
    """A backfill (records stamped days ago): the producer was seen now, and is kept."""
    old = clock_mod.now_ms() - 10 * 86_400_000
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"retention.ms": "-1"})
        append(eng, data(1, 0, 0, 3, ts=old))
        eng.checkpoint()
    with Engine.open(data_dir) as eng:
        assert append(eng, data(1, 0, 0, 3, ts=old)) == 0  # still a duplicate
        assert end(eng) == 3
