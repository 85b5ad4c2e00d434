"""What every command shares: options defined once, the global options' state, the engine
opener, and error mapping.

Nothing of the engine is imported here at start (nor by any command module): ``rivven
--help`` and shell completion load the command tree only, and a command imports what it uses
when it runs (tests/cli/test_cli_startup.py keeps it so).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, NoReturn

import typer
from typer._click.types import FloatParamType, IntParamType, IntRange, StringParamType
from typer._types import TyperChoice
from typer.core import TyperArgument, TyperGroup, TyperOption

DEFAULT_DATA_DIR = "./rivven-data"
# (the root's parameters; bootstrap_server: a hint, rivven_cli.habits)
GLOBAL_OPTIONS = ("data_dir", "debug", "lock_timeout_ms", "keyring", "bootstrap_server")


@dataclass
class CliState:
    """The global options of the line, wherever they were given (``rivven -d D topic list``
    or ``rivven topic list -d D``: the later wins), and the engine the command opened: the
    root context's ``obj`` (Typer's ``ctx.obj``, shared by every context below it)."""

    data_dir: str = DEFAULT_DATA_DIR
    debug: bool = False
    keyring: str | None = None
    lock_timeout_ms: int | None = None
    engine: Any = None  # what open_engine opened: its repairs are reported when the command ends

    @property
    def settings(self) -> dict[str, str]:
        """The engine settings the options give."""
        return {} if self.lock_timeout_ms is None else {"lock.timeout.ms": str(self.lock_timeout_ms)}


def state() -> CliState:
    """The running command's ``CliState``."""
    from typer._click.globals import get_current_context  # (typer's own copy of click)

    return get_current_context().find_root().obj


