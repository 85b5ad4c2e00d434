"""SCRAM's server side (engine/security/scram.py): RFC 7677's test vector, whole exchanges
against kafka-python's client, and every way an exchange fails (a wrong password and an unknown
user alike, only at the proof), and PLAIN's check against the same credential."""

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from engine.errors import InvalidArgument
from engine.security import scram
from engine.security.scram import ScramError, ScramServer

INVALID = "Authentication failed: Invalid user credentials"


def server(mech: str, users: dict[str, scram.ScramCredential]) -> ScramServer:
    return ScramServer(mech, users.get)


def exchange(mech: str, users: dict, user: str, password: str) -> ScramClient:
    """A whole exchange of kafka-python's client against the server (the client checks the
    server's signature: a ValueError when it is wrong)."""
    client = ScramClient(user, password, mech)
    s = server(mech, users)
    client.process_server_first_message(s.first(client.first_message()))
    client.process_server_final_message(s.final(client.final_message()))
    assert s.done and s.user == user
    return client


def test_rfc7677_sha256_test_vector():
    """RFC 7677 section 3: user "user", password "pencil", the RFC's salt, nonces and 4096
    iterations give the RFC's server signature; the RFC's proof is accepted."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram.derive("SCRAM-SHA-256", "pencil", 4096, salt=salt)
    s = server("SCRAM-SHA-256", {"user": cred})
    first = s.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").decode()
    assert first.startswith("r=rOprNGfwEbeRWgbNEkqO") and first.endswith(
        ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    # the server's half of the nonce is random: the RFC's is put in its place
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    s._nonce = nonce
    s._server_first = f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = s.final(f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
                    .encode())
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_whole_exchange_with_kafka_pythons_client(mech):
    users = {"alice": scram.derive(mech, "s3cret-é", 4096)}
    exchange(mech, users, "alice", "s3cret-é")
    # a credential of more iterations too (the client derives with what the server says)
    users = {"alice": scram.derive(mech, "pw", 8192)}
    exchange(mech, users, "alice", "pw")


def test_a_credential_keeps_no_password_and_a_new_salt_each_time():
    a = scram.derive("SCRAM-SHA-256", "pencil")
    b = scram.derive("SCRAM-SHA-256", "pencil")
    assert a.salt != b.salt and a.stored_key != b.stored_key
    assert len(a.salt) == scram.SALT_BYTES and a.iterations == scram.DEFAULT_ITERATIONS
    assert b"pencil" not in repr(a).encode() and "pencil" not in str(a.to_json())
    assert set(a.to_json()) == {"salt", "iterations", "stored_key", "server_key"}


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof(mech):
    users = {"alice": scram.derive(mech, "right", 4096)}
    with pytest.raises(ScramError) as wrong:
        exchange(mech, users, "alice", "wrong")
    # an unknown user gets a server-first of the same shape (salt, iterations) ...
    client = ScramClient("nobody", "x", mech)
    s = server(mech, users)
    first = s.first(client.first_message()).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    assert len(base64.b64decode(attrs["s"])) == scram.SALT_BYTES and attrs["i"] == "4096"
    assert not s.known
    # ... the same salt when asked again (guessing which names exist is no help)
    again = server(mech, users).first(ScramClient("nobody", "x", mech).first_message())
    assert dict(p.split("=", 1) for p in again.decode().split(","))["s"] == attrs["s"]
    client.process_server_first_message(first.encode())
    with pytest.raises(ScramError) as unknown:
        s.final(client.final_message())
    assert str(wrong.value) == str(unknown.value) == INVALID
    assert not s.done


def test_the_unknown_users_proof_fails_even_with_the_fake_salt_known():
    """Whatever the client sends, an unknown user never passes (the fake keys are random)."""
    s = server("SCRAM-SHA-256", {})
    client = ScramClient("ghost", "anything", "SCRAM-SHA-256")
    client.process_server_first_message(s.first(client.first_message()))
    with pytest.raises(ScramError, match="Invalid user credentials"):
        s.final(client.final_message())


@pytest.mark.parametrize("message, error", [
    (b"", "malformed SCRAM client-first"),
    (b"garbage", "malformed SCRAM client-first"),
    (b"n,,", "malformed SCRAM message"),
    (b"n,,n=alice", "malformed SCRAM client-first"),
    (b"n,,r=abc,n=alice", "malformed SCRAM client-first"),
    (b"n,,n=alice,r=", "malformed SCRAM client-first"),
    (b"n,,n=,r=abc", "empty SCRAM user name"),
    (b"p=tls-server-end-point,,n=alice,r=abc", "channel binding is not supported"),
    (b"n,x=y,n=alice,r=abc", "malformed SCRAM authorization id"),
    (b"n,a=bob,n=alice,r=abc", "the authorization id is not the user name"),
    (b"n,,n=al=ice,r=abc", "invalid SCRAM user name encoding"),
    (b"n,,m=ext,n=alice,r=abc", "malformed SCRAM client-first"),
    (b"n,,n=alice,r=abc,m=ext", "mandatory SCRAM extension not supported"),
    (b"n,,n=\xff,r=abc", "not UTF-8"),
    (b"n,,n=alice,r=" + b"a" * 5000, "too long"),
])
def test_a_malformed_client_first_is_refused(message, error):
    s = server("SCRAM-SHA-256", {"alice": scram.derive("SCRAM-SHA-256", "pw")})
    with pytest.raises(ScramError, match=error) as e:
        s.first(message)
    assert str(e.value).startswith("Authentication failed: ")
    assert s.cred is None and not s.done


def test_an_escaped_user_name_and_a_matching_authorization_id():
    users = {"a,b=c": scram.derive("SCRAM-SHA-256", "pw")}
    s = server("SCRAM-SHA-256", users)
    s.first(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")
    assert s.user == "a,b=c" and s.authzid == "a,b=c" and s.known


def started(users=None, user="alice", password="pw"):
    users = users if users is not None else {"alice": scram.derive("SCRAM-SHA-256", "pw")}
    client = ScramClient(user, password, "SCRAM-SHA-256")
    s = server("SCRAM-SHA-256", users)
    client.process_server_first_message(s.first(client.first_message()))
    return client, s


def replace_attr(final: bytes, key: str, value: str) -> bytes:
    return b",".join(f"{key}={value}".encode() if p.startswith(key.encode() + b"=") else p
                     for p in final.split(b","))


def test_a_nonce_mismatch_is_refused():
    client, s = started()
    final = client.final_message()
    nonce = dict(p.split(b"=", 1) for p in final.split(b","))[b"r"].decode()
    with pytest.raises(ScramError, match="invalid SCRAM nonce"):
        s.final(replace_attr(final, "r", nonce[:-1] + ("A" if nonce[-1] != "A" else "B")))
    # the client's half alone (the server's dropped) is no better
    client, s = started()
    with pytest.raises(ScramError, match="invalid SCRAM nonce"):
        s.final(replace_attr(client.final_message(), "r", client.nonce.decode()[:32]))
    assert not s.done


@pytest.mark.parametrize("change, error", [
    (lambda f: b"", "malformed SCRAM"),
    (lambda f: b"c=biws", "malformed SCRAM"),
    (lambda f: f.replace(b"c=biws,", b""), "malformed SCRAM client-final"),
    (lambda f: replace_attr(f, "c", "eSws"), "invalid SCRAM channel binding"),
    (lambda f: replace_attr(f, "p", "not base64!"), "malformed SCRAM proof"),
    (lambda f: replace_attr(f, "p", base64.b64encode(b"short").decode()), INVALID),
    (lambda f: f.split(b",p=")[0] + b",x=1,p=" + f.split(b",p=")[1], None),  # (an extension)
])
def test_a_malformed_client_final_is_refused(change, error):
    client, s = started()
    final = change(client.final_message())
    if error is None:  # an extension before the proof is part of the signed message: the
        with pytest.raises(ScramError, match="Invalid user credentials"):  # proof fails
            s.final(final)
        return
    with pytest.raises(ScramError, match=error):
        s.final(final)
    assert not s.done


def test_messages_out_of_order_are_refused():
    s = server("SCRAM-SHA-256", {})
    with pytest.raises(ScramError, match="out of order"):
        s.final(b"c=biws,r=abc,p=AAAA")
    client, s = started()
    s.final(client.final_message())
    with pytest.raises(ScramError, match="out of order"):  # (no second final)
        s.final(client.final_message())


def test_no_error_quotes_what_the_client_sent():
    """The messages are fixed texts: nothing of a (secret-bearing) message is echoed."""
    client, s = started(password="hunter2")
    with pytest.raises(ScramError) as e:
        s.final(replace_attr(client.final_message(), "c", "hunter2"))
    assert "hunter2" not in str(e.value)


def test_plain_checks_a_password_against_the_scram_credential():
    for mech in scram.MECHANISMS:
        cred = scram.derive(mech, "pencil", 4096)
        assert scram.check_password(cred, b"pencil")
        assert not scram.check_password(cred, b"pencil ")
        assert not scram.check_password(cred, b"")


def test_mechanisms_and_iterations_are_checked():
    assert scram.mechanism("scram-sha-512") == "SCRAM-SHA-512"
    with pytest.raises(InvalidArgument, match="unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        scram.mechanism("SCRAM-SHA-1")
    for bad in (4095, 16385, True, "4096"):
        with pytest.raises(InvalidArgument, match="4096..16384"):
            scram.derive("SCRAM-SHA-256", "pw", bad)
    assert scram.derive("SCRAM-SHA-256", "pw", 16384).iterations == 16384


def test_a_salted_password_gives_the_credential_derive_gives():
    """AlterUserScramCredentials sends a salted password: the same credential as derive."""
    salt = b"s" * 32
    salted = scram.salted_password("SCRAM-SHA-512", b"pw", salt, 4096)
    assert scram.from_salted("SCRAM-SHA-512", salted, salt, 4096) == \
        scram.derive("SCRAM-SHA-512", "pw", 4096, salt=salt)


def test_an_unknown_user_is_offered_the_iteration_count_most_users_have(tmp_path):
    """With users stored at 8192 iterations, an unknown name offered 4096 would tell it does
    not exist: the server offers the count most users have."""
    from engine import Engine

    with Engine.open(str(tmp_path / "d")) as eng:
        for name in ("a", "b"):
            eng.users.add(name, "pw", ["SCRAM-SHA-256"], iterations=8192)
        eng.users.add("c", "pw", ["SCRAM-SHA-256"], iterations=4096)
        assert eng.users.typical_iterations("SCRAM-SHA-256") == 8192
        assert eng.users.typical_iterations("SCRAM-SHA-512") == scram.DEFAULT_ITERATIONS
        s = ScramServer("SCRAM-SHA-256", lambda u: eng.users.credential(u, "SCRAM-SHA-256"),
                        eng.users.typical_iterations("SCRAM-SHA-256"))
        known = ScramServer("SCRAM-SHA-256", lambda u: eng.users.credential(u, "SCRAM-SHA-256"))
        assert s.first(b"n,,n=nobody,r=abc").decode().endswith(",i=8192")
        assert known.first(b"n,,n=a,r=abc").decode().endswith(",i=8192")
        eng.users.passwd("c", "pw", iterations=16384)
        eng.users.passwd("a", "pw", iterations=16384)  # (the file changed: counted again)
        assert eng.users.typical_iterations("SCRAM-SHA-256") == 16384
