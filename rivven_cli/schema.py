"""``rivven schema ...``: the schema registry of the data dir (``Engine.schemas``, docs/
SCHEMAS.md) — register, list, get, check, delete, config, serve. Each works on the data dir
directly, as every other command does; ``rivven schema serve`` (or ``rivven serve
--schema-registry-listen``) answers Confluent's REST API for clients."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Any

import typer

from .common import JsonOpt, YesOpt, confirm, fail, no_data_yet, open_engine, state
from .render import done, print_json, print_table

app = typer.Typer(no_args_is_help=True)
MAX_FILE = 8 << 20  # (engine.schemas.arguments.MAX_SCHEMA)
SubjectArg = Annotated[str, typer.Argument(
    help="Subject (Confluent's naming: TOPIC-value, TOPIC-key).", show_default=False)]


class SchemaType(str, Enum):
    avro = "avro"
    protobuf = "protobuf"
    json = "json"


class Level(str, Enum):
    none = "NONE"
    backward = "BACKWARD"
    backward_transitive = "BACKWARD_TRANSITIVE"
    forward = "FORWARD"
    forward_transitive = "FORWARD_TRANSITIVE"
    full = "FULL"
    full_transitive = "FULL_TRANSITIVE"


TypeOpt = Annotated[SchemaType | None, typer.Option(
    "--type", "-t", case_sensitive=False,
    help="avro, protobuf or json (default: protobuf for a .proto file, else avro, as "
         "Confluent's).", show_default=False)]
FileOpt = Annotated[str, typer.Option(
    "--file", "-f", metavar="FILE", help="The schema's file (- for stdin).")]
ReferenceOpt = Annotated[list[str] | None, typer.Option(
    "--reference", "-r", metavar="NAME=SUBJECT:VERSION",
    help="A schema this one refers to (repeatable): NAME as the schema names it (an Avro full "
         "name, a .proto import path, a JSON $ref), SUBJECT:VERSION where it is registered.",
    show_default=False)]
NormalizeOpt = Annotated[bool, typer.Option(
    "--normalize", help="Compare (and store) the schema in its normalized form, as "
                        "Confluent's normalize=true.")]


def _schema_file(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read(MAX_FILE + 1)
    else:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE + 1)
        except OSError as e:
            fail(f"cannot read --file {path}: {e.strerror}")
    if len(data) > MAX_FILE:
        fail(f"--file {path} is larger than {MAX_FILE >> 20} MiB: not a schema")
    try:
        return data.decode()
    except UnicodeDecodeError:
        fail(f"--file {path} is not UTF-8 text: give the schema's text")


def _type(given: SchemaType | None, path: str) -> str:
    if given is not None:
        return given.value.upper()
    return "PROTOBUF" if path.endswith(".proto") else "AVRO"


def _references(given: list[str] | None) -> list[dict[str, Any]]:
    out = []
    for r in given or ():
        name, eq, where = r.partition("=")
        subject, colon, version = where.rpartition(":")
        if not eq or not name or not colon or not subject or not version.isdigit():
            raise typer.BadParameter(f"{r!r}: use NAME=SUBJECT:VERSION, e.g. "
                                     "com.acme.Address=address-value:1", param_hint="--reference")
        out.append({"name": name, "subject": subject, "version": int(version)})
    return out


def _version(given: str | None) -> str | None:
    """A --version as the registry takes it: a number from 1, or latest (a usage error
    otherwise, before anything is opened)."""
    if given is None:
        return None
    from engine.schemas.errors import InvalidVersion
    from engine.schemas.registry import check_version

    try:
        check_version(given)
    except InvalidVersion:
        raise typer.BadParameter(f"{given!r}: a version number from 1, or latest",
                                 param_hint="--version") from None
    return given


class _NoSchemas:
    """The ``_schemas`` topic of a data dir that does not exist yet: empty."""

    def end(self) -> int:
        return 0

    def read(self, offset: int, max_records: int) -> list[tuple[int, bytes | None, bytes | None]]:
        return []

    def append(self, recs: Any) -> None:
        raise AssertionError("a reading command appends nothing")


def _never_writable() -> None:
    raise AssertionError("a reading command writes nothing")


@contextmanager
def _reading() -> Iterator[Any]:
    """The data dir's registry to read; with no data dir yet, an empty registry: a subject or
    an id is not found as in an empty one, a schema is still parsed and checked, and nothing
    is created."""
    if no_data_yet(state().data_dir):
        from engine.schemas.registry import Registry

        yield Registry(_NoSchemas(), "", _never_writable)
        return
    with open_engine(read_only=True) as eng:
        yield eng.schemas


@app.command()
def register(
    subject: SubjectArg,
    file: FileOpt,
    schema_type: TypeOpt = None,
    reference: ReferenceOpt = None,
    normalize: NormalizeOpt = False,
    json: JsonOpt = False,
) -> None:
    """Register a schema under a subject: a new version when it differs from the subject's
    versions and passes the subject's compatibility level; its id (global: the same schema
    has the same id in every subject)."""
    refs = _references(reference)
    text = _schema_file(file)
    stype = _type(schema_type, file)
    with open_engine() as eng:
        reg = eng.schemas
        sid = reg.register(subject, text, stype, refs, normalize)["id"]
        got = reg.lookup(subject, text, stype, refs, normalize)
    row = {"subject": subject, "version": got["version"], "id": sid, "schemaType": stype}
    if json:
        print_json(row)
        return
    done(f"{subject} version {row['version']}: schema id {sid} ({stype})")


@app.command("list")
def list_(
    deleted: Annotated[bool, typer.Option(
        "--deleted", help="Also subjects whose versions are all soft-deleted.")] = False,
    prefix: Annotated[str, typer.Option(
        "--prefix", help="Only subjects whose name starts with this.")] = "",
    json: JsonOpt = False,
) -> None:
    """Subjects with their versions, the latest version's id and type."""
    rows: list[dict[str, Any]] = []
    with _reading() as reg:
        for s in reg.subjects(deleted=deleted, prefix=prefix):
            vs = reg.versions(s, deleted=deleted)
            latest = reg.version(s, "latest", deleted=deleted)
            rows.append({"subject": s, "versions": vs, "latest": latest["version"],
                         "id": latest["id"], "schemaType": latest["schemaType"]})
    if json:
        print_json(rows)
        return
    print_table(["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"],
                [(r["subject"], ",".join(map(str, r["versions"])), r["latest"], r["id"],
                  r["schemaType"]) for r in rows], right=("LATEST", "ID"))


