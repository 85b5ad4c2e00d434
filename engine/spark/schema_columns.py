"""Registry-encoded keys and values as typed columns (the ``rivven`` source's ``decode``)
and typed columns as registry-encoded bytes (the sink's ``valueSchema``/``keySchema``):
docs/SPARK.md, "Schemas".

Reading. The driver reads the reader schema (the subject's latest version, or an id) from the
data dir's registry and gives the column its Spark type (schema_types); it also ships every
version of the subject to the executors. An executor decodes each record with the schema its
wire-format header names (its writer schema; a schema it was not shipped is read from the
registry, opening the data dir read-only once per Python worker) and fits the value to the
reader's type: Avro through fastavro's writer-to-reader resolution (a field new in the reader
takes its default), Protobuf and JSON by field name (a field the writer lacks is null, one the
reader lacks is left out). Values become Arrow arrays of the column's type in the executor.
A record that is not in the wire format, or does not decode, fails the task naming its topic,
partition and offset, or (``decodeErrors=null``) reads as null.

Writing. The driver resolves ``valueSchema`` (SUBJECT: its latest version; ``id:N``) to an
id; each task encodes the column's values with the schema's own encoder
(engine.schemas.serde.Serializer) — a value that does not fit fails the write, naming the
field.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..schemas.errors import RegistryError, SchemaMismatch, SchemaNotFound
from ..schemas.kinds import Parsed, Reference, parse
from ..schemas.serde import HEADER, MAGIC, schema_ref, split

Spec = tuple[str, str, tuple[Reference, ...]]  # (schema type, text, every reference resolved)
COLUMNS = ("key", "value")
MAX_REFERENCE_DEPTH = 64


class DecodeError(ValueError):
    """A record's key or value that does not decode (``decodeErrors=fail``)."""


# ---------------------------------------------------------------------------- options
@dataclass(frozen=True)
class Want:
    """One column to decode: ``subject`` (its latest version is the reader schema) or ``id``."""

    column: str
    subject: str | None
    id: int | None


def decode_options(options: dict[str, str], topics: Sequence[str]) -> tuple[list[Want], bool]:
    """The columns ``decode`` names, each with its reader schema, and whether a record that
    does not decode reads as null (``decodeErrors``). ``options``' keys lower-cased."""
    raw = options.get("decode", "").strip()
    if not raw:
        return [], False
    cols = [c.strip().lower() for c in raw.split(",") if c.strip()]
    if not cols or any(c not in COLUMNS for c in cols) or len(set(cols)) != len(cols):
        raise ValueError(f"decode {raw!r}: use value, key, or key,value")
    how = options.get("decodeerrors", "fail").lower()
    if how not in ("fail", "null"):
        raise ValueError(f"decodeErrors {options['decodeerrors']!r}: use fail or null")
    out = []
    for c in cols:
        subject, sid = options.get(f"{c}subject"), options.get(f"{c}schemaid")
        if subject and sid:
            raise ValueError(f"{c}Subject and {c}SchemaId both given: use one")
        if sid is not None:
            if not sid.isdigit() or int(sid) >= 2**31:
                raise ValueError(f"{c}SchemaId {sid!r}: a schema id, e.g. 1")
            out.append(Want(c, None, int(sid)))
        elif subject:
            out.append(Want(c, subject, None))
        elif len(topics) == 1:
            out.append(Want(c, f"{topics[0]}-{c}", None))  # Confluent's TopicNameStrategy
        else:
            raise ValueError(f"decode {c} of several topics: name the schema with "
                             f".option('{c}Subject', S) or .option('{c}SchemaId', N)")
    return out, how == "null"


def topics_named(options: dict[str, str]) -> list[str]:
    """The topics the options name (``topic``, ``topics``; none for ``topicPattern``)."""
    for k in ("topic", "topics"):
        if options.get(k):
            return [t.strip() for t in options[k].split(",") if t.strip()]
    return []


# ---------------------------------------------------------------------------- the driver
@dataclass
class Decoding:
    """How one column is decoded: pickled from the driver to the executors."""

    column: str
    reader: int  # the reader schema's id
    spark_type: Any  # pyspark DataType
    schemas: dict[int, Spec]  # the subject's versions (the reader's at least)
    path: str
    keyring: str | None
    null_on_error: bool
    subject: str | None = None


def spec_of(registry: Any, sid: int) -> Spec:
    """Schema ``sid`` as its type, text and references (each resolved, a reference before
    what refers to it), from ``registry`` (an ``engine.schemas.registry.Registry``)."""
    entry = registry.schema_by_id(sid)
    out: list[Reference] = []
    seen: set[tuple[str, int]] = set()

    def visit(refs: list[dict[str, Any]], depth: int) -> None:
        for r in refs:
            key = (r["subject"], int(r["version"]))
            if key in seen or depth > MAX_REFERENCE_DEPTH:
                continue
            seen.add(key)
            v = registry.version(r["subject"], int(r["version"]), deleted=True)
            visit(v.get("references", []), depth + 1)
            out.append(Reference(r["name"], r["subject"], int(r["version"]), v["schemaType"],
                                 v["schema"]))

    visit(entry.get("references", []), 0)
    return entry.get("schemaType", "AVRO"), entry["schema"], tuple(out)


