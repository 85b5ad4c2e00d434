"""confluent-kafka's own schema registry client and serializers against ``rivven serve
--schema-registry-listen``: what they register and serialize (produced through rivven serve)
decodes with ``rivven consume --decode``, and what ``rivven produce --value-schema`` writes
deserializes with theirs — Avro, Protobuf and JSON Schema."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from helpers import run_rivven
from helpers.kafka import Served, start_server

pytest.importorskip("confluent_kafka.schema_registry")  # (the dev extra installs it)
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
ORDERS = [{"id": i, "item": f"item{i}", "price": i * 0.5, "note": None if i % 2 else f"n{i}"}
          for i in range(20)]
PERSON_PROTO = """syntax = "proto3";
package acme;
message Person { string name = 1; int64 id = 2; repeated string tags = 3; }
"""
JSON_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                                 "age": {"type": "integer"}},
               "required": ["name"], "additionalProperties": False}


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[Served, str]]:
    d = str(tmp_path / "data")
    for t in ("a", "b", "p", "q", "j"):
        run_rivven(d, "topic", "create", t, check=True)
    s = start_server(d, "--schema-registry-listen", "127.0.0.1:0")
    try:
        m = re.search(r"schema registry on (http://\S+)", s.log())
        assert m, s.log()
        yield s, m.group(1)
    finally:
        s.kill()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        while len(out) < n:
            m = c.poll(10)
            assert m is not None, f"only {len(out)} of {n} records"
            assert m.error() is None, m.error()
            out.append(m.value())
    finally:
        c.close()
    return out


def decoded(d: str, topic: str) -> list:
    out = run_rivven(d, "consume", topic, "--decode", "--json", check=True).stdout
    return [json.loads(line)["value"] for line in out.decode().splitlines()]


def test_avro_both_ways_with_confluents_client_and_serializers(served):
    s, url = served
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    client = SchemaRegistryClient({"url": url})
    ser = AvroSerializer(client, json.dumps(ORDER))
    ctx = SerializationContext("a", MessageField.VALUE)
    produce(s.bootstrap, "a", [ser(o, ctx) for o in ORDERS])
    # their client registered under TopicNameStrategy; our registry holds it
    assert client.get_subjects() == ["a-value"]
    latest = client.get_latest_version("a-value")
    assert latest.version == 1 and latest.schema.schema_type == "AVRO"
    assert client.get_schema(latest.schema_id).schema_str == json.dumps(ORDER)
    assert decoded(s.data_dir, "a") == ORDERS

    # the other way: rivven produce --value-schema, their deserializer
    lines = "".join(json.dumps(o) + "\n" for o in ORDERS).encode()
    run_rivven(s.data_dir, "produce", "b", "--value-schema", "a-value", input=lines,
               check=True)
    de = AvroDeserializer(client)
    got = [de(v, SerializationContext("b", MessageField.VALUE))
           for v in consume(s.bootstrap, "b", len(ORDERS))]
    assert got == ORDERS
    # their compatibility call: a field without a default is not BACKWARD compatible
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    bad = dict(ORDER, fields=[*ORDER["fields"], {"name": "qty", "type": "int"}])
    assert client.test_compatibility("a-value", Schema(json.dumps(bad), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("a-value", Schema(json.dumps(bad), "AVRO"))
    assert e.value.error_code == 40901 and e.value.http_status_code == 409
    with pytest.raises(SchemaRegistryError) as e:
        client.get_version("nobody", 1)
    assert e.value.error_code == 40401


def _person_class():
    """A generated-style message class for PERSON_PROTO (what protoc --python_out gives)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from engine.schemas.protobuf import parse

    parsed = parse(PERSON_PROTO, ())
    fdp = descriptor_pb2.FileDescriptorProto()
    import base64

    fdp.ParseFromString(base64.b64decode(parsed.text("serialized")))
    fdp.name = "person.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Person"))


