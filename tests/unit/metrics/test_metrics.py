"""`rivven metrics` checked by Prometheus's own tools: promtool on the text of every kind of
data dir, JSON and the Python dict, the text file, ``metrics serve``, quantiles and rates,
``top``. (A Prometheus server scraping while a producer is killed:
tests/crash/test_metrics_crash.py.)"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from helpers import RIVVEN, ROOT, run_rivven
from helpers.cli import run_in_process
from helpers.metrics import http_get, needs_prometheus, promtool, start_producer
from prometheus_client.parser import text_string_to_metric_families

import engine.metrics as em
from engine import Engine, Record
from engine.metrics.collect import version

TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000", "segment.bytes": "1500"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "3000", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted label items): value} parsed by prometheus_client's parser."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(parsed: dict, name: str, **labels) -> float | None:
    return parsed.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


@pytest.fixture
def everything(data_dir):
    """A data dir with plain topics, a group with lag, a tiered topic (tiered), a compacted
    topic (compacted) and a committed transaction."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("orders", 3)
        eng.produce("orders", [Record(key=b"k%d" % i, value=b"v" * 50) for i in range(300)])
        c = eng.consumer("billing", "orders")
        c.poll(timeout_ms=200, max_records=40)
        c.commit()
        c.close()
        eng.create_topic("archive", 1, TIERED)
        for _ in range(40):
            eng.produce("archive", [Record(key=None, value=b"a" * 100)] * 10)
        eng.maintenance.tier()
        eng.create_topic("users", 1, COMPACT)
        for i in range(300):
            eng.produce("users", [Record(key=b"u%d" % (i % 20), value=b"x" * 40)])
        eng.maintenance.compact("users")
        tp = eng.producer(transactional_id="t1")
        tp.begin()
        tp.produce("orders", [Record(key=b"k", value=b"in a transaction")], partition=0)
        tp.commit()
        tp.close()
    return data_dir


@needs_prometheus
def test_promtool_passes_on_every_kind_of_data_dir_and_values_are_right(everything):
    r = run_rivven(everything, "metrics", check=True)
    check = promtool(r.stdout)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    got = samples(r.stdout.decode())
    with Engine.open(everything, read_only=True) as eng:
        ends = {t: eng.end_offsets(t) for t in ("orders", "archive", "users")}
        lag = {row["partition"]: row["lag"] for row in eng.groups.describe("billing")["partitions"]}
    for p, end in ends["archive"].items():  # every acknowledged record counted once
        assert value(got, "rivven_records_appended_total", topic="archive", partition=p) == end
        assert value(got, "rivven_log_end_offset", topic="archive", partition=p) == end
    # orders: 300 records and one in a transaction (its COMMIT marker takes an offset too)
    assert sum(value(got, "rivven_records_appended_total", topic="orders", partition=p) or 0
               for p in range(3)) == 301 == sum(ends["orders"].values()) - 1
    assert value(got, "rivven_tier_uploads_total", topic="archive") >= 1
    assert value(got, "rivven_log_cold_bytes", topic="archive", partition=0) > 0
    assert value(got, "rivven_tier_runs_total") == 1
    assert value(got, "rivven_tier_last_success_timestamp_seconds") > time.time() - 600
    assert value(got, "rivven_compaction_runs_total", topic="users") == 1
    assert value(got, "rivven_compaction_failures_total", topic="users") == 0
    assert value(got, "rivven_transactions_committed_total") == 1
    assert value(got, "rivven_group_commits_total", group="billing") == 1
    for p, n in lag.items():
        assert value(got, "rivven_group_lag", group="billing", topic="orders", partition=p) == n
    assert value(got, "rivven_wal_fsync_duration_seconds_count") > 0
    assert value(got, "rivven_wal_streams", state="dead") == 0
    assert value(got, "rivven_build_info", version=version(),
                 python=sys.version.split()[0]) == 1
    assert value(got, "rivven_metrics_processes", state="live") == 0  # all exited: merged


def test_json_and_the_python_dict_agree(everything):
    r = run_rivven(everything, "metrics", "--json", check=True)
    doc = json.loads(r.stdout)
    with Engine.open(everything, read_only=True) as eng:
        mine = eng.metrics()
    assert set(doc) == set(mine)
    assert doc["rivven_records_appended_total"] == mine["rivven_records_appended_total"]
    assert doc["rivven_wal_fsync_duration_seconds"]["type"] == "histogram"
    (h,) = doc["rivven_wal_fsync_duration_seconds"]["samples"]
    assert h["buckets"]["+Inf"] == h["count"] > 0