@app.command()
def get(
    subject: Annotated[str | None, typer.Argument(
        help="Subject (not needed with --id).", show_default=False)] = None,
    version: Annotated[str | None, typer.Option(
        "--version", "-v", metavar="N", help="A version number or latest (the default).",
        show_default=False)] = None,
    schema_id: Annotated[int | None, typer.Option(
        "--id", metavar="ID", help="The schema of this id instead.", show_default=False)] = None,
    deleted: Annotated[bool, typer.Option(
        "--deleted", help="A soft-deleted version too.")] = False,
    json: JsonOpt = False,
) -> None:
    """A schema: a subject's version (the latest by default) or the schema of an id, with
    its id, version, type and references, then its text."""
    if schema_id is not None and version is not None:
        raise typer.BadParameter("use either --version or --id", param_hint="--id")
    if schema_id is None and subject is None:
        raise typer.BadParameter("give a SUBJECT, or --id ID", param_hint="SUBJECT")
    version = _version(version)
    with _reading() as reg:
        if schema_id is not None:
            entry = dict(reg.schema_by_id(schema_id))
            entry["id"] = schema_id
            live = {(x["subject"], x["version"]) for x in reg.versions_of(schema_id)}
            entry["subjects"] = [x | {"deleted": (x["subject"], x["version"]) not in live}
                                 for x in reg.versions_of(schema_id, deleted=True)]
            if subject is not None and subject not in {x["subject"] for x in entry["subjects"]}:
                fail(f"schema id {schema_id} is not a version of subject {subject!r}; drop "
                     f"SUBJECT or see 'rivven schema get --id {schema_id}'")
        else:
            assert subject is not None
            entry = reg.version(subject, version or "latest", deleted=deleted)
    if json:
        print_json(entry)
        return
    if "subjects" in entry:
        where = ", ".join(f"{x['subject']} v{x['version']}"
                          + (" (soft-deleted)" if x["deleted"] else "") for x in entry["subjects"])
        sys.stdout.write(f"id {entry['id']} ({entry['schemaType']}): {where or 'no subject'}\n")
    else:
        sys.stdout.write(f"{entry['subject']} version {entry['version']}: id {entry['id']} "
                         f"({entry['schemaType']})\n")
    for r in entry.get("references", ()):
        sys.stdout.write(f"reference {r['name']} = {r['subject']}:{r['version']}\n")
    sys.stdout.write(entry["schema"].rstrip("\n") + "\n")


