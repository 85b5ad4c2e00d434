"""The topic's message.timestamp.type and message.timestamp.before/after.max.ms on every
produce path (engine.produce.path.stored_timestamps): LogAppendTime replaces the producer's
timestamps with the append time and marks the batch (ATTR_LOG_APPEND_TIME, Kafka's timestamp
type bit); CreateTime keeps them, within the bounds."""

import pyarrow as pa
import pytest

from engine import Engine, Record, clock
from engine.errors import InvalidTimestamp
from engine.format.records import ATTR_LOG_APPEND_TIME

NOW = 1_800_000_000_000
OLD = 1_600_000_000_000
LAT = {"message.timestamp.type": "LogAppendTime"}


@pytest.fixture
def now(monkeypatch):
    monkeypatch.setattr(clock, "now_ms", lambda: NOW)
    return NOW


def stored(eng, topic="t", partition=0):
    """``[(timestamp, log append time flag)]`` of every record, from the batch headers."""
    out = []
    for fb in eng.fetch(topic, partition, 0, 1 << 20).batches:
        if fb.columns is None:  # (a transaction marker)
            continue
        flag = bool(fb.header.attributes & ATTR_LOG_APPEND_TIME)
        ts = fb.columns[1]
        ts = ts if isinstance(ts, list | tuple) else [fb.header.first_timestamp] * len(fb.columns[3])
        out.extend((t, flag) for t in ts)
    return out


def paths(eng, topic):
    """Every way the engine writes records, each with a client timestamp OLD."""
    eng.produce(topic, [Record(value=b"a", timestamp=OLD)])
    eng.produce_batch(topic, [b"b", b"c"], timestamps=[OLD, OLD + 1])
    eng.produce_arrow(topic, pa.table({"value": [b"d"], "timestamp": [OLD]}))
    eng.produce_arrow(topic, pa.table({"value": [b"e"], "timestamp": [OLD],
                                       "headers": [[("h", b"1")]]}))
    eng.producer().produce(topic, [Record(value=b"f", timestamp=OLD)])
    tp = eng.producer(transactional_id="tx")
    tp.begin()
    tp.produce(topic, [Record(value=b"g", timestamp=OLD)])
    tp.produce_arrow(topic, pa.table({"value": [b"h"], "timestamp": [OLD]}))
    tp.commit()
    tp.close()
    eng.produce_wire(topic, 0, [None], [b"i"], None, [OLD])
    return 9


def test_log_append_time_stamps_every_path_and_marks_the_batch(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, LAT)
        n = paths(eng, "t")
        assert [r.timestamp for r in eng.read("t", 0, 0, 100)] == [NOW] * n
        assert stored(eng) == [(NOW, True)] * n
        # time lookups see the append time
        assert eng.offsets.for_time("t", 0, NOW) == 0


def test_create_time_keeps_the_producers_timestamps_unmarked(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        n = paths(eng, "t")
        got = [r.timestamp for r in eng.read("t", 0, 0, 100)]
        assert len(got) == n and set(got) == {OLD, OLD + 1}
        assert not any(flag for _, flag in stored(eng))


def test_produce_wire_stamps_the_append_time_it_is_given(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, LAT)
        eng.produce_wire("t", 0, [None, None], [b"a", b"b"], None, [OLD, OLD], append_time=NOW - 5)
        assert [r.timestamp for r in eng.read("t", 0, 0)] == [NOW - 5] * 2


def test_a_switch_of_the_type_applies_to_new_batches_only(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, LAT)
        eng.produce("t", [Record(value=b"a", timestamp=OLD)])
        eng.alter_topic_config("t", {"message.timestamp.type": "CreateTime"})
        eng.produce("t", [Record(value=b"b", timestamp=OLD)])
        assert stored(eng) == [(NOW, True), (OLD, False)]


def test_compaction_keeps_the_mark_of_a_rewritten_batch(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**LAT, "cleanup.policy": "compact", "segment.bytes": "1024",
                                  "min.cleanable.dirty.ratio": "0"})
        eng.produce_batch("t", [b"old", b"keep"], keys=[b"a", b"b"], timestamps=[OLD, OLD])
        eng.produce("t", [Record(key=b"a", value=b"new")])
        for _ in range(30):  # roll the segment: the first batches become cleanable
            eng.produce("t", [Record(key=b"z", value=b"x" * 64)])
        eng.maintenance.compact("t", force=True)
        recs = eng.read("t", 0, 0, 1000)
        assert [r.value for r in recs if r.key in (b"a", b"b")] == [b"keep", b"new"]
        assert all(flag for _, flag in stored(eng)) and {r.timestamp for r in recs} == {NOW}


# ---------------------------------------------------------------- CreateTime bounds
@pytest.mark.parametrize("cfg, ts, key", [
    ({"message.timestamp.before.max.ms": "1000"}, NOW - 1001, "message.timestamp.before.max.ms"),
    ({"message.timestamp.after.max.ms": "1000"}, NOW + 1001, "message.timestamp.after.max.ms"),
    ({"message.timestamp.difference.max.ms": "1000"}, NOW + 1001,
     "message.timestamp.after.max.ms"),
])
def test_a_timestamp_out_of_bounds_refuses_the_whole_call(data_dir, now, cfg, ts, key):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, cfg)
        tries = [
            lambda: eng.produce("t", [Record(value=b"ok", timestamp=NOW),
                                      Record(value=b"bad", timestamp=ts)]),
            lambda: eng.produce_batch("t", [b"ok", b"bad"], timestamps=[NOW, ts]),
            lambda: eng.produce_arrow("t", pa.table({"value": [b"ok", b"bad"],
                                                     "timestamp": [NOW, ts]})),
            lambda: eng.produce_wire("t", 0, [None, None], [b"ok", b"bad"], None, [NOW, ts]),
        ]
        for call in tries:
            with pytest.raises(InvalidTimestamp) as e:
                call()
            msg = str(e.value)
            assert f"record timestamp {ts} is out of range for topic 't': {key}=1000" in msg
            assert "\n" not in msg
        assert eng.read("t", 0, 0) == []
        # at the bound exactly, and the current time: accepted
        edge = NOW - 1000 if "before" in key else NOW + 1000
        eng.produce_batch("t", [b"edge", b"now"], timestamps=[edge, NOW])
        assert [r.timestamp for r in eng.read("t", 0, 0)] == [edge, NOW]


def test_bounds_do_not_apply_to_log_append_time(data_dir, now):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, {**LAT, "message.timestamp.before.max.ms": "1"})
        eng.produce("t", [Record(value=b"a", timestamp=OLD)])
        assert eng.read("t", 0, 0)[0].timestamp == NOW
