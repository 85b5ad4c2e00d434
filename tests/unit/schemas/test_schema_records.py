"""The ``_schemas`` topic's records (engine.schemas.records) and the view rebuilt from them
(engine.schemas.view): Confluent's exact key bytes, and records that do not check out skipped,
never trusted."""

from __future__ import annotations

import json

import pytest

from engine.schemas import records
from engine.schemas.records import SchemaValue
from engine.schemas.view import View


def test_keys_are_the_bytes_confluents_registry_writes():
    # Jackson with @JsonPropertyOrder({"keytype","subject","version","magic"}), compact: a key
    # must serialize the same always, or compaction would keep two records of one key
    assert records.schema_key("orders-value", 3) == \
        b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","magic":0}'
    assert records.config_key("s") == b'{"keytype":"CONFIG","subject":"s","magic":0}'


def test_a_schema_value_round_trips_with_references():
    sv = SchemaValue("s", 2, 7, "PROTOBUF", "syntax = 'proto3';", (("a.proto", "a", 1),))
    got = records.parse(records.schema_key("s", 2), sv.encode())
    assert got is not None and got.value == sv
    doc = json.loads(sv.encode())
    assert doc["references"] == [{"name": "a.proto", "subject": "a", "version": 1}]
    assert doc["deleted"] is False and doc["schemaType"] == "PROTOBUF"


def test_a_missing_schema_type_is_avro_and_unknown_fields_are_ignored():
    v = b'{"subject":"s","version":1,"id":3,"schema":"\\"string\\"","metadata":{"x":1}}'
    got = records.parse(records.schema_key("s", 1), v)
    assert got is not None and got.value.schema_type == "AVRO" and got.value.id == 3


@pytest.mark.parametrize("key, value", [
    (b"", b"{}"),
    (b"not json", b"{}"),
    (b"[1]", b"{}"),
    (b'{"keytype":7}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":0,"magic":1}', b"{}"),  # version 0
    (b'{"keytype":"SCHEMA","subject":"s","version":true,"magic":1}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":5,"version":1,"magic":1}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"id":-1,"schema":"x"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"id":99999999999,"schema":"x"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"id":1,"schema":5}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"id":1,"schema":"x","references":[{"name":"n"}]}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"id":1,"schema":"x","deleted":"yes"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"\xff\xfe"),
    (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":3}'),
    (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"version":"x"}'),
    (b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}"),
])
def test_a_record_that_does_not_check_out_is_skipped(key, value):
    assert records.parse(key, value) is None


def _apply(view: View, key: bytes, value: bytes | None) -> None:
    rec = records.parse(key, value)
    assert rec is not None
    view.apply(rec)


def _put(view: View, subject: str, version: int, sid: int, deleted: bool = False) -> None:
    sv = SchemaValue(subject, version, sid, "AVRO", f'"s{sid}"', (), deleted)
    _apply(view, records.schema_key(subject, version), sv.encode())


def test_the_view_follows_soft_and_hard_deletes_and_keeps_the_highest_id():
    v = View()
    _put(v, "a", 1, 1)
    _put(v, "a", 2, 2)
    _put(v, "b", 1, 2)
    g = v.generation
    assert [x.version for x in v.live("a")] == [1, 2] and v.holders[2] == {("a", 2), ("b", 1)}
    _put(v, "a", 2, 2, deleted=True)  # a soft delete rewrites the record
    assert [x.version for x in v.live("a")] == [1] and v.generation > g
    _apply(v, records.schema_key("a", 2), None)  # a hard delete: a tombstone
    assert v.holders[2] == {("b", 1)} and 2 in v.ids
    _apply(v, records.schema_key("b", 1), None)
    assert 2 not in v.ids and v.max_id == 2  # (the id is gone, never given again)
    assert v.next_version("a") == 2


def test_delete_subject_and_clear_subject_records_as_confluent_writes_them():
    v = View()
    for n in (1, 2, 3):
        _put(v, "s", n, n)
    _apply(v, b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}',
           b'{"subject":"s","version":2}')
    assert [x.version for x in v.live("s")] == [3]
    _apply(v, b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}', b'{"subject":"s"}')
    assert [x.version for x in v.all("s")] == [3]


def test_levels_global_and_per_subject():
    v = View()
    assert v.level("s") == "BACKWARD"
    _apply(v, records.config_key(None), records.config_value("FULL"))
    _apply(v, records.config_key("s"), records.config_value("NONE"))
    assert v.level("s") == "NONE" and v.level("t") == "FULL"
    _apply(v, records.config_key("s"), None)
    assert v.level("s") == "FULL"
