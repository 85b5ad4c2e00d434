"""The registry over a real data dir (engine.schemas.registry through ``eng.schemas``):
Confluent's answers and error codes, global ids never given twice — across processes, after
hard deletes and compaction — and references."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from engine import Engine
from engine.schemas.errors import RegistryError

ADDRESS = 'syntax = "proto3"; package acme; message Address { string zip = 1; }'
PERSON = ('syntax = "proto3"; package acme; import "address.proto"; '
          'message Person { string name = 1; int64 id = 2; acme.Address addr = 3; }')
REF = [{"name": "address.proto", "subject": "address.proto", "version": 1}]


def proto(n: int) -> str:
    """Schemas that grow one field per ``n``: each a compatible next version."""
    fields = " ".join(f"int64 f{i} = {i};" for i in range(1, n + 1))
    return f'syntax = "proto3"; package p; message M {{ {fields} }}'


def code(call, *args, **kw) -> int:
    with pytest.raises(RegistryError) as e:
        call(*args, **kw)
    return e.value.code


@pytest.fixture
def eng(tmp_path):
    e = Engine(str(tmp_path / "d"))
    yield e
    e.close()


def test_one_schema_one_id_in_every_subject_and_versions_numbered(eng):
    r = eng.schemas
    assert r.register("a", proto(1), "PROTOBUF") == {"id": 1}
    assert r.register("a", proto(1), "PROTOBUF") == {"id": 1}  # (no new version)
    assert r.register("b", proto(1), "PROTOBUF") == {"id": 1}  # (the same id elsewhere)
    assert r.register("a", proto(2), "PROTOBUF") == {"id": 2}
    assert r.versions("a") == [1, 2] and r.subjects() == ["a", "b"]
    assert r.version("a", "latest") == {"subject": "a", "version": 2, "id": 2,
                                        "schemaType": "PROTOBUF", "schema": proto(2)}
    assert r.version("a", -1)["version"] == 2 and r.version("a", "1")["id"] == 1
    assert r.lookup("b", proto(1), "PROTOBUF")["version"] == 1
    assert r.versions_of(1) == [{"subject": "a", "version": 1}, {"subject": "b", "version": 1}]
    assert r.subjects_of(2) == ["a"]
    assert r.schema_by_id(2) == {"schemaType": "PROTOBUF", "schema": proto(2)}


def test_confluents_error_codes(eng):
    r = eng.schemas
    r.register("a", proto(1), "PROTOBUF")
    assert code(r.versions, "nope") == 40401
    assert code(r.version, "a", 9) == 40402
    assert code(r.version, "a", "0") == 42202
    assert code(r.version, "a", "x") == 42202
    assert code(r.schema_by_id, 99) == 40403
    assert code(r.lookup, "a", proto(7), "PROTOBUF") == 40403
    assert code(r.lookup, "zz", proto(1), "PROTOBUF") == 40401
    assert code(r.register, "a", "syntax = 'proto3'; message {", "PROTOBUF") == 42201
    assert code(r.register, "a", proto(1), "XML") == 42201
    assert code(r.register, "", proto(1), "PROTOBUF") == 42208
    assert code(r.register, "a", "x" * (8 << 20 + 1), "PROTOBUF") == 42209
    assert code(r.set_config, None, "sideways") == 42203
    assert code(r.config, "a") == 40408
    err = pytest.raises(RegistryError, r.version, "nope", 1).value
    assert err.status == 404 and err.body() == {"error_code": 40401,
                                                "message": "Subject 'nope' not found."}


def test_incompatible_is_40901_with_the_reason_and_levels_apply(eng):
    r = eng.schemas
    r.register("o", 'syntax = "proto3"; message O { int64 id = 1; }', "PROTOBUF")
    changed = 'syntax = "proto3"; message O { string id = 1; }'
    err = pytest.raises(RegistryError, r.register, "o", changed, "PROTOBUF").value
    assert err.code == 40901 and err.status == 409 and "FIELD_SCALAR_KIND_CHANGED" in str(err)
    assert r.check("o", "latest", changed, "PROTOBUF") == {"is_compatible": False}
    assert r.check("nobody", "latest", changed, "PROTOBUF") == {"is_compatible": True}
    assert r.set_config("o", "none") == {"compatibility": "NONE"}
    assert r.config("o") == {"compatibilityLevel": "NONE"}
    assert r.register("o", changed, "PROTOBUF") == {"id": 2}
    assert r.delete_config("o") == {"compatibilityLevel": "NONE"}
    assert r.config("o", default_to_global=True) == {"compatibilityLevel": "BACKWARD"}
    r.set_config(None, "FULL")
    assert r.delete_config(None) == {"compatibilityLevel": "FULL"}
    assert r.config() == {"compatibilityLevel": "BACKWARD"}


def test_deletes_soft_then_hard_and_numbering_goes_on(eng):
    r = eng.schemas
    for n in (1, 2, 3):
        r.set_config("s", "NONE")
        r.register("s", proto(n), "PROTOBUF")
    assert code(r.delete_version, "s", 2, permanent=True) == 40407
    assert r.delete_version("s", 2) == 2
    assert code(r.delete_version, "s", 2) == 40406
    assert r.versions("s") == [1, 3] and r.versions("s", deleted=True) == [1, 2, 3]
    assert r.delete_version("s", 2, permanent=True) == 2
    assert code(r.delete_subject, "s", permanent=True) == 40405
    assert r.delete_subject("s") == [1, 3]
    assert code(r.versions, "s") == 40401 and code(r.delete_subject, "s") == 40404
    assert r.subjects() == [] and r.subjects(deleted=True) == ["s"]
    assert r.schema_by_id(1)["schema"] == proto(1)  # (a soft-deleted id still decodes)
    assert r.register("s", proto(9), "PROTOBUF") == {"id": 4}
    assert r.version("s", "latest")["version"] == 4  # (after the deleted ones)


def test_references_resolve_and_protect_what_they_name(eng):
    r = eng.schemas
    r.register("address.proto", ADDRESS, "PROTOBUF")
    assert r.register("person-value", PERSON, "PROTOBUF", REF) == {"id": 2}
    assert r.version("person-value", 1)["references"] == REF
    assert code(r.register, "p2", PERSON, "PROTOBUF") == 42201  # (the import unresolved)
    bad = [{"name": "address.proto", "subject": "address.proto", "version": 5}]
    assert code(r.register, "p2", PERSON, "PROTOBUF", bad) == 42201
    assert code(r.delete_subject, "address.proto") == 42206
    ser = r.serializer("person-value")
    data = ser.from_json({"name": "ann", "id": "5", "addr": {"zip": "1"}})
    assert data[:5] == b"\x00\x00\x00\x00\x02"
    assert r.deserializer().to_json(data) == {"name": "ann", "id": "5", "addr": {"zip": "1"}}


def test_ids_are_never_given_again_after_a_hard_delete_and_compaction(tmp_path):
    path = str(tmp_path / "d")
    with Engine(path) as e:
        # (small segments: compaction cleans sealed ones only)
        e.create_topic("_schemas", 1, {"cleanup.policy": "compact", "segment.bytes": "150",
                                       "delete.retention.ms": "0",
                                       "min.cleanable.dirty.ratio": "0.01"})
        r = e.schemas
        r.register("a", proto(1), "PROTOBUF")
        r.register("b", proto(2), "PROTOBUF")
        r.delete_subject("b")
        r.delete_subject("b", permanent=True)
        r.set_config(None, "FULL")  # (one more record: the tombstone's segment sealed)
        e.maintenance.compact("_schemas", force=True)
        e.maintenance.compact("_schemas", force=True)  # (the tombstones go in a second pass)
    with Engine(path) as e:
        keys = [rec.key for rec in e.read("_schemas", 0, 0)]
        assert all(b'"subject":"b"' not in k for k in keys), keys  # (compacted away)
        assert e.schemas.register("c", proto(3), "PROTOBUF") == {"id": 3}


WRITER = """
import os, sys, time
from engine import Engine
path, me, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Engine(path) as e:
    e.schemas.set_config(None, "NONE")
    while not os.path.exists(go):  # (all four start together)
        time.sleep(0.001)
    for n in range(40):
        # every process registers the shared schemas 0..9, and 30 of its own
        k = n % 10 if n % 4 == 0 else 1000 * (me + 1) + n
        sid = e.schemas.register("s" + str(me) + "-" + str(n), TEXT.format(n=k), "PROTOBUF")["id"]
        print(k, sid, flush=True)
