"""The schema registry's REST routes (engine/schemas/http.py) through the real listener on a
free port, over an in-memory registry (helpers/schema_http.py): every route, Confluent's
status codes and error bodies, the parameters as confluent-kafka sends them, bad bodies
(never a 500), unknown paths and methods, and confluent-kafka's own SchemaRegistryClient."""

import json
import logging

import pytest
from helpers.schema_http import AVRO, FakeRegistry, call, running

from engine.errors import InvalidArgument, LockTimeout, ReadOnlyError, StorageError
from engine.schemas.http import CONTENT_TYPE, Api, parse_query

V = "/subjects/orders-value/versions"


@pytest.fixture
def reg():
    return FakeRegistry()


@pytest.fixture
def port(reg):
    with running(Api(reg)) as listener:
        yield listener.port


def get(port, path, **kw):
    return call(port, "GET", path, **kw)


def post(port, path, body=None, **kw):
    return call(port, "POST", path, body, **kw)


def register(port, subject="orders-value", schema=AVRO, **extra):
    a = post(port, f"/subjects/{subject}/versions", {"schema": schema, **extra})
    assert a.status == 200, a
    return a.json["id"]


def err(a, status, code):
    """The answer is Confluent's error body with this status and code."""
    assert (a.status, a.json["error_code"]) == (status, code), a
    assert set(a.json) == {"error_code", "message"} and a.json["message"]
    assert a.headers["content-type"] == CONTENT_TYPE
    return a.json["message"]


# ---------------------------------------------------------------------- the routes
def test_root_and_types(port):
    a = get(port, "/")
    assert (a.status, a.json, a.headers["content-type"]) == (200, {}, CONTENT_TYPE)
    assert post(port, "/", {}).json == {}
    assert get(port, "/schemas/types").json == ["JSON", "PROTOBUF", "AVRO"]


def test_register_then_every_read_route(port, reg):
    assert register(port) == 1
    assert register(port) == 1  # (the same schema: its id)
    assert register(port, "payments-value") == 1  # (ids are global)
    other = json.dumps({"type": "string"})
    assert register(port, schema=other, schemaType="AVRO") == 2
    assert get(port, "/subjects").json == ["orders-value", "payments-value"]
    assert get(port, V).json == [1, 2]
    entry = {"subject": "orders-value", "version": 1, "id": 1, "schemaType": "AVRO",
             "schema": AVRO}
    assert get(port, f"{V}/1").json == entry
    for latest in ("latest", "-1"):
        assert get(port, f"{V}/{latest}").json["version"] == 2
    raw = get(port, f"{V}/1/schema")
    assert (raw.status, raw.body, raw.headers["content-type"]) == (200, AVRO.encode(),
                                                                   CONTENT_TYPE)
    assert get(port, "/schemas/ids/1").json == {"schemaType": "AVRO", "schema": AVRO}
    assert get(port, "/schemas/ids/1/schema").body == AVRO.encode()
    assert get(port, "/schemas/ids/1/subjects").json == ["orders-value", "payments-value"]
    assert get(port, "/schemas/ids/1/versions").json == [
        {"subject": "orders-value", "version": 1}, {"subject": "payments-value", "version": 1}]
    # a lookup
    a = post(port, "/subjects/orders-value", {"schema": other})
    assert a.json == {"subject": "orders-value", "version": 2, "id": 2, "schemaType": "AVRO",
                      "schema": other}


def test_parameters_as_confluent_kafka_sends_them(port, reg):
    register(port)
    # (its register formats the query by hand: normalize=False, capitalised)
    post(port, V + "?normalize=False", {"schema": AVRO, "schemaType": "AVRO"})
    assert reg.last("register")["normalize"] is False
    post(port, V + "?normalize=TRUE", {"schema": AVRO})
    assert reg.last("register")["normalize"] is True
    post(port, V + "?normalize=yes", {"schema": AVRO})  # (Java's parseBoolean: false)
    assert reg.last("register")["normalize"] is False
    a = get(port, "/subjects?deleted=false&deleted_only=false&offset=0&limit=-1&whatever=1")
    assert a.json == ["orders-value"]
    assert reg.last("subjects") == {"deleted": False, "deleted_only": False, "prefix": ""}
    get(port, "/subjects?deleted=true&deletedOnly=True&subjectPrefix=ord%65rs")
    assert reg.last("subjects") == {"deleted": True, "deleted_only": True, "prefix": "orders"}
    get(port, f"{V}?deleted=true&deletedOnly=false")
    assert reg.last("versions") == {"subject": "orders-value", "deleted": True,
                                    "deleted_only": False}
    get(port, f"{V}/1?deleted=true&format=serialized")
    assert reg.last("version") == {"subject": "orders-value", "version": "1", "deleted": True,
                                   "fmt": "serialized"}
    get(port, "/schemas/ids/1?subject=orders-value&format=serialized&fetchMaxId=false")
    assert reg.last("schema_by_id") == {"sid": 1, "subject": "orders-value",
                                        "fmt": "serialized"}
    get(port, "/schemas/ids/1?format=")
    assert reg.last("schema_by_id")["fmt"] is None
    post(port, "/subjects/orders-value?normalize=true&deleted=true", {"schema": AVRO})
    assert reg.last("lookup")["normalize"] is True and reg.last("lookup")["deleted"] is True
    get(port, "/config/orders-value?defaultToGlobal=true")
    assert reg.last("config") == {"subject": "orders-value", "default_to_global": True}
    get(port, "/schemas/ids/1/subjects?deleted=true")
    assert reg.last("subjects_of") == {"sid": 1, "deleted": True}
    call(port, "DELETE", "/subjects/orders-value/versions/2?permanent=false")
    assert reg.last("delete_version") == {"subject": "orders-value", "version": "2",
                                          "permanent": False}


