"""Issue 14, items 9, 11, 12, 13 and 18: one offset grammar everywhere, global options
anywhere, shell completion, topic list filters and --json on the topic changes, and cold-store
URIs checked when they are set."""

import glob
import json
import os
import shlex
import subprocess
import sys

import pytest
from conftest import ROOT, run_rivven
from typer.testing import CliRunner

from engine import Engine, Position, Record
from rivven_cli.main import app

runner = CliRunner()
T0 = 1_700_000_000_000  # record i of the topic 'g' has timestamp T0 + i minutes
MIN = 60_000


def cli(data_dir, *args, input=None):
    return runner.invoke(app, ["--data-dir", data_dir, *args], input=input)


def values(r):
    assert r.exit_code == 0, r.output
    return r.stdout.split()


@pytest.fixture
def g(data_dir):
    """Topic 'g': partition 0 holds 20 records (values 0..19), partition 1 holds 10
    (values 100..109); offset i of each has timestamp T0 + i minutes."""
    with Engine.open(data_dir) as eng:
        eng.create_topic("g", 2, {"retention.ms": "-1"})
        eng.produce("g", [Record(value=b"%d" % i, timestamp=T0 + i * MIN) for i in range(20)], 0)
        eng.produce("g", [Record(value=b"%d" % (100 + i), timestamp=T0 + i * MIN)
                          for i in range(10)], 1)
    return data_dir


def make_group(data_dir):
    """Group 'gg' with a committed offset (a reset of a group yet unknown is issue 14's item
    4, not this file's)."""
    with Engine.open(data_dir) as eng, eng.consumer("gg", "g", enable_auto_commit=False) as c:
        c.commit({("g", 0): 1})


def utc(ms):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- item 11: the grammar
@pytest.mark.parametrize("word", ["beginning", "earliest", "start", "oldest"])
def test_every_word_for_the_start(g, word):
    assert values(cli(g, "consume", "g", "-p", "0", "-o", word, "-n", "1")) == ["0"]
    assert json.loads(cli(g, "offsets", "g", "--time", word, "--json").stdout)[0]["offset"] == 0


@pytest.mark.parametrize("word", ["end", "latest", "newest"])
def test_every_word_for_the_end(g, word):
    assert values(cli(g, "consume", "g", "-o", word)) == []
    assert json.loads(cli(g, "offsets", "g", "--time", word, "--json").stdout)[0]["offset"] == 20


def test_plus_n_counts_from_the_log_start_as_rpk(g):
    """rpk's +N: N after the current start offset (here after a delete-records)."""
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "+3", "-n", "2")) == ["3", "4"]
    assert cli(g, "delete-records", "g", "--before", "5", "-p", "0", "--yes").exit_code == 0
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "+3", "-n", "2")) == ["8", "9"]
    assert values(cli(g, "consume", "g", "-p", "0", "-o", "-2")) == ["18", "19"]


@pytest.mark.parametrize("spec,p0,p1", [
    ("3:6", ["3", "4", "5"], ["103", "104", "105"]),  # END exclusive
    ("beginning:+2", ["0", "1"], ["100", "101"]),
    ("-2:end", ["18", "19"], ["108", "109"]),
    (":2", ["0", "1"], ["100", "101"]),
    ("18:", ["18", "19"], []),
    (f"@{T0 + 2 * MIN}:{T0 + 4 * MIN}", ["2", "3"], ["102", "103"]),
    (f"@{T0 + 2 * MIN}:@{T0 + 4 * MIN}", ["2", "3"], ["102", "103"]),
    # RFC 3339 times hold colons: the one after a whole time separates
    (f"@{utc(T0 + 8 * MIN)}:@{utc(T0 + 10 * MIN)}", ["8", "9"], ["108", "109"]),
    (f"@{utc(T0 + 8 * MIN)}:{utc(T0 + 10 * MIN)}", ["8", "9"], ["108", "109"]),
    (f"@{utc(T0 + 8 * MIN).replace('Z', '+00:00')}:{utc(T0 + 9 * MIN)}", ["8"], ["108"]),
    (f"@{utc(T0 + 8 * MIN)}:2m", ["8", "9"], ["108", "109"]),  # a duration from START
    (f"@{utc(T0 + 17 * MIN)}:end", ["17", "18", "19"], []),
    (f"@:{T0 + 1 * MIN}", ["0"], ["100"]),  # rpk's @:t
    ("5:@" + str(T0 + 7 * MIN), ["5", "6"], ["105", "106"]),
])
def test_consume_ranges(g, spec, p0, p1):
    r = cli(g, "consume", "g", "-o", spec, "-f", "%p:%v\n")
    got = values(r)
    assert [v[2:] for v in got if v.startswith("0:")] == p0, spec
    assert [v[2:] for v in got if v.startswith("1:")] == p1, spec


