"""Tiered storage: moving segments to a file:// cold store, reads across tiers, damaged cold
objects, restore, retention across tiers, the hot cache and the bounded cold cache. (A tier run
or restore killed at every step: tests/crash/test_tier_crash.py.)"""

import json
import os
import random
import subprocess
import sys
import time

import pytest
from helpers import ROOT, run_rivven
from helpers.cli import run_in_process
from helpers.tiering import cold_objects, everything, expected, load_manifest, local_bases, make, pdir

from engine import Engine, Record
from engine.errors import ColdObjectError, InvalidConfig, OffsetOutOfRange
from engine.segments import tier_manifest

DAY = 86_400_000


def test_config_rules(data_dir):
    with Engine.open(data_dir) as eng:
        with pytest.raises(InvalidConfig, match="local.retention.ms=5000 must not exceed "
                           "retention.ms=1000"):
            eng.create_topic("a", 1, {"retention.ms": "1000", "local.retention.ms": "5000"})
        with pytest.raises(InvalidConfig, match="local.retention.bytes=-1 must not exceed"):
            eng.create_topic("a", 1, {"retention.bytes": "10", "local.retention.bytes": "-1"})
        with pytest.raises(InvalidConfig, match="cannot be combined with cleanup.policy"):
            eng.create_topic("a", 1, {"remote.storage.enable": "true",
                                      "cleanup.policy": "compact"})
        with pytest.raises(InvalidConfig, match="must be a URI"):
            eng.create_topic("a", 1, {"remote.storage.uri": "not a uri"})
        with pytest.raises(InvalidConfig, match="must be true or false"):
            eng.create_topic("a", 1, {"remote.storage.enable": "yes"})
        eng.create_topic("a", 1, {"retention.ms": "-1", "local.retention.ms": "1000"})
        with pytest.raises(InvalidConfig, match="local.retention.ms=1000 must not exceed"):
            eng.alter_topic_config("a", {"retention.ms": "500"})
        assert eng.topic("a").config == {"retention.ms": "-1", "local.retention.ms": "1000"}
    r = run_in_process(data_dir, "topic", "alter-config", "a", "--set", "cleanup.policy=compact",
                       "--set", "remote.storage.enable=true")
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_in_process(data_dir, "spark", "tier", "a")
    assert r.returncode == 1 and b"remote.storage.enable=false" in r.stderr


def test_tier_then_read_everything_back_across_tiers(data_dir):
    make(data_dir, n=400, partitions=2)
    with Engine.open(data_dir) as eng:
        before = {p: everything(eng, p) for p in range(2)}
        assert before == {p: expected(400, p) for p in range(2)}
        plan = eng.maintenance.tier("t", dry_run=True)
        assert plan["tasks"] > 4 and not cold_objects(data_dir)  # a dry run moves nothing
        out = eng.maintenance.tier("t")
        for part in out["partitions"]:
            assert part["uploaded"] and len(part["local_deleted"]) == len(part["uploaded"])
        status = eng.maintenance.tier_status("t")
    for p, st in enumerate(status):
        locals_ = local_bases(data_dir, p)
        assert st["cold_start_offset"] == 0 and st["cold_end_offset"] == locals_[0]
        assert st["local_start_offset"] == locals_[0] and st["local_end_offset"] == 400
        assert st["log_start_offset"] == 0
        size = sum(os.path.getsize(os.path.join(pdir(data_dir, p), f"{b:020d}.log"))
                   for b in locals_)
        assert st["local_bytes"] == size and size - os.path.getsize(
            os.path.join(pdir(data_dir, p), f"{locals_[-1]:020d}.log")) <= 3000
        entries = load_manifest(pdir(data_dir, p))
        assert [e.base_offset for e in entries][0] == 0
        assert all(a.next_offset == b.base_offset for a, b in zip(entries, entries[1:]))
    # another process reads it all, cold then warm (CLI), and so does a fresh engine
    r = run_rivven(data_dir, "consume", "t", "-p", "1", "-o", "beginning", "-f", "%o %v\n",
                   check=True)
    assert r.stdout.decode().split("\n")[:-1] == [f"{o} {v.decode()}" for o, _, v in before[1]]
    with Engine.open(data_dir, read_only=True) as eng:
        assert {p: everything(eng, p) for p in range(2)} == before
        assert eng.read("t", 0, 123, 1)[0].offset == 123  # a seek into a cold segment
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"cold segment(s)" in r.stderr and b"OK" in r.stderr


