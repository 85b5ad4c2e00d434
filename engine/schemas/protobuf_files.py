"""The files a Protobuf schema is made of: its own (``.proto`` text, or a base64
``FileDescriptorProto`` as confluent-kafka's ProtobufSerializer registers it), its references
(either form, each under its import path) and the well-known files nobody registers
(``google/protobuf/*``, ``google/type/*``, ``confluent/*``: Confluent's known types, which its
clients never send as references), built into one private ``DescriptorPool``.

A pool of its own per schema: two schemas may define the same names differently, and the
process's default pool is the generated code's. Loads are cached (``load``, an LRU keyed by
the text and the references) since protoc costs ~1 ms.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeAlias

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import DecodeError

from . import protoc
from .errors import InvalidSchema
from .kinds import Reference

FileProto: TypeAlias = descriptor_pb2.FileDescriptorProto
MAIN = "schema.proto"  # the schema's own file name (another if a reference takes it)
BUILTIN = ("google/protobuf/", "google/type/", "confluent/")  # as confluent-kafka's _is_builtin
CACHE = 256  # loaded schemas kept
# the whole text in the base64 alphabet: a .proto file never is (it needs spaces, quotes, ";")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_IMPORT = re.compile(r'\bimport\s+(?:public\s+|weak\s+)?["\']([^"\']+)["\']')


@dataclass(frozen=True, eq=False)
class Files:
    """A loaded schema: ``main`` its file, ``pool`` holding it and every file it imports,
    ``protos`` all of them by name, ``refs`` each referenced file's (subject, version)."""

    text: str
    main: FileProto
    file: FileDescriptor
    pool: descriptor_pool.DescriptorPool
    protos: dict[str, FileProto]
    refs: dict[str, tuple[str, int]] = field(default_factory=dict)


def load(text: str, references: Sequence[Reference] = ()) -> Files:
    """``text`` (.proto text or a base64 ``FileDescriptorProto``) with ``references`` (every
    file it imports, directly or not, other than the well-known ones) in a pool of its own;
    InvalidSchema with protoc's (or the pool's) message when it does not build."""
    if not isinstance(text, str):
        raise InvalidSchema("A Protobuf schema must be a string: .proto text or a base64 "
                            "FileDescriptorProto")
    return _load(text, tuple(references))


@lru_cache(maxsize=CACHE)
def _load(text: str, references: tuple[Reference, ...]) -> Files:
    given: dict[str, Reference] = {}
    for ref in references:
        if ref.name not in given and not (ref.name.startswith(BUILTIN) and builtin(ref.name)):
            given[ref.name] = ref  # (a well-known file: ours, as Confluent's clients do)
    main_name = MAIN
    while main_name in given:
        main_name = "_" + main_name
    texts: dict[str, str] = {}
    protos: dict[str, FileProto] = {}
    sources = [(name, ref.schema) for name, ref in given.items()] + [(main_name, text)]
    for name, schema in sources:
        proto = decoded(schema, name)
        if proto is None:
            texts[protoc.safe_path(name)] = schema
        else:
            protos[name] = proto
    wanted = _builtins_for(list(texts.values()), list(protos.values()))
    if texts:
        known = [*protos.values(), *(p for n, p in wanted.items() if not n.startswith(BUILTIN[0]))]
        for proto in protoc.compile_files(texts, list(texts), known):
            protos.setdefault(proto.name, proto)
    for name, proto in wanted.items():
        protos.setdefault(name, proto)
    pool = descriptor_pool.DescriptorPool()
    for proto in _in_order(main_name, protos):
        try:
            pool.Add(proto)
        except Exception as e:  # (upb: TypeError; the python backend: others) one line of it
            raise InvalidSchema(f"{proto.name}: {str(e).splitlines()[0] if str(e) else e!r}") from e
    try:
        file = pool.FindFileByName(main_name)
    except KeyError as e:
        raise InvalidSchema(f"{main_name} did not load: {e}") from e
    refs = {name: (ref.subject, ref.version) for name, ref in given.items()}
    return Files(text, protos[main_name], file, pool, protos, refs)


def decoded(text: str, name: str) -> FileProto | None:
    """``text`` as a base64 ``FileDescriptorProto`` named ``name``, or None when it is not
    base64 (then it is .proto text); InvalidSchema when it is base64 of something else."""
    s = text.strip()
    if not s or len(s) % 4 or not _BASE64.fullmatch(s):
        return None
    try:
        proto = FileProto.FromString(base64.b64decode(s, validate=True))
    except (binascii.Error, DecodeError) as e:
        raise InvalidSchema(f"{name}: neither .proto text nor a base64 FileDescriptorProto "
                            f"({e})") from e
    proto.name = name  # (a serializer registers the name its generated code had)
    return proto


@lru_cache(maxsize=64)
def builtin(name: str) -> FileProto | None:
    """A well-known file from the Python package that ships it (protobuf for
    google/protobuf/*, googleapis-common-protos for google/type/*, confluent-kafka for
    confluent/*), or None when that package is not installed."""
    if not name.startswith(BUILTIN) or not name.endswith(".proto"):
        return None
    module = name[: -len(".proto")].replace("/", ".") + "_pb2"
    if name.startswith("confluent/"):
        module = "confluent_kafka.schema_registry." + module
    try:
        serialized = importlib.import_module(module).DESCRIPTOR.serialized_pb
    except (ImportError, AttributeError):
        return None
    proto = FileProto.FromString(serialized)
    return proto if proto.name == name else None


def _builtins_for(texts: list[str], protos: list[FileProto]) -> dict[str, FileProto]:
    """The well-known files the schema's files import, with what those import."""
    todo = [m for t in texts for m in _IMPORT.findall(t)] + [d for p in protos for d in p.dependency]
    found: dict[str, FileProto] = {}
    while todo:
        name = todo.pop()
        if name in found or not name.startswith(BUILTIN):
            continue
        proto = builtin(name)
        if proto is not None:
            found[name] = proto
            todo += proto.dependency
    return found


def _in_order(main: str, protos: dict[str, FileProto]) -> list[FileProto]:
    """``main`` and what it imports, each after its imports; InvalidSchema naming an import
    no file answers (or a circle of imports)."""
    out: list[FileProto] = []
    state: dict[str, bool] = {}  # False: being visited, True: done

    def visit(name: str, by: str) -> None:
        if state.get(name):
            return
        if name in state:
            raise InvalidSchema(f"{by}: circular import of \"{name}\"")
        proto = protos.get(name)
        if proto is None:
            raise InvalidSchema(f"{by}: import \"{name}\" not found: register it and pass it "
                                "as a reference")
        state[name] = False
        for dep in proto.dependency:
            visit(dep, name)
        state[name] = True
        out.append(proto)

    visit(main, main)
    return out
