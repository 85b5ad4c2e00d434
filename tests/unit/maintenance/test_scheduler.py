"""The background maintenance scheduler (engine.maintenance.scheduler) in process: retention of
an idle data dir, compaction once the dirty ratio passes its threshold (in process, or handed
to the Spark launcher past the size threshold), tiering past local retention, one pass per
partition at a time, the backoff of failing passes, metrics and stopping."""

import fcntl
import logging
import os
import threading
import time

import pytest

from engine import Engine, Record
from engine.errors import InvalidConfig
from engine.maintenance.scheduler import MaintenanceConfig, Scheduler, lock_path

DAY = 86_400_000
FAST = {"log.retention.check.interval.ms": "1000", "log.cleaner.backoff.ms": "100",
        "remote.log.manager.task.interval.ms": "100"}


def cfg(**values):
    return MaintenanceConfig.parse({**FAST, **{k.replace("_", "."): v for k, v in values.items()}})


def pdir(data_dir, topic, p=0):
    return os.path.join(data_dir, "topics", topic, f"partition-{p}")


def logs(data_dir, topic, p=0):
    return sorted(f for f in os.listdir(pdir(data_dir, topic, p)) if f.endswith(".log"))


def aged(data_dir, topic="t", partitions=1):
    """Topic ``topic``: 200 records three days old, then 100 fresh ones, with retention off
    while they are written (a writer applies retention itself); then retention.ms=1 day is
    set by a call that opens no partition: nothing deletes the old segments until a pass."""
    now = int(time.time() * 1000)
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, partitions, {"segment.bytes": "1200", "retention.ms": "-1"})
        for p in range(partitions):
            for i in range(0, 300, 10):
                eng.produce(topic, [Record(key=b"k%d" % j, value=b"v%05d" % (i + j),
                                           timestamp=now - 3 * DAY if i < 200 else now)
                                    for j in range(10)], partition=p)
        eng.alter_topic_config(topic, {"retention.ms": str(DAY)})


def write_keys(eng, n, topic="c", keys=5, start=0, partition=0):
    for i in range(start, start + n, 10):
        eng.produce(topic, [Record(key=b"k%d" % ((i + j) % keys),
                                   value=b"v%06d" % (i + j) + b"." * 40)
                            for j in range(10)], partition=partition)


def counter(eng, name, **labels):
    for series, got, values in eng.meter.values():
        if series == name and dict(got) == {k: str(v) for k, v in labels.items()}:
            return values[0]
    return 0.0


# ---------------------------------------------------------------- settings
def test_settings_use_kafkas_names_and_are_checked():
    c = MaintenanceConfig.parse({"log.retention.check.interval.ms": "60000",
                                 "log.cleaner.enable": "false"})
    assert c.log_retention_check_interval_ms == 60000 and c.kinds() == ["retention", "tier"]
    assert MaintenanceConfig.parse({"maintenance.enable": "false"}).kinds() == []
    assert MaintenanceConfig().as_kafka()["log.cleaner.spark.threshold.bytes"] == "1073741824"
    for bad, match in [({"log.retention.check.interval.ms": "5"}, "integer >= 1000"),
                       ({"log.cleaner.enable": "yes"}, "true or false"),
                       ({"log.cleaner.spark.master": " "}, "give a value"),
                       ({"log.cleaner.threads": "2"}, "unknown maintenance setting"),
                       ({"maintenance.retry.backoff.ms": "5000",
                         "maintenance.retry.backoff.max.ms": "1000"}, "lower the first")]:
        with pytest.raises(InvalidConfig, match=match):
            MaintenanceConfig.parse(bad)


# ---------------------------------------------------------------- retention
def test_retention_of_an_idle_data_dir(data_dir):
    aged(data_dir, partitions=2)
    before = [logs(data_dir, "t", p) for p in range(2)]
    with Engine.open(data_dir) as eng:
        s = Scheduler(eng.maintenance, cfg())
        rows = s.run_once()
        assert [(r["kind"], r["partition"], r["outcome"]) for r in rows] == [
            ("retention", 0, "ok"), ("retention", 1, "ok")]
        for p, r in enumerate(rows):
            assert len(logs(data_dir, "t", p)) < len(before[p])
            assert r["reclaimed_bytes"] > 0 and "log start offset 0 -> " in r["detail"]
        assert eng.start_offsets("t")[0] > 0
        assert counter(eng, "rivven_maintenance_passes_total", kind="retention",
                       outcome="ok") == 2
        assert counter(eng, "rivven_maintenance_reclaimed_bytes_total", kind="retention") == \
            sum(r["reclaimed_bytes"] for r in rows)
        assert s.run_once() == []  # nothing more is due: no pass, no row
        assert counter(eng, "rivven_maintenance_passes_total", kind="retention",
                       outcome="ok") == 2