@needs_prometheus
def test_textfile_is_replaced_whole_and_bad_paths_are_one_line_errors(everything, tmp_path):
    out = tmp_path / "tf"
    out.mkdir()
    path = out / "rivven.prom"
    path.write_text("old\n")
    r = run_rivven(everything, "metrics", "--textfile", str(path), check=True)
    assert os.listdir(out) == ["rivven.prom"]  # no temporary file left behind
    assert promtool(path.read_bytes()).returncode == 0
    assert b"rivven_log_end_offset" in path.read_bytes()
    r = run_in_process(everything, "metrics", "--textfile", str(tmp_path / "no" / "such" / "f.prom"))
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert r.stderr.decode().count("\n") == 1 and "--textfile" in r.stderr.decode()


def test_serve_from_python_and_port_errors(everything):
    with Engine.open(everything, read_only=True) as eng, em.serve(eng, port=0) as server:
        body = http_get(server.url)
        assert b"rivven_log_end_offset" in body
        assert promtool(body).returncode == 0 if shutil.which("promtool") else True
        r = run_in_process(everything, "metrics", "serve", "--port", str(server.port))
        assert r.returncode == 1 and b"in use" in r.stderr and b"--port" in r.stderr
        assert b"Traceback" not in r.stderr
    r = run_in_process(everything, "metrics", "serve", "--port", "70000")
    assert r.returncode == 2


