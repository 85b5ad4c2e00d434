"""Spark over encrypted topics: the ``rivven`` source with a keyring (the same rows as an
unencrypted copy, read_committed too; a clear error without one), a real ``rivven spark
compact`` of an encrypted topic (no plaintext left anywhere) and a real ``rivven spark
reencrypt`` over local and cold segments, dry runs, and client deploy mode only."""

from __future__ import annotations

import base64
import json
import os
import random
import sys
import time

import pytest
from helpers import run_rivven
from helpers.encryption import batches_of, forge_plaintext, plaintext_in, segment_files

from engine import Engine, Record

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
ENC = {"encryption.enable": "true", "encryption.key.id": "k1"}
T0 = int(time.time() * 1000) - 3_600_000  # (older records would go by retention.ms)


def write_keyring(path, keys: dict[str, bytes]) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({k: base64.b64encode(v).decode() for k, v in keys.items()}, f)
    return str(path)


@pytest.fixture
def keyring(tmp_path) -> str:
    return write_keyring(tmp_path / "keyring.json", {"k1": os.urandom(32)})


def mark(i: int) -> bytes:
    """A distinctive 32-byte value: in a file only if stored in plaintext."""
    return b"MARK-%026d" % i


def key_mark(k: int) -> bytes:
    return b"KEY!-%026d" % k


def engine_rows(eng, topic, **kw) -> list[tuple]:
    """(partition, offset, key, value, headers, timestamp) of every record, cold ones too."""
    out = []
    for p in range(eng.topic(topic).partitions):
        out += [(p, r.offset, r.key, r.value, tuple(tuple(h) for h in r.headers), r.timestamp)
                for r in eng.read(topic, p, eng.start_offsets(topic)[p], 1 << 30, **kw)]
    return sorted(out)


def spark_rows(df) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value,
                   tuple((h.key, h.value) for h in r.headers), r.timestamp)
                  for r in df.collect())


def source(spark, data_dir, topic, keyring=None, schema=None, **options):
    r = spark.read.format("rivven")
    if schema is not None:
        r = r.schema(schema)
    r = r.option("path", data_dir).option("topic", topic)
    if keyring is not None:
        r = r.option("keyring", keyring)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def mixed_records(n: int, seed: int = 11) -> list[Record]:
    """Records with and without keys, values (tombstones) and headers, fixed timestamps."""
    rng = random.Random(seed)
    return [Record(key=None if i % 11 == 0 else key_mark(rng.randrange(300)),
                   value=None if i % 13 == 0 else mark(i),
                   headers=[("h", b"%d" % i), ("none", None)] if i % 5 == 0 else (),
                   timestamp=T0 + i)
            for i in range(n)]


def produce_both(eng, topics, records, partition, compression=None) -> None:
    for t in topics:
        eng.produce(t, records, partition=partition, compression=compression)


# ---------------------------------------------------------------- the source
def test_source_reads_an_encrypted_topic_as_its_plain_copy(spark, data_dir, keyring):
    small = {"segment.bytes": "6000", "index.interval.bytes": "512"}
    recs = mixed_records(3000)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("plain", 2, small)
        eng.create_topic("enc", 2, {**small, **ENC})
        codecs = ["none", "lz4", "zstd", "gzip"]
        for n, i in enumerate(range(0, len(recs), 50)):
            produce_both(eng, ("plain", "enc"), recs[i:i + 50], n % 2, codecs[n % 4])
        # one committed and one aborted transaction over both partitions, then more records
        tx = eng.producer(transactional_id="x")
        tx.begin()
        for p in (0, 1):
            produce_both(tx, ("plain", "enc"), [Record(key=b"t", value=b"committed-%d-%d" % (p, j),
                                                       timestamp=T0 + 5000 + j)
                                                for j in range(7)], p)
        tx.commit()
        tx.begin()
        for p in (0, 1):
            produce_both(tx, ("plain", "enc"), [Record(key=b"t", value=b"aborted-%d-%d" % (p, j),
                                                       timestamp=T0 + 6000 + j)
                                                for j in range(5)], p)
        tx.abort()
        tx.close()
        for p in (0, 1):
            produce_both(eng, ("plain", "enc"), [Record(value=b"after-%d" % p, timestamp=T0 + 7000)],
                         p)
        want = engine_rows(eng, "plain")
        assert engine_rows(eng, "enc") == want
        committed = engine_rows(eng, "plain", isolation_level="read_committed")
        assert engine_rows(eng, "enc", isolation_level="read_committed") == committed
        status = eng.keys.status("enc")[0]
        segments = [len(eng.segments.list_segments("enc", p)) for p in (0, 1)]
    assert len(want) == 3000 + 2 * (7 + 5 + 1)
    assert min(segments) >= 4  # several segments per partition
    assert status["plaintext"]["bytes"] == 0 and status["keys"][0]["bytes"] > 0  # sealed
    assert len(committed) == 3000 + 2 * (7 + 1)
    values = {r[3] for r in committed}
    assert b"committed-1-6" in values and not any((v or b"").startswith(b"aborted") for v in values)

    plain = spark_rows(source(spark, data_dir, "plain"))
    assert plain == want
    # small splits: encrypted segments cut at offset-index positions too
    enc = source(spark, data_dir, "enc", keyring, splitBytes="4000")
    assert spark_rows(enc) == want
    assert enc.rdd.getNumPartitions() > 8

    subset = "partition int, offset long, key binary"
    got = sorted(tuple(r) for r in source(spark, data_dir, "enc", keyring, subset).collect())
    assert got == [(p, o, k) for p, o, k, _, _, _ in want]
    tombs = source(spark, data_dir, "enc", keyring, "partition int, offset long, tombstone boolean")
    assert sorted(tuple(r) for r in tombs.collect()) == [(p, o, v is None)
                                                          for p, o, _, v, _, _ in want]

    rc_plain = spark_rows(source(spark, data_dir, "plain", isolationLevel="read_committed"))
    rc_enc = spark_rows(source(spark, data_dir, "enc", keyring, isolationLevel="read_committed"))
    assert rc_enc == rc_plain == committed