# ---------------------------------------------------------------- compaction
def test_compaction_once_the_dirty_ratio_passes_the_threshold_and_not_before(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "3000",
                                  "min.cleanable.dirty.ratio": "0.5"})
        write_keys(eng, 300, keys=150)
        s = Scheduler(eng.maintenance, cfg())

        def explain():
            return eng.maintenance.explain_compaction("c")[0]

        first = s.run_once(["compaction"])
        assert [(r["kind"], r["outcome"], r["via"]) for r in first] == [
            ("compaction", "ok", "in process")]
        assert "dirty ratio 1.00" in first[0]["detail"] and first[0]["reclaimed_bytes"] > 0
        cleaned = explain()["cleaner"]["cleaned_end"]
        assert cleaned > 0
        # a little more: below the ratio, left alone
        write_keys(eng, 60, keys=150, start=300)
        assert 0 < explain()["dirty_ratio"] < 0.5
        assert s.run_once(["compaction"]) == []
        assert explain()["cleaner"]["cleaned_end"] == cleaned
        # enough to pass it: compacted
        write_keys(eng, 300, keys=150, start=360)
        assert explain()["dirty_ratio"] >= 0.5
        again = s.run_once(["compaction"])
        assert [r["outcome"] for r in again] == ["ok"]
        assert explain()["cleaner"]["cleaned_end"] > cleaned
        assert counter(eng, "rivven_maintenance_passes_total", kind="compaction",
                       outcome="ok") == 2
        # every key's last value survives
        recs = eng.read("c", 0, eng.start_offsets("c")[0], 10**6)
        last = {r.key: r.value for r in recs}
        assert last == {b"k%d" % (i % 150): b"v%06d" % i + b"." * 40 for i in range(660)}


def test_a_partition_past_the_size_threshold_goes_to_the_spark_launcher(data_dir):
    """(The launcher is a stand-in here: tests/spark/test_maintain_spark.py runs the job.)"""
    calls = []

    def spark(topic, partition):
        calls.append((topic, partition))
        return {"partitions": [{"partition": partition, "segments_before": 3,
                                "segments_after": 1, "bytes_in": 9000, "bytes_out": 100,
                                "records_in": 300, "records_out": 5}]}

    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "3000"})
        write_keys(eng, 300)  # partition 0: more than 5000 bytes cleanable
        write_keys(eng, 60, partition=1)  # partition 1: less
        sizes = [sum(x["bytes"] for x in pl["segments"])
                 for pl in eng.maintenance.compaction_plan("c")]
        assert sizes[0] > 5000 > sizes[1] > 0
        s = Scheduler(eng.maintenance, cfg(log_cleaner_spark_threshold_bytes="5000"), spark)
        rows = {r["partition"]: r for r in s.run_once(["compaction"])}
        assert calls == [("c", 0)]
        assert rows[0]["via"] == "spark" and rows[0]["reclaimed_bytes"] == 8900
        assert rows[1]["via"] == "in process" and rows[1]["outcome"] == "ok"
        # -1: never Spark
        write_keys(eng, 300, start=300)
        s = Scheduler(eng.maintenance, cfg(log_cleaner_spark_threshold_bytes="-1"), spark)
        assert [r["via"] for r in s.run_once(["compaction"])] == ["in process"]
        assert calls == [("c", 0)]


# ---------------------------------------------------------------- tiering
@pytest.mark.parametrize("local", [{"local.retention.bytes": "3000"},
                                   {"local.retention.ms": "1"}])
