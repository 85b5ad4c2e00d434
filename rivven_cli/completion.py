"""Shell completion: ``rivven --install-completion`` / ``--show-completion`` (bash, zsh, fish;
Typer's scripts, which call ``rivven`` back with ``_RIVVEN_COMPLETE`` set).

Commands and options complete from the command tree; topic and group names from the data dir
of the line being completed (``-d``/``--data-dir`` anywhere on it, else ``RIVVEN_DATA_DIR``,
else ``./rivven-data``), opened read-only. A parameter takes topic names when it is called
``topic``/``topics`` (or ``name`` under ``rivven topic``), group names when it is called
``group``/``groups`` and transactional ids when it is called ``transactional_id``: new
commands get completion by naming their parameters so.

This module is imported only when a shell asks for completions: start-up never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

TOPIC_PARAMS = ("topic", "topics", "topic_opt")  # (topic_opt: produce --topic)
GROUP_PARAMS = ("group", "groups")
TXN_PARAMS = ("transactional_id",)


def attach(cmd: Any, path: tuple[str, ...] = ()) -> None:
    """Give every topic and group parameter of ``cmd`` and its subcommands its completion
    (click's per-parameter hook; one set in the command itself is kept)."""
    for p in cmd.params:
        if p.name in TOPIC_PARAMS or (path[:1] == ("topic",) and p.name == "name"):
            kind = "topics"
        elif p.name in GROUP_PARAMS:
            kind = "groups"
        elif p.name in TXN_PARAMS:
            kind = "transactional ids"
        else:
            continue
        if p._custom_shell_complete is None:
            p._custom_shell_complete = partial(complete, kind)
    for name, sub in getattr(cmd, "commands", {}).items():
        attach(sub, (*path, name))


def complete(kind: str, ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The names of ``kind`` (topics, groups, transactional ids) starting with
    ``incomplete``."""
    data_dir = ctx.find_root().obj.data_dir  # (the global options' state: common.CliState)
    return [n for n in names(data_dir, kind) if n.startswith(incomplete)]


def names(data_dir: str, kind: str) -> list[str]:
    """Topic, group or transactional id names of a data dir; none when it cannot be read (a
    completion never fails, and never changes anything)."""
    from engine import Engine

    lister: dict[str, Callable[[Any], list[str]]] = {
        "topics": lambda eng: [t.name for t in eng.topics()],
        "groups": lambda eng: eng.groups.names(),
        "transactional ids": lambda eng: eng.txn.ids()}
    try:
        with Engine.open(data_dir, read_only=True, recover=False) as eng:
            return lister[kind](eng)
    except Exception:  # (a missing or damaged data dir: nothing to offer)
        return []