def test_source_without_a_keyring_says_so(spark, data_dir, keyring, tmp_path, monkeypatch):
    monkeypatch.delenv("RIVVEN_KEYRING", raising=False)
    monkeypatch.delenv("RIVVEN_SPARK_KEYS", raising=False)
    # (the reader is built in a Python process the JVM starts, with the JVM's environment)
    jvm = spark.sparkContext._jvm.System
    assert jvm.getenv("RIVVEN_KEYRING") is None and jvm.getenv("RIVVEN_SPARK_KEYS") is None, \
        "the shared SparkSession started with RIVVEN_KEYRING/RIVVEN_SPARK_KEYS set: unset them"
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("plain", 1)
        eng.create_topic("enc", 1, ENC)
        produce_both(eng, ("plain", "enc"), [Record(key=b"k", value=mark(i)) for i in range(20)], 0)
    with pytest.raises(Exception, match="no keyring was given") as e:
        source(spark, data_dir, "enc").collect()
    assert "KeyUnavailable" in str(e.value) and "'enc'" in str(e.value)
    with pytest.raises(Exception, match="master key 'k1' is not in the keyring"):
        other = write_keyring(tmp_path / "other.json", {"k2": os.urandom(32)})
        source(spark, data_dir, "enc", other).collect()
    assert [r.value for r in source(spark, data_dir, "plain").orderBy("offset").collect()] == \
        [mark(i) for i in range(20)]


def test_source_refuses_a_plaintext_batch_where_every_batch_is_sealed(spark, data_dir, keyring):
    """The last sealed batch replaced by a plaintext one of the same offsets and size, its
    CRC recomputed (no key needed): damage, as on the engine's read paths."""
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("enc", 1, ENC)
        for i in range(3):
            eng.produce("enc", [Record(value=mark(i))])
    path = segment_files(data_dir, "enc")[0]
    pos, h = batches_of(path)[-1]
    forge_plaintext(path, pos, h.base_offset, h.size)
    with pytest.raises(Exception, match="offsets 2..2.* is plaintext, but every batch"):
        source(spark, data_dir, "enc", keyring).collect()


# ---------------------------------------------------------------- real spark-submit runs
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "3000", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}


def produce_updates(eng, topic, n, keys, seed) -> None:
    """``n`` updates of ``keys`` keys per partition (values unique markers), 10% tombstones."""
    rng = random.Random(seed)
    for p in (0, 1):
        for i in range(0, n, 4):
            eng.produce(topic, [Record(key=key_mark(rng.randrange(keys)),
                                       value=None if rng.random() < 0.1 else mark(p * n + i + j),
                                       headers=[("h", b"x")] if rng.random() < 0.2 else (),
                                       timestamp=T0 + i + j) for j in range(4)], partition=p)


def latest(rows) -> dict[tuple[int, bytes], bytes]:
    """(partition, key) -> latest value of the records read back, deleted keys left out."""
    last: dict[tuple[int, bytes], bytes | None] = {}
    for p, _, k, v, _, _ in sorted(rows):
        last[(p, k)] = v
    return {k: v for k, v in last.items() if v is not None}