"""


def test_four_processes_registering_at_once_never_share_or_reuse_an_id(tmp_path):
    path, go = str(tmp_path / "d"), str(tmp_path / "go")
    text = 'syntax = "proto3"; package p{n}; message M {{ int64 f = 1; }}'
    code_ = WRITER.replace("TEXT", repr(text))
    Engine(path).close()  # (the data dir made first: four processes may not all create it)
    procs = [subprocess.Popen([sys.executable, "-c", code_, path, str(i), go],
                              stdout=subprocess.PIPE, text=True) for i in range(4)]
    time.sleep(1.0)
    open(go, "w").close()
    got: dict[str, set[int]] = {}
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0
        for line in out.split("\n"):
            if line:
                schema, sid = line.split()
                got.setdefault(schema, set()).add(int(sid))
    # one id per schema, whoever registered it; no id for two schemas; none skipped
    assert all(len(ids) == 1 for ids in got.values()), got
    ids = sorted(next(iter(ids)) for ids in got.values())
    assert ids == list(range(1, len(got) + 1)), ids
    with Engine(path, read_only=True) as e:  # (a second process sees every registration)
        assert len(e.schemas.subjects()) == 160
        assert {e.schemas.version(f"s{i}-{n}", 1)["id"] for i in range(4) for n in range(40)} \
            == set(ids)
