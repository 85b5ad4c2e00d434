"""Kafka's request and response frames, through the message classes kafka-python generates from
Kafka's own message schemas (``kafka.protocol``): which class an API key names, the request
header (v1, or v2 for a flexible version), the response header (v0, or v1 for a flexible
version; ApiVersions always v0), the frame's 4-byte size."""

from __future__ import annotations

import importlib
import struct
from typing import Any, NamedTuple

from ..errors import plural

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hhi")
# the kafka.protocol modules that define the messages served (imported once, on first use)
_MODULES = ("kafka.protocol.producer.produce", "kafka.protocol.producer.transaction",
            "kafka.protocol.consumer.fetch", "kafka.protocol.consumer.offsets",
            "kafka.protocol.consumer.group", "kafka.protocol.metadata.metadata",
            "kafka.protocol.metadata.api_versions", "kafka.protocol.metadata.find_coordinator",
            "kafka.protocol.admin.groups", "kafka.protocol.admin.topics",
            "kafka.protocol.admin.configs", "kafka.protocol.admin.cluster",
            "kafka.protocol.admin.transactions", "kafka.protocol.admin.acl",
            "kafka.protocol.admin.users", "kafka.protocol.sasl")


class Frame(NamedTuple):
    """A request as read off a connection: its header and its body (decoded lazily)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: memoryview  # the bytes after the header


class Messages:
    """Request and response classes by API key."""

    def __init__(self) -> None:
        from kafka.protocol.api_message import ApiMessage

        for name in _MODULES:
            importlib.import_module(name)
        self.request: dict[int, Any] = {}
        self.response: dict[int, Any] = {}
        # the generated classes are ApiMessage's direct subclasses (their per-version views,
        # made on use, are subclasses of those): the first class seen of a key is the one
        for cls in ApiMessage.__subclasses__():
            if cls.json is None:
                continue
            (self.request if cls.is_request() else self.response).setdefault(cls.API_KEY, cls)
        self._null_checks: dict[tuple[int, int], list[_Null]] = {}

    def flexible(self, api_key: int, version: int) -> bool:
        cls = self.request.get(api_key)
        return cls is not None and cls.flexible_version_q(version)

    def read_header(self, data: memoryview) -> Frame:
        """The request header: api key, version, correlation id, client id (v1 or v2); what
        follows is the body. ValueError when the header itself is malformed."""
        if len(data) < 8:
            raise ValueError(f"a request of {plural(len(data), 'byte')} has no room for its header")
        key, version, corr = _KEY_VERSION.unpack_from(data, 0)
        n = int.from_bytes(data[8:10], "big", signed=True) if len(data) >= 10 else -2
        if n < -1 or 10 + max(n, 0) > len(data):
            raise ValueError("a request header's client id runs past the request")
        client = None if n == -1 else bytes(data[10:10 + n]).decode("utf-8", "replace")
        pos = 10 + max(n, 0)
        if self.flexible(key, version) and key in self.request:
            pos = _skip_tags(data, pos)
        return Frame(key, version, corr, client, data[pos:])

    def decode(self, frame: Frame) -> Any:
        """The request body as its generated class (ValueError/struct.error/... when it
        is malformed: the caller answers with an error or closes). A body cut short is
        malformed: the generated decoder slices strings and bytes past the end silently, so
        where it stopped is checked against the body's length."""
        cls = self.request[frame.api_key]
        version = frame.api_version
        struct_ = getattr(cls, "_struct", None)
        if struct_ is None or not hasattr(struct_, "compiled_decode_from"):
            return cls.decode(frame.body, version=version)  # (another kafka-python)
        if not 0 <= version <= cls.max_version:
            raise ValueError(f"version {version} is past {cls.__name__}'s {cls.max_version}")
        flexible = cls.flexible_version_q(version)
        fast = struct_.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                            data_class=cls[None])
        body, pos = fast(frame.body, 0)
        if pos > len(frame.body):
            raise ValueError(f"its fields run {plural(pos - len(frame.body), 'byte')} past the "
                             f"{plural(len(frame.body), 'byte')} of the request body")
        _no_nulls(body, self._nulls(frame.api_key, cls, version), "")
        return body

    def _nulls(self, api_key: int, cls: Any, version: int) -> list[_Null]:
        key = (api_key, version)
        got = self._null_checks.get(key)
        if got is None:
            got = self._null_checks[key] = _null_checks(cls.fields, version)
        return got

    def encode(self, api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
        """A whole response frame: size, header (v0, or v1 for a flexible version), body."""
        payload = body.encode(version=version)
        flexible = self.flexible(api_key, version) and api_key != 18  # (ApiVersions: v0)
        head = _SIZE.pack(correlation_id) + (b"\x00" if flexible else b"")
        return _SIZE.pack(len(head) + len(payload)) + head + payload


class _Null(NamedTuple):
    """A field of a request to check for nulls at a version: Kafka's parser refuses a null
    string, bytes, array or struct where the schema does not allow one (the generated
    decoder would hand it to the handler), and a null inside an array of strings."""

    name: str
    nullable: bool  # the field itself may be null (its fields are checked when it is not)
    items: bool  # an array of strings or bytes: no item may be null
    inner: list[_Null] | None  # a struct or an array of structs: its fields' checks


def _null_checks(fields: dict[str, Any], version: int) -> list[_Null]:
    out = []
    for name, f in fields.items():
        if not f.for_version_q(version):
            continue
        struct_ = f.is_struct() or f.is_struct_array()
        inner = _null_checks(f.fields, version) if struct_ else None
        items = f.is_array() and not struct_ and \
            getattr(getattr(f, "array_of", None), "type_str", "") in ("string", "bytes")
        nullable = bool(f.nullable_for_version_q(version))
        can_be_null = struct_ or f.is_array() or \
            getattr(f, "type_str", "") in ("string", "bytes", "records")
        if (can_be_null and not nullable) or items or inner:
            out.append(_Null(name, nullable, items, inner or None))
    return out


def _no_nulls(obj: Any, checks: list[_Null], where: str) -> None:
    """ValueError naming a field that is null where its schema says it may not be."""
    for c in checks:
        v = getattr(obj, c.name, None)
        if v is None:
            if c.nullable:
                continue
            raise ValueError(f"{where}{c.name} is null")
        if c.items and any(x is None for x in v):
            raise ValueError(f"{where}{c.name} holds a null")
        if c.inner:
            for x in (v if isinstance(v, list) else (v,)):
                if x is None:
                    raise ValueError(f"{where}{c.name} holds a null")
                _no_nulls(x, c.inner, f"{where}{c.name}.")


def _skip_tags(data: memoryview, pos: int) -> int:
    """Past a tagged-field section (unsigned varints: count, then tag, size, bytes)."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
        if pos > len(data):
            raise ValueError("a tagged field runs past the request")
    return pos


def _uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError("a malformed varint in the request header")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def frame_size(prefix: bytes) -> int:
    return int(_SIZE.unpack(prefix)[0])