def test_offsets_for_times_cross_tiers(data_dir):
    now = int(time.time() * 1000)
    make(data_dir, n=300, ts=lambda i: now - DAY + i * 1000)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
        first_local = local_bases(data_dir)[0]
        assert first_local > 50
        for off in (0, 37, 50, first_local - 1, first_local, 299):
            assert eng.offset_for_time("t", 0, now - DAY + off * 1000) == off
        assert eng.offset_for_time("t", 0, now + 1000) is None
    r = run_rivven(data_dir, "offsets", "t", "--time", str(now - DAY + 42_000), "--json",
                   check=True)
    assert "42" in r.stdout.decode()


def test_a_topic_without_remote_storage_is_left_alone(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("plain", 1, {"segment.bytes": "1500"})
        for _ in range(10):
            eng.produce("plain", [Record(value=b"x" * 100) for _ in range(10)])
        make(data_dir, n=200)
        out = eng.maintenance.tier()
        assert {p["topic"] for p in out["partitions"]} == {"t"}
    assert len(local_bases(data_dir, topic="plain")) > 1


def test_damaged_and_missing_cold_objects(data_dir):
    make(data_dir, n=300)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
    entries = load_manifest(pdir(data_dir))
    victim = entries[1].url(".log")[len("file://"):]
    with open(victim, "r+b") as f:
        f.seek(80)
        b = f.read(1)
        f.seek(80)
        f.write(bytes([b[0] ^ 0x10]))
    os.unlink(entries[2].url(".index")[len("file://"):])
    with Engine.open(data_dir) as eng:
        assert eng.read("t", 0, 0, 10)[0].offset == 0  # the intact first segment
        with pytest.raises(ColdObjectError, match=f"cold object file://{victim} is damaged"):
            eng.read("t", 0, entries[1].base_offset, 10)
        with pytest.raises(ColdObjectError, match="is missing"):
            eng.read("t", 0, entries[2].base_offset, 10)
        rows = eng.maintenance.verify_cold("t")
    problems = [f["problem"] for f in rows[0]["findings"]]
    assert len(problems) == 2 and victim in problems[0] and "missing" in problems[1]
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 3
    assert victim.encode() in r.stdout and b"2 problem(s) found" in r.stderr
    r = run_rivven(data_dir, "consume", "t", "-o", "beginning")
    assert r.returncode == 3 and b"Traceback" not in r.stderr and victim.encode() in r.stderr
    # a damaged manifest: a clear error for reads of cold offsets, local reads still work
    with open(tier_manifest.path(pdir(data_dir)), "r+b") as f:
        f.write(b"{{{{")
    with Engine.open(data_dir) as eng:
        first_local = local_bases(data_dir)[0]
        assert eng.read("t", 0, first_local, 1)[0].offset == first_local
        with pytest.raises(Exception, match="tier manifest .* is damaged"):
            eng.maintenance.verify_cold("t")


def test_restore_brings_segments_back(data_dir):
    make(data_dir, n=400)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
    entries = load_manifest(pdir(data_dir))
    cut = entries[len(entries) // 2]
    before_local = local_bases(data_dir)
    r = run_rivven(data_dir, "tier", "restore", "t", "--from", str(cut.base_offset + 3),
                   "--dry-run", "--json", check=True)
    plan = json.loads(r.stdout)["partitions"][0]
    assert [s["base_offset"] for s in plan["segments"]] == [
        e.base_offset for e in entries if e.base_offset >= cut.base_offset]
    assert local_bases(data_dir) == before_local  # a dry run changes nothing
    r = run_rivven(data_dir, "tier", "restore", "t", "--from", str(cut.base_offset + 3),
                   check=True)
    assert b"restored" in r.stderr and b"remote.storage.enable=true" in r.stderr
    now_local = local_bases(data_dir)
    assert now_local[0] == cut.base_offset and now_local[-len(before_local):] == before_local
    left = load_manifest(pdir(data_dir))
    assert left == [e for e in entries if e.base_offset < cut.base_offset]
    assert len(cold_objects(data_dir)) == 3 * len(left)
    with Engine.open(data_dir) as eng:
        assert everything(eng) == expected(400)
    r = run_rivven(data_dir, "segment", "verify", "--cold")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_in_process(data_dir, "tier", "restore", "t", "--from", "x")
    assert r.returncode == 2 and b"is not a position: use beginning, N" in r.stderr


def test_retention_deletes_from_the_cold_store(data_dir):
    now = int(time.time() * 1000)
    make(data_dir, n=400, ts=lambda i: now - 3 * DAY if i < 200 else now,
         cfg={"retention.ms": str(7 * DAY)})
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
        entries = load_manifest(pdir(data_dir))
        assert entries and len(cold_objects(data_dir)) == 3 * len(entries)
        eng.alter_topic_config("t", {"retention.ms": str(DAY), "local.retention.ms": "-2"})
        rows = eng.maintenance.apply_retention("t")
    assert rows and all(r["tier"] == "cold" and r["reason"] == "time" for r in rows)
    new_start = rows[-1]["new_log_start_offset"]
    assert 150 <= new_start <= 200
    left = load_manifest(pdir(data_dir))
    assert all(e.next_offset > new_start for e in left)
    assert len(cold_objects(data_dir)) == 3 * len(left)
    with Engine.open(data_dir) as eng:
        assert eng.start_offsets("t") == {0: new_start}
        with pytest.raises(OffsetOutOfRange):
            eng.read("t", 0, 0)
        assert everything(eng) == expected(400)[new_start:]
    # by size, over both tiers: delete-records style start moves drop cold entries too
    with Engine.open(data_dir) as eng:
        rows = eng.maintenance.delete_records("t", {0: 300})
        assert eng.start_offsets("t") == {0: 300}
    assert all(e.next_offset > 300 for e in load_manifest(pdir(data_dir)))


def test_unreferenced_objects_are_collected_and_topic_delete_removes_cold_data(data_dir):
    make(data_dir, n=300)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
        objs = cold_objects(data_dir)
        prefix = os.path.dirname(objs[0])
        for name in ("00000000000000009999-deadbeef.log", "00000000000000000000-x.log.part-1"):
            with open(os.path.join(prefix, name), "wb") as f:
                f.write(b"junk")
        out = eng.maintenance.tier("t")
        assert len(out["partitions"][0]["orphans_removed"]) == 2
        assert cold_objects(data_dir) == objs
        eng.delete_topic("t")
    assert cold_objects(data_dir) == []


def test_hot_cache_serves_tailing_readers(data_dir):
    with Engine.open(data_dir, settings={"hot.max.bytes": "100000"}) as eng:
        eng.create_topic("t", 1)
        seen = []
        for i in range(200):
            eng.produce("t", [Record(value=b"v%05d" % (i * 5 + j)) for j in range(5)])
            seen += [r.value for r in eng.read("t", 0, len(seen), 1000)]
        st = eng.maintenance.tier_status("t")[0]
        assert seen == [b"v%05d" % i for i in range(1000)]
        assert st["hot_hits"] >= 199 and st["hot_hit_rate"] > 0.9 and 0 < st["hot_bytes"] <= 100000
        # another process appends: the gap restarts the run, reads stay exact
        run_rivven(data_dir, "produce", "t", input=b"a\nb\n", check=True)
        eng.produce("t", [Record(value=b"c")])
        assert [r.value for r in eng.read("t", 0, 998, 10)] == [b"v00998", b"v00999", b"a", b"b",
                                                               b"c"]
        eng.checkpoint()
        r = run_rivven(data_dir, "tier", "status", "--json", check=True)
        other = json.loads(r.stdout)[0]  # published by this live process at its checkpoint
        assert other["hot_bytes"] > 0 and other["hot_hits"] >= 199
    with Engine.open(data_dir, settings={"hot.max.bytes": "0"}) as eng:
        assert eng.hot is None
        assert len(eng.read("t", 0, 0, 2000)) == 1003


def test_the_cold_cache_is_bounded(data_dir):
    make(data_dir, n=600)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
    entries = load_manifest(pdir(data_dir))
    biggest = max(e.bytes + e.index_bytes + e.timeindex_bytes for e in entries)
    bound = 3 * biggest
    cache = os.path.join(data_dir, ".tier-cache")
    with Engine.open(data_dir, settings={"tier.cache.max.bytes": str(bound)}) as eng:
        for _ in range(2):
            assert everything(eng) == expected(600)
            held = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(cache)
                       for n in ns)
            assert held <= bound
        assert eng.cold_cache.downloads >= 2 * len(entries) - 3  # evicted, fetched again
    with Engine.open(data_dir) as eng:  # a fresh engine reuses what is cached
        random.seed(1)
        e = random.choice(entries)
        assert eng.read("t", 0, e.base_offset, 1)[0].offset == e.base_offset


READER_CHILD = """
import sys
from engine import Engine
want = [b"p0-v%05d" % i for i in range(int(sys.argv[2]))]
rounds = 0
with Engine.open(sys.argv[1], read_only=True) as eng:
    while True:
        got, off = [], 0
        while True:
            recs = eng.read("t", 0, off, 37)
            if not recs:
                break
            got += [r.value for r in recs]
            off = recs[-1].offset + 1
        assert got == want, (len(got), got[:3])
        rounds += 1
        if rounds > 3 and open(sys.argv[3]).read() == "done":
            break
print(rounds)
"""


def test_readers_in_other_processes_keep_reading_while_segments_move(data_dir, tmp_path):
    make(data_dir, n=600)
    flag = tmp_path / "flag"
    flag.write_text("")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    readers = [subprocess.Popen([sys.executable, "-c", READER_CHILD, data_dir, "600",
                                 str(flag)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) for _ in range(2)]
    time.sleep(0.5)
    with Engine.open(data_dir) as eng:
        for _ in range(4):  # tier, bring half back, tier again: files come and go under them
            eng.maintenance.tier("t")
            eng.maintenance.tier_restore("t", from_offset=300)
        eng.maintenance.tier("t")
    flag.write_text("done")
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err.decode()[-2000:]
        assert int(out) > 3


def test_any_fsspec_store_works_memory_uri(data_dir):
    """The generic fsspec path (what s3://, gs://, hdfs:// use), on fsspec's in-process
    memory:// file system."""
    make(data_dir, n=300, cfg={"remote.storage.uri": "memory://rivven-cold"})
    with Engine.open(data_dir) as eng:
        out = eng.maintenance.tier("t")
        assert out["partitions"][0]["uploaded"] and not os.path.exists(
            os.path.join(data_dir, "cold"))
        entries = load_manifest(pdir(data_dir))
        assert all(e.object.startswith("memory://rivven-cold/t-") for e in entries)
        assert everything(eng) == expected(300)
        assert eng.maintenance.verify_cold("t")[0]["findings"] == []
        import fsspec
        fs = fsspec.filesystem("memory")
        fs.pipe(entries[0].url(".log")[len("memory://"):], b"tampered")
        findings = eng.maintenance.verify_cold("t")[0]["findings"]
        assert len(findings) == 1 and "holds 8 bytes" in findings[0]["problem"]
        fs.rm(entries[0].url(".log")[len("memory://"):])
        eng.maintenance.tier_restore("t", from_offset=entries[1].base_offset)
        assert local_bases(data_dir)[0] == entries[1].base_offset
        eng.delete_topic("t")
        assert fs.find("/rivven-cold") == []


def test_a_changed_store_uri_keeps_old_copies_readable_and_delete_removes_both(data_dir,
                                                                                tmp_path):
    make(data_dir, n=300)
    other = tmp_path / "elsewhere"
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
        first = len(load_manifest(pdir(data_dir)))
        eng.alter_topic_config("t", {"remote.storage.uri": f"file://{other}"})
        for i in range(300, 500, 10):
            eng.produce("t", [Record(key=b"k%d" % ((i + j) % 7), value=b"p0-v%05d" % (i + j))
                              for j in range(10)])
        eng.maintenance.tier("t")
        entries = load_manifest(pdir(data_dir))
        assert entries[0].object.startswith(f"file://{data_dir}/cold/")
        assert entries[-1].object.startswith(f"file://{other}/") and len(entries) > first
        assert everything(eng) == expected(500)
        eng.delete_topic("t")
    assert cold_objects(data_dir) == []
    assert [f for _, _, fs in os.walk(other) for f in fs] == []


def test_hot_cache_under_group_commit_returns_exactly_the_log(data_dir):
    import threading
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)

        def work(t):
            for i in range(150):
                eng.produce("t", [Record(value=b"%d-%d-%d" % (t, i, j)) for j in range(3)])

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        seen = []
        while any(th.is_alive() for th in threads) or len(seen) < 1800:
            seen += [(r.offset, r.value) for r in eng.read("t", 0, len(seen), 100)]
        for th in threads:
            th.join()
        assert eng.maintenance.tier_status("t")[0]["hot_hits"] > 0
    with Engine.open(data_dir, settings={"hot.max.bytes": "0"}) as eng:
        assert [(r.offset, r.value) for r in eng.read("t", 0, 0, 5000)] == seen
    assert sorted(v for _, v in seen) == sorted(b"%d-%d-%d" % (t, i, j) for t in range(4)
                                               for i in range(150) for j in range(3))


def test_guards_compaction_lost_manifest_and_empty_dry_run(data_dir):
    make(data_dir, n=300)
    with Engine.open(data_dir) as eng:
        r = run_rivven(data_dir, "spark", "tier", "--dry-run")
        assert r.returncode == 0 and b"spark-submit" in r.stdout  # something to do
        eng.maintenance.tier("t")
        r = run_rivven(data_dir, "spark", "tier", "--dry-run")
        assert r.returncode == 0 and b"spark-submit" not in r.stdout
        assert b"nothing to tier" in r.stderr
        eng.alter_topic_config("t", {"remote.storage.enable": "false"})
        with pytest.raises(InvalidConfig, match="in the cold store, which compaction"):
            eng.alter_topic_config("t", {"cleanup.policy": "compact"})
        eng.alter_topic_config("t", {"remote.storage.enable": "true"})
        objs = cold_objects(data_dir)
        os.rename(tier_manifest.path(pdir(data_dir)), os.path.join(data_dir, "saved.json"))
        eng.maintenance.tier("t")  # a lost manifest: nothing in the cold store is collected
        assert cold_objects(data_dir) == objs
        os.rename(os.path.join(data_dir, "saved.json"), tier_manifest.path(pdir(data_dir)))
        assert everything(eng) == expected(300)


def test_hot_cache_bookkeeping_stays_bounded(data_dir):
    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "20000"})
        for _ in range(5000):  # many rolls: every roll clears the partition's run
            eng.produce("t", [Record(value=b"x" * 50)])
        hot = eng.hot
        assert len(hot._order) <= 2 * hot._live + 1024 and hot.bytes <= 20000
        assert len(eng.read("t", 0, 4990, 100)) == 10