def test_a_whole_time_is_never_a_range(g):
    """``@2023-11-14T22:21:00Z`` reads as one time (its colons stay in it)."""
    r = cli(g, "consume", "g", "-p", "0", "-o", f"@{utc(T0 + 18 * MIN)}")
    assert values(r) == ["18", "19"]


@pytest.mark.parametrize("spec,message", [
    ("6:3", "END 3 is not after START 6"),
    ("x:3", "'x' is not a position"),
    (f"@{T0 + 5 * MIN}:{T0 + 2 * MIN}", "is not after START"),
    ("@yesterday:end", "cannot read a time"),
    ("3:-1h", "is not a position"),
])
def test_bad_ranges_are_usage_errors_naming_the_forms(g, spec, message):
    r = cli(g, "consume", "g", "-o", spec)
    assert r.exit_code == 2 and message in r.stderr, r.stderr
    assert "START:END" in r.stderr and "+N" in r.stderr


def test_a_range_and_follow_or_a_group_are_refused(g):
    assert cli(g, "consume", "g", "-o", "0:5", "--follow").exit_code == 2
    assert cli(g, "consume", "g", "-o", "0:5", "-g", "x").exit_code == 2
    # the group's start words take the aliases too
    assert values(cli(g, "consume", "g", "-g", "x", "-o", "earliest", "-n", "1")) != []


def test_past_the_end_is_a_note_on_stderr(g):
    r = cli(g, "consume", "g", "-o", "15")
    assert values(r) == ["15", "16", "17", "18", "19"]
    assert "note: --offset 15 is past the end of g-1 (end offset 10)" in r.stderr
    assert "g-0" not in r.stderr and len(r.stderr.splitlines()) == 1
    r = cli(g, "consume", "g", "-o", "@2999-01-01T00:00:00Z")
    assert r.exit_code == 0 and r.stdout == ""
    assert "g-0 (end offset 20), g-1 (end offset 10)" in r.stderr
    assert "no record is at or after that time" in r.stderr
    r = cli(g, "consume", "g", "-p", "0", "-o", "18:100")
    assert values(r) == ["18", "19"] and "--offset END 100 is past the end of g-0" in r.stderr
    r = cli(g, "offsets", "g", "--time", "@2999-01-01", "--json")
    assert [x["past_end"] for x in json.loads(r.stdout)] == [True, True]
    assert "OFFSET is the end offset" in r.stderr
    r = cli(g, "offsets", "g", "--time", "+12", "--json")
    assert [(x["offset"], x["past_end"]) for x in json.loads(r.stdout)] == [(12, False),
                                                                            (10, True)]
    make_group(g)
    r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "15")
    assert r.exit_code == 0 and "note: --to 15 is past the end of g-1" in r.stderr
    r = cli(g, "tier", "restore", "g", "--from", "@2999-01-01", "--dry-run")
    assert r.exit_code == 0 and "nothing to restore there" in r.stderr
    r = cli(g, "delete-records", "g", "--before", "15", "--yes", "--json")
    assert [x["new_log_start_offset"] for x in json.loads(r.stdout)] == [15, 10]
    assert "note: --before 15 is past the end of g-1" in r.stderr
    r = cli(g, "consume", "g", "-o", "5")  # nothing past the end: no note
    assert r.exit_code == 0 and r.stderr == ""