def expected_after(rows, plans) -> list[tuple]:
    """The records a compaction pass of ``plans`` keeps: the last of each key below each
    partition's cleanable end (tombstones too: the first pass), everything from it on."""
    out = []
    for plan in plans:
        p, end = plan["partition"], plan["cleanable_end"]
        mine = [r for r in rows if r[0] == p]
        last = {r[2]: r[1] for r in mine if r[1] < end}
        out += [r for r in mine if r[1] >= end or last[r[2]] == r[1]]
    return sorted(out)


@pytest.mark.slow
def test_spark_compact_of_an_encrypted_topic_leaves_no_plaintext(data_dir, keyring, tmp_path):
    plain_dir = str(tmp_path / "plain")
    compacted = {**COMPACT, "segment.bytes": "8000"}
    for d, cfg in ((data_dir, {**compacted, **ENC}), (plain_dir, compacted)):
        with Engine.open(d, keyring=keyring) as eng:
            eng.create_topic("c", 2, cfg)
            produce_updates(eng, "c", 1200, keys=60, seed=3)
    with Engine.open(plain_dir) as eng:
        eng.maintenance.compact("c", force=True)
        plain_after = engine_rows(eng, "c")
    with Engine.open(data_dir, keyring=keyring) as eng:
        before = engine_rows(eng, "c")
        plans = eng.maintenance.compaction_plan("c")
        data_key = eng.keys.topic_keys("c").portable().keys[1][1]
    assert all(not p["skip"] for p in plans)
    values = [v for _, _, _, v, _, _ in before if v is not None]
    keys = sorted({k for _, _, k, _, _, _ in before})
    assert len(values) > 2000 and len(keys) == 60

    r = run_rivven(data_dir, "spark", "compact", "c", "--master", "local[2]", "--json",
                   "--keyring", keyring, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    out = json.loads(r.stdout)
    assert sum(p["records_out"] for p in out["partitions"]) < sum(p["records_in"]
                                                                  for p in out["partitions"])
    with Engine.open(data_dir, keyring=keyring) as eng:
        after = engine_rows(eng, "c")
        status = eng.keys.status("c")[0]
    assert after == expected_after(before, plans)
    assert len(after) < len(before) // 3
    # (offsets differ from the plain copy's: sealed batches are larger, segments roll elsewhere)
    assert latest(after) == latest(plain_after) == latest(before)
    assert status["plaintext"] == {"bytes": 0, "segments": 0, "ranges": []}
    assert [k["version"] for k in status["keys"]] == [1] and status["keys"][0]["bytes"] > 0

    secrets = [data_key, base64.b64encode(data_key)]
    assert plaintext_in([data_dir], values + keys + secrets) == []
    r = run_rivven(data_dir, "key", "status", "c", "--json", check=True)
    shown = json.loads(r.stdout)[0]
    assert shown["plaintext"]["bytes"] == 0 and shown["plaintext"]["segments"] == 0
    assert [(k["version"], k["bytes"] > 0) for k in shown["keys"]] == [(1, True)]
    r = run_rivven(data_dir, "--keyring", keyring, "segment", "verify", "--decrypt")
    assert r.returncode == 0, r.stdout + r.stderr


TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
          "segment.bytes": "1500"}


def make_mixed_topic(data_dir, keyring) -> list[bytes]:
    """Topic ``t``: plaintext records (most of them tiered to the cold store), then records
    sealed with data key v1 (some tiered too), then with v2 after a rotation. Returns every
    value written."""
    values = []

    def produce(eng, n):
        for p in (0, 1):
            for _ in range(0, n, 10):
                batch = [mark(len(values) + j) for j in range(10)]
                values.extend(batch)
                eng.produce("t", [Record(key=b"k%d" % (len(values) % 7), value=v,
                                         timestamp=T0 + len(values)) for v in batch], partition=p)

    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 2, TIERED)
        produce(eng, 200)
        eng.maintenance.tier("t")
        eng.alter_topic_config("t", set=ENC)
        produce(eng, 100)
        eng.maintenance.tier("t")
        eng.keys.rotate("t")
        produce(eng, 60)
    return values


def segment_bytes(root) -> dict[str, bytes]:
    out = {}
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".stats"]  # counters, not data (docs/METRICS.md)
        for n in names:
            if n.endswith((".log", ".index", ".timeindex", ".txnindex", ".json")):
                with open(os.path.join(d, n), "rb") as f:
                    out[os.path.join(d, n)] = f.read()
    return out


