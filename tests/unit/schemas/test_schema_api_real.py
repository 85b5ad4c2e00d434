"""The REST API over the real registry of a data dir (``Api(eng.schemas)``, no socket): bad
input of every kind answered with Confluent's code and message, never a 500 — the table of
known cases, then many random requests built from the same parts."""

from __future__ import annotations

import json
import random

import pytest

from engine import Engine
from engine.schemas.http import Api

CT = "application/vnd.schemaregistry.v1+json"
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
PERSON = 'syntax = "proto3"; import "address.proto"; message P { Address a = 1; }'


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    eng = Engine(str(tmp_path_factory.mktemp("api") / "d"))
    eng.schemas.register("orders-value", ORDER)
    yield Api(eng.schemas)
    eng.close()


def call(api: Api, method: str, path: str, body: object = None, raw: bytes | None = None,
         query: dict[str, str] | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    r = api.handle(method, path, query or {}, data, content_type=CT if data else None)
    return r.status, json.loads(r.body) if r.body else {}


CASES = [
    # (method, path, body, status, error_code, words in the message)
    ("POST", "/subjects/x-value/versions", {"schema": "{not json"}, 422, 42201, "Invalid schema"),
    ("POST", "/subjects/x-value/versions", {"schema": '{"type":"nope"}'}, 422, 42201,
     "nope"),
    ("POST", "/subjects/x-value/versions", {"schema": "syntax = 'proto3'; message {",
                                            "schemaType": "PROTOBUF"}, 422, 42201,
     "Expected message name"),
    ("POST", "/subjects/x-value/versions", {"schema": '{"type": 5}', "schemaType": "JSON"},
     422, 42201, "Invalid schema"),
    ("POST", "/subjects/x-value/versions", {"schema": ORDER, "schemaType": "XML"}, 422, 42201,
     "XML"),
    ("POST", "/subjects/p-value/versions", {"schema": PERSON, "schemaType": "PROTOBUF"}, 422,
     42201, "address.proto"),
    ("POST", "/subjects/p-value/versions",
     {"schema": PERSON, "schemaType": "PROTOBUF",
      "references": [{"name": "address.proto", "subject": "nobody", "version": 1}]},
     422, 42201, "nobody"),
    ("POST", "/subjects/x-value/versions", {"schema": ORDER.replace("long", "string")}, 200,
     None, ""),
    ("POST", "/subjects/orders-value/versions", {"schema": ORDER.replace('"long"', '"int"')},
     409, 40901, "incompatible"),
    ("GET", "/subjects/nope/versions", None, 404, 40401, "Subject 'nope' not found."),
    ("GET", "/subjects/orders-value/versions/7", None, 404, 40402, "Version 7 not found."),
    ("GET", "/subjects/orders-value/versions/0", None, 422, 42202, "not a valid version"),
    ("GET", "/subjects/orders-value/versions/x", None, 422, 42202, "not a valid version"),
    ("GET", "/schemas/ids/999", None, 404, 40403, "Schema 999 not found"),
    ("GET", "/schemas/ids/x", None, 404, None, ""),
    ("POST", "/subjects/orders-value", {"schema": '"string"'}, 404, 40403, "Schema not found"),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203, "Invalid compatibility"),
    ("GET", "/config/orders-value", None, 404, 40408, "does not have subject-level"),
    ("DELETE", "/subjects/orders-value/versions/1", None, 200, None, ""),
    ("DELETE", "/subjects/orders-value/versions/1", None, 404, 40406, "was soft deleted"),
    ("DELETE", "/subjects/x-value", None, 200, None, ""),
    ("DELETE", "/subjects/x-value", None, 404, 40404, "was soft deleted"),
    ("DELETE", "/subjects/nope", None, 404, 40401, "not found"),
]


def test_known_bad_inputs_get_confluents_codes(api):
    for method, path, body, status, code, words in CASES:
        got, doc = call(api, method, path, body)
        assert got == status, (method, path, doc)
        if code is not None:
            assert doc["error_code"] == code, (method, path, doc)
            assert words in doc["message"], (method, path, doc)


def test_bodies_that_are_not_what_the_api_takes(api):
    for raw in (b"{", b"[]", b'"x"', b"null", b'{"schema": 5}', b'{"schema": null}',
                b'{"schema": "\\"string\\"", "references": 3}',
                b'{"schema": "\\"string\\"", "references": [5]}', b"\xff\xfe",
                b'{"schema": "' + b"[" * 5000 + b'"}'):
        got, doc = call(api, "POST", "/subjects/b-value/versions", raw=raw)
        assert got in (400, 422), (raw[:40], got, doc)
        assert isinstance(doc.get("error_code"), int) and doc.get("message"), doc


def test_random_requests_are_never_answered_with_a_500(api):
    rnd = random.Random(33)
    methods = ["GET", "POST", "PUT", "DELETE"]
    parts = ["subjects", "orders-value", "versions", "latest", "-1", "1", "2", "x", "schemas",
             "ids", "1", "999", "config", "compatibility", "schema", "types", "subjects",
             "mode", "%00", "..", "%2F", "0", "2147483648", "-5"]
    bodies = [None, {}, {"schema": ORDER}, {"schema": '"int"', "schemaType": "AVRO"},
              {"schema": "syntax = 'proto3'; message M { int64 a = 1; }",
               "schemaType": "PROTOBUF"}, {"schema": '{"type": "object"}', "schemaType": "JSON"},
              {"compatibility": "FULL"}, {"compatibility": 7}, [1, 2], "x",
              {"schema": ORDER, "references": [{"name": "a", "subject": "b", "version": "c"}]}]
    queries = [{}, {"permanent": "true"}, {"deleted": "TRUE"}, {"normalize": "False"},
               {"format": "serialized"}, {"limit": "-1"}, {"verbose": "yes"}, {"offset": "x"}]
    for _ in range(3000):
        path = "/" + "/".join(rnd.choice(parts) for _ in range(rnd.randint(1, 5)))
        method = rnd.choice(methods)
        got, doc = call(api, method, path, rnd.choice(bodies), query=rnd.choice(queries))
        assert got < 500, (method, path, doc)
