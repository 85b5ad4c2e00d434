"""The REST API's routes: Confluent's paths, parameters, bodies, status codes and error
bodies over a ``Registry`` (docs/SCHEMAS.md lists them).

``Api.handle(method, path, query, body, principal, host)`` answers one request, never raising:
a ``RegistryError`` is its status and ``{"error_code", "message"}``; a body that is not JSON or
not the object a route takes is 400/400 (rest-utils' JsonParseException and
JsonMappingException mappers), an empty one 422/422 (its constraint violation mapper);
a path with no route 404/404, a route without the method 405/405 (Jersey's, through
rest-utils' WebApplicationException mapper, ``HTTP 404 Not Found``); a request body whose
Content-Type is not JSON 415/415. Anything else (a bug) is 500/50001, logged with its
traceback. Every answer has Confluent's content type ``application/vnd.schemaregistry.v1+json``
(the ``Accept`` header is not negotiated).

Parameters are parsed as Jersey does: booleans are ``true`` in any case and anything else
false (confluent-kafka sends ``normalize=False``), an integer that does not parse makes the
route not match (404), unknown parameters are ignored, ``limit`` <= 0 (the client's -1)
means no limit. ``HEAD`` is ``GET`` without the body (the listener drops it).

The listener (server.py) splits the work: ``match`` finds the route; a route marked
``blocking`` (a write: the registry appends to the topic and waits for it to be durable; a
lookup or a check: the schema is parsed, protoc may run) runs on a thread pool, the others on
the event loop."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol
from urllib.parse import unquote

from ..errors import InvalidArgument, LockTimeout, ReadOnlyError, RivvenError
from ..security.acl import ANONYMOUS
from .access import ALTER_CONFIGS, DELETE, DESCRIBE, DESCRIBE_CONFIGS, WRITE, Access
from .errors import (
    BadRequest,
    InvalidCompatibility,
    InvalidSchema,
    RegistryError,
)

log = logging.getLogger("rivven.schemas")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# what a request body may be labelled (Confluent's resources' @Consumes; none: octet-stream)
BODY_TYPES = frozenset({CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json",
                        "application/octet-stream"})
MAX_INT = 2**31 - 1


class Registry(Protocol):
    """What the routes call (engine/schemas/registry.py's ``Registry``): each answer is
    Confluent's response JSON, each refusal a ``RegistryError``."""

    @property
    def generation(self) -> int: ...

    def subjects(self, deleted: bool = False, deleted_only: bool = False,
                 prefix: str = "") -> list[str]: ...

    def versions(self, subject: str, deleted: bool = False,
                 deleted_only: bool = False) -> list[int]: ...

    def version(self, subject: str, version: str | int, deleted: bool = False,
                fmt: str | None = None) -> dict[str, Any]: ...

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: Sequence[Any] = (), normalize: bool = False) -> dict[str, Any]: ...

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: Sequence[Any] = (), normalize: bool = False,
               deleted: bool = False) -> dict[str, Any]: ...

    def schema_by_id(self, sid: int, subject: str | None = None,
                     fmt: str | None = None) -> dict[str, Any]: ...

    def subjects_of(self, sid: int, deleted: bool = False) -> list[str]: ...

    def versions_of(self, sid: int, deleted: bool = False) -> list[dict[str, Any]]: ...

    def types(self) -> list[str]: ...

    def check(self, subject: str, version: str | int | None, schema: str,
              schema_type: str = "AVRO", references: Sequence[Any] = (),
              normalize: bool = False, verbose: bool = False) -> dict[str, Any]: ...

    def config(self, subject: str | None = None,
               default_to_global: bool = False) -> dict[str, Any]: ...

    def set_config(self, subject: str | None, level: str) -> dict[str, Any]: ...

    def delete_config(self, subject: str | None) -> dict[str, Any]: ...

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]: ...

    def delete_version(self, subject: str, version: str | int,
                       permanent: bool = False) -> int: ...

    def mode(self, subject: str | None = None) -> dict[str, Any]: ...


class Response(NamedTuple):
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class Request(NamedTuple):
    query: dict[str, str]
    body: bytes
    content_type: str | None
    principal: str
    host: str


Handler = Callable[[Request, tuple[str, ...]], Any]


