"""Schemas on the data path of ``rivven produce`` (``--key-schema``/``--value-schema``: JSON
input to Confluent's wire format) and ``rivven consume`` (``--decode``: back to JSON). The
serializers need the engine's registry, so they are bound once the engine is open."""

from __future__ import annotations

from typing import Any


class SchemaInput:
    """The input parser with its keys and/or values turned into the wire format."""

    def __init__(self, key_schema: str | None, value_schema: str | None) -> None:
        self.key_schema, self.value_schema = key_schema, value_schema
        self._kser: Any = None
        self._vser: Any = None

    def wrap(self, parser: Any, tombstone_empty: bool) -> Any:
        from engine.format.jsonlines import ConvertedInput, JsonInput

        kconv = self._key if self.key_schema is not None else None
        vconv = self._value if self.value_schema is not None else None
        if isinstance(parser, JsonInput):
            parser.kconv, parser.vconv = kconv, vconv
            return parser
        return ConvertedInput(parser, kconv, vconv, tombstone_empty)

    def bind(self, eng: Any) -> None:
        """Look the schemas up (a subject's latest version, or an id): an unknown one stops
        the command before any input is read."""
        from engine.schemas.errors import RegistryError

        from .common import fail

        reg = eng.schemas
        for option, ref in (("--key-schema", self.key_schema),
                            ("--value-schema", self.value_schema)):
            if ref is None:
                continue
            try:
                ser = reg.serializer(ref)
            except RegistryError as e:
                fail(f"{option} {ref}: {str(e).rstrip('.')}; 'rivven schema list' lists the "
                     "subjects and their ids")
            if option == "--key-schema":
                self._kser = ser
            else:
                self._vser = ser

    def _key(self, doc: Any) -> bytes:
        return self._kser.from_json(doc)

    def _value(self, doc: Any) -> bytes:
        return self._vser.from_json(doc)


class Decoding:
    """``rivven consume --decode``: encoders of keys/values that decode the wire format to
    JSON (each schema id looked up once) through the registry of the engine the command
    opened (its first record finds it open)."""

    def __init__(self, keys: bool, values: bool, json: bool) -> None:
        self.keys, self.values, self.json = keys, values, json
        self._de: Any = None

    def _deserializer(self) -> Any:
        if self._de is None:
            from .common import state

            self._de = state().engine.schemas.deserializer()
        return self._de

    def encoders(self, kenc: Any, venc: Any) -> tuple[Any, Any]:
        return (self._encoder("key") if self.keys else kenc,
                self._encoder("value") if self.values else venc)

    def _encoder(self, what: str) -> Any:
        import json as jsonlib

        from engine.errors import InvalidArgument

        def decoded(b: bytes | None) -> Any:
            if b is None:
                return None if self.json else b""
            try:
                doc = self._deserializer().to_json(b)
            except InvalidArgument as e:
                raise InvalidArgument(f"--decode: a {what}: {e}") from None
            if self.json:
                return doc
            return jsonlib.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()

        return decoded