def store_global(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """The callback of the root's global options: their value into ``ctx.obj``."""
    if param.name == "keyring":
        value = value or None  # (RIVVEN_KEYRING= set empty: none)
    setattr(ctx.obj, param.name or "", value)
    return value


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
    """The engine of ``--data-dir``, with the global options' settings; what its opening
    recovered is reported on stderr (render.recovery_report), its repairs when the command
    ends."""
    from engine import Engine

    from .progress import progress_bar
    from .render import recovery_report

    st = state()
    with progress_bar() as progress:  # (crash recovery can take a while)
        eng = Engine.open(st.data_dir, read_only=read_only, sync=sync, recover=recover,
                          progress=progress, settings=st.settings,
                          on_lock_wait=_lock_wait, keyring=st.keyring)
    st.engine = eng
    for line in recovery_report(eng.last_recovery):
        sys.stderr.write(line + "\n")
    return eng


def no_data_yet(path: str) -> bool:
    """No data dir at ``path`` yet, or an empty directory (a first write makes it one)."""
    try:
        return not os.listdir(path)
    except FileNotFoundError:
        return True
    except OSError:  # (a file, no permission: opening names the problem)
        return False


def file_openers() -> Any:
    """What opens encrypted batches for the commands that read files by path, without an
    engine (engine.tools.openers), with the keyring of ``--keyring``/``RIVVEN_KEYRING``."""
    from engine.crypto.keyring import resolve
    from engine.crypto.topic import Vault
    from engine.tools.openers import Openers

    return Openers(Vault(resolve(state().keyring)))


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
    usage errors too (one line, exit 2). Every command below it takes the global options too
    (``rivven topic list -d D``, as rpk and Kafka's tools read them anywhere): hidden copies
    of the root's, read by click's own parser, which store through the root's option (its
    checks, its messages). A command's own option of the same name wins."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        root = {p.name: p for p in self.params if p.name in GLOBAL_OPTIONS}
        _give_global_options(self.commands.values(), [global_copy(p) for p in root.values()])
        tidy_help(self)

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
        if parent is None and extra.get("obj") is None:
            extra["obj"] = CliState()  # (before parsing: the options' callbacks fill it)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as e:  # (an option of the root: rivven --bogus)
            usage_error(e, info_name)

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                _report_repairs(ctx.obj)
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
            # usage errors and exits belong to click/typer (a --help too)
            if ctx.obj.debug or type(e).__module__.startswith(("click", "typer")):
                raise
            from engine.errors import RivvenError  # (imported here: start-up never pays)

            if isinstance(e, RivvenError):
                fail(str(e), getattr(e, "exit_code", 1))
            # anything else is a bug: still one line, unless --debug
            fail(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the "
                 "traceback, and please report it)")


class NounGroup(TyperGroup):
    """A group of commands (``rivven topic``): one that shows its help when given nothing
    shows it too when given no command, only global options (``rivven topic -d D``; not
    click's "Missing command")."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.help_without_command = self.no_args_is_help and not self.invoke_without_command
        self.invoke_without_command = True  # (invoke decides)

    def invoke(self, ctx: Any) -> Any:
        rv = super().invoke(ctx)
        if ctx.invoked_subcommand is None and self.help_without_command:
            from typer._click.exceptions import NoArgsIsHelpError

            raise NoArgsIsHelpError(ctx)
        return rv


def global_copy(root: Any) -> TyperOption:
    """A hidden option of a command below the root with the root option ``root``'s names:
    its value, when given, goes through ``root`` (its type and range checks, its callback:
    ``store_global``), so an error names the root's option as when given in front."""
    def store(ctx: Any, param: Any, value: Any) -> Any:
        if value is None or value is False:  # not given after this command
            return None
        return root.process_value(ctx.find_root(), value)

    return TyperOption(param_decls=[*root.opts, *root.secondary_opts], is_flag=root.is_flag,
                       default=False if root.is_flag else None, hidden=True,
                       expose_value=False, callback=store)


def _give_global_options(commands: Any, options: list[TyperOption]) -> None:
    """``options`` on every command of ``commands`` and below, but for one that has an
    option of the same name (once: a second call adds nothing)."""
    for cmd in commands:
        own = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        cmd.params += [o for o in options if not own & {*o.opts, *o.secondary_opts}]
        _give_global_options(getattr(cmd, "commands", {}).values(), options)


def _report_repairs(st: CliState) -> None:
    eng, st.engine = st.engine, None
    if eng is None:
        return
    from .render import repairs_report

    for line in repairs_report(eng.recovery.repairs()):
        sys.stderr.write(line + "\n")


# ---------------------------------------------------------------- --help as a reader wants it
# what an option's value is, beside it in --help (Typer shows "<str>", "<int range>")
METAVARS = {
    "--before": "POS", "--bind": "HOST", "--by-duration": "DURATION", "--checkpoint": "DIR",
    "--compression": "CODEC", "--conf": "KEY=VALUE", "--config": "KEY=VALUE",
    "--data-dir": "DIR", "--delete": "KEY", "--deploy-mode": "MODE", "--dir": "DIR",
    "--file": "FILE", "--format": "FORMAT", "--from": "POS", "--from-file": "FILE",
    "--group": "GROUP", "--header": "KEY=VALUE", "--idle-timeout": "DURATION", "--key": "KEY",
    "--key-separator": "SEP", "--keyring": "FILE", "--master": "URL", "--member-id": "ID",
    "--offset": "POS", "--port": "PORT", "--set": "KEY=VALUE", "--starting-offsets": "WHERE",
    "--time": "TIME", "--to": "POS", "--to-datetime": "TIME", "--to-file": "FILE",
    "--topic": "TOPIC", "--topics": "TOPICS", "--transactional-id": "ID", "--transform": "SQL",
    "--interval": "SECONDS", "--input": "KIND", "--key-encoding": "ENCODING",
    "--value-encoding": "ENCODING", "--isolation": "LEVEL",  # (their help names the choices)
}
METAVARS_OF_COMMAND = {("rewrap", "--to"): "KEY_ID", ("stream", "--from"): "TOPIC",
                       ("stream", "--to"): "TOPIC"}


class _Text(StringParamType):
    """A text argument's type: its name says what it is (TOPIC), no "<str>" beside it."""

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return ""


class _Range(IntRange):
    """An int range whose upper bound is a storage limit (2^31 - 1), shown by its lower
    bound only ("x>=1"): a reader never nears the other, and it crowded the help."""

    def _describe_range(self) -> str:
        return f"x>={self.min}"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        rv = IntParamType.convert(self, value, param, ctx)
        if not self.min <= rv <= self.max:  # (the error names both bounds)
            self.fail(f"{rv} is not in the range {self.min}<=x<={self.max}", param, ctx)
        return rv


class _Argument(TyperArgument):
    """An argument shown as click and most tools show one: ``NAME`` when required,
    ``[NAME]`` when not, ``NAME...`` when repeated (Typer's own: ``{name}``)."""

    def make_metavar(self, ctx: Any, *, usage: bool = False) -> str:
        var = self.metavar or (self.name or "").upper()
        if var.startswith("["):
            return var
        var += "..." if self.nargs != 1 else ""
        return var if self.required or not usage else f"[{var}]"


def tidy_help(cmd: Any) -> None:
    """The help of ``cmd`` and every command below it: paragraphs reflowed (a docstring's
    line breaks would show as ragged lines), metavars that say what a value is."""
    if cmd.help:
        cmd.help = _reflow(cmd.help)
    for p in cmd.params:
        if isinstance(p, TyperArgument):
            p.__class__ = _Argument
            p.metavar = p.metavar or (p.name or "").upper()
            if type(p.type) is StringParamType:
                p.type = _Text()
        elif isinstance(p, TyperOption) and not p.is_flag and p.metavar is None:
            p.metavar = _option_metavar(cmd.name, p)
            if type(p.type) is IntRange and p.type.min is not None and \
                    (p.type.max or 0) >= (1 << 31) - 1:
                p.type.__class__ = _Range
    for sub in getattr(cmd, "commands", {}).values():
        tidy_help(sub)


def _option_metavar(command: str | None, p: TyperOption) -> str:
    long = next((o for o in p.opts if o.startswith("--")), p.opts[0])
    if (command or "", long) in METAVARS_OF_COMMAND:
        return METAVARS_OF_COMMAND[(command or "", long)]
    if long in METAVARS:
        return METAVARS[long]
    if isinstance(p.type, TyperChoice):
        return "[" + "|".join(str(getattr(c, "value", c)) for c in p.type.choices) + "]"
    if isinstance(p.type, IntParamType | FloatParamType):
        return "N"
    return "TEXT"


def _reflow(text: str) -> str:
    """``text`` (a docstring) with each paragraph's lines joined: the terminal wraps them.
    A paragraph of indented lines (an example) or click's "\\b" keeps its lines."""
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") or any(line.startswith(" ") for line in
                                                        p.splitlines())
                       else " ".join(line.strip() for line in p.splitlines())
                       for p in paragraphs)