class Call(NamedTuple):
    """A matched route: its handler, the path's parameters, whether it runs off the loop."""

    handler: Handler
    params: tuple[str, ...]
    blocking: bool
    method: str
    path: str


class _NotFound(Exception):
    """A parameter that does not parse: Jersey answers 404 (the route does not match)."""


class Raw(str):
    """A handler's answer sent as the text itself (the ``/schema`` routes), not as JSON."""


def dumps(value: Any) -> bytes:
    """Compact JSON, as Jackson writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def error(status: int, code: int, message: str,
          headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, dumps({"error_code": code, "message": message}), headers)


NOT_FOUND = error(404, 404, "HTTP 404 Not Found")
INTERNAL = error(500, 50001, "Internal Server Error")


def registry_error(e: RegistryError, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(e.status, dumps(e.body()), headers)


def parse_query(qs: str) -> dict[str, str]:
    """``a=1&b=x%20y`` as a dict (the first value of a repeated name, as Jersey's
    ``@QueryParam`` takes; ``+`` is a space)."""
    out: dict[str, str] = {}
    if not qs:
        return out
    for part in qs.split("&"):
        if not part:
            continue
        k, _, v = part.partition("=")
        if "+" in k or "%" in k:
            k = unquote(k.replace("+", " "))
        if "+" in v or "%" in v:
            v = unquote(v.replace("+", " "))
        out.setdefault(k, v)
    return out


def _bool(q: dict[str, str], name: str) -> bool:
    return q.get(name, "").lower() == "true"  # (Java's Boolean.parseBoolean)


def _int(q: dict[str, str], name: str, default: int) -> int:
    v = q.get(name)
    if v is None or v == "":
        return default
    return _java_int(v)


def _java_int(v: str) -> int:
    t = v[1:] if v[:1] in "+-" else v
    if not t.isascii() or not t.isdigit():
        raise _NotFound(v)
    n = int(v)
    if not -MAX_INT - 1 <= n <= MAX_INT:
        raise _NotFound(v)
    return n


def _page(items: list[Any], q: dict[str, str]) -> list[Any]:
    """``offset`` and ``limit`` (<= 0: all) applied, as Confluent's list routes do."""
    offset = max(0, _int(q, "offset", 0))
    limit = _int(q, "limit", -1)
    if offset:
        items = items[offset:]
    return items if limit <= 0 else items[:limit]


def _fmt(q: dict[str, str]) -> str | None:
    return q.get("format") or None


