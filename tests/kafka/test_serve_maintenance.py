"""``rivven serve``'s background maintenance: a running server applies retention, compacts and
tiers with no client writing anything (and with ``--no-maintenance`` it does not), counts it
in the metrics, and stops cleanly."""

import json
import time

import pytest
from helpers import run_rivven
from helpers.kafka import FAST, start_server
from helpers.maintenance import idle_data_dir, seg_count

from engine.errors import InvalidConfig
from engine.kafka.config import ServeConfig

QUICK = (*FAST, "log.retention.check.interval.ms=1000", "log.cleaner.backoff.ms=200",
         "remote.log.manager.task.interval.ms=200")


def test_serve_takes_the_maintenance_settings_among_its_own():
    s = ServeConfig.parse({"log.cleaner.backoff.ms": "2000", "num.partitions": "3"})
    assert s.maintenance.log_cleaner_backoff_ms == 2000 and s.num_partitions == 3
    shown = s.as_kafka()  # (DescribeConfigs of the broker)
    assert shown["log.cleaner.backoff.ms"] == "2000" and shown["num.partitions"] == "3"
    assert shown["log.retention.check.interval.ms"] == "300000" and "maintenance" not in shown
    assert shown["log.cleaner.spark.master"] == "local[*]"
    assert ServeConfig.parse({"maintenance.enable": "false"}).maintenance.kinds() == []
    with pytest.raises(InvalidConfig, match="log.cleaner.backoff.ms"):
        ServeConfig.parse({"log.cleaner.backoff.ms": "x"})
    with pytest.raises(InvalidConfig, match="valid: .*log.cleaner.enable"):
        ServeConfig.parse({"nope": "1"})


def metric(data_dir, name, **labels):
    doc = json.loads(run_rivven(data_dir, "metrics", "--json", check=True).stdout)
    return sum(s["value"] for s in doc.get(name, {}).get("samples", [])
               if all(s["labels"].get(k) == v for k, v in labels.items()))


@pytest.mark.slow
def test_a_running_server_maintains_an_idle_data_dir_and_not_with_no_maintenance(tmp_path):
    on, off = str(tmp_path / "on" / "data"), str(tmp_path / "off" / "data")
    for d in (on, off):
        idle_data_dir(d)
    before = {t: seg_count(on, t) for t in ("t", "c", "r")}
    served = start_server(on, settings=QUICK)
    idle = start_server(off, "--no-maintenance", settings=QUICK)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                seg_count(on, "t") < before["t"] and seg_count(on, "r") < before["r"]
                and "background compaction of c-0" in served.log()):
            time.sleep(0.2)
        log = served.log()
        assert seg_count(on, "t") < before["t"], log
        assert seg_count(on, "r") < before["r"], log
        assert "INFO background retention of t-0: deleted " in log
        assert "INFO background compaction of c-0: in process: dirty ratio 1.00" in log
        assert "INFO background tier of r-0: copied " in log
        # counted while the server lives (its .stats), by kind and outcome
        assert metric(on, "rivven_maintenance_passes_total", kind="retention", outcome="ok") == 1
        assert metric(on, "rivven_maintenance_passes_total", kind="tier", outcome="ok") >= 1
        assert metric(on, "rivven_maintenance_reclaimed_bytes_total", kind="compaction") > 0
        assert metric(on, "rivven_maintenance_round_last_success_timestamp_seconds",
                      kind="retention") > time.time() - 60
        # the server with --no-maintenance, up as long, did nothing of it
        assert {t: seg_count(off, t) for t in before} == before
        assert "background" not in idle.log()
        for s in (served, idle):
            assert s.stop() == 0
            assert s.log().rstrip().endswith("stopped")
        assert "abandoned" not in served.log()
    finally:
        served.kill()
        idle.kill()
    with_engine = run_rivven(on, "retention", "apply", "--dry-run", "--json", check=True)
    assert json.loads(with_engine.stdout)["segments"] == []  # (nothing left for retention)