def test_offsets_time_keeps_its_bare_times_and_takes_positions(g):
    def offs(*args):
        r = cli(g, "offsets", "g", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["offset"] for x in json.loads(r.stdout)]

    assert offs("--time", str(T0 + 3 * MIN)) == [3, 3]  # epoch ms, no @ (as before)
    assert offs("--time", f"@{T0 + 3 * MIN}") == [3, 3]
    assert offs("--time", utc(T0 + 4 * MIN)) == [4, 4]
    assert offs("--time", "-1h") == [20, 10]  # relative, no @: all records are older
    assert offs("--time", "-3") == [17, 7]
    assert offs("--time", "+3") == [3, 3]
    assert cli(g, "offsets", "g", "--time", "soon").exit_code == 2


def test_delete_records_before_takes_the_grammar(g):
    def starts(*args):
        r = cli(g, "delete-records", "g", "--yes", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["new_log_start_offset"] for x in json.loads(r.stdout)]

    assert starts("--before", "+2") == [2, 2]  # the first two go
    assert starts("--before", "-15") == [5, 2]  # keep the last 15
    assert starts("--before", f"@{T0 + 6 * MIN}") == [6, 6]
    assert starts("--before", "beginning") == [6, 6]  # nothing
    assert starts("--before", "end", "-p", "1") == [10]  # every record (Kafka's -1)
    r = cli(g, "delete-records", "g", "--before", "soon", "--yes")
    assert r.exit_code == 2 and "use beginning, end, N, -N, +N or @TIME" in r.stderr


def test_tier_restore_from_takes_the_grammar_but_end(g):
    for spec in ("beginning", "earliest", "-5", "+5", "3", f"@{T0}"):
        r = cli(g, "tier", "restore", "g", "--from", spec, "--dry-run", "--json")
        assert r.exit_code == 0, (spec, r.output)
    r = cli(g, "tier", "restore", "g", "--from", "end", "--dry-run")
    assert r.exit_code == 2
    assert "end makes no sense here; use beginning, N, -N, +N or @TIME" in r.stderr


def test_group_reset_offsets_to_a_position(g):
    make_group(g)
    def new(*args):
        r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--json", *args)
        assert r.exit_code == 0, r.output
        return [x["new"] for x in json.loads(r.stdout)["partitions"]]

    assert new("--to", "-3") == [17, 7]
    assert new("--to", "+4") == [4, 4]
    assert new("--to", "beginning") == [0, 0]
    assert new("--to", "latest") == [20, 10]
    assert new("--to", "12") == [12, 10]
    assert new("--to", f"@{utc(T0 + 5 * MIN)}") == [5, 5]
    r = cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "-3", "--json")
    out = json.loads(r.stdout)
    assert out["mode"] == "from-end" and out["position"] == "-3"
    # the older flags keep working
    assert new("--to-offset", "6") == [6, 6] and new("--to-earliest") == [0, 0]
    assert new("--to-datetime", str(T0 + 5 * MIN)) == [5, 5]
    assert cli(g, "group", "reset-offsets", "gg", "--topic", "g", "--to", "-3",
               "--to-earliest").exit_code == 2


def test_engine_positions(g):
    with Engine.open(g, read_only=True) as eng:
        rows = eng.list_offsets("g", Position("from_start", 12))
        assert [(r["offset"], r["past_end"]) for r in rows] == [(12, False), (10, True)]
        assert eng.resolve_offset("g", 0, Position("from_start", 3)) == 3
        got = [(b.partition, list(b.offsets)) for b in eng.stream(
            "g", None, Position("offset", 4), end=Position("from_start", 6), follow=True)]
        assert got == [(0, [4, 5]), (1, [4, 5])]  # (a stop ends even a follow)
        rows = eng.reset_offsets("gg", {"g": None}, Position("from_end", 3))
        assert [r["new"] for r in rows] == [17, 7]
        rows = eng.reset_offsets("gg", {"g": [1]}, "from-start", 30)
        assert (rows[0]["new"], rows[0]["clamped"]) == (10, True)
        plan = eng.delete_records_before("g", Position("from_end", 4), dry_run=True)
        assert [r["new_log_start_offset"] for r in plan] == [16, 6]


