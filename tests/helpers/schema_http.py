"""What the schema registry's HTTP tests share: ``FakeRegistry`` (in memory, the methods and
errors of engine/schemas/registry.py's ``Registry``: the routes are tested without the topic
underneath), ``running(api)`` (the listener in an event loop of its own thread, on a free
port), and clients: ``call`` (http.client, one request), ``exchange`` (raw bytes in, every
answer parsed out: pipelining, malformed requests).

A schema here is any text (AVRO and JSON ones must be JSON); one containing ``INCOMPATIBLE``
is incompatible with any earlier version."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httptools

from engine.schemas import errors as E
from engine.schemas.http import Api
from engine.schemas.server import Limits, Listener, loop_factory, start

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


class FakeRegistry:
    def __init__(self) -> None:
        self.subj: dict[str, dict[int, dict[str, Any]]] = {}
        self.ids: dict[int, dict[str, Any]] = {}
        self.levels: dict[str | None, str] = {}
        self.generation = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (method, its arguments), in order
        self.refreshes = 0
        self.fail: Exception | None = None  # raised by the next call, once
        self._mu = threading.RLock()

    def _called(self, name: str, **args: Any) -> None:
        self.calls.append((name, args))
        if self.fail is not None:
            e, self.fail = self.fail, None
            raise e

    def last(self, name: str) -> dict[str, Any]:
        """The arguments of the last call of ``name``."""
        return [a for n, a in self.calls if n == name][-1]

    def refresh(self) -> int:
        self.refreshes += 1
        return self.generation

    # ------------------------------------------------------------------ reads
    def types(self) -> list[str]:
        self._called("types")
        return ["JSON", "PROTOBUF", "AVRO"]

    def subjects(self, deleted: bool = False, deleted_only: bool = False,
                 prefix: str = "") -> list[str]:
        self._called("subjects", deleted=deleted, deleted_only=deleted_only, prefix=prefix)
        out = []
        for s, vs in self.subj.items():
            if not s.startswith(prefix):
                continue
            live = any(not v["deleted"] for v in vs.values())
            gone = any(v["deleted"] for v in vs.values())
            if (deleted_only and gone) or (not deleted_only and (live or deleted)):
                out.append(s)
        return sorted(out)

    def versions(self, subject: str, deleted: bool = False,
                 deleted_only: bool = False) -> list[int]:
        self._called("versions", subject=subject, deleted=deleted, deleted_only=deleted_only)
        vs = self.subj.get(subject, {})
        if deleted_only:
            out = [n for n, v in sorted(vs.items()) if v["deleted"]]
        else:
            out = [n for n, v in sorted(vs.items()) if deleted or not v["deleted"]]
        if not vs or (not out and not deleted_only and not deleted):
            raise E.SubjectNotFound(f"Subject '{subject}' not found.")
        return out

    def version(self, subject: str, version: str | int, deleted: bool = False,
                fmt: str | None = None) -> dict[str, Any]:
        self._called("version", subject=subject, version=version, deleted=deleted, fmt=fmt)
        v = self._version(subject, version, deleted)
        return self._entry(subject, v, fmt)

    def _version(self, subject: str, version: str | int, deleted: bool) -> dict[str, Any]:
        n = check_version(version)
        seen = [v for _, v in sorted(self.subj.get(subject, {}).items())
                if deleted or not v["deleted"]]
        if not seen:
            raise E.SubjectNotFound(f"Subject '{subject}' not found.")
        if n is None:
            return seen[-1]
        for v in seen:
            if v["version"] == n:
                return v
        raise E.VersionNotFound(f"Version {n} not found.")

    def _entry(self, subject: str, v: dict[str, Any], fmt: str | None) -> dict[str, Any]:
        out = {"subject": subject, "version": v["version"], "id": v["id"],
               "schemaType": v["schemaType"]}
        if v["references"]:
            out["references"] = v["references"]
        out["schema"] = _text(v["schema"], fmt)
        return out

    def schema_by_id(self, sid: int, subject: str | None = None,
                     fmt: str | None = None) -> dict[str, Any]:
        self._called("schema_by_id", sid=sid, subject=subject, fmt=fmt)
        got = self.ids.get(sid)
        if got is None:
            raise E.SchemaNotFound(f"Schema {sid} not found", 40403)
        out: dict[str, Any] = {"schemaType": got["schemaType"]}
        if got["references"]:
            out["references"] = got["references"]
        out["schema"] = _text(got["schema"], fmt)
        return out

    def _holders(self, sid: int, deleted: bool) -> list[tuple[str, int]]:
        if sid not in self.ids:
            raise E.SchemaNotFound(f"Schema {sid} not found", 40403)
        return sorted((s, n) for s, vs in self.subj.items() for n, v in vs.items()
                      if v["id"] == sid and (deleted or not v["deleted"]))

    def subjects_of(self, sid: int, deleted: bool = False) -> list[str]:
        self._called("subjects_of", sid=sid, deleted=deleted)
        return sorted({s for s, _ in self._holders(sid, deleted)})

    def versions_of(self, sid: int, deleted: bool = False) -> list[dict[str, Any]]:
        self._called("versions_of", sid=sid, deleted=deleted)
        return [{"subject": s, "version": n} for s, n in self._holders(sid, deleted)]

    def config(self, subject: str | None = None,
               default_to_global: bool = False) -> dict[str, Any]:
        self._called("config", subject=subject, default_to_global=default_to_global)
        if subject is None or default_to_global or subject in self.levels:
            return {"compatibilityLevel": self.levels.get(subject,
                                                          self.levels.get(None, "BACKWARD"))}
        raise E.SubjectConfigNotFound(
            f"Subject '{subject}' does not have subject-level compatibility configured")

    def mode(self, subject: str | None = None) -> dict[str, Any]:
        self._called("mode", subject=subject)
        return {"mode": "READWRITE"}

    # ------------------------------------------------------------------ writes
    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: Sequence[Any] = (), normalize: bool = False) -> dict[str, Any]:
        self._called("register", subject=subject, schema=schema, schema_type=schema_type,
                     references=references, normalize=normalize)
        if not subject or any(ord(c) < 32 for c in subject):
            raise E.InvalidSubject(f"The specified subject '{subject}' is not a valid.")
        stype, refs = self._checked(schema, schema_type, references)
        with self._mu:
            vs = self.subj.get(subject, {})
            for v in vs.values():
                if not v["deleted"] and v["schema"] == schema and v["schemaType"] == stype:
                    return {"id": v["id"]}
            live = [v for v in vs.values() if not v["deleted"]]
            level = self.levels.get(subject, self.levels.get(None, "BACKWARD"))
            if live and level != "NONE" and "INCOMPATIBLE" in schema:
                raise E.IncompatibleSchema(
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: [fake: INCOMPATIBLE]')
            sid = next((i for i, s in self.ids.items()
                        if s["schema"] == schema and s["schemaType"] == stype), None)
            if sid is None:
                sid = max(self.ids, default=0) + 1
                self.ids[sid] = {"schemaType": stype, "schema": schema, "references": refs}
            n = max(vs, default=0) + 1
            self.subj.setdefault(subject, {})[n] = {
                "version": n, "id": sid, "schemaType": stype, "schema": schema,
                "references": refs, "deleted": False}
            self.generation += 1
            return {"id": sid}

    def _checked(self, schema: Any, schema_type: Any,
                 references: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
        if not isinstance(schema, str) or not schema.strip():
            raise E.InvalidSchema("Invalid schema: the schema is empty or not a string")
        stype = (schema_type or "AVRO").upper() if isinstance(schema_type, str) else ""
        if stype not in ("AVRO", "PROTOBUF", "JSON"):
            raise E.InvalidSchema(f"Invalid schema type {schema_type!r}: use AVRO, PROTOBUF or "
                                  "JSON")
        if stype != "PROTOBUF":
            try:
                json.loads(schema)
            except ValueError as e:
                raise E.InvalidSchema(f"Invalid schema: {e}") from None
        refs = []
        for r in references:
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                raise E.BadRequest("references: each one is {name, subject, version}")
            target = self.subj.get(r.get("subject"), {}).get(r.get("version"))  # type: ignore
            if target is None:
                raise E.InvalidSchema(f"Invalid schema: the reference {r['name']!r} does not "
                                      "exist")
            refs.append({"name": r["name"], "subject": r["subject"], "version": r["version"]})
        return stype, refs

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: Sequence[Any] = (), normalize: bool = False,
               deleted: bool = False) -> dict[str, Any]:
        self._called("lookup", subject=subject, schema=schema, schema_type=schema_type,
                     references=references, normalize=normalize, deleted=deleted)
        if not self.subj.get(subject):
            raise E.SubjectNotFound(f"Subject '{subject}' not found.")
        stype, _ = self._checked(schema, schema_type, references)
        for _, v in sorted(self.subj[subject].items(), reverse=True):
            if (deleted or not v["deleted"]) and v["schema"] == schema and \
                    v["schemaType"] == stype:
                return self._entry(subject, v, None)
        raise E.SchemaNotFound("Schema not found", 40403)

    def check(self, subject: str, version: str | int | None, schema: str,
              schema_type: str = "AVRO", references: Sequence[Any] = (),
              normalize: bool = False, verbose: bool = False) -> dict[str, Any]:
        self._called("check", subject=subject, version=version, schema=schema,
                     schema_type=schema_type, references=references, normalize=normalize,
                     verbose=verbose)
        self._checked(schema, schema_type, references)
        if version is not None:
            try:
                self._version(subject, version, False)
            except E.SubjectNotFound:
                if check_version(version) is not None:
                    raise
        problems = ["fake: INCOMPATIBLE"] if "INCOMPATIBLE" in schema else []
        out: dict[str, Any] = {"is_compatible": not problems}
        if verbose:
            out["messages"] = problems
        return out

    def set_config(self, subject: str | None, level: str) -> dict[str, Any]:
        self._called("set_config", subject=subject, level=level)
        lv = level.upper() if isinstance(level, str) else ""
        if lv not in LEVELS:
            raise E.InvalidCompatibility(
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive")
        with self._mu:
            self.levels[subject] = lv
            self.generation += 1
        return {"compatibility": lv}

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        self._called("delete_config", subject=subject)
        with self._mu:
            if subject is None:
                was = self.levels.pop(None, "BACKWARD")
                self.generation += 1
                return {"compatibilityLevel": was}
            if subject not in self.levels:
                if subject not in self.subj:
                    raise E.SubjectNotFound(f"Subject '{subject}' not found.")
                raise E.SubjectConfigNotFound(
                    f"Subject '{subject}' does not have subject-level compatibility configured")
            was = self.levels.pop(subject)
            self.generation += 1
        return {"compatibilityLevel": was}

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        self._called("delete_subject", subject=subject, permanent=permanent)
        with self._mu:
            vs = self.subj.get(subject)
            if not vs:
                raise E.SubjectNotFound(f"Subject '{subject}' not found.")
            live = [n for n, v in sorted(vs.items()) if not v["deleted"]]
            if permanent:
                if live:
                    raise E.SubjectNotSoftDeleted(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted", 40405)
                gone = sorted(vs)
                del self.subj[subject]
            else:
                if not live:
                    raise E.SubjectSoftDeleted(
                        f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                        "permanently", 40404)
                self._no_referrers(subject, live)
                for n in live:
                    vs[n]["deleted"] = True
                gone = live
            self.generation += 1
            return gone

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        self._called("delete_version", subject=subject, version=version, permanent=permanent)
        n = check_version(version)
        with self._mu:
            vs = self.subj.get(subject)
            if not vs:
                raise E.SubjectNotFound(f"Subject '{subject}' not found.")
            if n is None:
                n = max(k for k, v in vs.items() if permanent or not v["deleted"])
            v = vs.get(n)
            if v is None:
                raise E.VersionNotFound(f"Version {n} not found.")
            if permanent:
                if not v["deleted"]:
                    raise E.VersionNotSoftDeleted(
                        f"Subject '{subject}' Version {n} was not deleted first before being "
                        "permanently deleted", 40407)
                del vs[n]
            else:
                if v["deleted"]:
                    raise E.VersionSoftDeleted(
                        f"Subject '{subject}' Version {n} was soft deleted.Set permanent=true "
                        "to delete permanently", 40406)
                self._no_referrers(subject, [n])
                v["deleted"] = True
            self.generation += 1
            return n

    def _no_referrers(self, subject: str, versions: list[int]) -> None:
        for vs in self.subj.values():
            for v in vs.values():
                for r in v["references"]:
                    if r["subject"] == subject and r["version"] in versions and \
                            not v["deleted"]:
                        raise E.ReferenceExists(
                            f"One or more references exist to the schema "
                            f"{{subject={subject},version={r['version']}}}.")


def check_version(version: str | int | None) -> int | None:
    if version is None or version in ("latest", -1, "-1"):
        return None
    if isinstance(version, str) and version.isdigit() and len(version) < 12:
        version = int(version)
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version < 2**31:
        return version
    raise E.InvalidVersion(f"The specified version '{version}' is not a valid version id. "
                           'Allowed values are between [1, 2^31-1] and the string "latest"')


def _text(schema: str, fmt: str | None) -> str:
    return f"serialized:{schema}" if fmt == "serialized" else schema


AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


# ---------------------------------------------------------------------- a running listener
@contextmanager
def running(api: Api, limits: Limits | None = None, ssl_context: ssl.SSLContext | None = None,
            loop: str = "asyncio") -> Iterator[Listener]:
    """The listener over ``api`` on 127.0.0.1, a free port, in an event loop of its own
    thread; closed (and the thread joined) on exit."""
    ev = (loop_factory(loop) or asyncio.new_event_loop)()
    ready: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(ev)

        async def go() -> None:
            try:
                ready["listener"] = await start(api, "127.0.0.1", 0, ssl_context, None, limits)
            except BaseException as e:
                ready["error"] = e
            finally:
                started.set()
        ev.run_until_complete(go())
        if "listener" in ready:
            ev.run_forever()
        ev.run_until_complete(ev.shutdown_default_executor())
        ev.close()

    th = threading.Thread(target=run, daemon=True, name="schema-http-test")
    th.start()
    started.wait(30)
    if "error" in ready:
        raise ready["error"]
    listener: Listener = ready["listener"]
    try:
        yield listener
    finally:
        done = asyncio.run_coroutine_threadsafe(listener.close(grace_s=5.0), ev)
        done.result(30)
        ev.call_soon_threadsafe(ev.stop)
        th.join(30)


# ---------------------------------------------------------------------- clients
class Answer:
    """One HTTP answer: ``status``, ``headers`` (lower-case names), ``body``, ``json``."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Answer({self.status}, {self.body[:200]!r})"


