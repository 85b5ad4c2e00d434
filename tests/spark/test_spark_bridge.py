"""``rivven spark export | import``: the copy of issue 32 spread over Spark tasks, one per
partition, against a real ``rivven serve`` as the Kafka cluster. Three real spark-submit runs
(local[2]) in one test: out, back, and a rerun that resumes; what is refused is refused
before Spark starts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers import run_rivven
from helpers.bridge import content, fill, kafka_content
from helpers.encryption import ENC
from helpers.kafka import Served, start_server

from engine import Engine, Record
from engine.bridge.export import export
from engine.bridge.importer import import_topics
from engine.bridge.spark_copy import MAX_ID, copy_task, task_id, total


@pytest.fixture
def served(tmp_path) -> Iterator[Served]:
    """A ``rivven serve`` on an empty data dir, on a free port (tests/bridge's)."""
    s = start_server(str(tmp_path / "cluster"))
    try:
        yield s
    finally:
        s.kill()


def spark(data_dir: str, *args: str) -> dict:
    r = run_rivven(data_dir, "spark", *args, "--master", "local[2]", "--json", timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return json.loads(r.stdout)


def tids(data_dir: str) -> list[str]:
    with Engine.open(data_dir, read_only=True) as eng:
        return [t for t in eng.txn.ids() if t.startswith("rivven-mirror-")]


def test_out_and_back_one_task_per_partition_and_a_rerun_resumes(tmp_path, served):
    src, sink = str(tmp_path / "src"), str(tmp_path / "sink")
    with Engine.open(src) as eng:
        fill(eng, "orders", config={"retention.ms": "86400000"})  # (txns, a tombstone, headers)
        want = content(eng, "orders")

    out = spark(src, "export", "orders", "-b", served.bootstrap)
    assert out["direction"] == "export" and out["exactly_once"] and out["tasks"] == 3
    assert out["created"] == ["orders"] and out["group"] == "rivven-mirror-export-orders"
    assert out["records"] == sum(map(len, want.values())) == 25
    assert [(p["partition"], p["records"], p["lag"]) for p in out["partitions"]] == \
        [(p, len(want[p]), 0) for p in range(3)]
    assert kafka_content(served.bootstrap, "orders", 3) == want  # no aborted record
    # each task under a transactional id of its own, the launcher's base id too
    assert tids(served.data_dir) == ["rivven-mirror-export-orders",
                                     *[f"rivven-mirror-export-orders/orders/{p}"
                                       for p in range(3)]]
    # the same group as the one-process copy's: it has nothing left to copy
    assert export_rerun(src, served) == 0

    back = spark(sink, "import", "orders", "-b", served.bootstrap, "--prefix", "back.")
    assert back["records"] == 25 and back["tasks"] == 3 and back["created"] == ["back.orders"]
    with Engine.open(sink) as eng:
        assert content(eng, "back.orders") == want
        assert eng.topic("back.orders").config["retention.ms"] == "86400000"
        assert sorted(eng.groups.committed(back["group"])) == [("back.orders", p)
                                                                for p in range(3)]
    assert "rivven-mirror-import-orders/orders/2" in tids(sink)

    # a record since: the rerun on Spark copies it alone, the one-process import resumes
    # where the Spark import's tasks left the data dir's group
    with Engine.open(src) as eng:
        eng.produce("orders", [Record(b"new", b"1", (), 1_700_000_500_000)], partition=2)
        want = content(eng, "orders")
    again = spark(src, "export", "orders", "-b", served.bootstrap)
    assert again["records"] == 1 and again["created"] == []
    assert [p["records"] for p in again["partitions"]] == [0, 0, 1]
    assert kafka_content(served.bootstrap, "orders", 3) == want
    with Engine.open(sink) as eng:
        assert import_topics(eng, ["orders"], served.bootstrap, prefix="back.")["records"] == 1
        assert content(eng, "back.orders") == want


def export_rerun(src: str, served: Served) -> int:
    with Engine.open(src) as eng:
        return export(eng, ["orders"], served.bootstrap)["records"]


def test_refused_before_spark_starts(tmp_path, served):
    """Bad input is one line and exit 1, and no spark-submit runs (each takes seconds)."""
    src = str(tmp_path / "src")
    with Engine.open(src) as eng:
        fill(eng, "t")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic("small", 1, replication_factor=-1)])["small"].result(30)
    cases = [
        (("export", "nope", "-b", served.bootstrap), "'nope'"),
        (("export", "t", "-b", served.bootstrap, "-p", "3"), "has no partition 3 (it has 3)"),
        (("export", "t", "-b", served.bootstrap, "--to-topic", "small"), "1 partition(s)"),
        (("import", "nope", "-b", served.bootstrap), "does not exist on"),
        (("import", "small", "-b", served.bootstrap, "-p", "1"), "has no partition 1"),
        (("export", "t", "-b", "127.0.0.1:1", "--timeout", "1"), "cannot reach the cluster"),
        (("export", "t", "-b", served.bootstrap, "-X", "no.such.setting=1"), "no.such.setting"),
    ]
    for args, said in cases:
        r = run_rivven(src, "spark", *args, "--master", "local[2]", timeout=120)
        err = r.stderr.decode()  # (librdkafka logs its connection failures there too)
        lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert r.returncode == 1 and len(lines) == 1 and said in lines[0], (args, err)
    with Engine.open(src) as eng:
        assert "small" not in [m.name for m in eng.topics()]  # (nothing imported)
    # no job was submitted: a failed one keeps its Spark log there
    staged = tmp_path / "src" / ".compaction"
    assert not staged.exists() or not any(staged.iterdir())