# ---------------------------------------------------------------- item 12: global options
def test_global_options_after_the_command(data_dir, tmp_path):
    other = str(tmp_path / "other")
    assert runner.invoke(app, ["topic", "create", "x", "--data-dir", other]).exit_code == 0
    for args in (["topic", "list", "--data-dir", other, "--json"],
                 ["topic", "list", "-d", other, "--json"],
                 ["topic", "list", f"--data-dir={other}", "--json"],
                 ["topic", "--data-dir", other, "list", "--json"],
                 ["topic", "list", "--json", "-d" + other],
                 ["-d", data_dir, "topic", "list", "--json", "-d", other],  # the later wins
                 ["topic", "list", "--json", "-d", other, "--debug", "--lock-timeout-ms", "5"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
        assert [t["topic"] for t in json.loads(r.stdout)] == ["x"], args
    assert not (tmp_path / "rivven-data").exists()


def test_debug_and_lock_timeout_after_the_command(data_dir):
    r = run_rivven(data_dir, "topic", "describe", "nope", "--debug")
    assert r.returncode == 1 and b"Traceback" in r.stderr
    r = run_rivven(data_dir, "topic", "describe", "nope", "--lock-timeout-ms", "-2")
    assert r.returncode == 2  # (read by the root: its range check)


def test_option_values_and_double_dash_are_never_moved(data_dir, tmp_path):
    d = str(tmp_path / "d")

    def run(line):  # (anything not sent to d would go to data_dir)
        return runner.invoke(app, line.split(), env={"RIVVEN_DATA_DIR": data_dir})

    r = run(f"topic create -d {d} x -p 3 -c retention.ms=1000 --json")  # before a word
    assert r.exit_code == 0 and json.loads(r.stdout)["partitions"] == 3, r.output
    (tmp_path / "in").write_text("v\n")
    assert run(f"produce x -k -d -d {d} -f {tmp_path / 'in'}").exit_code == 0  # -k takes -d
    r = run(f"consume x -o -5 -d{d} -f %k\\n")  # an attached value
    assert r.exit_code == 0 and r.stdout == "-d\n", r.output
    r = run("consume x -nd")  # -n takes 'd' (no int): the d is no option
    assert r.exit_code == 2 and "'-n': 'd' is not a valid int" in r.stderr, r.output
    r = run(f"nope -d {d}")  # an unknown command: click says so
    assert r.exit_code == 2 and "No such command 'nope'" in r.stderr, r.output
    assert run(f"topic delete x -yd {d}").exit_code == 0  # a cluster is split
    assert listed(run(f"topic list --json -d {d}")) == []
    assert not os.path.exists(data_dir)
    # the real thing: -d after -k is the key of the record, not the data dir
    run_rivven(data_dir, "topic", "create", "t", check=True)
    run_rivven(data_dir, "produce", "t", "-K", ":", input=b"-d:v\n", check=True)
    r = run_rivven(data_dir, "consume", "t", "-f", "%k\n")
    assert r.stdout == b"-d\n"
    r = run_rivven(data_dir, "consume", "--", "-d")
    assert r.returncode == 1 and b"'-d'" in r.stderr  # a topic named -d, not an option


# ---------------------------------------------------------------- item 13: shell completion
@pytest.fixture
def shell(tmp_path, data_dir):
    """A ``rivven`` on PATH (as the completion scripts call it), a data dir with topics
    'orders' and 'other' and group 'grp1', and a function running bash with both."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rivven").write_text(
        f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -P -m rivven_cli.main "$@"\n')
    (bin_dir / "rivven").chmod(0o755)
    with Engine.open(data_dir) as eng:
        eng.create_topic("orders")
        eng.create_topic("other")
        with eng.consumer("grp1", "orders", enable_auto_commit=False) as c:
            c.commit({("orders", 0): 0})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RIVVEN_", "_RIVVEN"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", HOME=str(tmp_path / "home"))

    def run(script, **extra):
        r = subprocess.run(["bash", "--norc", "-c", script], env={**env, **extra},
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout
    return run


def bash_complete(shell, *words, **env):
    """COMPREPLY of the real bash completion function for the words (the last one being
    completed)."""
    script = ('eval "$(rivven --show-completion)"\n'
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              '_rivven_completion rivven\nprintf "%s\\n" "${COMPREPLY[@]}"')
    return [x for x in shell(script, **env).splitlines() if x]


def snapshot(data_dir):
    return {(p, os.stat(p).st_mtime_ns, os.stat(p).st_size)
            for p in glob.glob(f"{data_dir}/**", recursive=True) if "/.stats" not in p}


def test_bash_completes_topic_and_group_names(shell, data_dir):
    before = snapshot(data_dir)
    assert bash_complete(shell, "rivven", "topic", "describe", "-d", data_dir, "o") == [
        "orders", "other"]
    assert bash_complete(shell, "rivven", "-d", data_dir, "consume", "or") == ["orders"]
    assert bash_complete(shell, "rivven", "consume", "orders", "--group", "",
                         RIVVEN_DATA_DIR=data_dir) == ["grp1"]
    assert bash_complete(shell, "rivven", "group", "describe", "--data-dir", data_dir,
                         "") == ["grp1"]
    assert bash_complete(shell, "rivven", "group", "reset-offsets", "grp1", "--topic", "ot",
                         RIVVEN_DATA_DIR=data_dir) == ["other"]
    assert bash_complete(shell, "rivven", "topi") == ["topic"]
    assert bash_complete(shell, "rivven", "top") == ["top", "topic"]
    assert bash_complete(shell, "rivven", "consume", "", "-d", "/nonexistent") == []
    assert snapshot(data_dir) == before  # completing changes nothing


def test_zsh_and_fish_protocols_complete_names(shell, data_dir):
    out = shell("rivven", _RIVVEN_COMPLETE="complete_zsh", RIVVEN_DATA_DIR=data_dir,
                _TYPER_COMPLETE_ARGS="rivven topic delete ")
    assert '"orders"' in out and '"other"' in out
    out = shell("rivven", _RIVVEN_COMPLETE="complete_fish", RIVVEN_DATA_DIR=data_dir,
                _TYPER_COMPLETE_FISH_ACTION="get-args",
                _TYPER_COMPLETE_ARGS="rivven group delete ")
    assert out.split() == ["grp1"]


def test_show_and_install_completion_for_each_shell(shell, tmp_path):
    # (detected from the process tree: bash must stay rivven's parent, not exec it as the
    # last command of -c, or the shell found is whatever ran the tests)
    assert "complete -o default -F _rivven_completion rivven" in shell(
        "rivven --show-completion; exit $?")  # (the shell it runs in: bash)
    scripts = {"bash": "_RIVVEN_COMPLETE=complete_bash", "zsh": "#compdef rivven",
               "fish": "complete --command rivven"}
    for name, mark in scripts.items():
        out = shell(f"rivven --show-completion {name}",
                    _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
        assert mark in out, name
    assert "bash completion installed" in shell("rivven --install-completion; exit $?")
    assert "_rivven_completion" in (tmp_path / "home/.bash_completions/rivven.sh").read_text()


# ---------------------------------------------------------------- item 18: topic commands
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
    assert r.exit_code == 0 and "topic other deleted" in r.stderr
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


# ---------------------------------------------------------------- item 9: cold-store URIs
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


def test_a_time_past_any_calendar_is_shown_as_its_number():
    """An offset of 19 digits is never rendered as a time (it crashed 'tier restore --from'),
    and a time past year 9999 shows as milliseconds rather than an internal error."""
    from engine import Position
    from rivven_cli.positions import shown
    from rivven_cli.render import utc

    assert shown(Position("offset", 9_000_000_000_000_000_000)) == "9000000000000000000"
    assert utc(9_000_000_000_000_000_000) == "9000000000000000000 ms"
    assert utc(0) == "1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize("text,ms", [("90s", 90_000), ("500ms", 500), ("1.5m", 90_000),
                                     ("1h30m", 5_400_000), ("2d", 172_800_000),
                                     ("PT2H", 7_200_000), ("P1DT30M", 88_200_000),
                                     ("pt0.5s", 500)])
def test_one_duration_grammar(text, ms):
    """--idle-timeout and --by-duration read durations alike (one parser)."""
    from rivven_cli.positions import parse_duration

    assert parse_duration(text, "--x") == ms


@pytest.mark.parametrize("text", ["xyz", "P", "PT", "5", "-5s", "1x"])
def test_a_bad_duration_is_a_usage_error(text):
    import typer

    from rivven_cli.positions import parse_duration

    with pytest.raises(typer.BadParameter, match="cannot read duration"):
        parse_duration(text, "--x")