def test_tiering_past_local_retention(data_dir, local):
    with Engine.open(data_dir) as eng:
        eng.create_topic("r", 1, {"remote.storage.enable": "true", "segment.bytes": "1500",
                                  **local})
        eng.create_topic("plain", 1, {"segment.bytes": "1500"})
        for t in ("r", "plain"):
            write_keys(eng, 300, topic=t)
        local_before = logs(data_dir, "r")
        time.sleep(0.01)
        rows = Scheduler(eng.maintenance, cfg()).run_once(["tier"])
        assert [(r["topic"], r["outcome"]) for r in rows] == [("r", "ok")]
        assert "to the cold store" in rows[0]["detail"] and rows[0]["reclaimed_bytes"] > 0
        assert len(logs(data_dir, "r")) < len(local_before)
        st = eng.maintenance.tier_status("r")[0]
        assert st["cold_segments"] > 0
        # every record still reads back, cold ones included
        recs = eng.read("r", 0, 0, 10**6)
        assert [r.offset for r in recs] == list(range(300))
        assert counter(eng, "rivven_maintenance_passes_total", kind="tier", outcome="ok") == 1


# ---------------------------------------------------------------- one pass at a time
def test_a_partition_another_pass_holds_is_left_to_the_next_round(data_dir):
    aged(data_dir, partitions=2)
    with Engine.open(data_dir) as eng:
        meta = eng.topic("t")
        path = lock_path(data_dir, meta.id, 0)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # (as another scheduler's pass holds it)
            s = Scheduler(eng.maintenance, cfg())
            rows = {r["partition"]: r for r in s.run_once()}
            assert rows[0]["outcome"] == "busy" and "another pass holds" in rows[0]["detail"]
            assert rows[1]["outcome"] == "ok"
            assert eng.start_offsets("t")[0] == 0  # untouched
            assert s.backing_off() == []  # (busy is no failure: no backoff)
        rows = s.run_once()
        assert [(r["partition"], r["outcome"]) for r in rows] == [(0, "ok")]
        assert eng.start_offsets("t")[0] > 0
        assert counter(eng, "rivven_maintenance_passes_total", kind="retention",
                       outcome="busy") == 1


def test_a_compaction_whose_partition_changed_under_it_is_busy_not_failed(data_dir, monkeypatch):
    from engine.maintenance import compaction

    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "3000"})
        write_keys(eng, 300)
        real = compaction.swap

        def swap_after_retention(log, plan, *a, **kw):
            # another process's pass got there first: the oldest segment is gone
            eng.maintenance.delete_records("c", {0: plan["segments"][1]["base_offset"]})
            return real(log, plan, *a, **kw)

        monkeypatch.setattr(compaction, "swap", swap_after_retention)
        s = Scheduler(eng.maintenance, cfg())
        rows = s.run_once(["compaction"])
        assert [r["outcome"] for r in rows] == ["busy"] and "changed" in rows[0]["detail"]
        assert s.backing_off() == []
        monkeypatch.setattr(compaction, "swap", real)
        assert [r["outcome"] for r in s.run_once(["compaction"])] == ["ok"]


