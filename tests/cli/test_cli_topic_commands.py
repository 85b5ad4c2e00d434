"""The topic commands as rpk users know them: ``topic list`` filters (names, ``--regex``),
``--json`` on the changes, ``--if-exists``/``--if-not-exists``, and cold-store URIs checked when
they are set."""

import json

import pytest
from typer.testing import CliRunner

from engine import Engine
from rivven_cli.main import app

runner = CliRunner()


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


# ---------------------------------------------------------------- topic commands
@pytest.fixture
def three(data_dir):
    for name, p in (("orders-1", 3), ("orders-2", 1), ("other", 1)):
        assert cli(data_dir, "topic", "create", name, "-p", str(p)).exit_code == 0
    return data_dir


def listed(r):
    assert r.exit_code == 0, r.output
    return [t["topic"] for t in json.loads(r.stdout)]


def test_topic_list_names_and_regex_as_rpk(three):
    assert listed(cli(three, "topic", "list", "--json")) == ["orders-1", "orders-2", "other"]
    assert listed(cli(three, "topic", "list", "--json", "-r", "orders-.*")) == [
        "orders-1", "orders-2"]
    assert listed(cli(three, "topic", "list", "--json", "--regex", "orders-1|oth.*")) == [
        "orders-1", "other"]
    assert listed(cli(three, "topic", "list", "--json", "-r", "orders")) == []  # whole names
    assert listed(cli(three, "topic", "list", "--json", "other", "orders-2")) == [
        "orders-2", "other"]
    r = cli(three, "topic", "list", "orders-.*", "--json")  # exact names unless --regex
    assert listed(r) == [] and "add --regex to read it as a regular expression" in r.stderr
    r = cli(three, "topic", "list", "-r", "(")
    assert r.exit_code == 1 and "invalid regular expression" in r.stderr
    r = cli(three, "topic", "list", "-r", "orders-.*")  # the table too
    assert "orders-1" in r.stdout and "other" not in r.stdout