def test_offset_and_limit(port):
    for s in ("a", "b", "c", "d"):
        register(port, s)
    assert get(port, "/subjects?offset=1&limit=2").json == ["b", "c"]
    assert get(port, "/subjects?limit=0").json == ["a", "b", "c", "d"]
    assert get(port, "/subjects?offset=-5").json == ["a", "b", "c", "d"]
    assert get(port, "/subjects?offset=9").json == []
    # an integer that does not parse: Jersey's answer (the route does not match)
    err(get(port, "/subjects?limit=abc"), 404, 404)
    err(get(port, "/subjects?offset=99999999999"), 404, 404)


def test_path_segments_are_percent_decoded(port, reg):
    register(port, "a%2Fb%20c")
    assert reg.last("register")["subject"] == "a/b c"
    assert get(port, "/subjects").json == ["a/b c"]
    assert get(port, "/subjects/a%2Fb%20c/versions").json == [1]
    assert get(port, "/subjects/").json == ["a/b c"]  # (a trailing slash)
    err(get(port, "/subjects//versions"), 404, 404)
    err(get(port, "/subjects/%ff%fe/versions"), 404, 404)  # (not UTF-8)


def test_compatibility_routes(port, reg):
    register(port)
    p = "/compatibility/subjects/orders-value/versions"
    assert post(port, f"{p}/latest", {"schema": AVRO}).json == {"is_compatible": True}
    assert post(port, f"{p}/1?verbose=true", {"schema": "\"INCOMPATIBLE\""}).json == {
        "is_compatible": False, "messages": ["fake: INCOMPATIBLE"]}
    assert post(port, p, {"schema": AVRO}).json == {"is_compatible": True}
    assert reg.last("check")["version"] is None
    err(post(port, f"{p}/7", {"schema": AVRO}), 404, 40402)
    err(post(port, f"{p}/x", {"schema": AVRO}), 422, 42202)


def test_config_and_mode(port, reg):
    register(port)
    assert get(port, "/config").json == {"compatibilityLevel": "BACKWARD"}
    a = call(port, "PUT", "/config", {"compatibility": "FULL"})
    assert a.json == {"compatibility": "FULL"}
    assert reg.last("set_config") == {"subject": None, "level": "FULL"}
    msg = err(get(port, "/config/orders-value"), 404, 40408)
    assert msg == "Subject 'orders-value' does not have subject-level compatibility configured"
    assert get(port, "/config/orders-value?defaultToGlobal=true").json == {
        "compatibilityLevel": "FULL"}
    assert call(port, "PUT", "/config/orders-value", {"compatibility": "none"}).json == {
        "compatibility": "NONE"}
    assert get(port, "/config/orders-value").json == {"compatibilityLevel": "NONE"}
    assert call(port, "DELETE", "/config/orders-value").json == {"compatibilityLevel": "NONE"}
    err(call(port, "DELETE", "/config/orders-value"), 404, 40408)
    err(call(port, "PUT", "/config", {"compatibility": "SIDEWAYS"}), 422, 42203)
    err(call(port, "PUT", "/config", {"compatibility": 3}), 422, 42203)
    err(call(port, "PUT", "/config", {"normalize": True}), 422, 42203)
    assert get(port, "/mode").json == {"mode": "READWRITE"}
    assert get(port, "/mode/orders-value").json == {"mode": "READWRITE"}
    assert get(port, "/contexts?offset=0&limit=-1").json == ["."]