# ---------------------------------------------------------------- failures back off
def test_a_failing_pass_backs_off_exponentially_and_is_reported(data_dir, tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # a cold store under a regular file: every write fails, even as root
    with Engine.open(data_dir) as eng:
        eng.create_topic("bad", 1, {"remote.storage.enable": "true", "segment.bytes": "1500",
                                    "local.retention.bytes": "3000",
                                    "remote.storage.uri": f"file://{blocker}/cold"})
        eng.create_topic("good", 1, {"remote.storage.enable": "true", "segment.bytes": "1500",
                                     "local.retention.bytes": "3000"})
        write_keys(eng, 300, topic="bad")
        seen = []
        s = Scheduler(eng.maintenance, cfg(maintenance_retry_backoff_ms="300",
                                           maintenance_retry_backoff_max_ms="1200"),
                      on_pass=lambda row: seen.append((time.monotonic(), row)))
        caplog.set_level(logging.INFO, logger="rivven.maintenance")
        t0 = time.monotonic()
        s.start(initial_delay_s=0)
        time.sleep(1.0)
        write_keys(eng, 300, topic="good")  # another topic is tiered meanwhile
        time.sleep(3.0)
        failed = [(t, r) for t, r in list(seen) if r["topic"] == "bad"]
        warned = [m for m in caplog.messages if "background tier of bad-0 failed" in m]
        backoff_gauge = counter(eng, "rivven_maintenance_backoff_partitions", kind="tier")
        n_failed = counter(eng, "rivven_maintenance_passes_total", kind="tier", outcome="failed")
        rounds = [v for n, lab, v in eng.meter.values() if n == "rivven_maintenance_round"
                  and dict(lab) == {"kind": "tier"}][0]
        backing_off = s.backing_off()
        blocker.unlink()
        blocker.mkdir()  # the store mended: the next pass succeeds
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                r["topic"] == "bad" and r["outcome"] == "ok" for _, r in seen):
            time.sleep(0.05)
        assert s.stop(timeout=10)
    assert all(r["outcome"] == "failed" for _, r in failed)
    # every 0.1 s without the backoff (~40 tries in 4 s); with it at 0, 0.3, 0.9, 2.1, 3.3
    assert 3 <= len(failed) <= 6, [round(t - t0, 2) for t, _ in failed]
    gaps = [b[0] - a[0] for a, b in zip(failed, failed[1:])]
    for gap, want in zip(gaps, [0.3, 0.6, 1.2, 1.2, 1.2]):
        assert want - 0.05 <= gap <= want + 1.0, gaps
    assert [r["failures"] for _, r in failed] == list(range(1, len(failed) + 1))
    assert [r["retry_in_s"] for _, r in failed][:4] == [0.3, 0.6, 1.2, 1.2][:len(failed)]
    assert "Not a directory" in failed[0][1]["detail"], failed[0][1]["detail"]
    # reported: a warning per failure naming the partition, the error and the next try
    assert len(warned) >= len(failed) and "next try in 0.3 s" in warned[0]
    assert "Not a directory" in warned[0]
    assert n_failed >= len(failed) and backoff_gauge == 1
    assert rounds[0] > rounds[1] >= len(failed)  # (a run series: rounds, rounds that failed)
    assert backing_off[0]["failures"] >= len(failed) and backing_off[0]["partition"] == 0
    # the other topic was not held up; the mended one succeeded and stopped backing off
    good = [r["outcome"] for _, r in seen if r["topic"] == "good"]
    assert good and set(good) == {"ok"}
    assert [r["outcome"] for _, r in seen if r["topic"] == "bad"][-1] == "ok"
    assert s.backing_off() == []
    assert any("background tier of bad-0 succeeded after" in m for m in caplog.messages)


def test_a_partition_backing_off_is_skipped_until_its_time_and_forgotten_with_its_topic(
        data_dir, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with Engine.open(data_dir) as eng:
        eng.create_topic("bad", 2, {"remote.storage.enable": "true", "segment.bytes": "1500",
                                    "local.retention.bytes": "3000",
                                    "remote.storage.uri": f"file://{blocker}/cold"})
        write_keys(eng, 300, topic="bad")
        s = Scheduler(eng.maintenance, cfg())  # (the default backoff: 30 s)
        rows = s.run_once(["tier"])
        assert [(r["partition"], r["outcome"], r["retry_in_s"]) for r in rows] == [
            (0, "failed", 30)]
        assert s.run_once(["tier"]) == []  # backing off: not tried again now
        assert [b["partition"] for b in s.backing_off()] == [0]
        assert counter(eng, "rivven_maintenance_backoff_partitions", kind="tier") == 1
        eng.delete_topic("bad")
        assert s.run_once(["tier"]) == []
        assert s.backing_off() == []
        assert counter(eng, "rivven_maintenance_backoff_partitions", kind="tier") == 0


# ---------------------------------------------------------------- stopping
def test_stop_lets_the_pass_in_progress_finish_or_abandons_it_after_the_timeout(data_dir,
                                                                                  caplog):
    caplog.set_level(logging.WARNING, logger="rivven.maintenance")
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "3000"})
        write_keys(eng, 300)
        for timeout, finishes in ((0.2, False), (10, True)):
            entered, release = threading.Event(), threading.Event()

            def slow_spark(topic, partition, entered=entered, release=release):
                entered.set()
                release.wait(10)
                return {"partitions": []}

            s = Scheduler(eng.maintenance, cfg(log_cleaner_spark_threshold_bytes="0"),
                          slow_spark)
            s.start(initial_delay_s=0)
            assert entered.wait(10)
            threading.Timer(0.5, release.set).start()
            t0 = time.monotonic()
            assert s.stop(timeout=timeout) is finishes
            took = time.monotonic() - t0
            if finishes:  # waited for the pass, then every thread ended
                assert 0.3 < took < 5 and not any(t.is_alive() for t in s._threads)
                assert not any("abandoned" in m for m in caplog.messages)
            else:  # still running: abandoned, and said so
                assert took < 0.5
                assert any("abandoned" in m and "compaction of c-0" in m
                           for m in caplog.messages)
                release.wait(10)
                for t in s._threads:
                    t.join(10)
                caplog.clear()