@app.command()
def check(
    subject: SubjectArg,
    file: FileOpt,
    schema_type: TypeOpt = None,
    reference: ReferenceOpt = None,
    version: Annotated[str | None, typer.Option(
        "--version", "-v", metavar="N", help="Check against this version only (default: "
        "the versions the subject's level compares with).", show_default=False)] = None,
    json: JsonOpt = False,
) -> None:
    """Whether a schema could be registered under a subject, by its compatibility level,
    and why not when it could not. Exit code 1 when it is not compatible."""
    refs = _references(reference)
    version = _version(version)
    text = _schema_file(file)
    stype = _type(schema_type, file)
    with _reading() as reg:
        out = reg.check(subject, version, text, stype, refs, verbose=True)
        level = reg.config(subject, default_to_global=True)["compatibilityLevel"]
        first = subject not in reg.subjects()
    if json:
        print_json(out | {"subject": subject, "compatibility": level})
    elif out["is_compatible"]:
        done(f"compatible with {subject} ({level})"
             + (": it has no live version to compare with" if first else ""))
    else:
        reasons = [m for m in out["messages"]
                   if not m.startswith(("{oldSchemaVersion:", "{compatibility:"))]
        sys.stdout.write(f"not compatible with {subject} ({level}):\n")
        for m in reasons:
            sys.stdout.write(f"  {m}\n")
    if not out["is_compatible"]:
        raise typer.Exit(1)


@app.command()
def delete(
    subject: SubjectArg,
    version: Annotated[str | None, typer.Option(
        "--version", "-v", metavar="N", help="Delete this version (or latest) only, not the "
        "subject.", show_default=False)] = None,
    permanent: Annotated[bool, typer.Option(
        "--permanent", help="Delete for good what a soft delete hid (its records tombstoned; "
                            "the ids are never given again).")] = False,
    yes: YesOpt = False,
    json: JsonOpt = False,
) -> None:
    """Soft-delete a subject or one version (hidden, still readable with --deleted; its
    ids keep decoding records), or with --permanent delete what was soft-deleted."""
    version = _version(version)
    if no_data_yet(state().data_dir):
        with _reading() as reg:
            reg.versions(subject)  # (not found: nothing to delete, and nothing is created)
    with open_engine() as eng:
        reg = eng.schemas
        what = f"{subject} version {version}" if version else f"subject {subject}"
        if permanent:
            confirm(f"delete {what} permanently?", yes)
        if version is not None:
            versions = [reg.delete_version(subject, version, permanent)]
        else:
            versions = reg.delete_subject(subject, permanent)
    if json:
        print_json({"subject": subject, "versions": versions, "permanent": permanent})
        return
    done(f"{subject}: {'permanently ' if permanent else 'soft-'}deleted version"
         f"{'s' if len(versions) != 1 else ''} {', '.join(map(str, versions))}")


