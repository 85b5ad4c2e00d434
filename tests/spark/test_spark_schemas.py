"""Schemas in Spark (engine/spark/schema_columns.py, schema_types.py, schema_values.py): the
``rivven`` source's ``decode`` (registry-encoded keys and values as typed columns, each record
read with its writer schema, fitted to the reader's) and the sink's ``valueSchema`` /
``keySchema`` (a struct column encoded in Confluent's wire format), on the shared SparkSession;
the Spark types of Avro, Protobuf and JSON schemas without one."""

import datetime as dt
import io
import json
import os
import sys
import uuid
from decimal import Decimal

import fastavro
import pytest

from engine import Engine, Record

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "double"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "DONE"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
        {"name": "zip", "type": "int"}, {"name": "city", "type": "string"}]}], "default": None},
    {"name": "pick", "type": ["int", "string", {"type": "record", "name": "Box", "fields": [
        {"name": "x", "type": "int"}]}]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                               "scale": 2}},
    {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "blob", "type": "bytes"},
]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "note", "type": "string", "default": "none"}]}
ORDER_TYPE = ("struct<id:bigint,amount:double,status:string,tags:array<string>,"
              "attrs:map<string,int>,addr:struct<zip:int,city:string>,"
              "pick:struct<member0:int,member1:string,member2:struct<x:int>>,day:date,"
              "ts:timestamp,price:decimal(9,2),at:int,ref:string,blob:binary")
TS = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
REF = "12345678-1234-5678-1234-567812345678"


def order(i, **kw):
    """An Order as the serializer takes it."""
    return {"id": i, "amount": i * 1.5, "status": "NEW" if i % 2 else "DONE",
            "tags": [f"t{i}"], "attrs": {"n": i}, "addr": {"zip": 10000 + i, "city": f"c{i}"},
            "pick": "s" if i % 2 else {"x": i}, "day": dt.date(2024, 1, 1 + i), "ts": TS,
            "price": Decimal(f"{i}.25"), "at": dt.time(1, 2, 3), "ref": REF,
            "blob": bytes([i, 255]), **kw}


