"""Global options anywhere on the line: ``--data-dir``/``-d``, ``--debug`` and
``--lock-timeout-ms`` after the command (the later one wins), option values and ``--`` never
moved."""

import json
import os

from helpers import run_rivven
from typer.testing import CliRunner

from rivven_cli.main import app

runner = CliRunner()


def listed(r):
    assert r.exit_code == 0, r.output
    return [t["topic"] for t in json.loads(r.stdout)]


# ---------------------------------------------------------------- global options
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
