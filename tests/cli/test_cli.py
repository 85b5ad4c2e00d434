"""The CLI through Typer's CliRunner and as real subprocesses (an error in a real process is one
line, exit 1; a follower sees another process); the README's commands run."""

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import ROOT, run_rivven
from helpers.cli import run_in_process
from typer.testing import CliRunner

from rivven_cli.main import app

runner = CliRunner()


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


def all_commands():
    """Every leaf command as its words, e.g. ('topic', 'create')."""
    import typer.main

    group = typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            out += [((name, sub), c) for sub, c in cmd.commands.items()]
        else:
            out.append(((name,), cmd))
    return out


def test_every_command_has_help_and_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for words, cmd in all_commands():
        assert cmd.help, f"rivven {' '.join(words)} has no help text"
        assert f"rivven {' '.join(words)}" in readme, f"rivven {' '.join(words)} not in README"
        r = runner.invoke(app, [*words, "--help"])
        assert r.exit_code == 0


def help_at_80_columns(words) -> str:
    r = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"},
                      prog_name="rivven")
    assert r.exit_code == 0, r.output
    return r.stdout


def test_help_at_80_columns_reads_well():
    """Every command's --help at 80 columns: metavars that say what a value is (TOPIC, N,
    KEY=VALUE; not Typer's <str> or {topic}), no text cut with "…", the description's
    paragraphs wrapped by the terminal (no line broken where the docstring was), and
    produce's many options in panels by subject, the common ones first."""
    for words, _ in all_commands():
        out = help_at_80_columns(words)
        assert max(len(line) for line in out.splitlines()) <= 80, words
        assert not re.findall(r"<[a-z ]+>|\{[a-z_]+\}|…", out), (words, out)
        usage = next(line for line in out.splitlines() if "Usage:" in line)
        assert re.fullmatch(r" Usage: rivven [a-z -]+ \[OPTIONS\]( \[?[A-Z_]+(\.\.\.)?\]?(\.\.\.)?)*",
                            usage.rstrip()), usage
        lines = out.splitlines()
        text = lines[lines.index(usage) + 1:next(i for i, line in enumerate(lines)
                                                 if line.startswith("╭"))]
        for a, b in zip(text, text[1:]):  # a line ends early only where a paragraph ends
            if a.strip() and b.strip():
                assert len(a.rstrip()) + 1 + len(b.split()[0]) > 78, (words, a, b)
    create = help_at_80_columns(["topic", "create"])
    assert "Usage: rivven topic create [OPTIONS] NAME" in create
    assert re.search(r"--partitions\s+-p\s+N \[1<=x<=10000\]", create)
    produce = help_at_80_columns(["produce"])
    assert "Usage: rivven produce [OPTIONS] [TOPIC] [FILE]" in produce
    panels = re.findall(r"╭─ ([A-Za-z ]+?) ─", produce)
    assert panels == ["Arguments", "Options", "Batches and compression", "Input formats",
                      "Idempotence and transactions"]
    assert produce.count("\n") < 110  # (136 in one panel)
    first = produce[produce.index("╭─ Options"):produce.index("╭─ Batches")]
    assert all(o in first for o in ("--key ", "--partition", "--file", "--quiet"))
    assert "│ --transactional-id" not in first and "│ --input" not in first
    assert "Usage: rivven consume [OPTIONS] [TOPIC]..." in help_at_80_columns(["consume"])


def test_the_tour_comparison_can_fail():
    """The normalization keeps what a run must reproduce: a count, a name, a line."""
    tour = _tour_module()
    a = "produced 2 records (45 B) to orders in 0.00 s (479 records/s)"
    assert tour.normalize("x", a) == tour.normalize(
        "x", "produced 2 records (45 B) to orders in 1.25 s (1,600 records/s)")
    assert tour.normalize("x", a) != tour.normalize("x", a.replace("2 records", "3 records"))
    assert tour.normalize("x", "a\nb") != tour.normalize("x", "a")
    assert tour.normalize("x", "topic id: 94fc4afee2b34f679a5df1aa3156688f at "
                          "2026-11-26T18:56:24.406Z") == tour.normalize(
        "x", "topic id: 0123456789abcdef0123456789abcdef at 2027-01-02T03:04:05.006Z")
    assert tour.normalize("rivven bench produce", "produce 200000 1,743,135") == \
        tour.normalize("rivven bench produce", "produce 200000 2,001,000")
    assert tour.exit_code("error: topic 'nope' does not exist") == 1