def read(spark, data_dir, topic, **opts):
    r = spark.read.format("rivven").option("path", data_dir).option("topic", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def by_offset(df, column="value"):
    return {r.offset: (r[column].asDict(recursive=True) if r[column] is not None else None)
            for r in df.select("offset", column).collect()}


def utc(ts):
    """A timestamp Spark collected (naive, the session's time zone) as an aware UTC one."""
    return ts.astimezone(dt.UTC)


# ------------------------------------------------------------------ decode: Avro
def test_avro_values_read_as_typed_columns_with_each_records_writer_schema(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("orders", 1)
        v1 = eng.schemas.register("orders-value", json.dumps(ORDER_V1))["id"]
        ser1 = eng.schemas.serializer("orders-value")
        eng.produce("orders", [Record(value=ser1(order(1))), Record(value=ser1(order(2)))])
        eng.schemas.register("orders-value", json.dumps(ORDER_V2))
        ser2 = eng.schemas.serializer("orders-value")
        eng.produce("orders", [Record(value=ser2(order(3, note="hi", addr=None))),
                               Record(key=b"gone", value=None)])  # a tombstone: null, no error

    df = read(spark, data_dir, "orders", decode="value")
    assert df.schema["value"].dataType.simpleString() == ORDER_TYPE + ",note:string>"
    assert df.schema["key"].dataType.simpleString() == "binary"  # (not decoded)
    got = by_offset(df)
    assert got[3] is None
    one = got[0]
    assert utc(one.pop("ts")) == TS
    assert one == {"id": 1, "amount": 1.5, "status": "NEW", "tags": ["t1"], "attrs": {"n": 1},
                   "addr": {"zip": 10001, "city": "c1"},
                   "pick": {"member0": None, "member1": "s", "member2": None},
                   "day": dt.date(2024, 1, 2), "price": Decimal("1.25"),
                   "at": 3723000, "ref": REF, "blob": b"\x01\xff",
                   "note": "none"}  # written with v1: the reader's (v2) default
    assert got[1]["pick"] == {"member0": None, "member1": None, "member2": {"x": 2}}
    assert (got[2]["note"], got[2]["addr"], got[2]["id"]) == ("hi", None, 3)
    # nested fields filter and select as any column's
    assert [r.offset for r in df.filter("value.addr.zip = 10002").collect()] == [1]
    assert sorted(r.s for r in df.selectExpr("value.status AS s").collect()
                  if r.s is not None) == ["DONE", "NEW", "NEW"]

    # an older reader: valueSchemaId picks it, and v2's records lose what v1 does not know
    old = read(spark, data_dir, "orders", decode="value", valueSchemaId=str(v1))
    assert old.schema["value"].dataType.simpleString() == ORDER_TYPE + ">"
    assert by_offset(old)[2]["id"] == 3


# ------------------------------------------------------------------ decode: Protobuf, JSON
ITEM_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Item {
  int64 id = 1;
  uint64 big = 2;
  string name = 3;
  bytes blob = 4;
  enum Kind { PLAIN = 0; FANCY = 1; }
  Kind kind = 5;
  repeated int32 sizes = 6;
  map<string, Part> parts = 7;
  message Part { string sku = 1; int32 qty = 2; }
  Part main = 8;
  google.protobuf.Timestamp at = 9;
  google.protobuf.Int64Value maybe = 10;
  optional string opt = 11;
}"""
ITEM_TYPE = ("struct<id:bigint,big:decimal(20,0),name:string,blob:binary,kind:string,"
             "sizes:array<int>,parts:map<string,struct<sku:string,qty:int>>,"
             "main:struct<sku:string,qty:int>,at:timestamp,maybe:bigint,opt:string")
REGION_V1 = {"type": "object", "properties": {"region": {"type": "string"},
                                              "shard": {"type": "integer"}}}
REGION_V2 = {"type": "object", "properties": {**REGION_V1["properties"],
                                              "zone": {"type": ["string", "null"]}}}


def test_a_protobuf_value_and_a_json_key_decoded_together(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("items", 1)
        eng.schemas.register("items-value", ITEM_PROTO, "PROTOBUF")
        val = eng.schemas.serializer("items-value")
        eng.schemas.register("items-key", json.dumps(REGION_V1), "JSON")
        key1 = eng.schemas.serializer("items-key")
        eng.produce("items", [Record(
            key=key1({"region": "eu", "shard": 2**40}),
            value=val({"id": 2**60, "big": 2**64 - 1, "name": "lamp", "blob": "AAE=",
                       "kind": "FANCY", "sizes": [1, 2], "parts": {"a": {"sku": "s", "qty": 3}},
                       "main": {"sku": "m"}, "at": "2024-05-06T07:08:09.123Z", "maybe": 7}))])
        eng.schemas.set_config("items-key", "NONE")
        eng.schemas.register("items-key", json.dumps(REGION_V2), "JSON")
        key2 = eng.schemas.serializer("items-key")
        eng.produce("items", [Record(key=key2({"region": "us", "shard": 1, "zone": "z1"}),
                                     value=val({"id": 5}))])

    df = read(spark, data_dir, "items", decode="key,value")
    assert df.schema["value"].dataType.simpleString() == ITEM_TYPE + ">"
    assert df.schema["key"].dataType.simpleString() == \
        "struct<region:string,shard:bigint,zone:string>"
    rows = {r.offset: r for r in df.collect()}
    first, second = rows[0].value.asDict(recursive=True), rows[1].value.asDict(recursive=True)
    assert utc(first.pop("at")) == dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
    assert first == {"id": 2**60, "big": Decimal(2**64 - 1), "name": "lamp", "blob": b"\x00\x01",
                     "kind": "FANCY", "sizes": [1, 2], "parts": {"a": {"sku": "s", "qty": 3}},
                     "main": {"sku": "m", "qty": 0}, "maybe": 7, "opt": None}
    # proto3 fields without presence read as their defaults; messages, wrappers, optional: null
    assert second == {"id": 5, "big": Decimal(0), "name": "", "blob": b"", "kind": "PLAIN",
                      "sizes": [], "parts": {}, "main": None, "at": None, "maybe": None,
                      "opt": None}
    # JSON by property name: v1's document has no zone (null)
    assert rows[0].key.asDict() == {"region": "eu", "shard": 2**40, "zone": None}
    assert rows[1].key.asDict() == {"region": "us", "shard": 1, "zone": "z1"}
    assert df.filter("key.region = 'us' AND value.kind = 'PLAIN'").count() == 1


def test_json_objects_without_properties_read_as_their_json_text(spark, data_dir):
    doc = {"type": "object", "properties": {
        "id": {"type": "integer"}, "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},  # anything: its JSON text
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "addr": {"$ref": "#/definitions/Addr"}},
        "definitions": {"Addr": {"type": "object", "additionalProperties": False,
                                 "properties": {"zip": {"type": "string"}}}}}
    with Engine.open(data_dir) as eng:
        eng.create_topic("docs", 1)
        eng.schemas.register("docs-value", json.dumps(doc), "JSON")
        ser = eng.schemas.serializer("docs-value")
        eng.produce("docs", [Record(value=ser({"id": 1, "price": 2, "tags": ["a"],
                                               "meta": {"x": [1, {"y": None}]},
                                               "counts": {"a": 1}, "addr": {"zip": "0123"}}))])
    df = read(spark, data_dir, "docs", decode="value")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,price:double,tags:array<string>,meta:string,"
        "counts:map<string,bigint>,addr:struct<zip:string>>")
    assert by_offset(df)[0] == {"id": 1, "price": 2.0, "tags": ["a"],
                                "meta": '{"x":[1,{"y":null}]}', "counts": {"a": 1},
                                "addr": {"zip": "0123"}}


# ------------------------------------------------------------------ decode: errors
def test_records_that_do_not_decode_fail_the_read_naming_them_or_read_as_null(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("mixed", 1)
        sid = eng.schemas.register("mixed-value", json.dumps(ORDER_V1))["id"]
        ser = eng.schemas.serializer("mixed-value")
        good = ser(order(1))
        eng.produce("mixed", [Record(value=good),
                              Record(value=b"plain text"),                     # no magic byte
                              Record(value=bytes([0, 0, 0, 0, 99]) + good[5:]),  # unknown id
                              Record(value=good[:12]),                         # truncated
                              Record(value=good)])
    with pytest.raises(Exception) as e:
        read(spark, data_dir, "mixed", decode="value").collect()
    text = str(e.value)
    assert "mixed-0 offset 1: the value does not decode: not in Confluent's wire format" in text
    assert ".option('decodeErrors', 'null')" in text
    got = by_offset(read(spark, data_dir, "mixed", decode="value", decodeErrors="null"))
    assert [o for o, v in sorted(got.items()) if v is not None] == [0, 4]
    assert got[4]["id"] == 1

    # the driver refuses what it can tell before any task runs, saying what to do
    with pytest.raises(Exception, match="subject 'nope-value'.*Subject 'nope-value' not found"):
        read(spark, data_dir, "mixed", decode="value", valueSubject="nope-value")
    with pytest.raises(Exception, match="decode 'values': use value, key, or key,value"):
        read(spark, data_dir, "mixed", decode="values")
    with pytest.raises(Exception, match="decodeErrors 'skip': use fail or null"):
        read(spark, data_dir, "mixed", decode="value", decodeErrors="skip")
    with pytest.raises(Exception, match="the column's type is binary.*leave value out"):
        (spark.read.format("rivven").schema("offset long, value binary")
         .option("path", data_dir).option("topic", "mixed").option("decode", "value")
         .load().collect())
    assert sid == 1


# ------------------------------------------------------------------ the sink
def test_the_sink_encodes_a_struct_column_with_a_registered_schema(spark, data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("src", 1)
        eng.create_topic("out", 1)
        eng.schemas.register("src-value", json.dumps(ORDER_V1))
        ser = eng.schemas.serializer("src-value")
        eng.produce("src", [Record(value=ser(order(i))) for i in range(1, 5)])
        eng.schemas.register("out-value", json.dumps(ORDER_V1))
        key_id = eng.schemas.register("out-key", '"string"')["id"]

    # decoded, then written back under a schema: a struct column, a union of three branches
    # (a struct of members), a map, a decimal, a timestamp... each encodes as it read
    (read(spark, data_dir, "src", decode="value")
     .selectExpr("CAST(offset AS STRING) AS key", "value")
     .write.format("rivven").option("path", data_dir).option("topic", "out")
     .option("valueSchema", "out-value").option("keySchema", f"id:{key_id}")
     .mode("append").save())
    with Engine.open(data_dir) as eng:
        de = eng.schemas.deserializer()
        recs = sorted(eng.read("out", 0, 0, 100), key=lambda r: de(r.key))
        assert [de(r.key) for r in recs] == ["0", "1", "2", "3"]
        want = [order(i) for i in range(1, 5)]
        for w in want:
            w["ref"] = uuid.UUID(w["ref"])
        assert [de(r.value) for r in recs] == want
        sid = int.from_bytes(recs[0].value[1:5], "big")
        assert sid == eng.schemas.version("out-value", "latest")["id"]
        # Avro's own binary body, as confluent-kafka's AvroDeserializer reads it after the
        # 5-byte header
        plain = fastavro.parse_schema(json.loads(eng.schemas.schema_by_id(sid)["schema"]))
        assert fastavro.schemaless_reader(io.BytesIO(recs[1].value[5:]), plain)["id"] == 2

    # a row that does not fit fails the write, naming the field; nothing is written
    bad = spark.createDataFrame(
        [({"region": "eu", "shard": "x"},)], "value struct<region:string,shard:string>")
    with Engine.open(data_dir) as eng:
        eng.schemas.register("regions", json.dumps({**REGION_V1, "required": ["shard"]}),
                             "JSON")
    with pytest.raises(Exception, match="the value does not fit schema id .* field shard"):
        (bad.write.format("rivven").option("path", data_dir).option("topic", "out")
         .option("valueSchema", "regions").mode("append").save())
    with Engine.open(data_dir) as eng:
        assert len(eng.read("out", 0, 0, 100, isolation_level="read_committed")) == 4
    with pytest.raises(Exception, match="value column is struct<region:string.*valueSchema"):
        bad.write.format("rivven").option("path", data_dir).option("topic", "out") \
            .mode("append").save()
    with pytest.raises(Exception, match="valueSchema subject 'none'.*not found"):
        bad.write.format("rivven").option("path", data_dir).option("topic", "out") \
            .option("valueSchema", "none").mode("append").save()


def test_a_stream_decodes_and_its_sink_encodes_protobuf(spark, data_dir, tmp_path):
    with Engine.open(data_dir) as eng:
        eng.create_topic("in", 2)
        eng.create_topic("out", 1)
        eng.schemas.register("in-value", ITEM_PROTO, "PROTOBUF")
        eng.schemas.register("out-value", ITEM_PROTO, "PROTOBUF")
        ser = eng.schemas.serializer("in-value")
        eng.produce("in", [Record(key=b"k%d" % i, value=ser(
            {"id": i, "name": f"n{i}", "kind": "FANCY" if i % 2 else "PLAIN",
             "parts": {"p": {"sku": f"s{i}", "qty": i}}, "at": "2024-01-01T00:00:00Z"}))
            for i in range(20)])
    df = (spark.readStream.format("rivven").option("path", data_dir).option("topic", "in")
          .option("startingOffsets", "earliest").option("decode", "value").load())
    q = (df.filter("value.kind = 'FANCY'").select("key", "value")
         .writeStream.format("rivven").option("path", data_dir).option("topic", "out")
         .option("valueSchema", "out-value")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
         .start())
    q.awaitTermination(300)
    assert q.exception() is None
    with Engine.open(data_dir) as eng:
        de = eng.schemas.deserializer()
        got = sorted((de.to_json(r.value) for r in eng.read("out", 0, 0, 100,
                                                              isolation_level="read_committed")),
                     key=lambda v: int(v["id"]))
    assert [int(v["id"]) for v in got] == list(range(1, 20, 2))
    assert got[0]["parts"] == {"p": {"sku": "s1", "qty": 1}}
    assert got[0]["at"] == "2024-01-01T00:00:00Z"


# ------------------------------------------------------------------ types, without Spark
@pytest.mark.parametrize("schema, want", [
    ("int", "int"), ("long", "bigint"), ("float", "float"), ("double", "double"),
    ("boolean", "boolean"), ("bytes", "binary"), ("string", "string"), ("null", "void"),
    ({"type": "fixed", "name": "F", "size": 4}, "binary"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "string"),
    (["null", "string"], "string"), (["int", "long"], "bigint"), (["null", "float", "double"],
                                                                  "double"),
    (["string", "int"], "struct<member0:string,member1:int>"),
    ({"type": "array", "items": ["null", "int"]}, "array<int>"),
    ({"type": "map", "values": {"type": "map", "values": "long"}}, "map<string,map<string,bigint>>"),
    ({"type": "int", "logicalType": "date"}, "date"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "timestamp"),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, "timestamp_ntz"),
    ({"type": "long", "logicalType": "time-micros"}, "bigint"),
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18,
      "scale": 4}, "decimal(18,4)"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 0}, "binary"),  # (unusable)
    ({"type": "string", "logicalType": "uuid"}, "string"),
    ({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "record", "name": "S", "fields": [
            {"name": "b", "type": "int"}]}}, {"name": "c", "type": "S"}]},
     "struct<a:struct<b:int>,c:struct<b:int>>"),
])
def test_avro_types(schema, want):
    from engine.spark.schema_types import avro_type

    assert avro_type(fastavro.parse_schema(schema)).simpleString() == want


def test_types_spark_has_not_are_refused_naming_the_field():
    from engine.schemas.protobuf import parse
    from engine.spark.schema_types import Unsupported, avro_type, json_type, protobuf_type

    node = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(Unsupported, match="next: the record Node holds itself"):
        avro_type(fastavro.parse_schema(node))
    with pytest.raises(Unsupported, match="decimal\\(40,2\\) has more than 38 digits"):
        avro_type(fastavro.parse_schema({"type": "bytes", "logicalType": "decimal",
                                         "precision": 40, "scale": 2}))
    tree = parse('syntax = "proto3"; message T { repeated T kids = 1; string name = 2; }')
    with pytest.raises(Unsupported, match="kids: the message T holds itself"):
        protobuf_type(tree.descriptor)
    # JSON: a recursive schema reads as its JSON text where it recurs
    doc = {"type": "object", "properties": {"name": {"type": "string"},
                                            "kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert json_type(json.dumps(doc)).simpleString() == \
        "struct<name:string,kids:array<string>>"


@pytest.mark.parametrize("schema, want", [
    ({"type": "integer"}, "bigint"), ({"type": "number"}, "double"),
    ({"type": ["integer", "number"]}, "double"), ({"type": ["null", "boolean"]}, "boolean"),
    ({"type": ["string", "integer"]}, "string"), ({}, "string"), (True, "string"),
    ({"type": "array"}, "array<string>"),
    ({"type": "array", "items": [{"type": "integer"}]}, "array<string>"),  # a tuple
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, "struct<a:bigint>"),
    ({"type": "object", "properties": {"a": {"type": "integer"}},
      "additionalProperties": True}, "string"),
    ({"type": "object", "additionalProperties": {"type": "number"}}, "map<string,double>"),
    ({"anyOf": [{"type": "null"}, {"type": "string"}]}, "string"),
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "string"),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}},
                {"properties": {"b": {"type": "string"}}}]}, "struct<a:bigint,b:string>"),
])
def test_json_types(schema, want):
    from engine.spark.schema_types import json_type

    assert json_type(json.dumps(schema)).simpleString() == want


def test_json_references_are_followed_by_name():
    from engine.schemas.kinds import Reference
    from engine.spark.schema_types import json_type

    addr = {"type": "object", "properties": {"zip": {"type": "string"}},
            "definitions": {"N": {"type": "integer"}}}
    doc = {"type": "object", "properties": {"home": {"$ref": "addr.json"},
                                            "n": {"$ref": "addr.json#/definitions/N"},
                                            "lost": {"$ref": "other.json"}}}
    refs = [Reference("addr.json", "addr", 1, "JSON", json.dumps(addr))]
    assert json_type(json.dumps(doc), refs).simpleString() == \
        "struct<home:struct<zip:string>,n:bigint,lost:string>"


# ------------------------------------------------------------------ values, without Spark
def test_values_that_do_not_fit_the_readers_type_are_named_in_the_task(data_dir):
    """(The executors' part, in this process.) A JSON document not checked when it was written,
    a Protobuf field whose type changed under the same name: the record fails, naming the field
    and the record, or reads as null."""
    import pyarrow as pa

    from engine.spark.schema_columns import DecodeError, Decoders, decode_options, plan_decoding

    proto_v2 = ITEM_PROTO.replace("string name = 3;", "int64 name = 3;")
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1)
        eng.schemas.register("t-value", json.dumps(REGION_V1), "JSON")
        eng.schemas.register("p-value", ITEM_PROTO, "PROTOBUF")
        eng.schemas.set_config("p-value", "NONE")
        old = eng.schemas.serializer("p-value")
        eng.schemas.register("p-value", proto_v2, "PROTOBUF")
        new = eng.schemas.serializer("p-value")
        json_bad = bytes([0, 0, 0, 0, 1]) + b'{"region": "eu", "shard": "x"}'
        json_ok = eng.schemas.serializer("t-value")({"region": "us", "shard": 2})
        pb_old, pb_new = old({"id": 1, "name": "lamp"}), new({"id": 2, "name": 7})

    def decode(values, **opts):
        wants, null = decode_options({"decode": "value", **{k.lower(): v for k, v in opts.items()}},
                                     ["t"])
        batch = pa.RecordBatch.from_pydict({"offset": list(range(len(values))), "value": values})
        return Decoders(plan_decoding(data_dir, None, wants, null)).batch(
            batch, "t", 0, ["value"]).column(0).to_pylist()

    with pytest.raises(DecodeError, match="t-0 offset 1: the value does not decode: field "
                                          "shard: expected an integer, got \"x\""):
        decode([json_ok, json_bad])
    assert decode([json_ok, json_bad], decodeErrors="null") == [
        {"region": "us", "shard": 2}, None]
    # v1's records read with v2 (the latest): name was a string, v2's is a bigint
    with pytest.raises(DecodeError, match="t-0 offset 0: the value does not decode: does not "
                                          "fit the column's type struct<id:bigint"):
        decode([pb_old, pb_new], valueSubject="p-value")
    got = decode([pb_old, pb_new], valueSubject="p-value", decodeErrors="null")
    assert got[0] is None and (got[1]["id"], got[1]["name"]) == (2, 7)


def test_sink_options_take_bytes_strings_and_nulls_and_a_struct_only_with_a_schema():
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        NullType,
        StringType,
        StructField,
        StructType,
    )

    from engine.spark.sink import SinkOptions

    def opts(value, key=BinaryType(), **o):
        schema = StructType([StructField("key", key), StructField("value", value)])
        return SinkOptions({"path": "/d", "topic": "t", **o}, schema)

    for t in (BinaryType(), StringType(), NullType()):  # (NullType: lit(None), tombstones)
        assert opts(t, key=t).schema_refs == {}
    struct = StructType([StructField("a", IntegerType())])
    with pytest.raises(ValueError, match="value column is struct<a:int>: a value is binary or "
                                         "string, unless .option\\('valueSchema'"):
        opts(struct)
    with pytest.raises(ValueError, match="key column is int: a key is binary"):
        opts(BinaryType(), key=IntegerType())
    assert opts(struct, valueSchema="s-value").schema_refs == {"value": ("s-value", None)}
    assert opts(BinaryType(), key=IntegerType(), keySchema="id:7").schema_refs == \
        {"key": (None, 7)}
    with pytest.raises(ValueError, match="keySchema: 'id:x': use id:N"):
        opts(BinaryType(), keySchema="id:x")
