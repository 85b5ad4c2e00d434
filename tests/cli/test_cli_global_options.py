"""Global options anywhere on the line: ``--data-dir``/``-d``, ``--debug`` and
``--lock-timeout-ms`` after the command (the later one wins), option values and ``--`` never
moved."""

import json

from helpers import run_rivven
from typer.testing import CliRunner

from rivven_cli.main import app

runner = CliRunner()


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


def test_option_values_and_double_dash_are_never_moved(data_dir):
    from typer.main import get_command

    from rivven_cli.common import hoist_global_options

    root = get_command(app)

    def h(line):
        return " ".join(hoist_global_options(root, line.split()))

    assert h("produce t -k -d") == "produce t -k -d"  # -d is the key
    assert h("consume t -- -d D") == "consume t -- -d D"
    assert h("topic delete t -yd D") == "-d D topic delete t -y"  # a cluster is split
    assert h("consume t -nd") == "consume t -nd"  # -n takes 'd' (click would say it is no int)
    assert h("consume t -o -5 -dD") == "-dD consume t -o -5"
    assert h("nope -d D") == "nope -d D"  # an unknown command: click says so
    assert h("-d A topic list -d B") == "-d A -d B topic list"
    assert h("topic create -d D x -p 3 -c a=b") == "-d D topic create x -p 3 -c a=b"
    # the real thing: -d after -k is the key of the record, not the data dir
    run_rivven(data_dir, "topic", "create", "t", check=True)
    run_rivven(data_dir, "produce", "t", "-K", ":", input=b"-d:v\n", check=True)
    r = run_rivven(data_dir, "consume", "t", "-f", "%k\n")
    assert r.stdout == b"-d\n"
    r = run_rivven(data_dir, "consume", "--", "-d")
    assert r.returncode == 1 and b"'-d'" in r.stderr  # a topic named -d, not an option