def test_metrics_md_lists_every_metric_with_its_type_and_labels():
    from engine.counters.names import all_metrics

    text = (ROOT / "docs" / "METRICS.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for m in all_metrics():
        assert f"| `{m.name}` | {m.kind} | {', '.join(m.labels) or '—'} |" in text, m.name
        assert f"`{m.name}`" in readme, f"{m.name} missing from the README's Monitoring list"


def test_quantiles_and_rates_between_two_documents():
    from engine.metrics.rates import quantile, rates

    assert quantile(0.5, []) is None
    assert quantile(0.5, [(0.001, 0), (0.002, 10), (float("inf"), 10)]) == pytest.approx(0.0015)
    assert quantile(0.99, [(0.001, 0), (0.002, 0), (float("inf"), 4)]) == 0.002

    def doc(appended, fsync_buckets, fsync_sum):
        counts = {"0.001": fsync_buckets[0], "0.002": fsync_buckets[1], "+Inf": fsync_buckets[2]}
        return {
            "rivven_topic_partitions": {"samples": [{"labels": {"topic": "t"}, "value": 2}]},
            "rivven_records_appended_total": {"samples": [
                {"labels": {"topic": "t", "partition": str(p)}, "value": v}
                for p, v in enumerate(appended)]},
            "rivven_group_lag": {"samples": [
                {"labels": {"group": "g", "topic": "t", "partition": "0"}, "value": 7}]},
            "rivven_wal_fsync_duration_seconds": {"samples": [
                {"labels": {}, "buckets": counts, "count": fsync_buckets[2], "sum": fsync_sum}]},
        }

    r = rates(doc([100, 50], (1, 2, 2), 0.002), doc([300, 150], (1, 12, 12), 0.017), 2.0)
    (row,) = r["topics"]
    assert row["produce_per_s"] == 150 and row["lag"] == 7 and row["read_per_s"] == 0
    assert r["fsyncs_per_s"] == 5 and r["fsync_mean_s"] == pytest.approx(0.0015)
    assert 0.001 < r["fsync_p50_s"] <= 0.002
    # a counter that went down (a topic made again, a reset) counts from zero
    r = rates(doc([300, 150], (1, 12, 12), 0.017), doc([10, 0], (0, 1, 1), 0.001), 1.0)
    assert r["topics"][0]["produce_per_s"] == 10


def test_top_shows_the_produce_rate_of_a_running_producer(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
    p = start_producer(data_dir, "t", 400, "exit")
    try:
        r = run_rivven(data_dir, "top", "--interval", "0.5", "--count", "3", "--json",
                       check=True, timeout=120)
    finally:
        p.kill()
        p.wait(30)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == 3
    assert max(x["topics"][0]["produce_per_s"] for x in lines) > 0
    assert any(x["fsyncs_per_s"] > 0 and x["fsync_p99_s"] > 0 for x in lines)
    table = run_rivven(data_dir, "top", "-i", "0.2", "-n", "1", check=True)
    assert b"PRODUCE/s" in table.stdout and b" t " in table.stdout


def test_a_scrape_holds_the_files_of_one_partition_at_a_time(data_dir):
    """Hundreds of partitions under a descriptor limit far below three per partition: each
    one is looked at and closed again."""
    import resource

    with Engine.open(data_dir, sync=False) as eng:
        eng.create_topic("many", 300)
        for p in range(0, 300, 3):
            eng.produce("many", [Record(key=None, value=b"v")], partition=p)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    r = subprocess.run([*RIVVEN, "metrics"], capture_output=True, env=env, cwd=ROOT,
                       timeout=120, preexec_fn=limit)
    assert r.returncode == 0, r.stderr.decode()
    got = samples(r.stdout.decode())
    assert sum(value(got, "rivven_log_end_offset", topic="many", partition=p)
               for p in range(300)) == 100


def test_a_scrape_that_cannot_gather_is_one_line_and_up_zero(everything):
    """(meter.lock held past lock.timeout.ms: a scraper stopped with Ctrl-Z.) Until issue 29
    a retired.json that was a directory did this; it is damage now, set aside (below)."""
    from helpers.fs import holder

    with holder(os.path.join(everything, ".stats", "meter.lock")):
        r = run_rivven(everything, "--lock-timeout-ms", "300", "metrics")
        err = r.stderr.decode()
        errors = [line for line in err.splitlines() if not line.startswith("waiting:")]
        assert r.returncode == 1 and len(errors) == 1 and "meter.lock" in errors[0], err
        with Engine.open(everything, read_only=True, settings={"lock.timeout.ms": "300"}
                         ) as eng, em.serve(eng, port=0) as server:
            got = samples(http_get(server.url).decode())
    assert value(got, "rivven_metrics_up") == 0
    assert value(got, "rivven_build_info", version=version(), python=sys.version.split()[0]) == 1


def dead_process(d: str, stem: str, series: list[tuple[str, dict, list[float]]]) -> str:
    """A dead process's file set in ``d`` (no flock on its keys): its stem's path."""
    import struct

    lines, values = [], []
    for name, labels, vals in series:
        lines.append(f"{len(values)} {json.dumps([name, labels])}\n")
        values += vals
    with open(os.path.join(d, stem + ".keys"), "w") as f:
        f.write("".join(lines))
    with open(os.path.join(d, stem + ".values"), "wb") as f:
        f.write(struct.pack(f"<{len(values)}d", *values))
    return os.path.join(d, stem)


def test_a_damaged_file_of_stats_is_one_warning_and_the_scrape_goes_on(everything):
    """A dead process's file holding 1e300 was scraped and merged into retired.json as that
    value; a FIFO named <stem>.values gave an error naming <stem>.keys and every scrape
    failed until someone removed it; a retired.json that was a directory failed them too."""
    d = os.path.join(everything, ".stats")
    base = samples(run_rivven(everything, "metrics", check=True).stdout.decode())
    orders0 = value(base, "rivven_records_appended_total", topic="orders", partition=0)
    huge = dead_process(d, "m-999999-00000001", [
        ("rivven_records_appended_total", {"topic": "orders", "partition": "0"}, [1e300])])
    fifo = dead_process(d, "m-999999-00000002", [
        ("rivven_records_appended_total", {"topic": "orders", "partition": "0"}, [5.0])])
    os.unlink(fifo + ".values")
    os.mkfifo(fifo + ".values")
    hist = dead_process(d, "m-999999-00000003", [  # buckets not cumulative
        ("rivven_wal_fsync_duration_seconds", {}, [3.0, -1.0] + [0.0] * 15 + [0.01])])
    r = run_rivven(everything, "metrics", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    lines = sorted(err.splitlines())
    assert len(lines) == 3, err
    assert lines[0].startswith(f"warning: {huge}.values: ") and "out of range" in lines[0]
    assert lines[1].startswith(f"warning: {fifo}.values: ") and "a FIFO" in lines[1]
    assert lines[2].startswith(f"warning: {hist}.values: ") and "negative" in lines[2]
    got = samples(r.stdout.decode())
    assert value(got, "rivven_records_appended_total", topic="orders", partition=0) == orders0
    assert value(got, "rivven_metrics_files_set_aside") == 6
    assert value(got, "rivven_metrics_up") == 1
    if shutil.which("promtool"):
        assert promtool(r.stdout).returncode == 0
    retired = open(os.path.join(d, "retired.json")).read()
    assert "1e+300" not in retired and "1e300" not in retired
    # the next scrape is clean; a retired.json that is a directory is set aside too
    retired_path = os.path.join(d, "retired.json")
    os.unlink(retired_path)
    os.mkdir(retired_path)
    os.mkfifo(os.path.join(d, "m-999999-00000004.keys"))
    with Engine.open(everything, read_only=True) as eng, em.serve(eng, port=0) as server:
        body = http_get(server.url, timeout=30)
    got = samples(body.decode())
    assert value(got, "rivven_metrics_up") == 1
    assert value(got, "rivven_metrics_files_set_aside") == 8
    assert os.path.isdir(retired_path + ".damaged")
    assert os.path.exists(os.path.join(d, "m-999999-00000004.keys.damaged"))
    r = run_rivven(everything, "metrics", check=True)
    assert r.stderr == b""
