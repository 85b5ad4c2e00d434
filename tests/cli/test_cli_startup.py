"""What a ``rivven`` command loads before it runs: the command tree only (typer and the
CLI's command modules), then what the command itself uses. Each case runs the real command in
a subprocess and records ``sys.modules`` at exit; no timings here (tests/bench/bench_startup.py
measures them)."""

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT

from engine import Engine, Record

# the project's modules a bare `rivven --help` loads: the command tree, nothing of the engine
HELP_MODULES = [
    "rivven_cli", "rivven_cli.acl", "rivven_cli.bench", "rivven_cli.common", "rivven_cli.compaction",
    "rivven_cli.consume", "rivven_cli.group", "rivven_cli.habits", "rivven_cli.interrupts",
    "rivven_cli.kafka",
    "rivven_cli.key", "rivven_cli.main", "rivven_cli.maintain", "rivven_cli.metrics",
    "rivven_cli.offsets",
    "rivven_cli.produce", "rivven_cli.render", "rivven_cli.retention", "rivven_cli.schema",
    "rivven_cli.segment",
    "rivven_cli.serve", "rivven_cli.spark", "rivven_cli.tier", "rivven_cli.top", "rivven_cli.topic",
    "rivven_cli.txn", "rivven_cli.user",
    "rivven_cli.wal",
]
# libraries only some commands need (Spark jobs, Arrow input and reads, metrics, encryption)
HEAVY = ("pyspark", "pyarrow", "prometheus_client", "cryptography", "fsspec")
# the engine's write path, transactions, keys and Spark: not what listing topics needs
# (engine.crypto's key-set parsers come with the catalog, whose topics.json holds wrapped
# data keys; the cipher library, cryptography, does not: HEAVY)
NOT_FOR_READING = ("engine.produce", "engine.txn", "engine.spark", "engine.maintenance",
                   "engine.tools", "engine.groups", "engine.metrics")

RUN = ("import atexit, json, os, sys\n"
       "atexit.register(lambda: json.dump(sorted(sys.modules), open(os.environ['MODULES_TO'], 'w')))\n"
       "from rivven_cli.main import main\n"
       "main()\n")


def loaded(tmp_path, *args, **env):
    """The modules the real ``rivven ARGS`` had loaded when it exited, and its result."""
    out = tmp_path / "modules.json"
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("RIVVEN_", "_RIVVEN"))}
    run_env.update(PYTHONPATH=str(ROOT), MODULES_TO=str(out), **env)
    r = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True,
                       env=run_env, cwd=tmp_path, timeout=120)
    return json.loads(out.read_text()), r


def project(mods):
    return [m for m in mods if m.split(".")[0] in ("engine", "rivven_cli")]


def tops(mods):
    return {m.split(".")[0] for m in mods}


def test_help_loads_the_command_tree_and_nothing_of_the_engine(tmp_path):
    mods, r = loaded(tmp_path, "--help")
    assert r.returncode == 0 and "Usage: rivven" in r.stdout, r.stderr
    assert project(mods) == HELP_MODULES
    assert not tops(mods) & set(HEAVY)


def test_a_group_help_and_completing_a_command_name_load_no_engine_either(tmp_path):
    mods, r = loaded(tmp_path, "topic", "--help")
    assert r.returncode == 0 and "rivven topic" in r.stdout, r.stderr
    assert project(mods) == HELP_MODULES
    mods, r = loaded(tmp_path, _RIVVEN_COMPLETE="complete_bash", COMP_WORDS="rivven topi",
                     COMP_CWORD="1")
    assert r.returncode == 0 and "topic" in r.stdout.split(), (r.stdout, r.stderr)
    assert project(mods) == sorted([*HELP_MODULES, "rivven_cli.completion"])


@pytest.fixture
def topics(data_dir):
    with Engine.open(data_dir) as eng:
        for i in range(3):
            eng.create_topic(f"t{i}", 2)
            eng.produce(f"t{i}", [Record(value=b"v%d" % j) for j in range(10)])
    return data_dir


def test_topic_list_loads_no_spark_arrow_metrics_or_cipher_library(tmp_path, topics):
    mods, r = loaded(tmp_path, "-d", topics, "topic", "list")
    assert r.returncode == 0 and r.stdout.split()[4:6] == ["t0", "2"], r.stderr
    assert not tops(mods) & set(HEAVY), tops(mods) & set(HEAVY)
    assert "rich" not in tops(mods)  # (piped: a plain table)
    assert not [m for m in mods if m.startswith("engine.spark")]
    # completing a topic name opens the data dir read-only: the same holds
    mods, r = loaded(tmp_path, _RIVVEN_COMPLETE="complete_bash", RIVVEN_DATA_DIR=topics,
                     COMP_WORDS="rivven topic describe t", COMP_CWORD="3")
    assert r.stdout.split() == ["t0", "t1", "t2"], (r.stdout, r.stderr)
    assert not tops(mods) & set(HEAVY)


def test_topic_list_loads_no_produce_path_transactions_keys_or_maintenance(tmp_path, topics):
    mods, r = loaded(tmp_path, "-d", topics, "topic", "list")
    assert r.returncode == 0 and "t2" in r.stdout, r.stderr
    assert [m for m in mods if m.startswith(NOT_FOR_READING)] == []
    assert not tops(mods) & set(HEAVY)
