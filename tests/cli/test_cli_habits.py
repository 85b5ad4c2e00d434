"""What Kafka, rpk and kcat users paste from their scripts: accepted where it means the same
here, otherwise one line naming rivven's way (exit 2)."""

import json
import os

import pytest
from helpers import run_rivven
from typer.testing import CliRunner

from engine import Engine, Record
from engine.tools.inspect import inspect_segment
from rivven_cli.main import app

runner = CliRunner()
T0 = 1_800_000_000_000


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


@pytest.fixture
def topic(data_dir):
    """Topic t: 10 records, values 0..9, timestamps T0 + 1000 * i."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"%d" % i, timestamp=T0 + 1000 * i) for i in range(10)])
    return data_dir


def committed(data_dir, group):
    with Engine.open(data_dir, read_only=True) as eng:
        return eng.groups.committed(group)


def usage(r, *words):
    """A usage error: exit 2, one line, saying ``words``."""
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr


# ================================================================ consume
def test_kafka_and_kcat_spellings_of_consume(topic):
    """--topic/-t, --from-beginning, --max-messages, -c, -J mean what they mean there."""
    assert cli(topic, "consume", "--topic", "t", "--from-beginning", "--max-messages", "3"
               ).output == "0\n1\n2\n"
    assert cli(topic, "consume", "-t", "t", "-c", "2").output == "0\n1\n"
    rows = [json.loads(x) for x in cli(topic, "consume", "t", "-J", "-c", "1").output.splitlines()]
    assert rows[0]["offset"] == 0 and rows[0]["value"] == "0"
    usage(cli(topic, "consume"), "--topic")
    usage(cli(topic, "consume", "t", "--from-beginning", "-o", "5"), "--from-beginning", "-o 5")
    usage(cli(topic, "consume", "t", "-c", "1", "-n", "2"), "--num", "-c")


def test_kcat_timestamp_offsets(topic):
    """-o s@TS starts at the first record at or after TS (epoch ms), -o e@TS stops before
    the first one at or after TS."""
    assert cli(topic, "consume", "t", "-o", f"s@{T0 + 7000}").output == "7\n8\n9\n"
    assert cli(topic, "consume", "t", "-o", f"s@{T0 + 2500}", "-o", f"e@{T0 + 5000}"
               ).output == "3\n4\n"
    assert cli(topic, "consume", "t", "-o", f"e@{T0 + 2000}").output == "0\n1\n"
    usage(cli(topic, "consume", "t", "-o", "1", "-o", "2"), "s@TS")
    usage(cli(topic, "consume", "t", "-o", "1:3", "-o", f"e@{T0}"), "e@TS")


def test_quiet_leaves_out_the_notes(topic):
    loud = cli(topic, "consume", "t", "-o", "50")
    assert loud.exit_code == 0 and "note:" in loud.stderr
    quiet = cli(topic, "consume", "t", "-o", "50", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_kcat_settings_that_mean_something_here_are_taken(topic):
    """-X group.id, auto.offset.reset, client.id and isolation.level are rivven's options."""
    r = cli(topic, "consume", "t", "-X", "group.id=g", "-X", "auto.offset.reset=latest",
            "-X", "client.id=me", "-X", "isolation.level=read_committed")
    assert r.exit_code == 0 and r.output == ""
    assert committed(topic, "g") == {("t", 0): 10}  # started at the end: the reset committed
    r = cli(topic, "consume", "t", "-X", "group.id=h", "-X", "auto.offset.reset=smallest",
            "-c", "4")
    assert r.output == "0\n1\n2\n3\n" and committed(topic, "h") == {("t", 0): 4}
    usage(cli(topic, "consume", "t", "-g", "a", "-X", "group.id=b"), "--group a", "group.id")
    usage(cli(topic, "consume", "t", "-X", "auto.offset.reset=sometimes"), "earliest")


def test_kcat_settings_that_mean_nothing_here_name_what_is_taken(topic):
    usage(cli(topic, "consume", "t", "-X", "fetch.wait.max.ms=10"), "fetch.wait.max.ms",
          "group.id", "auto.offset.reset")
    usage(cli(topic, "consume", "t", "-X", "security.protocol=SASL_SSL"), "-d DIR",
          "rivven serve")
    usage(cli(topic, "consume", "t", "-X", "novalue"), "key=value")


