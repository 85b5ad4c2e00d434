"""``rivven maintain``: the background maintenance without a listener, as real processes —
one round (``--once``) on an idle data dir, a failing pass reported and backing off, two
maintainers on one data dir sharing the partitions, never one at the same time."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from helpers import RIVVEN, ROOT, run_rivven
from helpers.maintenance import idle_data_dir, seg_count

from engine import Engine

FAST = ["--set", "log.retention.check.interval.ms=1000", "--set", "log.cleaner.backoff.ms=100",
        "--set", "remote.log.manager.task.interval.ms=100"]


def test_once_on_an_idle_data_dir_does_each_kind_and_says_so(data_dir):
    idle_data_dir(data_dir)
    before = {t: seg_count(data_dir, t) for t in ("t", "c", "r")}
    r = run_rivven(data_dir, "maintain", "--once", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = {row["kind"]: row for row in out["passes"]}
    assert sorted(rows) == ["compaction", "retention", "tier"] and out["failed"] == 0
    assert {row["topic"] for row in out["passes"]} == {"t", "c", "r"}
    assert all(row["outcome"] == "ok" and row["reclaimed_bytes"] > 0 for row in out["passes"])
    assert out["reclaimed_bytes"] == sum(row["reclaimed_bytes"] for row in out["passes"])
    assert rows["compaction"]["via"] == "in process"
    assert seg_count(data_dir, "t") < before["t"] and seg_count(data_dir, "r") < before["r"]
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.start_offsets("t")[0] > 0
        assert eng.maintenance.tier_status("r")[0]["cold_segments"] > 0
        assert eng.maintenance.explain_compaction("c")[0]["dirty_ratio"] == 0
    # the next round finds nothing due
    r = run_rivven(data_dir, "maintain", "--once")
    assert r.returncode == 0 and r.stdout == b"", r.stderr
    assert b"nothing to do" in r.stderr


def test_once_prints_a_row_per_pass(data_dir):
    idle_data_dir(data_dir)
    r = run_rivven(data_dir, "maintain", "--once", "--set", "log.cleaner.enable=false",
                   "--set", "remote.log.storage.system.enable=false")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].split()[:5] == ["KIND", "TOPIC", "PARTITION", "OUTCOME", "RECLAIMED"]
    assert len(lines) == 2 and re.match(r"retention +t +0 +ok +\d", lines[1]), lines
    assert re.search(rb"^1 pass, 0 failed, [\d.]+ KiB reclaimed$", r.stderr, re.M), r.stderr


def test_a_failing_pass_is_reported_with_exit_1(data_dir, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # a cold store under a regular file: every write fails
    idle_data_dir(data_dir, f"file://{blocker}/cold")
    r = run_rivven(data_dir, "maintain", "--once", "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    failed = [row for row in out["passes"] if row["outcome"] == "failed"]
    assert [(row["kind"], row["topic"]) for row in failed] == [("tier", "r")]
    assert failed[0]["failures"] == 1 and failed[0]["retry_in_s"] == 30
    assert "Not a directory" in failed[0]["detail"]
    err = r.stderr.decode()
    assert err.startswith("error: 1 of 3 passes failed: tier of r-0: ") and \
        err.count("\n") == 1, err
    assert "Traceback" not in err


def test_bad_settings_are_usage_errors(data_dir):
    for args, text in [(["--set", "log.cleaner.backoff.ms=soon"], "use an integer >= 100"),
                       (["--set", "log.cleaner.threads=2"], "unknown maintenance setting"),
                       (["--set", "nokey"], "use KEY=VALUE")]:
        r = run_rivven(data_dir, "maintain", "--once", *args)
        assert r.returncode == 2 and text in r.stderr.decode(), r.stderr
    r = run_rivven(data_dir, "serve", "--set", "log.cleaner.enable=maybe")
    assert r.returncode == 2 and b"log.cleaner.enable" in r.stderr


def start_maintainer(data_dir, *args):
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    return subprocess.Popen([*RIVVEN, "maintain", "--json", *FAST, *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, [json.loads(line) for line in out.decode().splitlines()], \
        err.decode()


@pytest.mark.slow
def test_a_failing_pass_backs_off_in_a_running_maintainer(data_dir, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    idle_data_dir(data_dir, f"file://{blocker}/cold")
    p = start_maintainer(data_dir, "--set", "maintenance.retry.backoff.ms=500",
                         "--set", "maintenance.retry.backoff.max.ms=1000")
    time.sleep(5)
    rc, rows, err = stop(p)
    assert rc == 0, err
    failed = [r for r in rows if r["kind"] == "tier"]
    # tried every 0.1 s without the backoff (~50 times); with it at 0, 0.5, 1.5, 2.5, 3.5, ...
    assert 3 <= len(failed) <= 7 and {r["outcome"] for r in failed} == {"failed"}, failed
    assert [r["failures"] for r in failed] == list(range(1, len(failed) + 1))
    starts = [r["started_ms"] for r in failed]
    assert all(b - a >= 450 for a, b in zip(starts, starts[1:])), starts
    warned = re.findall(r"WARNING background tier of r-0 failed \((\d+) in a row\): .*Not a "
                        r"directory.*; next try in ([\d.]+) s", err)
    assert warned[:3] == [("1", "0.5"), ("2", "1"), ("3", "1")], err
    assert len(warned) == len(failed)
    # the other kinds were not held up
    assert {(r["kind"], r["outcome"]) for r in rows if r["kind"] != "tier"} == {
        ("retention", "ok"), ("compaction", "ok")}
    assert err.rstrip().endswith("stopped")


WRITER = """
import sys, time
from engine import Engine, Record
end = time.monotonic() + float(sys.argv[2])
with Engine.open(sys.argv[1]) as eng:
    i = 0
    while time.monotonic() < end:
        for t in ("c", "r"):
            for p in range(4):
                eng.produce(t, [Record(key=b"k%d" % ((i + j) % 30), value=b"v%08d" % (i + j))
                                for j in range(20)], partition=p)
        i += 20
        time.sleep(0.01)