def _tour_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_tour", ROOT / "scripts" /
                                                  "readme_tour.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_version_and_usage_errors(data_dir):
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("rivven ")
    assert runner.invoke(app, ["topic", "create"]).exit_code == 2
    assert cli(data_dir, "consume", "t", "--key-encoding", "rot13").exit_code == 2


@pytest.mark.parametrize("args,message", [
    (["consume", "missing"], "does not exist"),
    (["topic", "create", "../x"], "invalid topic name"),
    (["topic", "create", ""], "invalid topic name"),
    (["topic", "create", "a" * 250], "invalid topic name"),
    (["topic", "create", "t", "-c", "segment.bytes=abc"], "invalid value 'abc' for segment.bytes"),
    (["topic", "create", "t", "-c", "nope=1"], "unknown topic config 'nope'"),
])
def test_errors_are_one_line_exit_1(data_dir, args, message):
    assert cli(data_dir, "topic", "create", "exists").exit_code == 0
    r = cli(data_dir, *args)
    err = r.stderr
    assert r.exit_code == 1, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_error_in_a_real_process_is_one_line(data_dir):
    run_rivven(data_dir, "topic", "create", "exists", check=True)
    r = run_rivven(data_dir, "consume", "missing")
    err = r.stderr.decode()
    assert r.returncode == 1 and "does not exist" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_existing_topic_and_bad_data_dir(tmp_path, data_dir):
    run_in_process(data_dir, "topic", "create", "t", check=True)
    r = run_in_process(data_dir, "topic", "create", "t")
    assert r.returncode == 1 and b"already exists" in r.stderr
    assert run_in_process(data_dir, "topic", "create", "t", "--if-not-exists").returncode == 0
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("hi")
    r = run_in_process(str(junk), "topic", "create", "t")
    assert r.returncode == 1 and b"not a rivven data dir" in r.stderr
    assert os.listdir(junk) == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = run_in_process(str(afile), "topic", "list")
    assert r.returncode == 1 and b"Traceback" not in r.stderr


def test_produce_record_too_large_names_the_line(data_dir):
    run_in_process(data_dir, "topic", "create", "t", "-c", "max.message.bytes=1000", check=True)
    lines = b"a\nb\n" + b"x" * 2000 + b"\nc\n"
    r = run_in_process(data_dir, "produce", "t", "--batch-records", "1", input=lines)
    assert r.returncode == 1 and b"line 3" in r.stderr
    assert run_in_process(data_dir, "consume", "t").stdout == b"a\nb\n"


def test_produce_malformed_json_names_the_line(data_dir):
    run_in_process(data_dir, "topic", "create", "t", check=True)
    lines = b'{"value": "ok"}\n{"value": null, "key": "k"}\n{not json}\n{"value": "never"}\n'
    r = run_in_process(data_dir, "produce", "t", "--input", "json", input=lines)
    assert r.returncode == 1 and b"line 3" in r.stderr and b"Traceback" not in r.stderr
    out = run_in_process(data_dir, "consume", "t", "--json").stdout.decode().splitlines()
    assert [json.loads(x)["value"] for x in out] == ["ok", None]


