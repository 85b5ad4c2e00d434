"""Who may use the schema registry (engine/schemas/access.py) over real sockets, with the
data dir's real SCRAM users and ACLs (engine.security): HTTP basic auth (401 with the
challenge; a success remembered, forgotten when the users file changes, also on a
keep-alive connection), and the ACL model of docs/SCHEMAS.md route by route (Describe, Write,
Delete, AlterConfigs on the subject's topic or the cluster; ids by any subject holding them;
GET /subjects filtered), an ACL change applying at once, the anonymous principal, super users,
and the answers kept per principal."""

import base64
import json

import pytest
from helpers.schema_http import AVRO, FakeRegistry, call, parse_answers, read_answers, running

from engine import Engine
from engine.schemas.access import CHALLENGE, Access, topic_of
from engine.schemas.http import Api
from engine.security import scram
from engine.security.acl import Acl, AclFilter

ALICE, BOB = "User:alice", "User:bob"
PASSWORDS = {"alice": "alice-secret-1", "bob": "bob-secret-1", "root": "root-secret-1"}


def basic(user, password=None):
    pw = PASSWORDS[user] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}


def allow(who, op, name="orders", rtype="Topic", pattern="Literal"):
    return Acl.make(rtype, name, pattern, who, "*", op, "Allow")


@pytest.fixture
def eng(data_dir):
    with Engine.open(data_dir) as e:
        for u, pw in PASSWORDS.items():
            e.users.add(u, pw, iterations=4096)
        yield e


@pytest.fixture
def reg():
    r = FakeRegistry()
    r.register("orders-value", AVRO)  # id 1
    r.register("payments-value", json.dumps({"type": "string"}))  # id 2
    r.register("misc", json.dumps({"type": "string"}))  # id 2 too
    return r


@pytest.fixture
def served(eng, reg):
    """(port, eng): basic auth and ACLs always on, root a super user, changes seen at once."""
    access = Access.from_data_dir(eng.users, eng.acls, super_users=["User:root"],
                                  enabled=True, recheck_s=0)
    with running(Api(reg, access)) as listener:
        yield listener.port, eng


def status(port, method, path, who=None, body=None, **kw):
    headers = basic(who, **kw) if who else {}
    return call(port, method, path, body, headers=headers)


def forbidden(a):
    assert (a.status, json.loads(a.body)["error_code"]) == (403, 40301), a
    return json.loads(a.body)["message"]