def test_protobuf_both_ways_with_confluents_serializers(served):
    s, url = served
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    person = _person_class()
    client = SchemaRegistryClient({"url": url})
    ser = ProtobufSerializer(person, client, {"use.deprecated.format": False})
    ctx = SerializationContext("p", MessageField.VALUE)
    people = [person(name=f"p{i}", id=i * 1000, tags=["x"] * (i % 3)) for i in range(10)]
    produce(s.bootstrap, "p", [ser(m, ctx) for m in people])
    got = decoded(s.data_dir, "p")
    assert got == [{"name": f"p{i}", "id": str(i * 1000), "tags": ["x"] * (i % 3)}
                   for i in range(10)]  # (int64 as a string: protobuf's JSON mapping)
    # the registered base64 descriptor reads back through format=serialized
    sid = client.get_latest_version("p-value").schema_id
    assert client.get_schema(sid, fmt="serialized").schema_type == "PROTOBUF"

    lines = "".join(json.dumps({"name": f"q{i}", "id": i, "tags": ["a", "b"]}) + "\n"
                    for i in range(10)).encode()
    run_rivven(s.data_dir, "produce", "q", "--value-schema", "p-value", input=lines,
               check=True)
    de = ProtobufDeserializer(person, {"use.deprecated.format": False})
    got = [de(v, SerializationContext("q", MessageField.VALUE))
           for v in consume(s.bootstrap, "q", 10)]
    assert [(m.name, m.id, list(m.tags)) for m in got] == [(f"q{i}", i, ["a", "b"])
                                                            for i in range(10)]


def test_json_schema_with_confluents_serializer_and_a_refused_line(served):
    s, url = served
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": url})
    ser = JSONSerializer(json.dumps(JSON_SCHEMA), client)
    ctx = SerializationContext("j", MessageField.VALUE)
    docs = [{"name": f"n{i}", "age": i} for i in range(5)]
    produce(s.bootstrap, "j", [ser(d, ctx) for d in docs])
    assert decoded(s.data_dir, "j") == docs
    lines = b'{"name": "x", "age": 1}\n{"name": "y", "age": "old"}\n'
    r = run_rivven(s.data_dir, "produce", "j", "--value-schema", "j-value", input=lines)
    assert r.returncode == 1
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "line 2" in err and "age" in err, err
    de = JSONDeserializer(json.dumps(JSON_SCHEMA), schema_registry_client=client)
    got = [de(v, ctx) for v in consume(s.bootstrap, "j", 6)]
    assert got == [*docs, {"name": "x", "age": 1}]


def test_the_registry_shares_tls_users_and_acls_of_a_sasl_ssl_server(tmp_path):
    """A SASL_SSL listener: the registry answers HTTPS with its certificate and asks for
    the SCRAM users' passwords (basic auth); the ACLs decide per subject as per topic."""
    from helpers.certs import Pki

    from engine import Engine
    from engine.security.acl import Acl

    pki = Pki(tmp_path / "pki")
    d = str(tmp_path / "data")
    with Engine.open(d) as eng:
        eng.users.add("alice", b"alice-secret")
        eng.users.add("bob", b"bob-secret")
        eng.acls.add([Acl.make("Topic", "orders", "Literal", "User:alice", "*", op, "Allow")
                      for op in ("Write", "Describe")])
    s = start_server(d, "--schema-registry-listen", "127.0.0.1:0",
                     settings=(f"ssl.keystore.location={pki.server.pem}",),
                     listeners=("SASL_SSL://127.0.0.1:0",))
    try:
        m = re.search(r"schema registry on (https://\S+)", s.log())
        assert m, s.log()

        def client(user: str | None, password: str = "") -> SchemaRegistryClient:
            conf = {"url": m.group(1), "ssl.ca.location": str(pki.ca.cert)}
            if user:
                conf["basic.auth.user.info"] = f"{user}:{password}"
            return SchemaRegistryClient(conf)

        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        schema = Schema(json.dumps(ORDER), "AVRO")
        assert client("alice", "alice-secret").register_schema("orders-value", schema) == 1
        for who, code in ((None, 401), (("alice", "wrong"), 401), (("bob", "bob-secret"), 403)):
            c = client(*who) if who else client(None)
            with pytest.raises(SchemaRegistryError) as e:
                c.register_schema("orders-value", schema)
            assert e.value.http_status_code == code, (who, e.value)
        # bob may not see the subject: it is not listed to him, its id is not served
        assert client("bob", "bob-secret").get_subjects() == []
        assert client("alice", "alice-secret").get_subjects() == ["orders-value"]
        with pytest.raises(SchemaRegistryError) as e:
            client("bob", "bob-secret").get_schema(1)
        assert e.value.http_status_code == 403
        assert "alice-secret" not in s.log()
    finally:
        s.kill()