def test_deletes_and_their_codes(port):
    register(port)
    register(port, schema="{\"type\": \"string\"}")
    assert call(port, "DELETE", f"{V}/2").json == 2
    err(call(port, "DELETE", f"{V}/2"), 404, 40406)
    err(call(port, "DELETE", f"{V}/1?permanent=true"), 404, 40407)
    assert call(port, "DELETE", f"{V}/2?permanent=true").json == 2
    err(call(port, "DELETE", f"{V}/9"), 404, 40402)
    err(call(port, "DELETE", "/subjects/orders-value?permanent=true"), 404, 40405)
    assert call(port, "DELETE", "/subjects/orders-value").json == [1]
    err(call(port, "DELETE", "/subjects/orders-value"), 404, 40404)
    assert get(port, "/subjects?deleted=true").json == ["orders-value"]
    assert call(port, "DELETE", "/subjects/orders-value?permanent=true").json == [1]
    err(call(port, "DELETE", "/subjects/orders-value"), 404, 40401)
    # a schema another refers to
    register(port, "base")
    refs = [{"name": "R", "subject": "base", "version": 1}]
    register(port, "user", "{\"type\": \"record\", \"name\": \"U\", \"fields\": []}",
             references=refs)
    assert get(port, "/subjects/user/versions/1").json["references"] == refs
    err(call(port, "DELETE", "/subjects/base"), 422, 42206)


def test_not_found_and_invalid_codes(port):
    register(port)
    assert err(get(port, "/subjects/nope/versions"), 404, 40401) == "Subject 'nope' not found."
    err(get(port, "/subjects/nope/versions/1"), 404, 40401)
    err(get(port, f"{V}/5"), 404, 40402)
    for bad in ("0", "abc", "1.5", "99999999999"):
        err(get(port, f"{V}/{bad}"), 422, 42202)
    assert err(get(port, "/schemas/ids/42"), 404, 40403) == "Schema 42 not found"
    err(get(port, "/schemas/ids/42/subjects"), 404, 40403)
    for bad in ("abc", "1.0", "99999999999"):  # (an id not an int32: no route, as Jersey's)
        err(get(port, f"/schemas/ids/{bad}"), 404, 404)
    err(post(port, "/subjects/nope", {"schema": AVRO}), 404, 40401)
    err(post(port, "/subjects/orders-value", {"schema": "{\"type\": \"int\"}"}), 404, 40403)


def test_register_refusals(port):
    register(port)
    err(post(port, V, {"schema": "{not json"}), 422, 42201)
    err(post(port, V, {"schema": AVRO, "schemaType": "XML"}), 422, 42201)
    err(post(port, V, {"schemaType": "AVRO"}), 422, 42201)  # (no schema)
    err(post(port, V, {"schema": AVRO, "references": [
        {"name": "X", "subject": "nope", "version": 1}]}), 422, 42201)
    err(post(port, "/subjects/%01bad/versions", {"schema": AVRO}), 422, 42208)
    msg = err(post(port, V, {"schema": "\"INCOMPATIBLE\""}), 409, 40901)
    assert msg.startswith("Schema being registered is incompatible with an earlier schema "
                          'for subject "orders-value"')
    # unknown fields are ignored (confluent-kafka sends metadata and ruleSet as null)
    assert post(port, V, {"schema": AVRO, "metadata": None, "ruleSet": None, "x": 1}).json == {
        "id": 1}


# ---------------------------------------------------------------------- bad bodies
@pytest.mark.parametrize("raw, status, any_route", [
    (b"{not json", 400, True), (b"[1, 2]", 400, True), (b"\"text\"", 400, True),
    (b"42", 400, True), (b"{\"schema\": NaN}", 400, True), (b"\xff\xfe{}", 400, True),
    (b"[" * 100_000 + b"]" * 100_000, 400, True),
    (b"", 422, True), (b"   ", 422, True), (b"null", 422, True),
    # (what a schema's body must be)
    (b"{\"schema\": {\"type\": \"int\"}}", 400, False), (b"{\"schema\": [1]}", 400, False),
    (b"{\"schema\": \"x\", \"schemaType\": 7}", 400, False),
    (b"{\"schema\": \"x\", \"references\": {\"a\": 1}}", 400, False),
    (b"{\"schema\": \"x\", \"references\": [1]}", 400, False),
])
def test_bad_bodies_get_confluents_codes_never_a_500(port, raw, status, any_route):
    register(port)
    for path in (V, "/subjects/orders-value", "/compatibility/subjects/orders-value/versions/1"):
        a = call(port, "POST", path, raw=raw, headers={"Content-Type": CONTENT_TYPE})
        err(a, status, status)
    if any_route:
        for method, path in (("PUT", "/config"), ("PUT", "/config/orders-value"), ("POST", "/")):
            a = call(port, method, path, raw=raw, headers={"Content-Type": "application/json"})
            err(a, status, status)