# ---------------------------------------------------------------------- authentication
def test_requests_without_good_credentials_get_401_with_the_challenge(served):
    port, _ = served
    cases = [{}, basic("alice", "wrong"), basic("nobody", "whatever"),
             {"Authorization": "Bearer abc"}, {"Authorization": "Basic !!notbase64"},
             {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
             {"Authorization": "Basic " + base64.b64encode(b":pw").decode()}]
    for headers in cases:
        for method, path in (("GET", "/"), ("GET", "/nope"), ("GET", "/schemas/ids/1"),
                             ("POST", "/subjects/orders-value/versions")):
            a = call(port, method, path, headers=headers)
            assert a.status == 401, (headers, path, a)
            assert json.loads(a.body)["error_code"] == 40101
            assert a.headers["www-authenticate"] == CHALLENGE == 'Basic realm="rivven"'
    assert status(port, "GET", "/", "alice").status == 200
    assert status(port, "GET", "/nope", "alice").status == 404


def test_a_success_is_remembered_and_forgotten_when_the_users_file_changes(served, monkeypatch):
    port, eng = served
    checks = []
    real = scram.check_password
    monkeypatch.setattr(scram, "check_password", lambda c, p: checks.append(1) or real(c, p))
    for _ in range(3):
        assert status(port, "GET", "/schemas/types", "alice").status == 200
    assert len(checks) == 1  # (PBKDF2 once)
    for _ in range(2):  # (failures are not remembered: each costs the derivation)
        assert status(port, "GET", "/", "alice", password="wrong").status == 401
    assert len(checks) == 3
    eng.users.passwd("alice", "alice-secret-2")
    assert status(port, "GET", "/", "alice").status == 401
    assert status(port, "GET", "/", "alice", password="alice-secret-2").status == 200
    eng.users.delete("alice")
    assert status(port, "GET", "/", "alice", password="alice-secret-2").status == 401


def test_a_keep_alive_connection_is_checked_again_after_a_change(served):
    port, eng = served
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    auth = basic("bob")["Authorization"].encode()
    req = b"GET /schemas/types HTTP/1.1\r\nAuthorization: " + auth + b"\r\n\r\n"
    s.sendall(req * 2)
    assert [a.status for a in parse_answers(read_answers(s, 2))] == [200, 200]
    eng.users.passwd("bob", "bob-secret-2")
    s.sendall(req)
    (a,) = parse_answers(read_answers(s, 1))
    assert a.status == 401
    s.close()


# ---------------------------------------------------------------------- the ACL model
def test_topic_of():
    assert [topic_of(s) for s in ("orders-value", "orders-key", "misc", "-value", "a-key-value",
                                  "value")] == ["orders", "orders", "misc", "-value", "a-key",
                                                "value"]


def test_reading_a_subject_needs_describe_on_its_topic(served):
    port, eng = served
    reads = [("GET", "/subjects/orders-value/versions"),
             ("GET", "/subjects/orders-value/versions/1"),
             ("GET", "/subjects/orders-value/versions/latest/schema"),
             ("POST", "/subjects/orders-value"),
             ("POST", "/compatibility/subjects/orders-value/versions/latest"),
             ("POST", "/compatibility/subjects/orders-value/versions")]
    body = {"schema": AVRO}
    for method, path in reads:
        msg = forbidden(status(port, method, path, "alice", body))
        assert msg.startswith("User:alice is not authorized to Describe subject 'orders-value' "
                              "(topic 'orders')") and "rivven acl add" in msg
    eng.acls.add([allow(ALICE, "Describe")])
    for method, path in reads:
        assert status(port, method, path, "alice", body).status == 200, path
        forbidden(status(port, method, path, "bob", body))
    # Read implies Describe (Kafka's rule); the key subject is the same topic
    eng.acls.add([allow(BOB, "Read")])
    assert status(port, "GET", "/subjects/orders-value/versions", "bob").status == 200
    assert status(port, "GET", "/subjects/orders-key/versions", "bob").json == {
        "error_code": 40401, "message": "Subject 'orders-key' not found."}
    forbidden(status(port, "GET", "/subjects/payments-value/versions", "bob"))
    # a super user may do anything
    assert status(port, "GET", "/subjects/payments-value/versions", "root").status == 200


def test_register_needs_write_and_delete_needs_delete(served):
    port, eng = served
    new = {"schema": json.dumps({"type": "long"})}
    eng.acls.add([allow(ALICE, "Describe")])
    forbidden(status(port, "POST", "/subjects/orders-value/versions", "alice", new))
    eng.acls.add([allow(ALICE, "Write")])
    assert status(port, "POST", "/subjects/orders-value/versions", "alice", new).json == {"id": 3}
    for path in ("/subjects/orders-value/versions/2", "/subjects/orders-value"):
        forbidden(status(port, "DELETE", path, "alice"))
    eng.acls.add([allow(ALICE, "Delete", "orders-", pattern="Prefixed")])
    # (a prefixed ACL on "orders-" does not name the topic "orders")
    forbidden(status(port, "DELETE", "/subjects/orders-value", "alice"))
    eng.acls.add([allow(ALICE, "Delete")])
    assert status(port, "DELETE", "/subjects/orders-value/versions/2", "alice").json == 2
    assert status(port, "DELETE", "/subjects/orders-value", "alice").json == [1]


def test_configs_need_alter_configs(served):
    port, eng = served
    level = {"compatibility": "FULL"}
    forbidden(status(port, "PUT", "/config/orders-value", "alice", level))
    forbidden(status(port, "GET", "/config/orders-value", "alice"))
    forbidden(status(port, "GET", "/mode/orders-value", "alice"))
    eng.acls.add([allow(ALICE, "AlterConfigs")])
    assert status(port, "PUT", "/config/orders-value", "alice", level).json == {
        "compatibility": "FULL"}
    assert status(port, "GET", "/config/orders-value", "alice").json == {
        "compatibilityLevel": "FULL"}  # (AlterConfigs implies DescribeConfigs)
    assert status(port, "DELETE", "/config/orders-value", "alice").status == 200
    # the global level: AlterConfigs on the cluster
    msg = forbidden(status(port, "PUT", "/config", "alice", level))
    assert "--cluster" in msg
    eng.acls.add([allow(ALICE, "AlterConfigs", "kafka-cluster", "Cluster")])
    assert status(port, "PUT", "/config", "alice", level).status == 200
    # what any authenticated principal may read
    for path in ("/config", "/mode", "/schemas/types", "/"):
        assert status(port, "GET", path, "bob").status == 200, path


def test_ids_are_readable_through_any_subject_holding_them(served):
    port, eng = served
    for path in ("/schemas/ids/2", "/schemas/ids/2/schema", "/schemas/ids/2/subjects",
                 "/schemas/ids/2/versions"):
        forbidden(status(port, "GET", path, "alice"))
    assert status(port, "GET", "/schemas/ids/9", "alice").status == 404  # (no such id)
    eng.acls.add([allow(ALICE, "Describe", "misc")])  # (id 2 is in misc and payments-value)
    assert status(port, "GET", "/schemas/ids/2", "alice").json["schema"] == '{"type": "string"}'
    # the lists name only the subjects alice may see
    assert status(port, "GET", "/schemas/ids/2/subjects", "alice").json == ["misc"]
    assert status(port, "GET", "/schemas/ids/2/versions", "alice").json == [
        {"subject": "misc", "version": 1}]
    forbidden(status(port, "GET", "/schemas/ids/1", "alice"))
    assert status(port, "GET", "/schemas/ids/2/subjects", "root").json == [
        "misc", "payments-value"]


def test_the_subject_list_shows_what_the_principal_may_describe(served):
    port, eng = served
    assert status(port, "GET", "/subjects", "alice").json == []
    eng.acls.add([allow(ALICE, "Describe"), allow(ALICE, "Write", "pay", pattern="Prefixed")])
    assert status(port, "GET", "/subjects", "alice").json == ["orders-value", "payments-value"]
    assert status(port, "GET", "/subjects", "root").json == ["misc", "orders-value",
                                                           "payments-value"]


def test_answers_are_kept_per_principal_and_an_acl_change_applies_at_once(served):
    port, eng = served
    eng.acls.add([allow(ALICE, "Describe")])
    for _ in range(2):
        assert status(port, "GET", "/schemas/ids/1", "alice").status == 200
        forbidden(status(port, "GET", "/schemas/ids/1", "bob"))
    eng.acls.add([allow(BOB, "Describe")])
    assert status(port, "GET", "/schemas/ids/1", "bob").status == 200
    eng.acls.remove([AclFilter.make("Topic", "orders", "Literal", ALICE)])
    forbidden(status(port, "GET", "/schemas/ids/1", "alice"))


def test_without_users_the_principal_is_anonymous(eng, reg):
    eng.acls.add([allow("User:ANONYMOUS", "Describe")])
    access = Access.from_data_dir(None, eng.acls, enabled=True, recheck_s=0)
    with running(Api(reg, access)) as listener:
        port = listener.port
        # (credentials sent are not looked at: there is nobody to check them against)
        assert status(port, "GET", "/schemas/ids/1", "alice", password="anything").status == 200
        assert call(port, "GET", "/subjects").json == ["orders-value"]
        forbidden(call(port, "POST", "/subjects/orders-value/versions", {"schema": AVRO}))


def test_authorization_off_and_on_once_the_data_dir_has_an_acl(eng, reg):
    access = Access.from_data_dir(eng.users, eng.acls, enabled=None, recheck_s=0)
    with running(Api(reg, access)) as listener:
        port = listener.port
        assert status(port, "GET", "/subjects", "bob").json == ["misc", "orders-value",
                                                              "payments-value"]
        assert status(port, "POST", "/subjects/misc/versions", "bob", {"schema": AVRO}).status \
            == 200
        eng.acls.add([allow(ALICE, "Describe")])  # (the first ACL: authorization is on)
        assert status(port, "GET", "/subjects", "bob").json == []
        assert status(port, "GET", "/subjects", "alice").json == ["orders-value"]
    off = Access.from_data_dir(eng.users, eng.acls, enabled=False, recheck_s=0)
    with running(Api(reg, off)) as listener:
        assert status(listener.port, "GET", "/subjects", "bob").json == [
            "misc", "orders-value", "payments-value"]


def test_no_access_at_all_allows_everything(reg):
    with running(Api(reg, Access())) as listener:
        assert call(listener.port, "DELETE", "/subjects/misc").json == [1]
