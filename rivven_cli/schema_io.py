"""Schemas on the data path of ``rivven produce`` (``--key-schema``/``--value-schema``: JSON
input to Confluent's wire format) and ``rivven consume`` (``--decode``: back to JSON). The
serializers need the engine's registry, so they are bound once the engine is open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.errors import RivvenError


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


class Undecodable(RivvenError):
    """What ``--decode`` met: a record it cannot decode. ``message`` names the record;
    ``before`` and ``pieces`` are its batch's records ahead of it and their text, for the
    caller to print before the error."""

    def __init__(self, message: str, before: Any, pieces: list[bytes]) -> None:
        super().__init__(message)
        self.before, self.pieces = before, pieces


class _Failed(RivvenError):
    """A key or value ``--decode`` cannot decode (``located`` says which record)."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"--decode: a {what}: {problem}")
        self.what, self.problem = what, problem


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

    def located(self, emit: Any) -> Any:
        """``emit`` (a batch's records to their text) whose refusal of a record names it:
        ``Undecodable`` "--decode: the value of T partition P offset O: ...", with the
        records ahead of it in the batch."""
        def each(b: Any) -> list[bytes]:
            b = _reusable(b)
            try:
                return emit(b)
            except _Failed:
                pass
            for i in range(len(b.offsets)):  # (which record: only once one failed)
                try:
                    emit(_records(b, i, i + 1))
                except _Failed as e:
                    before = _records(b, 0, i)
                    raise Undecodable(
                        f"--decode: the {e.what} of {b.topic} partition {b.partition} offset "
                        f"{b.offsets[i]}: {e.problem}", before, emit(before)) from None
            return emit(b)  # (not reached: a record failed)

        return each

    def _encoder(self, what: str) -> Any:
        import json as jsonlib

        from engine.errors import InvalidArgument

        def decoded(b: bytes | None) -> Any:
            if b is None:
                return None if self.json else b""
            try:
                doc = self._deserializer().to_json(b)
            except InvalidArgument as e:
                raise _Failed(what, str(e)) from None
            if self.json:
                return doc
            return jsonlib.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()

        return decoded


def _reusable(b: Any) -> Any:
    """A ``ColumnBatch`` whose columns can be read more than once (a decoded batch's
    timestamps and headers may be ``itertools.repeat`` iterators)."""
    iters = {f: list(getattr(b, f)) for f in ("timestamps", "headers")
             if isinstance(getattr(b, f), Iterator)}
    return b._replace(**iters) if iters else b


def _records(b: Any, start: int, stop: int) -> Any:
    """The records ``start`` to ``stop`` of a ``ColumnBatch``."""
    return b._replace(offsets=b.offsets[start:stop], timestamps=b.timestamps[start:stop],
                      keys=b.keys[start:stop], values=b.values[start:stop],
                      headers=b.headers[start:stop])