def test_a_task_stopped_midway_resumes_its_partition_alone(tmp_path, served, keyring):
    """``copy_task`` in this process, as an executor runs it: a first attempt of partition 1
    that stopped at offset 4, then the retry, each way; the other partitions untouched. The
    source topic is encrypted: the task opens the data dir with the keyring it is given."""
    src, sink = str(tmp_path / "src"), str(tmp_path / "sink")
    with Engine.open(src, keyring=keyring) as eng:
        fill(eng, "t", config=ENC)
        want = content(eng, "t")
        # (the launcher's part: the destination made first)
        export(eng, ["t"], served.bootstrap, name="m", partitions={"t": []})
    task = {"topic": "t", "partition": 1, "to_topic": "t",
            "transactional_id": task_id("m", "t", 1)}
    common = {"data_dir": src, "client": {"bootstrap.servers": served.bootstrap},
              "name": "m", "keyring": keyring, "at_least_once": False, "start": None,
              "txn_records": 2, "timeout": 30.0}
    first = copy_task({**common, "direction": "export", "stop": ["offset", 4]}, task)
    rest = copy_task({**common, "direction": "export", "stop": None}, task)
    assert first["transactional_id"] == "rivven-mirror-m/t/1" and first["transactions"] > 1
    assert 0 < first["records"] < len(want[1]) == first["records"] + rest["records"]
    got = kafka_content(served.bootstrap, "t", 3)
    assert got == {0: [], 1: want[1], 2: []}

    with Engine.open(sink) as eng:
        import_topics(eng, ["t"], served.bootstrap, name="m", partitions={"t": []})
    common["keyring"] = None  # (the destination topic is not encrypted)
    first = copy_task({**common, "data_dir": sink, "direction": "import",
                       "stop": ["offset", 3]}, task)
    rest = copy_task({**common, "data_dir": sink, "direction": "import", "stop": None}, task)
    # (offsets 0 to 2 of the cluster's partition: its transactions' markers take some)
    assert 0 < first["records"] < 3 and first["records"] + rest["records"] == len(want[1])
    with Engine.open(sink) as eng:
        assert content(eng, "t") == {0: [], 1: want[1], 2: []}
        assert eng.groups.committed("rivven-mirror-m") == {("t", 1): rest["partitions"][0][
            "position"]}


def test_task_ids_and_the_sum_of_the_tasks():
    assert task_id("n", "orders", 3) == "rivven-mirror-n/orders/3"
    long = task_id("n" * 200, "t" * 249, 7)
    assert long.endswith("/7") and "t" * 30 not in long and len(long) > MAX_ID
    assert len(long.replace("/", "%2F").replace("#", "%23")) <= 255  # (a file name)
    assert task_id("n" * 200, "a" * 249, 7) != long  # (each topic its own)
    row = {"topic": "t", "to_topic": "t", "position": 5, "end": 5, "lag": 0}
    base = {"warnings": ["w0"], "exactly_once": True, "transactional_id": "rivven-mirror-n"}
    got = total([{"records": 5, "bytes": 50, "transactions": 1, "warnings": ["w1"],
                  "partitions": [{**row, "partition": 1, "records": 5}]},
                 {"records": 2, "bytes": 9, "transactions": 2, "warnings": ["w1"],
                  "partitions": [{**row, "partition": 0, "records": 2}]}], base)
    assert (got["records"], got["bytes"], got["transactions"]) == (7, 59, 3)
    assert got["warnings"] == ["w0", "w1"]
    assert [p["partition"] for p in got["partitions"]] == [0, 1]
    assert got["transactional_id"] == "rivven-mirror-n/<topic>/<partition>"