def test_consume_json_is_binary_safe(data_dir):
    from engine import Engine, Record

    with Engine.open(data_dir) as eng:
        eng.create_topic("b", 1)
        eng.produce("b", [Record(key=None, value=b"\xff\x00\x01", headers=[("h", None)]),
                          Record(key=b"k", value=None, timestamp=5)])
    r = cli(data_dir, "consume", "b", "--json", "--value-encoding", "base64")
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert rows[0]["key"] is None and rows[0]["value"] == "/wAB"
    assert rows[0]["headers"] == [["h", None]]
    assert rows[1] == {"topic": "b", "partition": 0, "offset": 1, "timestamp": 5, "key": "k",
                       "value": None, "headers": []}
    r = cli(data_dir, "consume", "b", "-f", "%o:%k:%v|", "--value-encoding", "hex")
    assert r.output == "0::ff0001|1:k:|"


def test_consume_offsets_and_num(data_dir):
    run_in_process(data_dir, "topic", "create", "t", check=True)
    run_in_process(data_dir, "produce", "t", input=b"".join(b"%d\n" % i for i in range(100)),
                   check=True)
    assert cli(data_dir, "consume", "t", "-o", "95").output == "95\n96\n97\n98\n99\n"
    assert cli(data_dir, "consume", "t", "-o", "-2").output == "98\n99\n"
    assert cli(data_dir, "consume", "t", "-o", "10", "-n", "2").output == "10\n11\n"
    assert cli(data_dir, "consume", "t", "-o", "end").output == ""
    assert cli(data_dir, "consume", "t", "-o", "@0", "-n", "1").output == "0\n"
    r = cli(data_dir, "consume", "t", "-o", "@2999-01-01T00:00:00Z")
    assert r.stdout == "" and "past the end of t-0" in r.stderr  # (a note says so)
    assert cli(data_dir, "consume", "t", "-o", "bogus").exit_code == 2
    r = cli(data_dir, "offsets", "t", "--json", "--time", "earliest")
    assert json.loads(r.output) == [{"partition": 0, "start_offset": 0, "end_offset": 100,
                                     "offset": 0, "past_end": False}]


def test_consume_follow_sees_another_process(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    follower = subprocess.Popen([sys.executable, "-m", "rivven_cli", "consume", "t", "--follow",
                                 "-n", "3"], stdout=subprocess.PIPE, env=env, cwd=ROOT)
    for v in (b"x\n", b"y\n", b"z\n"):
        run_rivven(data_dir, "produce", "t", input=v, check=True)
    out, _ = follower.communicate(timeout=60)
    assert out == b"x\ny\nz\n" and follower.returncode == 0


def test_topic_describe_and_list_json(data_dir):
    run_in_process(data_dir, "topic", "create", "t", "-p", "2", "-c", "retention.ms=1000",
                   check=True)
    d = json.loads(cli(data_dir, "topic", "describe", "t", "--json").output)
    assert d["partitions"] == 2
    assert {"key": "retention.ms", "value": "1000", "source": "topic"} in d["config_entries"]
    assert d["config"] == {"retention.ms": "1000"}
    rows = json.loads(cli(data_dir, "topic", "list", "--json").output)
    assert rows[0]["topic"] == "t" and rows[0]["partitions"] == 2


def test_delete_needs_confirmation_without_a_terminal(data_dir):
    run_in_process(data_dir, "topic", "create", "t", check=True)
    r = run_in_process(data_dir, "topic", "delete", "t")
    assert r.returncode == 1 and b"--yes" in r.stderr
    r = run_in_process(data_dir, "topic", "list", "--json")
    assert json.loads(r.stdout)[0]["topic"] == "t"


def test_bench_json(data_dir):
    r = cli(data_dir, "bench", "produce", "--records", "5000", "--no-sync", "--json")
    row = json.loads(r.stdout)["produce"]
    assert row["records"] == 5000 and row["records_per_s"] > 0
    assert re.match(r"\d", str(row["latency_ms_p99"]))


def test_produce_json_output(data_dir):
    run_rivven(data_dir, "topic", "create", "t", check=True)
    r = run_rivven(data_dir, "produce", "t", "--print-offsets", "--json", input=b"a\nb\n")
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [
        {"partition": 0, "offset": 0}, {"partition": 0, "offset": 1}]
    assert json.loads(r.stderr)["records"] == 2
