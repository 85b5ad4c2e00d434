"""``rivven user ...``: the SCRAM users of the data dir (``Engine.users``) — add, list,
describe, delete, passwd. A password is never an argument (it would sit in the shell's history
and in ``ps``): it is asked twice at a terminal, hidden, or read as one line from stdin
(``--password-stdin``, or whenever stdin is not a terminal). No output shows a salt or a key."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Any

import typer

from .common import JsonOpt, YesOpt, confirm, fail, no_data_yet, open_engine, state
from .render import done, print_json, print_table

app = typer.Typer(no_args_is_help=True)
NameArg = Annotated[str, typer.Argument(help="User name (the SCRAM user name clients give).")]
MAX_PASSWORD = 1024  # (engine.security.users.MAX_PASSWORD: tests/cli checks they agree)


class Mechanism(str, Enum):
    sha256 = "SCRAM-SHA-256"
    sha512 = "SCRAM-SHA-512"


MechanismOpt = Annotated[list[Mechanism] | None, typer.Option(
    "--mechanism", "-m", case_sensitive=False, metavar="MECHANISM",
    help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both).", show_default=False)]
IterationsOpt = Annotated[int, typer.Option(
    "--iterations", min=4096, max=16384,
    help="PBKDF2 iterations (Kafka's bounds 4096..16384): more costs each SCRAM login's "
    "client (a PLAIN login's server) that much more, and a guesser with the file as much "
    "per guess.")]
PasswordStdinOpt = Annotated[bool, typer.Option(
    "--password-stdin", help="Read the password as one line from stdin (the default when "
    "stdin is not a terminal); without it, a terminal is asked twice, hidden.")]


def _password(name: str, from_stdin: bool) -> bytes:
    """The password: one line of stdin (its line break dropped), or asked twice at a terminal
    without echo. Never in an error message."""
    if from_stdin or not sys.stdin.isatty():
        line = sys.stdin.buffer.readline(MAX_PASSWORD + 3)
        pw = line.removesuffix(b"\n").removesuffix(b"\r")
        if line and not line.endswith(b"\n") and len(line) > MAX_PASSWORD:
            fail(f"the password on stdin is longer than the {MAX_PASSWORD}-byte limit: give a "
                 "shorter one")
        if not pw:
            fail("no password on stdin: give it as one line (echo ... | rivven user add "
                 f"{name} --password-stdin), or run at a terminal to be asked")
        return pw
    import getpass

    first = getpass.getpass(f"Password for {name}: ", stream=sys.stderr)
    if not first:
        fail("empty password: nothing was changed")
    if getpass.getpass("Again, to confirm: ", stream=sys.stderr) != first:
        fail("the two passwords differ: nothing was changed")
    return first.encode()


def _mechanisms(given: list[Mechanism] | None) -> list[str] | None:
    return None if not given else [m.value for m in given]


def _show_one(info: dict[str, Any], what: str, json: bool) -> None:
    if json:
        print_json(info)
        return
    creds = info["credentials"]
    done(f"user {info['name']} {what} (" + ", ".join(
        f"{c['mechanism']} {c['iterations']} iterations" for c in creds) + ")")


@app.command()
def add(
    name: NameArg,
    mechanism: MechanismOpt = None,
    iterations: IterationsOpt = 4096,
    password_stdin: PasswordStdinOpt = False,
    json: JsonOpt = False,
) -> None:
    """Add a SCRAM user: its credentials (salt, iterations, StoredKey, ServerKey) per
    mechanism, never the password, in the data dir's security/users.json (0600)."""
    with open_engine() as eng:
        if name in {u["name"] for u in eng.users.list()}:  # (before a password is asked)
            fail(f"user {name!r} exists; change its password with `rivven user passwd {name}`")
        pw = _password(name, password_stdin)
        info = eng.users.add(name, pw, [m.value for m in mechanism or Mechanism], iterations)
    _show_one(dict(info), "added", json)


@app.command()
def passwd(
    name: NameArg,
    mechanism: Annotated[list[Mechanism] | None, typer.Option(
        "--mechanism", "-m", case_sensitive=False, metavar="MECHANISM",
        help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: the user's own).",
        show_default=False)] = None,
    iterations: Annotated[int | None, typer.Option(
        "--iterations", min=4096, max=16384,
        help="PBKDF2 iterations, 4096..16384 (default: the user's own).",
        show_default=False)] = None,
    password_stdin: PasswordStdinOpt = False,
    json: JsonOpt = False,
) -> None:
    """Set a user's password (new salts; connections made with the old one stay open until
    they re-authenticate: connections.max.reauth.ms)."""
    with open_engine() as eng:
        # (an unknown user is told before a password is asked)
        had = eng.users.describe(name)["credentials"]
        if iterations is None:
            iterations = max((c["iterations"] for c in had), default=4096)
        pw = _password(name, password_stdin)
        info = eng.users.passwd(name, pw, _mechanisms(mechanism), iterations=iterations)
    _show_one(dict(info), "password changed", json)


@app.command("list")
def list_(json: JsonOpt = False) -> None:
    """Users with their mechanisms and iteration counts (no salt or key is ever shown)."""
    if no_data_yet(state().data_dir):  # (as `topic list`: an empty list, not an error)
        users = []
    else:
        with open_engine(read_only=True) as eng:
            users = eng.users.list()
    if json:
        print_json(users)
        return
    print_table(["USER", "MECHANISMS", "ITERATIONS"],
                [(u["name"], ",".join(c["mechanism"] for c in u["credentials"]),
                  ",".join(dict.fromkeys(str(c["iterations"]) for c in u["credentials"])))
                 for u in users])


@app.command()
def describe(name: NameArg, json: JsonOpt = False) -> None:
    """A user's credentials: mechanism and iterations of each (Kafka's
    DescribeUserScramCredentials)."""
    with open_engine(read_only=True) as eng:
        info = eng.users.describe(name)
    if json:
        print_json(info)
        return
    print_table(["USER", "MECHANISM", "ITERATIONS"],
                [(info["name"], c["mechanism"], c["iterations"]) for c in info["credentials"]],
                right=("ITERATIONS",))


@app.command()
def delete(name: NameArg, yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Delete a user and its credentials (its open connections end at their next
    re-authentication; its ACLs stay: `rivven acl remove` removes them)."""
    with open_engine() as eng:
        eng.users.describe(name)
        confirm(f"delete user {name}?", yes)
        info = eng.users.delete(name)
    if json:
        print_json(info)
        return
    done(f"user {info['name']} deleted")
