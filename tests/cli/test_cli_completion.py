"""Shell completion: bash, zsh and fish complete topic and group names of the data dir, and
``--show-completion``/``--install-completion`` work for each shell."""

import glob
import os
import shlex
import subprocess
import sys

import pytest
from helpers import ROOT

from engine import Engine


# ---------------------------------------------------------------- shell completion
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
