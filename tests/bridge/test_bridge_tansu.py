"""Round trips through tansu, a Kafka-protocol broker that is not rivven (Rust, memory storage):
a data dir exported to it and imported back into a second data dir equals the first, byte for
byte in keys, values, headers and timestamps, partition by partition in order — for every
codec, for tombstones and transactions, and for a million records.

tansu's read_committed shows aborted records, so the parts about aborted transactions on the
cluster side are tested against ``rivven serve`` (test_bridge_copy.py); here the source's own
aborted transaction is left out by the export's read_committed read of the data dir."""

from __future__ import annotations

import hashlib

import pytest
from helpers.bridge import content, fill, kafka_content, sink_fixture, source_fixture  # noqa: F401
from helpers.tansu import tansu_fixture  # noqa: F401  (the "tansu" fixture)

from engine import Record
from engine.bridge.export import export
from engine.bridge.importer import import_topics

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_every_codec_round_trips_through_tansu(source, sink, tansu):
    """Each codec stores the source topic (compression.type) and compresses the copy on the
    wire (librdkafka's compression.type): what comes back is what went out."""
    for codec in CODECS:
        fill(source, f"c-{codec}", config={"compression.type": codec})
        out = export(source, [f"c-{codec}"], tansu.bootstrap,
                     config={"compression.type": codec})
        assert out["records"] == 25
        assert kafka_content(tansu.bootstrap, f"c-{codec}", 3) == content(source, f"c-{codec}")
        back = import_topics(sink, [f"c-{codec}"], tansu.bootstrap)
        assert back["records"] == 25
        assert content(sink, f"c-{codec}") == content(source, f"c-{codec}"), codec


def test_a_resumed_round_trip_through_tansu_copies_each_record_once(source, sink, tansu):
    fill(source, "t")
    export(source, ["t"], tansu.bootstrap, txn_records=4)
    import_topics(sink, ["t"], tansu.bootstrap, txn_records=5)
    source.produce("t", [Record(b"more", b"1", (("h", b"x"),), 1_700_000_900_000)], partition=0)
    assert export(source, ["t"], tansu.bootstrap)["records"] == 1
    assert import_topics(sink, ["t"], tansu.bootstrap)["records"] == 1
    assert content(sink, "t") == content(source, "t")


def digest(eng, topic: str) -> dict[int, tuple[int, str]]:
    """Per partition the record count and a hash of every key, value, header and timestamp
    in order (a million records compared without a million tuples held twice)."""
    out = {}
    for p in range(eng.topic(topic).partitions):
        h = hashlib.sha256()
        n = pos = 0
        while True:
            batch = eng.read(topic, p, pos, 50_000, isolation_level="read_committed")
            if not batch:
                break
            for r in batch:
                h.update(repr((r.key, r.value, tuple(r.headers), r.timestamp)).encode())
            n += len(batch)
            pos = batch[-1].offset + 1
        out[p] = (n, h.hexdigest())
    return out


@pytest.mark.slow
def test_a_million_records_round_trip_through_tansu_unchanged(source, sink, tansu):
    parts, per = 4, 250_000
    source.create_topic("big", parts)
    for p in range(parts):
        for s in range(0, per, 50_000):
            keys = [b"k-%d-%07d" % (p, i) for i in range(s, s + 50_000)]
            values = [b"%07d" % i * (1 + i % 20) if i % 997 else None for i in range(s, s + 50_000)]
            headers = [(("i", b"%d" % i),) if i % 10 == 0 else () for i in range(s, s + 50_000)]
            source.produce_batch("big", values, keys, headers,
                                 [1_700_000_000_000 + i for i in range(s, s + 50_000)],
                                 partition=p)
    out = export(source, ["big"], tansu.bootstrap)
    assert out["records"] == parts * per
    back = import_topics(sink, ["big"], tansu.bootstrap)
    assert back["records"] == parts * per
    assert digest(sink, "big") == digest(source, "big")