@app.command()
def config(
    subject: Annotated[str | None, typer.Argument(
        help="Subject (default: the global level).", show_default=False)] = None,
    compatibility: Annotated[Level | None, typer.Option(
        "--compatibility", "-c", case_sensitive=False, metavar="MODE",
        help="Set the level: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, "
             "FULL or FULL_TRANSITIVE.", show_default=False)] = None,
    reset: Annotated[bool, typer.Option(
        "--delete", help="Remove the subject's own level (the global one applies again); "
                         "without SUBJECT, the global level back to BACKWARD.")] = False,
    json: JsonOpt = False,
) -> None:
    """Show or set the compatibility level, globally or of one subject."""
    if reset and compatibility is not None:
        raise typer.BadParameter("use either --delete or --compatibility",
                                 param_hint="--delete")
    if reset and subject is not None and no_data_yet(state().data_dir):
        with _reading() as reg:
            reg.versions(subject)  # (not found: no level to remove, and nothing is created)
    if compatibility is not None or (reset and not no_data_yet(state().data_dir)):
        with open_engine() as eng:
            if compatibility is None:
                eng.schemas.delete_config(subject)
                level = eng.schemas.config(subject, True)["compatibilityLevel"]
            else:
                level = eng.schemas.set_config(subject, compatibility.value)["compatibility"]
        own = subject is not None and not reset
    else:
        with _reading() as reg:
            level = reg.config(subject, True)["compatibilityLevel"]
            own = subject is not None and subject in reg.subject_levels()
    row = {"subject": subject, "compatibilityLevel": level,
           "source": "subject" if own else "global"}
    if json:
        print_json(row)
        return
    where = subject if subject is not None else "global"
    said = "set" if compatibility is not None else "now" if reset else "is"
    done(f"{where}: compatibility {said} {level}"
         + ("" if subject is None or own else " (the global level)"))


class Loop(str, Enum):
    auto = "auto"
    uvloop = "uvloop"
    asyncio = "asyncio"


@app.command()
def serve(
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT",
        help="Where to answer Confluent's REST API (port 0: any free one).")
    ] = "127.0.0.1:8081",
    authenticate: Annotated[bool, typer.Option(
        "--authenticate", help="HTTP basic auth against the data dir's SCRAM users (rivven "
                               "user add); without it every request is User:ANONYMOUS.")] = False,
    tls: Annotated[bool, typer.Option(
        "--tls", help="HTTPS, with the certificate of the ssl.* settings (-c "
                      "ssl.keystore.location=... as rivven serve: docs/SECURITY.md).")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", "-c", metavar="KEY=VALUE",
        help="rivven serve's settings that apply here: the ssl.* ones, super.users and the "
             "other authorizer settings (docs/SCHEMAS.md); repeatable.",
        show_default=False)] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Answer plain HTTP on an address other than loopback.")] = False,
    loop: Annotated[Loop, typer.Option(
        "--loop", metavar="LOOP", help="The event loop: uvloop (about twice the requests per CPU second), "
                       "asyncio, or auto (uvloop when installed).")] = Loop.auto,
) -> None:
    """Answer the schema registry's REST API (Confluent's: its clients, serializers and UIs
    work unchanged) over the data dir until Ctrl-C or SIGTERM. Other processes keep using the
    data dir meanwhile; their registrations are seen within 50 ms. `rivven serve
    --schema-registry-listen` does the same beside the Kafka listener."""
    from engine.errors import RivvenError
    from engine.kafka.config import ServeConfig
    from engine.kafka.serve import is_loopback, parse_address
    from engine.kafka.tls import server_context
    from engine.schemas.access import Access
    from engine.schemas.http import Api
    from engine.schemas.server import serve as run

    try:
        host, port = parse_address(listen, "--listen")
        values = {}
        for item in settings or ():
            k, sep, v = item.partition("=")
            if not sep or not k.strip():
                fail(f"--set {item!r}: use KEY=VALUE, e.g. --set super.users=User:admin",
                     code=2)
            values[k.strip()] = v.strip()
        cfg = ServeConfig.parse(values)
        ctx = server_context(cfg, "SSL") if tls else None
    except RivvenError as e:
        fail(str(e), code=2)
    if not tls and not insecure and not is_loopback(host):
        fail(f"--listen {listen} is not a loopback address: plain HTTP has no encryption; "
             "add --tls (with the ssl.* settings) or --insecure", code=2)
    scheme = "https" if tls else "http"

    def ready(listener: Any) -> None:
        sys.stderr.write(f"rivven schema registry of {state().data_dir} on "
                         f"{scheme}://{listener.host}:{listener.port} (Ctrl-C stops)\n")
        sys.stderr.flush()

    with open_engine() as eng:
        access = Access.from_data_dir(eng.users if authenticate else None, eng.acls,
                                      cfg.super_user_set(), cfg.allow_everyone_if_no_acl_found,
                                      cfg.authorizer_on())
        try:
            run(Api(eng.schemas, access), host, port, ctx, loop.value, on_ready=ready)
        except OSError as e:
            fail(f"cannot listen on {listen}: {e.strerror}; pick another with --listen")
    sys.stderr.write("stopped\n")