def call(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None, raw: bytes | None = None) -> Answer:
    """One request on a new connection (``body``: sent as JSON; ``raw``: these bytes)."""
    hdrs = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/vnd.schemaregistry.v1+json")
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


class _Responses:
    """httptools' callbacks collecting answers (none may answer a HEAD: its Content-Length
    would be taken for a body)."""

    def __init__(self) -> None:
        self.done: list[Answer] = []
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.status = 0
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode().lower()] = value.decode()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, b: bytes) -> None:
        self.body += b

    def on_message_complete(self) -> None:
        self.done.append(Answer(self.status, self.headers, bytes(self.body)))
        self.headers, self.body = {}, bytearray()


def parse_answers(data: bytes) -> list[Answer]:
    """Every HTTP answer in ``data``, in order."""
    sink = _Responses()
    sink.parser.feed_data(data)
    return sink.done


def exchange(port: int, data: bytes, answers: int | None = None, timeout: float = 10.0,
             context: ssl.SSLContext | None = None, shut: bool = False) -> bytes:
    """Send ``data`` on a new connection; read until ``answers`` complete answers arrived
    (None: until the server closes). ``shut``: half-close after sending."""
    sock: socket.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname="localhost")
    try:
        sock.sendall(data)
        if shut and context is None:
            sock.shutdown(socket.SHUT_WR)
        return read_answers(sock, answers)
    finally:
        sock.close()


def read_answers(sock: socket.socket, answers: int | None) -> bytes:
    """Read from ``sock`` until ``answers`` complete answers (None: until it closes)."""
    sink = _Responses()
    got = bytearray()
    while answers is None or len(sink.done) < answers:
        try:
            b = sock.recv(1 << 16)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not b:
            break
        got += b
        sink.parser.feed_data(b)
    return bytes(got)
