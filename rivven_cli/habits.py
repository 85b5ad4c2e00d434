"""Kafka's, rpk's and kcat's spellings that mean something else here, or nothing: kcat's ``-X
key=value`` (librdkafka settings; the keys that mean something here become rivven's options)
and the broker address a pasted command starts with (``--bootstrap-server``, ``-b``). What
cannot be accepted is a usage error of one line naming rivven's way (exit 2)."""

from __future__ import annotations

from typing import Any

import typer

NO_SERVER = ("rivven's commands work on the data dir itself, -d DIR (or RIVVEN_DATA_DIR); "
             "Kafka's clients reach it through 'rivven serve'")
# librdkafka settings about reaching a broker: nothing to set up here
CONNECTION = ("bootstrap.servers", "metadata.broker.list", "security.protocol", "sasl.", "ssl.",
              "socket.", "broker.", "api.version")


def refuse_server(ctx: Any, param: Any, value: Any) -> Any:
    """The callback of ``--bootstrap-server`` and its kin (hidden global options): given a
    value, the hint and exit 2."""
    if value is None:
        return value
    import sys

    from .common import fail

    words = sys.argv[1:]
    if "kafka" in words:  # (rivven -b B kafka export T: the copy's cluster, misplaced)
        after = words[words.index("kafka") + 1:words.index("kafka") + 2] or ["export"]
        fail(f"give the cluster after the command: rivven kafka {after[0]} ... "
             f"--bootstrap-server {value}", 2)
    fail(f"a broker address ({value}) is not needed: {NO_SERVER}; to copy topics to or from "
         "a Kafka cluster, rivven kafka export|import -b HOST:PORT", 2)


def x_settings(pairs: list[str] | None, takes: dict[str, str], command: str) -> dict[str, str]:
    """kcat's ``-X key=value`` pairs as ``{key: value}``, every key one of ``takes``
    (``{key: what it is here}``); any other key is a usage error naming what is taken."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value (kcat's -X)", param_hint="-X")
        if key.startswith(CONNECTION):
            raise typer.BadParameter(f"{key}: {NO_SERVER}", param_hint="-X")
        if key not in takes:
            taken = "; ".join(f"{k} ({v})" for k, v in takes.items())
            raise typer.BadParameter(
                f"{key} means nothing to rivven {command}; -X takes {taken}",
                param_hint="-X")
        out[key] = value
    return out


def x_choice(settings: dict[str, str], key: str, choices: dict[str, Any]) -> Any:
    """The value of ``-X key=...`` as rivven's word (``choices``: kcat's word to rivven's);
    None when not given; another value is a usage error."""
    if key not in settings:
        return None
    value = settings[key].lower()
    if value not in choices:
        raise typer.BadParameter(f"{key}={settings[key]}: use one of "
                                 f"{', '.join(choices)}", param_hint="-X")
    return choices[value]


def same_or_refuse(option: str, given: Any, other: str, other_value: Any) -> Any:
    """One thing given two ways (``--group G`` and ``-X group.id=G``): the value (None when
    neither), or a usage error when they differ."""
    if other_value is None:
        return given
    if given is not None and given != other_value:
        raise typer.BadParameter(f"{option} {given} and {other}{'' if other.endswith('=') else ' '}"
                                 f"{other_value} say different things: give one",
                                 param_hint=option)
    return other_value