def _json_body(req: Request, kind: str) -> dict[str, Any]:
    """The request's JSON object; 415, 422 or 400 (as Confluent answers) when it is not one."""
    ctype = req.content_type
    if ctype is not None:
        media = ctype.partition(";")[0].strip().lower()
        if media and media not in BODY_TYPES:
            raise RegistryError("HTTP 415 Unsupported Media Type", 415)
    if not req.body.strip():
        raise RegistryError(f"The request body is empty: send a {kind} JSON object", 422)
    try:
        doc = json.loads(req.body, parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise BadRequest(f"Invalid UTF-8 in the request body at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise BadRequest(f"Unexpected JSON in the request body: {e.msg} at line {e.lineno} "
                         f"column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"Unexpected JSON in the request body: {e}") from None
    if doc is None:
        raise RegistryError(f"The request body is null: send a {kind} JSON object", 422)
    if not isinstance(doc, dict):
        raise BadRequest(f"Cannot deserialize value of type `{kind}` from "
                         f"{_json_kind(doc)} value: send a JSON object")
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_kind(v: Any) -> str:
    if isinstance(v, list):
        return "Array"
    if isinstance(v, str):
        return "String"
    if isinstance(v, bool):
        return "Boolean"
    return "Number"


def _schema_body(req: Request) -> tuple[Any, str, Any]:
    """``(schema, schemaType, references)`` of a register / lookup / check body (their
    values checked by the registry; JSON of the wrong kind here: 400, as Jackson refuses it)."""
    doc = _json_body(req, "RegisterSchemaRequest")
    schema = doc.get("schema")
    if schema is None:
        raise InvalidSchema("Invalid schema: the request has no schema: send "
                            '{"schema": "<the schema as a string>"}')
    if isinstance(schema, (dict, list)):
        raise BadRequest("Cannot deserialize value of type `String` from "
                         f"{'Object' if isinstance(schema, dict) else 'Array'} value "
                         "(field schema): send the schema as a JSON string")
    if not isinstance(schema, str):
        schema = json.dumps(schema)  # (Jackson coerces a scalar to its text)
    stype = doc.get("schemaType")
    if stype is None:
        stype = "AVRO"
    elif not isinstance(stype, str):
        raise BadRequest("Cannot deserialize value of type `String` from "
                         f"{_json_kind(stype)} value (field schemaType): send AVRO, PROTOBUF "
                         "or JSON")
    refs = doc.get("references")
    if refs is None:
        refs = []
    elif not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise BadRequest("Cannot deserialize the field references: send a list of objects, "
                         'each {"name", "subject", "version"}')
    return schema, stype, refs


class Api:
    """The routes over ``registry``; ``access`` decides who may do what (None: anyone)."""

    def __init__(self, registry: Registry, access: Access | None = None) -> None:
        self.registry = registry
        self.access = access
        # (method, first segment, number of segments) -> [(pattern, handler, blocking)]
        self._routes: dict[tuple[str, int], list[tuple[tuple[str | None, ...],
                                                       dict[str, tuple[Handler, bool]]]]] = {}
        self._add_routes()

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, path: str, query: dict[str, str] | None = None,
               body: bytes = b"", principal: str = ANONYMOUS, host: str = "",
               content_type: str | None = None) -> Response:
        """One request (``path`` as sent, still percent-encoded), answered: never raises."""
        if self.access is not None:
            try:
                self.access.state()
            except Exception:
                log.exception("schema registry: the users or ACLs could not be read")
                return INTERNAL
        found = self.match(method, path)
        if isinstance(found, Response):
            return found
        return self.run(found, query or {}, body, principal, host, content_type)

    def match(self, method: str, path: str) -> Call | Response:
        """The route of ``method path`` (HEAD as GET), or the 404 / 405 answer."""
        segs = _segments(path)
        if segs is None:
            return NOT_FOUND
        key = (segs[0] if segs else "", len(segs))
        allowed: list[str] = []
        for pattern, methods in self._routes.get(key, ()):
            params = _match(pattern, segs)
            if params is None:
                continue
            want = "GET" if method == "HEAD" else method
            got = methods.get(want)
            if got is not None:
                return Call(got[0], params, got[1], method, path)
            allowed += methods
        if not allowed:
            return NOT_FOUND
        allow = ", ".join(sorted({*allowed, *(["HEAD"] if "GET" in allowed else []),
                                  "OPTIONS"}))
        if method == "OPTIONS":
            return Response(204, b"", (("Allow", allow),))
        return error(405, 405, "HTTP 405 Method Not Allowed", (("Allow", allow),))

    def run(self, call: Call, query: dict[str, str], body: bytes, principal: str, host: str,
            content_type: str | None = None) -> Response:
        """Run a matched route: its answer, never an exception."""
        req = Request(query, body, content_type, principal, host)
        try:
            out = call.handler(req, call.params)
        except RegistryError as e:
            return registry_error(e)
        except _NotFound:
            return NOT_FOUND
        except ReadOnlyError as e:
            return error(422, 42205, f"Operation not permitted: {e}")
        except LockTimeout as e:
            return error(500, 50002, f"Operation timed out: {e}")
        except InvalidArgument as e:
            return error(400, 400, str(e))
        except RivvenError as e:
            log.error("schema registry: %s %s failed: %s", call.method, call.path, e)
            return error(500, 50001, f"Error in the backend data store: {e}")
        except Exception:
            log.exception("schema registry: %s %s failed", call.method, call.path)
            return INTERNAL
        if isinstance(out, Response):
            return out
        if isinstance(out, Raw):
            return Response(200, out.encode())
        return Response(200, dumps(out))

    # ------------------------------------------------------------------ the routes
    def _add_routes(self) -> None:
        S = None  # a path parameter
        add = self._add
        add(("",), GET=self._root, POST=self._root_post)
        add(("subjects",), GET=self._subjects)
        add(("subjects", S), POST=(self._lookup, True), DELETE=(self._delete_subject, True))
        add(("subjects", S, "versions"), GET=self._versions, POST=(self._register, True))
        add(("subjects", S, "versions", S), GET=self._version,
            DELETE=(self._delete_version, True))
        add(("subjects", S, "versions", S, "schema"), GET=self._version_schema)
        add(("schemas", "ids", S), GET=self._by_id)
        add(("schemas", "ids", S, "schema"), GET=self._by_id_schema)
        add(("schemas", "ids", S, "subjects"), GET=self._id_subjects)
        add(("schemas", "ids", S, "versions"), GET=self._id_versions)
        add(("schemas", "types"), GET=self._types)
        add(("compatibility", "subjects", S, "versions", S), POST=(self._check, True))
        add(("compatibility", "subjects", S, "versions"), POST=(self._check_all, True))
        add(("config",), GET=self._config, PUT=(self._set_global, True),
            DELETE=(self._delete_global, True))
        add(("config", S), GET=self._subject_config, PUT=(self._set_subject, True),
            DELETE=(self._delete_subject_config, True))
        add(("mode",), GET=self._mode)
        add(("contexts",), GET=self._contexts)
        add(("mode", S), GET=self._subject_mode)

    def _add(self, pattern: tuple[str | None, ...], **methods: Any) -> None:
        table = {m: (h if isinstance(h, tuple) else (h, False)) for m, h in methods.items()}
        n = 0 if pattern == ("",) else len(pattern)
        self._routes.setdefault((pattern[0] or "", n), []).append((pattern, table))

    # (each handler: (request, path parameters) -> JSON value, Raw text or a Response)
    def _may(self, req: Request, op: str, subject: str) -> None:
        if self.access is not None:
            self.access.check(req.principal, req.host, op, subject)

    def _root(self, req: Request, p: tuple[str, ...]) -> Any:
        return {}

    def _root_post(self, req: Request, p: tuple[str, ...]) -> Any:
        _json_body(req, "Map")
        return {}

    def _subjects(self, req: Request, p: tuple[str, ...]) -> Any:
        q = req.query
        subjects = self.registry.subjects(deleted=_bool(q, "deleted"),
                                          deleted_only=_bool(q, "deletedOnly"),
                                          prefix=q.get("subjectPrefix", ""))
        if self.access is not None:
            subjects = self.access.visible(req.principal, req.host, subjects)
        return _page(subjects, q)

    def _versions(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE, p[0])
        q = req.query
        return _page(self.registry.versions(p[0], deleted=_bool(q, "deleted"),
                                            deleted_only=_bool(q, "deletedOnly")), q)

    def _version(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE, p[0])
        return self.registry.version(p[0], p[1], deleted=_bool(req.query, "deleted"),
                                     fmt=_fmt(req.query))

    def _version_schema(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE, p[0])
        got = self.registry.version(p[0], p[1], deleted=_bool(req.query, "deleted"),
                                    fmt=_fmt(req.query))
        return Raw(got["schema"])

    def _register(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, WRITE, p[0])
        schema, stype, refs = _schema_body(req)
        return self.registry.register(p[0], schema, stype, refs,
                                      normalize=_bool(req.query, "normalize"))

    def _lookup(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE, p[0])
        schema, stype, refs = _schema_body(req)
        return self.registry.lookup(p[0], schema, stype, refs,
                                    normalize=_bool(req.query, "normalize"),
                                    deleted=_bool(req.query, "deleted"))

    def _delete_subject(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DELETE, p[0])
        return self.registry.delete_subject(p[0], permanent=_bool(req.query, "permanent"))

    def _delete_version(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DELETE, p[0])
        return self.registry.delete_version(p[0], p[1], permanent=_bool(req.query, "permanent"))

    def _id(self, req: Request, raw: str) -> int:
        sid = _java_int(raw)
        if self.access is not None and self.access.authorizer is not None:
            holders = self.registry.subjects_of(sid, deleted=True)
            self.access.check_any(req.principal, req.host, DESCRIBE, holders, f"schema {sid}")
        return sid

    def _by_id(self, req: Request, p: tuple[str, ...]) -> Any:
        sid = _java_int(p[0])
        out = self.registry.schema_by_id(sid, subject=req.query.get("subject") or None,
                                         fmt=_fmt(req.query))
        self._id(req, p[0])  # (after: an id that does not exist is 40403 for anyone)
        return out

    def _by_id_schema(self, req: Request, p: tuple[str, ...]) -> Any:
        sid = _java_int(p[0])
        out = self.registry.schema_by_id(sid, subject=req.query.get("subject") or None,
                                         fmt=_fmt(req.query))
        self._id(req, p[0])
        return Raw(out["schema"])

    def _id_subjects(self, req: Request, p: tuple[str, ...]) -> Any:
        sid = self._id(req, p[0])
        subjects = self.registry.subjects_of(sid, deleted=_bool(req.query, "deleted"))
        if self.access is not None:
            subjects = self.access.visible(req.principal, req.host, subjects)
        return _page(subjects, req.query)

    def _id_versions(self, req: Request, p: tuple[str, ...]) -> Any:
        sid = self._id(req, p[0])
        out = self.registry.versions_of(sid, deleted=_bool(req.query, "deleted"))
        if self.access is not None and self.access.authorizer is not None:
            seen = set(self.access.visible(req.principal, req.host,
                                           {v["subject"] for v in out}))
            out = [v for v in out if v["subject"] in seen]
        return _page(out, req.query)

    def _types(self, req: Request, p: tuple[str, ...]) -> Any:
        return self.registry.types()

    def _check(self, req: Request, p: tuple[str, ...]) -> Any:
        return self._checked(req, p[0], p[1])

    def _check_all(self, req: Request, p: tuple[str, ...]) -> Any:
        return self._checked(req, p[0], None)

    def _checked(self, req: Request, subject: str, version: str | None) -> Any:
        self._may(req, DESCRIBE, subject)
        schema, stype, refs = _schema_body(req)
        q = req.query
        return self.registry.check(subject, version, schema, stype, refs,
                                   normalize=_bool(q, "normalize"), verbose=_bool(q, "verbose"))

    def _config(self, req: Request, p: tuple[str, ...]) -> Any:
        return self.registry.config(None, default_to_global=_bool(req.query, "defaultToGlobal"))

    def _subject_config(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE_CONFIGS, p[0])
        return self.registry.config(p[0], default_to_global=_bool(req.query, "defaultToGlobal"))

    def _level(self, req: Request) -> str:
        level = _json_body(req, "ConfigUpdateRequest").get("compatibility")
        if not isinstance(level, str):
            raise InvalidCompatibility(
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive")
        return level

    def _set_global(self, req: Request, p: tuple[str, ...]) -> Any:
        if self.access is not None:
            self.access.check_cluster(req.principal, req.host, ALTER_CONFIGS)
        return self.registry.set_config(None, self._level(req))

    def _delete_global(self, req: Request, p: tuple[str, ...]) -> Any:
        if self.access is not None:
            self.access.check_cluster(req.principal, req.host, ALTER_CONFIGS)
        return self.registry.delete_config(None)

    def _set_subject(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, ALTER_CONFIGS, p[0])
        return self.registry.set_config(p[0], self._level(req))

    def _delete_subject_config(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, ALTER_CONFIGS, p[0])
        return self.registry.delete_config(p[0])

    def _mode(self, req: Request, p: tuple[str, ...]) -> Any:
        return self.registry.mode(None)

    def _contexts(self, req: Request, p: tuple[str, ...]) -> Any:
        return _page(["."], req.query)  # (the default context only: ids are global)

    def _subject_mode(self, req: Request, p: tuple[str, ...]) -> Any:
        self._may(req, DESCRIBE_CONFIGS, p[0])
        return self.registry.mode(p[0])


def _segments(path: str) -> list[str] | None:
    """The path's segments, each percent-decoded (a ``%2F`` stays inside its segment); one
    trailing slash ignored; None for a path that is not one (no leading ``/``, ``//``)."""
    if not path.startswith("/"):
        return None
    inner = path[1:]
    if inner.endswith("/"):
        inner = inner[:-1]
    if not inner:
        return []
    out = []
    for s in inner.split("/"):
        if not s:
            return None
        if "%" in s:
            try:
                s = unquote(s, errors="strict")
            except UnicodeDecodeError:
                return None
        out.append(s)
    return out


def _match(pattern: tuple[str | None, ...], segs: list[str]) -> tuple[str, ...] | None:
    if pattern == ("",):
        return () if not segs else None
    params = []
    for want, got in zip(pattern, segs):
        if want is None:
            params.append(got)
        elif want != got:
            return None
    return tuple(params)