"""


@pytest.mark.slow
def test_two_maintainers_never_run_a_pass_on_one_partition_at_once(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("c", 4, {"cleanup.policy": "compact", "segment.bytes": "3000",
                                  "min.cleanable.dirty.ratio": "0.1"})
        eng.create_topic("r", 4, {"segment.bytes": "3000", "retention.bytes": "9000"})
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, data_dir, "8"], env=env, cwd=ROOT)
    a, b = start_maintainer(data_dir), start_maintainer(data_dir)
    assert writer.wait(60) == 0
    time.sleep(1.5)  # (a last round after the writer)
    (rc_a, rows_a, err_a), (rc_b, rows_b, err_b) = stop(a), stop(b)
    assert rc_a == 0 and rc_b == 0, err_a + err_b
    both = [("a", r) for r in rows_a] + [("b", r) for r in rows_b]
    assert not [r for _, r in both if r["outcome"] == "failed"], both
    # busy only by the maintenance lock: never a compaction refused because the other
    # maintainer's changed the partition under it
    assert all(r["detail"].startswith("another pass holds the partition")
               for _, r in both if r["outcome"] == "busy"), both
    ran = [(who, r) for who, r in both if r["outcome"] == "ok"]
    assert {who for who, _ in ran} == {"a", "b"}  # the work was shared
    assert {r["kind"] for _, r in ran} == {"retention", "compaction"}
    by_partition = {}
    for who, r in ran:
        by_partition.setdefault((r["topic"], r["partition"]), []).append(
            (r["started_ms"], r["started_ms"] + r["seconds"] * 1000, who, r["kind"]))
    for key, passes in by_partition.items():
        passes.sort()
        for (s1, e1, w1, k1), (s2, e2, w2, k2) in zip(passes, passes[1:]):
            assert s2 >= e1 - 2, (key, (s1, e1, w1, k1), (s2, e2, w2, k2))  # (ms rounding)
    r = run_rivven(data_dir, "segment", "verify")  # (and the data dir is whole)
    assert r.returncode == 0, r.stdout + r.stderr