def test_topic_changes_print_json(three):
    r = cli(three, "topic", "create", "new", "-p", "2", "-c", "retention.ms=1000", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["topic"] == "new" and out["partitions"] == 2 and len(out["id"]) == 32
    assert (out["config"], out["created"], out["not_applied"]) == (
        {"retention.ms": "1000"}, True, [])
    out = json.loads(cli(three, "topic", "alter-config", "new", "--set", "retention.ms=5",
                         "--json").stdout)
    assert out == {"topic": "new", "config": {"retention.ms": "5"}}
    out = json.loads(cli(three, "topic", "add-partitions", "new", "--total", "4",
                         "--json").stdout)
    assert out == {"topic": "new", "partitions": 4}
    r = cli(three, "topic", "delete", "new", "--yes", "--json")
    out = json.loads(r.stdout)
    assert (out["topic"], out["deleted"], out["problems"]) == ("new", True, [])
    assert len(out["cold_prefixes"]) == 1
    assert cli(three, "topic", "delete", "new", "--yes", "--json").exit_code == 1


def test_topic_delete_if_exists(three):
    r = cli(three, "topic", "delete", "nope", "--if-exists")
    assert r.exit_code == 0 and "topic nope does not exist: nothing was deleted" in r.stderr
    r = cli(three, "topic", "delete", "nope", "--if-exists", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["deleted"] is False
    r = cli(three, "topic", "delete", "other", "--if-exists", "--yes")
    assert r.exit_code == 0 and r.stdout == "topic other deleted\n"
    assert cli(three, "topic", "delete", "nope").exit_code == 1  # without it: an error
    assert cli(three, "topic", "delete", "../x", "--if-exists").exit_code == 1  # a bad name
    with Engine.open(three) as eng:
        assert eng.delete_topic("nope", if_exists=True)["deleted"] is False


def test_create_if_not_exists_says_what_was_not_changed(three):
    r = cli(three, "topic", "create", "orders-1", "--if-not-exists", "-p", "5")
    assert r.exit_code == 0
    assert ("topic orders-1 exists with 3 partition(s), not 5: the partitions were not "
            "changed") in r.stderr and "add-partitions orders-1 --total 5" in r.stderr
    r = cli(three, "topic", "create", "orders-1", "--if-not-exists", "-p", "5", "-c",
            "retention.ms=1", "--json")
    out = json.loads(r.stdout)
    assert (out["created"], out["partitions"], out["not_applied"]) == (
        False, 3, ["partitions", "config"])
    assert "its config was not changed" in r.stderr
    r = cli(three, "topic", "create", "orders-1", "--if-not-exists", "-p", "3", "--json")
    assert json.loads(r.stdout)["not_applied"] == [] and "note" not in r.stderr
    assert cli(three, "topic", "create", "orders-1", "-p", "3").exit_code == 1


# ---------------------------------------------------------------- cold-store URIs
@pytest.mark.parametrize("uri,message", [
    ("bogus://x", "no cold-store backend knows the scheme bogus://"),
    ("file:///tmp/cold?x=1", "is not a plain URI"),
    ("s3://bucket/a%2Fb", "is not a plain URI"),
    ("s3://bucket/a#b", "is not a plain URI"),
    ("file://relative/path", "is not a plain URI"),
    ("s3://bucket//p", "is not a plain URI"),
    ("/mnt/cold", "must be a URI such as"),
])
def test_a_bad_cold_store_uri_is_refused_when_set(data_dir, uri, message):
    for args in (["topic", "create", "t", "-c", f"remote.storage.uri={uri}"],
                 ["topic", "alter-config", "ok", "--set", f"remote.storage.uri={uri}"]):
        assert cli(data_dir, "topic", "create", "ok", "--if-not-exists").exit_code == 0
        r = cli(data_dir, *args)
        assert r.exit_code == 1 and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    with Engine.open(data_dir) as eng:
        assert [t.name for t in eng.topics()] == ["ok"] and eng.topic("ok").config == {}


@pytest.mark.skipif(any(__import__("importlib").util.find_spec(m) for m in ("s3fs", "gcsfs")),
                    reason="s3fs or gcsfs is installed")
def test_s3_without_s3fs_names_the_extra(data_dir):
    from engine import InvalidConfig

    r = cli(data_dir, "topic", "create", "t", "-c", "remote.storage.uri=s3://bucket/prefix")
    assert r.exit_code == 1 and "pip install 'rivven[s3]'" in r.stderr
    with Engine.open(data_dir) as eng, pytest.raises(InvalidConfig, match=r"rivven\[gcs\]"):
        eng.create_topic("t", config={"remote.storage.uri": "gs://b/p"})


def test_a_good_cold_store_uri_is_taken(data_dir, tmp_path):
    for uri in (f"file://{tmp_path}/cold", "memory://rivven-cold", "hdfs://nn/p", ""):
        r = cli(data_dir, "topic", "create", "t", "--if-not-exists", "-c",
                f"remote.storage.uri={uri}")
        assert r.exit_code == 0, (uri, r.output)
        r = cli(data_dir, "topic", "alter-config", "t", "--set", f"remote.storage.uri={uri}")
        assert r.exit_code == 0, (uri, r.output)


# ---------------------------------------------------------------- as Kafka and rpk users expect
def test_success_lines_go_to_stdout_as_kafkas(data_dir):
    """Kafka's tools print "Created topic T." on stdout: so does every topic change here;
    notes stay on stderr."""
    r = cli(data_dir, "topic", "create", "t", "-p", "2")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "topic t ready (2 partitions)\n", "")
    r = cli(data_dir, "topic", "create", "t", "-p", "3", "--if-not-exists")
    assert r.stdout == "topic t exists (2 partitions)\n" and r.stderr.startswith("note: topic t")
    r = cli(data_dir, "topic", "alter-config", "t", "--set", "retention.ms=5")
    assert (r.stdout, r.stderr) == ("topic t config: retention.ms=5\n", "")
    r = cli(data_dir, "topic", "add-partitions", "t", "--total", "3")
    assert (r.stdout, r.stderr) == ("topic t now has 3 partitions\n", "")
    r = cli(data_dir, "topic", "delete", "t", "--yes")
    assert (r.stdout, r.stderr) == ("topic t deleted\n", "")


@pytest.mark.parametrize("args", [["topic", "create", "t", "-p", "0"],
                                  ["topic", "create", "t", "-p", "abc"],
                                  ["topic", "create", "t", "--partitions", "-1"],
                                  ["topic", "create", "t", "-p", "10001"],
                                  ["topic", "add-partitions", "t", "--total", "0"]])
def test_a_bad_partition_count_is_a_usage_error(data_dir, args):
    """-p 0 and -p abc are the same mistake: a usage error (exit 2) naming the option (the
    engine's own check, InvalidArgument, is for its callers: its bound is the CLI's)."""
    from engine.storage.topics import MAX_PARTITIONS
    from rivven_cli import topic
    assert topic.MAX_PARTITIONS == MAX_PARTITIONS
    r = cli(data_dir, *args)
    assert r.exit_code == 2, r.output
    assert "'--partitions'" in r.stderr or "'--total'" in r.stderr
    assert not cli(data_dir, "topic", "list", "--json").exit_code and not [
        t for t in json.loads(cli(data_dir, "topic", "list", "--json").stdout)]


def test_the_engine_refuses_a_bad_partition_count_too(data_dir):
    """(What test_errors_are_one_line_exit_1 proved through the CLI before the CLI checked
    the count itself.)"""
    from engine.errors import InvalidArgument
    with Engine.open(data_dir) as eng:
        for n in (0, 10_001):
            with pytest.raises(InvalidArgument, match=f"invalid partition count {n}: use 1 to"):
                eng.create_topic("t", n)


def test_topic_list_before_any_data_is_empty_as_rpks(tmp_path):
    """No data dir yet, or an empty directory: an empty list (rpk's), not an error."""
    for d in (tmp_path / "none", tmp_path / "empty"):
        if d.name == "empty":
            d.mkdir()
        r = cli(str(d), "topic", "list", "--json")
        assert (r.exit_code, json.loads(r.stdout)) == (0, []), r.output
        assert "no topics" in r.stderr
        r = cli(str(d), "topic", "list")
        assert (r.exit_code, r.stdout.split()) == (0, ["TOPIC", "PARTITIONS", "RECORDS", "CONFIG"])
        assert not (tmp_path / "none").exists()  # (a read made nothing)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")  # not a data dir: still an error
    assert cli(str(tmp_path / "other"), "topic", "list").exit_code == 1


def test_describe_json_gives_config_as_an_object_as_list_does(data_dir):
    """topic list --json and topic describe --json give "config" the same shape: the topic's
    own settings as an object; describe adds every setting with its source."""
    cli(data_dir, "topic", "create", "t", "-c", "retention.ms=1000", "-c", "cleanup.policy=compact")
    listed = json.loads(cli(data_dir, "topic", "list", "--json").stdout)[0]["config"]
    described = json.loads(cli(data_dir, "topic", "describe", "t", "--json").stdout)
    assert described["config"] == listed == {"retention.ms": "1000", "cleanup.policy": "compact"}
    entries = {e["key"]: (e["value"], e["source"]) for e in described["config_entries"]}
    assert entries["retention.ms"] == ("1000", "topic")
    assert entries["segment.bytes"][1] == "default"