# ================================================================ produce
def test_kafka_and_kcat_spellings_of_produce(topic, tmp_path):
    r = run_rivven(topic, "produce", "--topic", "t", "-X", "compression.type=zstd",
                   "-X", "acks=all", "-X", "enable.idempotence=true", input=b"a\nb\n")
    assert r.returncode == 0, r.stderr
    src = tmp_path / "in.txt"
    src.write_bytes(b"c\n")
    r = run_rivven(topic, "produce", "-t", "t", str(src))  # (the argument is then the file)
    assert r.returncode == 0, r.stderr
    assert cli(topic, "consume", "t", "-o", "10").output == "a\nb\nc\n"
    log = os.path.join(topic, "topics", "t", "partition-0", "0" * 20 + ".log")
    codecs = [(b["base_offset"], b["codec"]) for b in inspect_segment(log)]
    assert (10, "zstd") in codecs and codecs[-1][1] != "zstd"  # (-X applies where given)
    r = run_rivven(topic, "produce", "t", "-X", "linger.ms=5", input=b"x\n")
    assert r.returncode == 2 and b"compression.type" in r.stderr
    r = run_rivven(topic, "produce", "t", "-X", "acks=0", input=b"x\n")
    assert r.returncode == 2 and b"acks" in r.stderr


# ================================================================ topic
def test_replication_factor_one_is_accepted_and_more_refused(data_dir):
    assert cli(data_dir, "topic", "create", "a", "-r", "1").exit_code == 0
    assert cli(data_dir, "topic", "create", "b", "--replication-factor", "1", "-p", "2"
               ).exit_code == 0
    usage(cli(data_dir, "topic", "create", "c", "-r", "3"),
          "no replication: one copy, made durable by fsync")
    with Engine.open(data_dir, read_only=True) as eng:
        assert [t.name for t in eng.topics()] == ["a", "b"]


def test_describe_p_prints_the_partitions(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 3)
    r = cli(data_dir, "topic", "describe", "t", "-p")
    assert r.exit_code == 0, r.output
    assert "PARTITION" in r.output and "CONFIG" not in r.output
    rows = json.loads(cli(data_dir, "topic", "describe", "t", "-p", "--json").output)
    assert [p["partition"] for p in rows] == [0, 1, 2]


def test_add_partitions_num_adds_that_many(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 2)
    assert cli(data_dir, "topic", "add-partitions", "t", "--num", "3").exit_code == 0
    assert cli(data_dir, "topic", "add-partitions", "t", "-n", "1").exit_code == 0
    with Engine.open(data_dir, read_only=True) as eng:
        assert eng.topic("t").partitions == 6
    usage(cli(data_dir, "topic", "add-partitions", "t", "--num", "1", "--total", "9"), "--num")
    usage(cli(data_dir, "topic", "add-partitions", "t"), "--num", "--total")


# ================================================================ group
def test_reset_offsets_dry_run_plans_and_changes_nothing(topic):
    with Engine.open(topic) as eng, eng.consumer("g", "t", enable_auto_commit=False) as c:
        c.commit({("t", 0): 5})
    r = cli(topic, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "dry run" in r.stderr and committed(topic, "g") == {("t", 0): 5}
    usage(cli(topic, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
              "--dry-run", "--execute"), "--dry-run", "--execute")
    assert cli(topic, "group", "reset-offsets", "g", "--topic", "t", "--to-earliest",
               "--execute").exit_code == 0
    assert committed(topic, "g") == {("t", 0): 0}


# ================================================================ a broker address
@pytest.mark.parametrize("words", [
    ("consume", "t", "--bootstrap-server", "localhost:9092"),
    ("produce", "t", "--bootstrap-server", "localhost:9092"),
    ("topic", "list", "--bootstrap-server", "localhost:9092"),
    ("--bootstrap-server", "localhost:9092", "topic", "list"),
    ("consume", "-b", "localhost:9092", "-t", "t"),
    ("group", "list", "--brokers", "localhost:9092"),
])
def test_a_broker_address_gets_a_one_line_hint(topic, words):
    r = run_rivven(topic, *words, input=b"")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "-d DIR" in lines[0] and "rivven serve" in lines[0], lines


def test_a_copys_cluster_given_before_the_command_is_shown_where_it_goes(topic):
    r = run_rivven(topic, "-b", "localhost:9092", "kafka", "import", "t")
    assert r.returncode == 2
    assert r.stderr.decode().strip() == ("error: give the cluster after the command: rivven "
                                         "kafka import ... --bootstrap-server localhost:9092")