def plan_decoding(path: str, keyring: str | None, wants: list[Want], null_on_error: bool
                  ) -> list[Decoding]:
    """(The driver.) Each wanted column's reader schema, Spark type and the schemas to ship;
    ValueError naming the subject or id the registry does not have."""
    from engine import Engine

    if not wants:
        return []
    out = []
    with Engine.open(path, read_only=True, keyring=keyring) as eng:
        reg = eng.schemas
        for w in wants:
            what = f"subject {w.subject!r}" if w.subject else f"schema id {w.id}"
            try:
                if w.subject is not None:
                    sid = int(reg.version(w.subject, "latest")["id"])
                    ids = {int(reg.version(w.subject, v)["id"]) for v in reg.versions(w.subject)}
                else:
                    assert w.id is not None
                    sid, ids = w.id, {w.id}
                schemas = {i: spec_of(reg, i) for i in sorted(ids)}
                t = spark_type(parsed_of(schemas[sid]), schemas[sid])
            except RegistryError as e:
                opt = f"{w.column}Subject" if w.subject else f"{w.column}SchemaId"
                raise ValueError(f"decode {w.column}: {what} ({opt}): {e}; register it "
                                 f"(rivven schema register) or name another with "
                                 f".option('{w.column}Subject', S) or "
                                 f".option('{w.column}SchemaId', N)") from None
            except ValueError as e:
                raise ValueError(f"decode {w.column} with {what}: {e}") from None
            out.append(Decoding(w.column, sid, t, schemas, path, keyring, null_on_error,
                                w.subject))
    return out


def spark_type(parsed: Parsed, spec: Spec) -> Any:
    """The Spark type of values of a schema (schema_types)."""
    from . import schema_types as st

    if parsed.schema_type == "AVRO":
        avro = cast(Any, parsed)  # (an engine.schemas.avro.AvroSchema)
        return st.avro_type(avro.fast, avro.named)
    if parsed.schema_type == "PROTOBUF":
        desc = cast(Any, parsed).descriptor
        if desc is None:
            raise ValueError("the Protobuf schema has no message type")
        return st.protobuf_type(desc)
    return st.json_type(spec[1], spec[2])


# ---------------------------------------------------------------------------- the executors
_parsed: dict[Spec, Parsed] = {}  # a Python worker's, across the tasks it runs


def parsed_of(spec: Spec) -> Parsed:
    """The schema parsed (kept by the process: a worker runs many tasks)."""
    p = _parsed.get(spec)
    if p is None:
        p = _parsed[spec] = parse(*spec)
    return p


