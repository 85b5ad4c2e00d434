"""read_committed: reads stop at the last stable offset, aborted transactions are left out,
markers are never returned; the .txnindex files that make it cheap are written at snapshots
and survive restarts, rolls, retention and tiering (docs/TRANSACTIONS.md)."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from engine import Engine, InvalidArgument, Record
from engine import clock as clock_mod
from engine.format import control
from engine.format.encode import encode_batch
from engine.format.records import ATTR_TRANSACTIONAL
from engine.segments import filenames
from engine.segments.txn_index import AbortedTxn, read_entries

NOW = clock_mod.now_ms()
RC, RU = "read_committed", "read_uncommitted"


def data(pid, epoch, seq, tag, n=1):
    return encode_batch([None] * n, [b"%s%d" % (tag, i) for i in range(n)], NOW,
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        flags=ATTR_TRANSACTIONAL)


def append(eng, batch, topic="t", partition=0):
    return eng._path.append_encoded(eng._path.log_for(eng.topic(topic), partition), batch)


def values(eng, level, topic="t", partition=0, offset=0):
    return [r.value for r in eng.read(topic, partition, offset, 10_000, isolation_level=level)]


@pytest.fixture
def eng(data_dir):
    with Engine.open(data_dir) as e:
        e.create_topic("t", 1)
        yield e


def interleaved(eng):
    """plain a | txn 1 (pid 1): b0 b1 | plain c | txn 2 (pid 2): d0 | ABORT 1 | COMMIT 2 |
    txn 3 (pid 3): e0, still open | plain f"""
    eng.produce("t", [Record(value=b"a", timestamp=NOW)], partition=0)  # 0
    append(eng, data(1, 0, 0, b"b", 2))  # 1..2
    eng.produce("t", [Record(value=b"c", timestamp=NOW)], partition=0)  # 3
    append(eng, data(2, 0, 0, b"d"))  # 4
    append(eng, control.encode_marker(1, 1, False, NOW))  # 5: ABORT txn 1
    append(eng, control.encode_marker(2, 1, True, NOW))  # 6: COMMIT txn 2
    append(eng, data(3, 0, 0, b"e"))  # 7: txn 3 opens: the LSO
    eng.produce("t", [Record(value=b"f", timestamp=NOW + 1000)], partition=0)  # 8


def test_read_committed_skips_aborts_and_stops_at_the_lso(eng):
    interleaved(eng)
    assert values(eng, RU) == [b"a", b"b0", b"b1", b"c", b"d0", b"e0", b"f"]  # no markers
    assert values(eng, RC) == [b"a", b"c", b"d0"]
    assert values(eng, RC, offset=2) == [b"c", b"d0"]
    assert eng.end_offsets("t") == {0: 9}
    assert eng.end_offsets("t", isolation_level=RC) == {0: 7}
    table = eng.read_arrow("t", 0, 0, isolation_level=RC)
    assert table.column("value").to_pylist() == [b"a", b"c", b"d0"]
    assert [v for cols in eng.read_columns("t", 0, 0, 100, isolation_level=RC) for v in cols[3]] \
        == [b"a", b"c", b"d0"]
    assert [v for b in eng.stream("t", isolation_level=RC) for v in b.values] == \
        [b"a", b"c", b"d0"]
    assert eng.offset_for_time("t", 0, NOW) == 0
    assert eng.offset_for_time("t", 0, NOW + 1) == 8  # f, past the LSO:
    assert eng.offset_for_time("t", 0, NOW + 1, isolation_level=RC) is None
    # txn 3 commits: the LSO moves to the end, e0 and f appear
    append(eng, control.encode_marker(3, 1, True, NOW))
    assert values(eng, RC) == [b"a", b"c", b"d0", b"e0", b"f"]
    assert eng.end_offsets("t", isolation_level=RC) == {0: 10}
    with pytest.raises(InvalidArgument, match="read_committed"):
        eng.read("t", 0, 0, isolation_level="snapshot")


def test_a_read_committed_consumer(eng):
    interleaved(eng)
    with eng.consumer("g", "t", isolation_level=RC, enable_auto_commit=False) as c:
        got = []
        for _ in range(5):
            got += [r.value for r in c.poll()]
        assert got == [b"a", b"c", b"d0"]
        c.seek_to_end("t", 0)
        assert c.position("t", 0) == 7  # the last stable offset
    with eng.consumer("h", "t", isolation_level=RC, auto_offset_reset="latest") as c:
        c.poll()
        assert c.position("t", 0) == 7
    with pytest.raises(InvalidArgument, match="isolation_level"):
        eng.consumer("g", "t", isolation_level="dirty")


@pytest.mark.parametrize("level", [RC, RU])
def test_a_consumer_steps_over_the_markers_after_its_records(eng, level):
    """As Kafka's: the position (and so the committed offset and the lag) is past a marker
    that follows the last record handed out, whether the marker came in the same fetch,
    a later one, or the records were taken one by one."""
    tp = eng.producer(transactional_id="x")
    for vals in ([b"a", b"b"], [b"c"]):
        tp.begin()
        tp.produce("t", [Record(value=v) for v in vals])
        tp.commit()  # a, b | COMMIT 2 | c | COMMIT 4
    with eng.consumer("g1", "t", isolation_level=level, enable_auto_commit=False) as c:
        assert [r.value for r in c.poll()] == [b"a", b"b", b"c"]  # the markers in this fetch
        assert c.position("t", 0) == 5
        c.commit()
    with eng.consumer("g2", "t", isolation_level=level, enable_auto_commit=False) as c:
        assert [r.value for r in c.poll(max_records=2)] == [b"a", b"b"]  # stops at b
        assert c.position("t", 0) == 2
        assert [r.value for r in c.poll()] == [b"c"]  # steps over COMMIT 2 first
        assert c.position("t", 0) == 5
        assert c.poll() == [] and c.position("t", 0) == 5
    with eng.consumer("g3", "t", isolation_level=level, enable_auto_commit=False,
                      consumer_timeout_ms=0) as c:
        assert [r.value for r in c] == [b"a", b"b", b"c"]  # one by one
        c.commit()
    with eng.consumer("g4", "t", isolation_level=level, enable_auto_commit=False) as c:
        it = iter(c)
        assert next(it).value == b"a"
        assert c.position("t", 0) == 1  # b is still to come: no step yet
        c.seek("t", 0, 2)  # to the marker: the next look steps over it
        assert [r.value for r in c.poll()] == [b"c"] and c.position("t", 0) == 5
    assert eng.groups.committed("g1") == eng.groups.committed("g3") == {("t", 0): 5}
    assert [g["lag"] for g in eng.groups.describe("g1")["partitions"]] == [0]


def test_aborts_reach_txnindex_files_at_a_checkpoint_and_readers_in_other_processes(data_dir):
    """Until a snapshot, an abort is known from the log; the snapshot makes its .txnindex
    entry durable first. A reader in another process sees the same thing either way."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        interleaved(eng)
        pdir = filenames.partition_dir(data_dir, "t", 0)
        assert read_entries(filenames.path(pdir, 0, filenames.TXNINDEX), 0)[0] == []  # not yet
        assert values(eng, RC) == [b"a", b"c", b"d0"]  # known from the log meanwhile
        code = ("import sys; from engine import Engine\n"
                "with Engine.open(sys.argv[1], read_only=True) as e:\n"
                "    print([r.value for r in e.read('t', 0, 0, 100, "
                "isolation_level='read_committed')])")
        out = subprocess.run([sys.executable, "-c", code, data_dir], capture_output=True,
                             text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert out.stdout.strip() == "[b'a', b'c', b'd0']", out.stderr
        eng.checkpoint()
        assert read_entries(filenames.path(pdir, 0, filenames.TXNINDEX), 0)[0] == \
            [AbortedTxn(1, 1, 5, 4)]  # (txn 2 still open then: the LSO was 4)
    with Engine.open(data_dir, read_only=True) as eng:  # from the snapshot and the index
        assert values(eng, RC) == [b"a", b"c", b"d0"]


def test_an_abort_in_a_later_segment_hides_data_in_an_earlier_one(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "1024"})
        append(eng, data(9, 0, 0, b"x"))  # offset 0: txn of pid 9
        for i in range(30):  # rolls several segments
            eng.produce("t", [Record(value=b"p%02d" % i + b"." * 100)], partition=0)
        append(eng, control.encode_marker(9, 1, False, NOW))
        eng.checkpoint()
        pdir = filenames.partition_dir(data_dir, "t", 0)
        bases = filenames.segment_bases(pdir)
        assert len(bases) > 3 and not os.path.exists(filenames.path(pdir, 0, filenames.TXNINDEX))
        assert os.path.exists(filenames.path(pdir, bases[-1], filenames.TXNINDEX))
    with Engine.open(data_dir, read_only=True) as eng:
        got = values(eng, RC)
        assert b"x0" not in got and len(got) == 30
        assert values(eng, RU)[0] == b"x0"


