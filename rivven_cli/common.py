"""What every command shares: options defined once, the engine opener, and error mapping."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from engine.errors import RivvenError, plural

DEFAULT_DATA_DIR = "./rivven-data"
STATE: dict[str, Any] = {"data_dir": DEFAULT_DATA_DIR, "debug": False, "settings": {},
                         "keyring": None}

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys) instead of a table.")]
PartitionOpt = Annotated[
    int | None, typer.Option("--partition", "-p", min=0, help="Only this partition.")]
PartitionsOpt = Annotated[list[int] | None, typer.Option(
    "--partition", "-p", min=0, help="Only these partitions (repeatable).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Only show what would be done; change nothing.")]


class Isolation(str, Enum):
    """What a read sees of transactions (``--isolation``, rpk's flag; Kafka's
    ``isolation.level``)."""

    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


IsolationOpt = Annotated[Isolation, typer.Option(
    "--isolation", help="read_uncommitted (the default, as Kafka: every record, open and "
    "aborted transactions' too) or read_committed (only committed records, up to the last "
    "stable offset: the first offset of the oldest open transaction).")]


class Encoding(str, Enum):
    """How keys and values are written as text (``--key-encoding/--value-encoding``)."""

    utf8 = "utf8"
    base64 = "base64"
    hex = "hex"


def open_engine(read_only: bool = False, sync: bool = True, recover: bool = True) -> Any:
    from engine import Engine

    from .progress import progress_bar

    with progress_bar() as progress:  # (crash recovery can take a while)
        eng = Engine.open(STATE["data_dir"], read_only=read_only, sync=sync, recover=recover,
                          progress=progress, settings=STATE["settings"],
                          on_lock_wait=_lock_wait, keyring=STATE["keyring"])
    STATE["engine"] = eng
    rec = eng.last_recovery
    if rec.get("deferred"):
        sys.stderr.write("the WAL of crashed writers waits to be replayed (the disk is full); "
                         "free space, then produce again\n")
    if rec.get("streams"):
        sys.stderr.write(f"recovered {len(rec['streams'])} WAL stream(s) of crashed writers: "
                         f"{rec['applied']} batch(es) replayed, {rec['skipped']} already in "
                         "the log" + (f", {rec['dropped']} after a hole dropped"
                                      if rec.get("dropped") else "")
                         + ("; the disk is full: the streams are kept and replayed again "
                            "once there is room" if rec.get("kept") else "") + "\n")
        for t in rec.get("torn_tails", []):
            if not t.get("incomplete", True):  # (a write a crash cut short is routine)
                sys.stderr.write(f"warning: WAL {t['file']} damaged at position {t['position']} "
                                 f"({t['reason']}): its records after that were not replayed\n")
    return eng


def file_openers() -> Any:
    """What opens encrypted batches for the commands that read files by path, without an
    engine (engine.tools.openers), with the keyring of ``--keyring``/``RIVVEN_KEYRING``."""
    from engine.crypto.keyring import resolve
    from engine.crypto.topic import Vault
    from engine.tools.openers import Openers

    return Openers(Vault(resolve(STATE["keyring"])))


def show_engine_warnings() -> None:
    """The engine's ``logging`` warnings (loggers ``rivven.*``) as ``warning:`` lines on
    stderr, escaped (they may quote names and paths from the disk)."""
    import logging

    from .render import printable

    class Line(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"warning: {printable(record.getMessage())}"

    logger = logging.getLogger("rivven")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(Line())
        logger.addHandler(handler)
        logger.propagate = False


def _lock_wait(message: str) -> None:
    """The engine's report of a long lock wait (who holds the lock): one line on stderr."""
    sys.stderr.write(f"waiting: {message}\n")
    sys.stderr.flush()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one red line on stderr and exit. ``message`` is plain text, shown as it is
    (never read as Rich markup: it quotes names and input, like "[key, value]")."""
    error_line(message)
    raise typer.Exit(code)


def error_line(message: str) -> None:
    """``error: MESSAGE`` on stderr, one line (control characters and line breaks escaped),
    "error:" in bold red on a terminal."""
    from rich.console import Console
    from rich.text import Text

    from .render import printable

    Console(stderr=True, highlight=False, soft_wrap=True).print(
        Text.assemble(("error:", "bold red"), " ", printable(message)))


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{question} needs confirmation: pass --yes when not at a terminal")
    if not typer.confirm(question, default=False, err=True):
        fail("aborted, nothing was changed")


@contextmanager
def as_usage_error(option: str) -> Iterator[None]:
    """The engine's InvalidArgument raised inside (a value it cannot use) as a usage error
    about ``option``: its message, exit 2."""
    from engine.errors import InvalidArgument

    try:
        yield
    except InvalidArgument as e:
        raise typer.BadParameter(str(e), param_hint=option) from None


def usage_error(e: Any, command: str | None = None) -> NoReturn:
    """A usage error of click/typer (bad option, missing argument, bad value...) as one line,
    its message and where the help is, exit 2 (typer's default is a box of several lines)."""
    if type(e).__name__ == "NoArgsIsHelpError":  # (typer shows the help)
        raise e
    message = " ".join(line.strip() for line in e.format_message().splitlines() if line.strip())
    if message.endswith(".") and not message.endswith(".."):
        message = message[:-1]
    ctx = getattr(e, "ctx", None)
    command = ctx.command_path if ctx is not None else command
    fail(message + (f" (see '{command} --help')" if command else ""), e.exit_code)


class RivvenGroup(TyperGroup):
    """Root group: engine errors cross into the CLI here, once, as a red line and an exit code;
    usage errors too (one line, exit 2); global options are read wherever they are on the
    line (``hoist_global_options``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, args))

    def _main_shell_completion(self, ctx_args: Any, prog_name: str,
                               complete_var: str | None = None) -> None:
        # (click's hook, run first on every start: a shell asking for completions sets
        # _RIVVEN_COMPLETE; only then are topic and group names wired in)
        var = complete_var or f"_{prog_name}_COMPLETE".replace("-", "_").upper()
        if os.environ.get(var):
            from .completion import attach

            attach(self)
        super()._main_shell_completion(ctx_args, prog_name, complete_var)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as e:  # (an option of the root: rivven --bogus)
            usage_error(e, info_name)

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                _report_repairs()
        except RivvenError as e:
            if STATE["debug"]:
                raise
            fail(str(e), getattr(e, "exit_code", 1))
        except BrokenPipeError:
            # the reader went away (e.g. `| head`): stop quietly like other Unix tools
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except OSError:
                pass
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except typer.TyperException as e:  # (click's exceptions: usage errors)
            usage_error(e)
        except Exception as e:
            # usage errors and exits belong to click/typer; anything else is a bug: still one
            # line, unless --debug
            if STATE["debug"] or type(e).__module__.startswith(("click", "typer")):
                raise
            fail(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the "
                 "traceback, and please report it)")


def _report_repairs() -> None:
    eng = STATE.pop("engine", None)
    if eng is None:
        return
    for c in eng.repairs():
        if c.get("action") == "ignored":  # damaged metadata: reported, never acted on
            sys.stderr.write(f"warning: {c['reason']}\n")
            continue
        sys.stderr.write(f"repaired: cut {plural(c['bytes'], 'byte')} at {c['file']}:{c['position']} "
                         f"({c['reason']}); the WAL restores what was acknowledged\n")


# ---------------------------------------------------------------- global options anywhere
GLOBAL_OPTIONS = ("data_dir", "debug", "lock_timeout_ms", "keyring")  # (the root's parameters)


def _options(cmd: Any) -> dict[str, int]:
    """``{option string: how many values it takes}`` of a command's options."""
    out = {"--help": 0}
    for p in cmd.params:
        if p.param_type_name == "option":
            n = 0 if p.is_flag or p.count else p.nargs
            out.update(dict.fromkeys((*p.opts, *p.secondary_opts), n))
    return out


def hoist_global_options(root: Any, args: list[str]) -> list[str]:
    """``args`` with the global options (``--data-dir``/``-d``, ``--debug``,
    ``--lock-timeout-ms``, ``--keyring``) found after the command words moved in front of them, as rpk and
    Kafka's tools read them anywhere: ``rivven topic list -d D`` = ``rivven -d D topic list``.

    The words are walked as click reads them, command by command: an option's value is
    never taken for an option (``produce t -k -d`` keeps ``-d`` as the key), nothing after
    ``--`` moves, a command's own option of the same name wins, a cluster of short flags
    (``-yd D``) is split, and an unknown option or command is left for click to refuse.
    Moved options go after the ones already in front: the later one wins, as in click."""
    glob = {o: n for o, n in _options(root).items()
            if o in {x for p in root.params if p.name in GLOBAL_OPTIONS
                     for x in (*p.opts, *p.secondary_opts)}}
    front: list[str] = []  # the root's own options, before the command
    moved: list[str] = []
    rest: list[str] = []
    i = _walk(args, 0, _options(root), {}, front, moved)
    cmd = root
    while i < len(args):
        word = args[i]
        sub = cmd.commands.get(word) if hasattr(cmd, "commands") else None
        if word == "--" or (sub is None and hasattr(cmd, "commands")):
            rest += args[i:]  # (an unknown command: click says so)
            break
        rest.append(word)  # a command, or a positional word of one
        cmd = sub or cmd
        i = _walk(args, i + 1, _options(cmd), glob, rest, moved)
    return front + moved + rest


def _walk(args: list[str], i: int, own: dict[str, int], glob: dict[str, int],
          keep: list[str], move: list[str]) -> int:
    """Read options from ``args[i]`` on, up to a word that is not one (or ``--``): a
    command's own (and unknown ones) into ``keep``, global ones into ``move``. Returns where
    it stopped."""
    while i < len(args):
        tok = args[i]
        if tok == "--" or tok == "-" or not tok.startswith("-"):
            return i
        i += 1
        name, eq, _ = tok.partition("=")
        if name in own or name in glob or tok.startswith("--"):  # (unknown: one word)
            take = 0 if eq else own.get(name, glob.get(name, 0))
            (move if name in glob and name not in own else keep).extend(
                [tok, *args[i:i + take]])
            i += take
            continue
        kept, values = "", []  # a cluster of short options: -yd DIR, -dDIR, -n5
        for j in range(1, len(tok)):
            o, attached = "-" + tok[j], tok[j + 1:]
            if o not in own and o not in glob:  # unknown: left for click to refuse
                kept += tok[j:]
                break
            n = own.get(o, glob.get(o, 0))
            if o in own:
                kept += tok[j] if n == 0 else tok[j:]
            elif n == 0:
                move.append(o)
            else:
                move.append(o + attached) if attached else move.extend([o, *args[i:i + n]])
            if n == 0:
                continue
            if not attached:
                if o in own:
                    values = args[i:i + n]
                i += n
            break
        if kept:
            keep.append("-" + kept)
        keep += values
    return i
