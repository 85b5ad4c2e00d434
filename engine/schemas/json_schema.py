"""JSON schemas: checked and applied by jsonschema (draft 7 unless ``$schema`` names another,
as Confluent's default), references resolved through a ``referencing.Registry`` under their
names; compatibility by Confluent's rules (``json_compat``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.exceptions import PointerToNowhere, Unresolvable

from . import json_compat
from .errors import InvalidSchema, SchemaMismatch, got
from .json_model import SPEC
from .kinds import Reference

# keywords whose values are data, not schemas: a "$ref" inside them is not a reference
_DATA = frozenset(("enum", "const", "default", "examples"))


class JsonSchema:
    """A parsed JSON schema (``kinds.Parsed``)."""

    schema_type = "JSON"

    def __init__(self, text: str, doc: Any, registry: Registry, validator: Any) -> None:
        self._text = text
        self.doc = doc
        self.registry = registry  # the references, by name: json_compat resolves $ref with it
        self._validator = validator
        self._fresh: Any = None  # the last value from_json checked (encode need not again)

    def __repr__(self) -> str:
        return f"JsonSchema({self.canonical()[:60]})"

    def canonical(self) -> str:
        """The registered JSON, compact, key order kept (Confluent compares
        ``jsonNode.toString()``)."""
        return json.dumps(self.doc, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        """Confluent's ``normalize``: the same JSON with every object's keys sorted."""
        return json.dumps(self.doc, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def text(self, fmt: str | None = None) -> str:
        return self._text

    def problems_reading(self, writer: Any, names: tuple[str, str] = ("reader", "writer")
                         ) -> list[str]:
        """Why a document ``writer`` accepts may be refused by this schema: Confluent's
        ``SchemaDiff.compare(writer, self)`` with its STRICT policy, one message per
        incompatible difference (``names``: how the messages call the reader and the
        writer; Confluent says "new" and "old")."""
        if getattr(writer, "schema_type", None) != "JSON":
            return ["Incompatible because of different schema type"]
        try:
            return json_compat.problems(writer, self, names)
        except Exception as e:  # as Confluent: a failed check is an incompatibility, not a 500
            return [f"Unexpected exception during compatibility check: {type(e).__name__}: {e}"]

    def from_json(self, doc: Any) -> Any:
        """``doc`` itself, once the schema accepts it; SchemaMismatch naming the field when
        it does not."""
        self._check(doc)
        self._fresh = doc
        return doc

    def encode(self, value: Any) -> bytes:
        """Compact UTF-8 JSON (the bytes confluent-kafka's JSONSerializer writes after the
        5-byte header), once the schema accepts ``value``."""
        if value is not self._fresh:  # from_json checked what it returned
            self._check(value)
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode("utf-8")
        except ValueError:
            raise SchemaMismatch("", "NaN and Infinity have no JSON form") from None
        except (TypeError, RecursionError) as e:
            raise SchemaMismatch("", f"not a JSON value: {e}") from None

    def decode(self, payload: bytes) -> Any:
        """The JSON value of a payload, not checked against the schema (as Confluent's
        JSONDeserializer does by default)."""
        try:
            return json.loads(bytes(payload))
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError
            raise SchemaMismatch("", f"payload is not JSON: {e}") from None

    def to_json(self, value: Any) -> Any:
        return value

    def _check(self, value: Any) -> None:
        try:
            if self._validator.is_valid(value):
                return
            error = best_match(self._validator.iter_errors(value))
        except Unresolvable as e:
            raise SchemaMismatch("", f"cannot be checked: {e}") from None
        except RecursionError:
            raise SchemaMismatch("", "nested too deeply") from None
        if error is None:
            return
        field, problem = _explain(error)
        raise SchemaMismatch(field, problem)


def parse(text: str, references: Sequence[Reference] = ()) -> JsonSchema:
    """``text`` as a JSON schema, with ``references`` (JSON schemas) known by their names to
    its ``$ref``s; InvalidSchema when it is no schema or a ``$ref`` does not resolve."""
    try:
        return _parse(text, references)
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None


def _parse(text: str, references: Sequence[Reference]) -> JsonSchema:
    doc = _load(text)
    resources = []
    for ref in references:
        if (ref.schema_type or "JSON").upper() != "JSON":
            raise InvalidSchema(f"Invalid schema: reference {ref.name!r} ({ref.subject} version "
                                f"{ref.version}) is a {ref.schema_type} schema, not JSON")
        try:
            rdoc = _load(ref.schema)
        except InvalidSchema as e:
            raise InvalidSchema(f"Invalid schema: reference {ref.name!r} ({ref.subject} version "
                                f"{ref.version}): {e}") from None
        resources.append((ref.name, Resource.from_contents(rdoc, default_specification=SPEC)))
    try:
        registry = Registry().with_resources(resources).crawl()
    except Exception as e:  # referencing's own checks of the resources
        raise InvalidSchema(f"Invalid schema: {e}") from None
    root = Resource.from_contents(doc, default_specification=SPEC)
    _check_refs(doc, registry.resolver_with_root(root), "#")
    for name, resource in resources:
        _check_refs(resource.contents, registry.resolver(name), f"{name}#", name)
    cls = validator_for(doc, default=Draft7Validator)
    return JsonSchema(text, doc, registry, cls(doc, registry=registry))


def _load(text: str) -> Any:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
    if not isinstance(doc, (dict, bool)):
        raise InvalidSchema(f"Invalid schema: a JSON schema is an object or a boolean, got "
                            f"{type(doc).__name__} {text[:40]!r}")
    try:
        cls = validator_for(doc, default=Draft7Validator)
        cls.check_schema(doc)
    except SchemaError as e:
        where = _pointer(e.absolute_path)
        raise InvalidSchema(f"Invalid schema: {_short(e.message)}"
                            + (f" at {where}" if where != "#" else "")) from None
    return doc


def _check_refs(doc: Any, resolver: Any, at: str, name: str = "") -> None:
    """Every ``$ref`` in ``doc`` resolves (a reference is given for each outside name)."""
    for where, ref, here in _refs(doc, resolver, at):
        try:
            here.lookup(ref)
        except PointerToNowhere:
            raise InvalidSchema(f"Invalid schema: $ref {ref!r} at {where} points to nothing "
                                "in the schema it names") from None
        except Unresolvable:
            raise InvalidSchema(f"Invalid schema: $ref {ref!r} at {where} does not resolve: no "
                                "reference of that name was given (references: name, subject, "
                                "version)" + (f" (in reference {name!r})" if name else "")
                                ) from None


def _refs(node: Any, resolver: Any, at: str) -> Iterator[tuple[str, str, Any]]:
    """``(where, $ref, the resolver there)`` of each reference, the base URI following
    ``$id``s."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            yield from _refs(x, resolver, f"{at}/{i}")
        return
    if not isinstance(node, dict):
        return
    own_id = node.get("$id", node.get("id"))
    if isinstance(own_id, str) and at != "#" and not own_id.startswith("#"):
        resolver = resolver.in_subresource(Resource.from_contents(node, default_specification=SPEC))
    ref = node.get("$ref")
    if isinstance(ref, str):
        yield at, ref, resolver
    for key, value in node.items():
        if key not in _DATA and isinstance(value, (dict, list)):
            yield from _refs(value, resolver, f"{at}/{key}")


def _explain(error: ValidationError) -> tuple[str, str]:
    """(the field, the problem) of a validation error, in the words of the other types."""
    path = list(error.absolute_path)
    problem = _short(error.message)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        if missing:
            path.append(missing[0])
            problem = "missing, and it is required"
    elif error.validator == "type":
        types = error.validator_value
        listed = " or ".join(types) if isinstance(types, list) else str(types)
        problem = f"expected {listed}, got {got(error.instance)}"
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = [k for k in error.instance if k not in props]
        if len(extra) == 1:
            path.append(extra[0])
            problem = "not allowed here (additionalProperties is false)"
    return _field(path), problem


def _field(path: list[Any]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _pointer(path: Any) -> str:
    return "#" + "".join(f"/{p}" for p in path)


def _short(message: str, limit: int = 200) -> str:
    one = " ".join(message.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."