# ---------------------------------------------------------------- compaction
def test_compaction_drops_aborted_records_keeps_markers_and_stops_at_the_lso(data_dir):
    """Kafka's cleaner rules: an aborted transaction's records never survive (even as a
    key's last value), committed transactional records survive as plain ones, markers stay
    (until their delete horizon, and while each is its producer's last batch: here both
    are), and nothing at or past the last stable offset is cleaned. (Markers and their
    horizon: tests/unit/maintenance/test_compaction_txn.py.)"""
    cfg = {"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}

    def keyed(pid, seq, key, value):
        return encode_batch([key], [value], NOW, producer_id=pid, producer_epoch=0,
                            base_sequence=seq, flags=ATTR_TRANSACTIONAL)

    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, cfg)
        eng.produce("c", [Record(key=b"k", value=b"plain-1")], partition=0)
        append(eng, keyed(1, 0, b"k", b"aborted"), "c")  # would be k's last value...
        append(eng, keyed(2, 0, b"j", b"committed"), "c")
        append(eng, control.encode_marker(1, 1, False, NOW), "c")  # ...but it aborts
        append(eng, control.encode_marker(2, 1, True, NOW), "c")
        for i in range(20):
            eng.produce("c", [Record(key=b"f%d" % i, value=b"." * 100)], partition=0)
        append(eng, keyed(3, 0, b"open", b"pending"), "c")  # an open transaction: the LSO
        lso = eng.end_offsets("c", isolation_level=RC)[0]
        for i in range(20):
            eng.produce("c", [Record(key=b"g%d" % i, value=b"." * 100)], partition=0)
        eng.checkpoint()
        out = eng.maintenance.compact("c", force=True)
        plan = out[0]["plan"]
        assert plan["held_by_transaction"]["last_stable_offset"] == lso
        assert plan["cleanable_end"] <= lso
        assert plan["aborted"] == [[1, 1, 3]]
        got = {r.key: r.value for r in eng.read("c", 0, 0, 1000)}
        assert got[b"k"] == b"plain-1" and got[b"j"] == b"committed"
        assert values(eng, RC, "c")[:2] == [b"plain-1", b"committed"]
        assert b"pending" not in values(eng, RC, "c")
        # what was cleaned holds no transactional data any more; the markers stay
        log = eng._path.log_for(eng.topic("c"), 0)
        cleaned = [h for h, _ in log.headers(0, plan["cleanable_end"], lambda h: False)]
        assert cleaned and not any(h.is_transactional and not h.is_control for h in cleaned)
        assert [h.base_offset for h in cleaned if h.is_control] == [3, 4]
        eng.maintenance.compact("c", force=True)  # (delete.retention.ms=0: past the horizon)
        cleaned = [h for h, _ in log.headers(0, plan["cleanable_end"], lambda h: False)]
        assert [h.base_offset for h in cleaned if h.is_control] == [3, 4]  # producers' last
        # the open transaction commits: its record is back for read_committed, all intact
        append(eng, control.encode_marker(3, 1, True, NOW), "c")
        assert b"pending" in values(eng, RC, "c")
    with Engine.open(data_dir, read_only=True) as eng:  # the state rebuilt from the log
        assert b"pending" in values(eng, RC, "c")
        assert eng.end_offsets("c", isolation_level=RC) == eng.end_offsets("c")