def test_a_txnindex_is_tiered_restored_and_removed_with_its_segment(data_dir):
    """A segment's aborted-transaction index travels with it: copied and recorded in the
    manifest, checked, brought back by a restore, fetched into the cold cache, and removed
    with the segment's other objects."""
    from engine.segments import filenames
    from engine.segments.txn_index import AbortedTxn, TxnIndex, read_entries
    from engine.tiering.cache import download_segment

    make(data_dir)
    base = local_bases(data_dir)[1]
    ix = TxnIndex(os.path.join(pdir(data_dir), f"{base:020d}.txnindex"), base)
    ix.append(AbortedTxn(3, base, base + 2, base))
    ix.sync()
    ix.close()
    with open(ix.path, "rb") as f:
        ix_first_byte = f.read(1)
    with Engine.open(data_dir) as eng:
        eng.maintenance.tier("t")
        (entry,) = [e for e in load_manifest(pdir(data_dir)) if e.base_offset == base]
        assert entry.txnindex_bytes == 40 and entry.suffixes()[-1] == ".txnindex"
        assert [c for c in cold_objects(data_dir) if c.endswith(".txnindex")] == \
            [entry.url(".txnindex").removeprefix("file://")]
        others = [e for e in load_manifest(pdir(data_dir)) if e.base_offset != base]
        assert others and all(e.txnindex_bytes == 0 and len(e.suffixes()) == 3 for e in others)
        (row,) = eng.maintenance.verify_cold("t")
        assert row["findings"] == [] and row["bytes"] == sum(
            e.bytes + e.index_bytes + e.timeindex_bytes for e in others + [entry]) + 40
        with open(entry.url(".txnindex").removeprefix("file://"), "r+b") as f:
            f.write(b"\xff")  # damage only the .txnindex: found
        (row,) = eng.maintenance.verify_cold("t")
        assert [f["object"] for f in row["findings"]] == [entry.url(".txnindex")]
        with open(entry.url(".txnindex").removeprefix("file://"), "r+b") as f:
            f.write(ix_first_byte)
        dest = os.path.join(data_dir, "fetched")
        os.makedirs(dest)
        download_segment(entry, dest)
        assert read_entries(filenames.path(dest, base, filenames.TXNINDEX), base)[0] == \
            [AbortedTxn(3, base, base + 2, base)]
        raw = json.loads(open(tier_manifest.path(pdir(data_dir))).read())
        assert sum("txnindex_bytes" in s for s in raw["segments"]) == 1  # only where there is one
        eng.maintenance.tier_restore("t", from_offset=0)
    assert read_entries(os.path.join(pdir(data_dir), f"{base:020d}.txnindex"), base)[0] == \
        [AbortedTxn(3, base, base + 2, base)]
    assert not [c for c in cold_objects(data_dir) if c.endswith(".txnindex")]