class ColumnDecoder:
    """One column's values (wire-format bytes) as Arrow values of its Spark type."""

    def __init__(self, d: Decoding) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        from . import schema_values as sv

        self.d = d
        self.arrow_type = to_arrow_type(d.spark_type, timezone="UTC")
        self.reader = parsed_of(d.schemas[d.reader])
        self.kind = self.reader.schema_type
        self._fns: dict[int, Callable[[bytes], Any]] = {}
        self._avro: Any = None
        self._pb: Any = None
        self._json: Any = None
        if self.kind == "AVRO":
            self._avro_reader = _avro_reading(self.reader)
            self._avro = sv.avro_values(*self._avro_reader[:2])
        elif self.kind == "PROTOBUF":
            self._pb = sv.ProtobufValues()
        else:
            self._json = sv.json_values(d.spark_type)

    def values(self, data: list[bytes | None], offsets: Any, topic: str, partition: int
               ) -> Any:
        """``data`` (one batch's keys or values) as an Arrow array of the column's type."""
        import pyarrow as pa

        out: list[Any] = []
        fns = self._fns
        for i, b in enumerate(data):
            if b is None:
                out.append(None)  # (a tombstone, a record without a key: no error)
                continue
            try:
                if len(b) < HEADER or b[0] != MAGIC:
                    split(b)  # (raises, saying why)
                sid = int.from_bytes(b[1:HEADER], "big")
                fn = fns.get(sid)
                if fn is None:
                    fn = fns[sid] = self._writer(sid)
                out.append(fn(b[HEADER:]))
            except Exception as e:  # (garbage makes decoders raise anything: fastavro does)
                out.append(self._failed(e, offsets[i], topic, partition))
        try:
            return pa.array(out, type=self.arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass  # a value that does not fit the type: find it
        for i, v in enumerate(out):
            try:
                pa.array([v], type=self.arrow_type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                out[i] = self._failed(SchemaMismatch("", f"does not fit the column's type "
                                                         f"{self.d.spark_type.simpleString()}: "
                                                         f"{e}"),
                                      offsets[i], topic, partition)
        return pa.array(out, type=self.arrow_type)

    def _failed(self, e: Exception, offset: Any, topic: str, partition: int) -> Any:
        """None (``decodeErrors=null``), else DecodeError naming the record."""
        if self.d.null_on_error:
            return None
        col = self.d.column
        problem = str(e) if isinstance(e, SchemaMismatch) else f"{type(e).__name__}: {e}"
        offset = offset.as_py() if hasattr(offset, "as_py") else offset
        raise DecodeError(f"{topic}-{partition} offset {offset}: the {col} does not decode: "
                          f"{problem} (.option('decodeErrors', 'null') reads such a {col} as "
                          "null)")

    def _writer(self, sid: int) -> Callable[[bytes], Any]:
        """How payloads written with schema ``sid`` decode to the reader's values."""
        spec = self.d.schemas.get(sid)
        if spec is None:
            try:
                spec = self.d.schemas[sid] = _fetch(self.d.path, self.d.keyring, sid)
            except SchemaNotFound:
                return _refuse(f"schema id {sid} is not in the registry")
        w = parsed_of(spec)
        if w.schema_type != self.kind:
            return _refuse(f"written with schema id {sid}, a {w.schema_type} schema; the "
                           f"reader's (id {self.d.reader}) is {self.kind}")
        if self.kind == "AVRO":
            from fastavro import schemaless_reader

            wfast, _, wrapped = _avro_reading(w)
            rfast, _, unwrap = self._avro_reader
            if wrapped != unwrap:
                return _refuse(f"written with schema id {sid}, which does not resolve to the "
                               f"reader's (id {self.d.reader}): a record and a type that is not")
            rfast = None if sid == self.d.reader else rfast
            conv = self._avro

            def avro(payload: bytes) -> Any:
                v: Any = schemaless_reader(io.BytesIO(payload), wfast, rfast,
                                           return_named_type=True,
                                           return_named_type_override=True)
                if conv is not None:
                    v = conv(v)
                return v["value"] if unwrap else v
            return avro
        if self.kind == "PROTOBUF":
            pb = self._pb
            return lambda payload: pb(w.decode(payload))
        project = self._json
        return lambda payload: project(w.decode(payload))


WRAPPER = "rivven.spark.Value"  # a record of one field: its binary form is the field's


def _avro_reading(parsed: Parsed) -> tuple[Any, dict[str, Any], bool]:
    """fastavro's parsed schema to read values of an AVRO schema with, its named types, and
    whether values come wrapped: a schema that is not a record (a union of references, an
    array...) goes inside a record of one field ``value`` (the same bytes), whose parsed form
    carries the named types fastavro needs."""
    import fastavro

    avro = cast(Any, parsed)  # (an engine.schemas.avro.AvroSchema)
    fast, named = avro.fast, avro.named
    if isinstance(fast, dict) and "__named_schemas" in fast:
        return fast, named, False
    wrapper = {"type": "record", "name": WRAPPER, "fields": [{"name": "value", "type": fast}]}
    inner = dict(named)
    return fastavro.parse_schema(wrapper, named_schemas=inner), inner, True


def _refuse(problem: str) -> Callable[[bytes], Any]:
    def refuse(payload: bytes) -> Any:
        raise SchemaMismatch("", problem)
    return refuse


def _fetch(path: str, keyring: str | None, sid: int) -> Spec:
    """A schema the driver did not ship, from the registry (this worker's read-only engine)."""
    from . import worker

    reg = worker.engine(path, keyring).schemas
    reg.refresh()
    return spec_of(reg, sid)


class Decoders:
    """Every decoded column of a reader; made in the task, from what the driver planned."""

    def __init__(self, plans: list[Decoding]) -> None:
        self.plans = {d.column: d for d in plans}
        self.columns = set(self.plans)
        self._made: dict[str, ColumnDecoder] = {}

    def batch(self, batch: Any, topic: str, partition: int, keep: Sequence[str]) -> Any:
        """``batch`` (with an ``offset`` column) with its decoded columns' bytes replaced by
        values, ``keep`` columns only."""
        import pyarrow as pa

        offsets = batch.column(batch.schema.get_field_index("offset"))
        arrays = []
        for c in keep:
            col = batch.column(batch.schema.get_field_index(c))
            if c in self.columns:
                dec = self._made.get(c)
                if dec is None:
                    dec = self._made[c] = ColumnDecoder(self.plans[c])
                col = dec.values(col.to_pylist(), offsets, topic, partition)
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, names=list(keep))


def replace_types(schema: Any, plans: list[Decoding]) -> Any:
    """``schema`` (a StructType) with the decoded columns' types."""
    from pyspark.sql.types import StructField, StructType

    types = {d.column: d.spark_type for d in plans}
    return StructType([StructField(f.name, types.get(f.name, f.dataType), True)
                       for f in schema.fields])


def check_types(schema: Any, plans: list[Decoding]) -> None:
    """The schema Spark reads with gives each decoded column its decoded type (a user
    schema, or the subject's latest version changed since the DataFrame was made)."""
    got = {f.name: f.dataType for f in schema.fields}
    for d in plans:
        if d.column in got and got[d.column] != d.spark_type:
            raise ValueError(f"decode {d.column}: the column's type is "
                             f"{got[d.column].simpleString()}, the schema's is "
                             f"{d.spark_type.simpleString()}: leave {d.column} out of "
                             ".schema(...) (its type comes from the registry), or make the "
                             "DataFrame again if the subject has a new version")


# ---------------------------------------------------------------------------- the sink
def encode_options(options: dict[str, str]) -> dict[str, tuple[str | None, int | None]]:
    """``valueSchema``/``keySchema`` (SUBJECT or ``id:N``) by column. ``options``' keys
    lower-cased."""
    out = {}
    for c in COLUMNS:
        raw = options.get(f"{c}schema")
        if raw is not None:
            try:
                out[c] = schema_ref(raw)
            except SchemaMismatch as e:
                raise ValueError(f"{c}Schema: {e}") from None
    return out


def resolve_encoding(path: str, keyring: str | None,
                     refs: dict[str, tuple[str | None, int | None]]) -> dict[str, int]:
    """(The driver.) Each encoded column's schema id: a subject's latest version, or the id
    (which must exist)."""
    from engine import Engine

    if not refs:
        return {}
    out = {}
    with Engine.open(path, read_only=True, keyring=keyring) as eng:
        for c, (subject, sid) in refs.items():
            try:
                if subject is not None:
                    out[c] = int(eng.schemas.version(subject, "latest")["id"])
                else:
                    assert sid is not None
                    eng.schemas.schema_by_id(sid)
                    out[c] = sid
            except RegistryError as e:
                what = f"subject {subject!r}" if subject else f"id:{sid}"
                raise ValueError(f"{c}Schema {what}: {e}") from None
    return out


class Encoders:
    """(A sink task.) The encoded columns of each batch as wire-format bytes."""

    def __init__(self, registry: Any, ids: dict[str, int]) -> None:
        self.ids = ids
        self._ser = {c: registry.serializer(sid) for c, sid in ids.items()}
        self._specs = {c: spec_of(registry, sid) for c, sid in ids.items()}
        self._conv: dict[tuple[str, Any], Callable[[Any], Any] | None] = {}
        self.rows = 0  # rows of the task before this batch (for messages)

    def batch(self, batch: Any) -> Any:
        import pyarrow as pa

        names = batch.schema.names
        arrays = []
        for i, name in enumerate(names):
            col = batch.column(i)
            if name in self._ser:
                col = pa.array(self._encode(name, col), pa.binary())
            arrays.append(col)
        self.rows += batch.num_rows
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _encode(self, name: str, col: Any) -> list[bytes | None]:

        ser = self._ser[name]
        key = (name, col.type)
        if key not in self._conv:
            self._conv[key] = _encodable(col.type, ser.schema, self._specs[name])
        conv = self._conv[key]
        out: list[bytes | None] = []
        for i, v in enumerate(col.to_pylist()):
            if v is None:
                out.append(None)  # (a tombstone, a row without a key)
                continue
            try:
                out.append(ser(v if conv is None else conv(v)))
            except SchemaMismatch as e:
                raise ValueError(f"row {self.rows + i} of the task: the {name} does not fit "
                                 f"schema id {ser.id} ({ser.schema.schema_type}): {e}") from None
        return out


def _encodable(arrow_type: Any, parsed: Parsed, spec: Spec) -> Callable[[Any], Any] | None:
    """``to_pylist()`` values of ``arrow_type`` as ``parsed``'s encoder takes them
    (schema_values), or None when they fit as they are."""
    from . import schema_values as sv

    kind = parsed.schema_type
    p = cast(Any, parsed)  # (the type's own class: AvroSchema, ProtobufSchema)
    from . import schema_types as st

    second = (sv.avro_encodable(p.fast, p.named) if kind == "AVRO" else
              sv.protobuf_encodable(p.descriptor) if kind == "PROTOBUF" else
              sv.json_encodable(st.json_shape(spec[1], spec[2])))
    first = sv.encodable(arrow_type, kind)
    if first is None or second is None:
        return first or second
    return lambda v: second(first(v))