def test_compaction_explain_names_an_open_transaction(data_dir):
    from helpers import run_rivven

    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1024"})
        append(eng, encode_batch([b"k"], [b"v"], NOW, producer_id=4, producer_epoch=0,
                                 base_sequence=0, flags=ATTR_TRANSACTIONAL), "c")
        for i in range(20):
            eng.produce("c", [Record(key=b"f%d" % i, value=b"." * 100)], partition=0)
    r = run_rivven(data_dir, "compaction", "explain", "c")
    assert r.returncode == 0 and b"an open transaction (the last stable offset is 0)" in \
        r.stdout, r.stdout


# ---------------------------------------------------------------- with real transactions
READER = """
import sys
from engine import Engine
data = sys.argv[1]
with Engine.open(data, read_only=True) as eng:
    print(eng.end_offsets("out", isolation_level="read_committed")[0],
          [r.value.decode() for r in eng.read("out", 0, 0, 1000,
                                               isolation_level="read_committed")], flush=True)
"""


def test_another_process_sees_nothing_past_the_lso_until_commit_and_never_an_abort(data_dir):
    def look():
        r = subprocess.run([sys.executable, "-c", READER, data_dir], capture_output=True,
                           text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    with Engine.open(data_dir) as eng:
        eng.create_topic("out", 1)
        eng.produce("out", [Record(value=b"before")], partition=0)
        tp = eng.producer(transactional_id="w")
        tp.begin()
        tp.produce("out", [Record(value=b"t1-a"), Record(value=b"t1-b")], partition=0)
        assert look() == "1 ['before']"  # open: the LSO is its first offset
        assert eng.end_offsets("out", isolation_level=RC) == {0: 1}
        tp.abort()
        assert look() == "4 ['before']"  # aborted: never seen (offset 3 is its marker)
        tp.begin()
        tp.produce("out", [Record(value=b"t2")], partition=0)
        eng.produce("out", [Record(value=b"plain")], partition=0)  # after it, still hidden
        assert look() == "4 ['before']"
        tp.commit()
        assert look() == "7 ['before', 't2', 'plain']"
        assert values(eng, RC, "out") == [b"before", b"t2", b"plain"]
        assert values(eng, RU, "out") == [b"before", b"t1-a", b"t1-b", b"t2", b"plain"]