def covered(status) -> dict[object, set[tuple[int, str]]]:
    """Data key version (or "plaintext") -> the (partition, tier) pairs it covers."""
    out = {k["version"]: {(r["partition"], r["tier"]) for r in k["ranges"]}
           for k in status["keys"] if k["bytes"]}
    if status["plaintext"]["bytes"]:
        out["plaintext"] = {(r["partition"], r["tier"]) for r in status["plaintext"]["ranges"]}
    return out


@pytest.mark.slow
def test_spark_reencrypt_rewrites_local_and_cold_segments(data_dir, keyring):
    values = make_mixed_topic(data_dir, keyring)
    cold = os.path.join(data_dir, "cold")
    both = {(p, t) for p in (0, 1) for t in ("local", "cold")}
    with Engine.open(data_dir, keyring=keyring) as eng:
        before = engine_rows(eng, "t")  # (cold segments through the tier cache)
        status = eng.keys.status("t")[0]
        data_keys = eng.keys.topic_keys("t").portable().keys
    assert [r[3] for r in sorted(before, key=lambda r: r[5])] == values
    assert covered(status) == {"plaintext": {(0, "cold"), (1, "cold")}, 1: both, 2: {(0, "local"),
                                                                                    (1, "local")}}
    assert plaintext_in([cold], values[:10])  # (the test's premise: plaintext in the cold store)

    r = run_rivven(data_dir, "--keyring", keyring, "spark", "reencrypt", "t", "--master", "local[2]",
                   "--json", timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    out = json.loads(r.stdout)
    assert out["master"] == "local[2]" and out["spark_s"] > 0  # (the rewrites ran on Spark)
    assert out["command"][-2].endswith("reencrypt_job.py")
    assert out["target_version"] == 2 and out["dropped_versions"] == [1]
    assert out["kept_versions"] == [2]
    assert all(p["cold_segments"] and p["local_segments"] and p["cold_rewritten"]
               for p in out["partitions"])

    with Engine.open(data_dir, keyring=keyring) as eng:
        status = eng.keys.status("t")[0]
        assert engine_rows(eng, "t") == before
    assert [k["version"] for k in status["keys"]] == [2] and status["keys"][0]["current"]
    assert status["keys"][0]["bytes"] > 0
    assert status["plaintext"] == {"bytes": 0, "segments": 0, "ranges": []}
    assert covered(status) == {2: both}
    r = run_rivven(data_dir, "--keyring", keyring, "segment", "verify", "--cold", "--decrypt")
    assert r.returncode == 0, r.stdout + r.stderr
    old_key = data_keys[1][1]
    assert plaintext_in([data_dir, cold], values + [old_key, base64.b64encode(old_key)]) == []


def test_spark_reencrypt_dry_run_and_cluster_deploy_mode(data_dir, keyring):
    values = make_mixed_topic(data_dir, keyring)
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("c", 2, {**COMPACT, **ENC})
        produce_updates(eng, "c", 200, keys=5, seed=1)
        status = eng.keys.status()
        data_keys = [k for t in ("t", "c") for _, k in eng.keys.topic_keys(t).portable().keys.values()]
    files_before = segment_bytes(data_dir)

    r = run_rivven(data_dir, "--keyring", keyring, "spark", "reencrypt", "t", "--dry-run",
                   check=True)
    assert b"spark-submit" in r.stdout and b"reencrypt_job.py" in r.stdout
    r = run_rivven(data_dir, "spark", "reencrypt", "t", "--dry-run", "--json", "--keyring", keyring,
                   check=True)
    out = json.loads(r.stdout)
    assert out["dry_run"] and out["would_drop"] == [1] and out["target_version"] == 2
    assert out["command"][-2].endswith("reencrypt_job.py")
    assert all(p["cold_segments"] and p["local_segments"] for p in out["partitions"])

    for args in (("compact", "c"), ("compact", "c", "--dry-run"), ("reencrypt", "t", "--dry-run")):
        r = run_rivven(data_dir, "--keyring", keyring, "spark", *args, "--deploy-mode", "cluster")
        assert r.returncode != 0, args
        assert b"--deploy-mode client" in r.stderr and b"encrypted" in r.stderr, r.stderr

    with Engine.open(data_dir, keyring=keyring) as eng:
        assert eng.keys.status() == status
    staged = {k: v for k, v in segment_bytes(data_dir).items() if "/.compaction/" not in k}
    assert staged == files_before
    # the dry runs' staging folders (plan, engine zip) hold no data key
    secrets = data_keys + [base64.b64encode(k) for k in data_keys]
    assert plaintext_in([os.path.join(data_dir, ".compaction")], secrets) == []
    assert len(values) == 2 * 360