def test_content_types(port):
    for ctype in (CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json",
                  "application/json; charset=utf-8", "application/octet-stream", None):
        headers = {"Content-Type": ctype} if ctype else {}
        a = call(port, "POST", V, raw=json.dumps({"schema": AVRO}).encode(), headers=headers)
        assert a.json == {"id": 1}, (ctype, a)
    for ctype in ("text/plain", "application/xml", "multipart/form-data"):
        a = call(port, "POST", V, raw=json.dumps({"schema": AVRO}).encode(),
                 headers={"Content-Type": ctype})
        assert err(a, 415, 415) == "HTTP 415 Unsupported Media Type"


# ---------------------------------------------------------------------- no route, HEAD
def test_unknown_paths_and_methods(port):
    for path in ("/nope", "/subjects/a/b/c/d/e", "/schemas/nope", "/schemas/ids", "/config/a/b"):
        assert err(get(port, path), 404, 404) == "HTTP 404 Not Found"
    a = call(port, "PUT", "/subjects")
    assert err(a, 405, 405) == "HTTP 405 Method Not Allowed"
    assert a.headers["allow"] == "GET, HEAD, OPTIONS"
    a = call(port, "PATCH", "/subjects/x/versions")
    err(a, 405, 405)
    assert a.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    err(call(port, "POST", "/config"), 405, 405)
    a = call(port, "OPTIONS", "/config/x")
    assert (a.status, a.body, a.headers["allow"]) == (204, b"", "DELETE, GET, HEAD, OPTIONS, PUT")


def test_head_is_get_without_the_body(port):
    register(port)
    g, h = get(port, "/schemas/ids/1"), call(port, "HEAD", "/schemas/ids/1")
    assert (h.status, h.body) == (200, b"")
    assert h.headers["content-length"] == str(len(g.body))
    g, h = get(port, "/schemas/ids/7"), call(port, "HEAD", "/schemas/ids/7")
    assert (h.status, h.body, h.headers["content-length"]) == (404, b"", str(len(g.body)))


# ---------------------------------------------------------------------- failures
def test_an_unexpected_exception_is_a_logged_500_50001(port, reg, caplog):
    register(port)
    caplog.set_level(logging.ERROR, logger="rivven.schemas")
    reg.fail = RuntimeError("the handler blew up")
    assert err(get(port, "/schemas/ids/1"), 500, 50001) == "Internal Server Error"
    assert any("GET /schemas/ids/1 failed" in r.getMessage() and r.exc_info
               and "the handler blew up" in str(r.exc_info[1]) for r in caplog.records)
    assert get(port, "/schemas/ids/1").status == 200  # (the server goes on; 500 not kept)
    reg.fail = RuntimeError("and again")
    err(post(port, V, {"schema": AVRO}), 500, 50001)  # (on the thread pool too)


@pytest.mark.parametrize("exc, status, code", [
    (StorageError("disk full"), 500, 50001),
    (LockTimeout("the schemas lock is busy"), 500, 50002),
    (ReadOnlyError("the data dir is read-only"), 422, 42205),
    (InvalidArgument("a bad argument"), 400, 400),
])
def test_engine_errors_map_to_confluent_codes(reg, exc, status, code):
    api = Api(reg)
    reg.fail = exc
    a = api.handle("POST", V, {}, json.dumps({"schema": AVRO}).encode())
    body = json.loads(a.body)
    assert (a.status, body["error_code"]) == (status, code) and str(exc) in body["message"]


def test_parse_query():
    assert parse_query("a=1&b=x%20y&a=2&c&d=&e=a+b") == {"a": "1", "b": "x y", "c": "",
                                                         "d": "", "e": "a b"}
    assert parse_query("") == {}


# ---------------------------------------------------------------------- confluent-kafka
def test_confluent_kafkas_schema_registry_client(port):
    sr = pytest.importorskip("confluent_kafka.schema_registry")
    client = sr.SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    schema = sr.Schema(AVRO, "AVRO")
    sid = client.register_schema("orders-value", schema)
    assert sid == 1
    assert client.get_schema(sid).schema_str == AVRO
    latest = client.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version, latest.subject) == (1, 1, "orders-value")
    assert client.lookup_schema("orders-value", schema).version == 1
    assert client.get_subjects() == ["orders-value"]
    assert client.get_versions("orders-value") == [1]
    assert client.get_version("orders-value", 1).schema.schema_str == AVRO
    assert client.set_compatibility("orders-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("orders-value") == "FULL"
    assert client.test_compatibility("orders-value", schema) is True
    with pytest.raises(sr.error.SchemaRegistryError) as e:
        client.get_version("orders-value", 9)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40402)
    assert client.delete_subject("orders-value") == [1]
    assert client.get_subjects() == []
