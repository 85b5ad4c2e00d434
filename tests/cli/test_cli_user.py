"""``rivven user`` as real processes: the password from stdin or a hidden prompt asked twice
(never argv), what is stored logs in with SCRAM, no salt, key or password in any output, and
one-line errors (exit 1; usage errors exit 2)."""

import json
import os

import pytest
from helpers import run_rivven
from helpers.terminal import on_a_terminal
from kafka.net.sasl.scram import ScramClient

from engine import Engine
from engine.security.scram import ScramError, ScramServer

SECRET_WORDS = ("salt", "stored_key", "server_key", "StoredKey", "ServerKey")


def login(data_dir, user, password, mech="SCRAM-SHA-256"):
    """Does a SCRAM exchange of kafka-python's client pass against what the data dir holds?"""
    with Engine.open(data_dir, read_only=True) as eng:
        server = ScramServer(mech, lambda u: eng.users.credential(u, mech))
        client = ScramClient(user, password, mech)
        try:
            client.process_server_first_message(server.first(client.first_message()))
            client.process_server_final_message(server.final(client.final_message()))
        except ScramError:
            return False
        return True


def ok(data_dir, *args, input=b""):
    r = run_rivven(data_dir, *args, input=input)
    assert r.returncode == 0, r.stderr.decode()
    return r


def fails(data_dir, *args, input=b"", code=1):
    r = run_rivven(data_dir, *args, input=input)
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    return err


def no_secret(*outputs, password=None):
    for out in outputs:
        text = out.decode() if isinstance(out, bytes) else out
        for word in SECRET_WORDS:
            assert word not in text, text
        if password:
            assert password not in text, text


def test_add_list_describe_from_stdin(data_dir):
    a = ok(data_dir, "user", "add", "alice", "--password-stdin", input=b"pencil-one\n")
    assert a.stdout.decode() == ("user alice added (SCRAM-SHA-256 4096 iterations, "
                                 "SCRAM-SHA-512 4096 iterations)\n")
    # stdin not a terminal: read as with --password-stdin (no line break at the end too)
    b = ok(data_dir, "user", "add", "bob", "--mechanism", "scram-sha-512", "--iterations",
           "8192", "--json", input=b"pencil-two")
    assert json.loads(b.stdout) == {"name": "bob", "credentials": [
        {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
    listed = ok(data_dir, "user", "list")
    assert listed.stdout.decode().split("\n")[:3] == [
        "USER   MECHANISMS                   ITERATIONS",
        "alice  SCRAM-SHA-256,SCRAM-SHA-512  4096",
        "bob    SCRAM-SHA-512                8192"]
    as_json = json.loads(ok(data_dir, "user", "list", "--json").stdout)
    assert [u["name"] for u in as_json] == ["alice", "bob"]
    assert all(set(c) == {"mechanism", "iterations"} for u in as_json for c in u["credentials"])
    d = ok(data_dir, "user", "describe", "alice")
    assert "alice  SCRAM-SHA-512        4096" in d.stdout.decode()
    dj = ok(data_dir, "user", "describe", "bob", "--json")
    no_secret(a.stdout, a.stderr, b.stdout, listed.stdout, d.stdout, dj.stdout,
              json.dumps(as_json), password="pencil")
    # what was stored is the password given (its line break dropped), for each mechanism
    assert login(data_dir, "alice", "pencil-one") and login(data_dir, "alice", "pencil-one",
                                                            "SCRAM-SHA-512")
    assert not login(data_dir, "alice", "pencil-one\n") and not login(data_dir, "alice", "x")
    assert login(data_dir, "bob", "pencil-two", "SCRAM-SHA-512")
    assert not login(data_dir, "bob", "pencil-two", "SCRAM-SHA-256")


def test_the_password_is_never_an_argument(data_dir):
    err = fails(data_dir, "user", "add", "alice", "hunter2", code=2)
    assert "hunter2" in err and "unexpected extra argument" in err.lower()
    fails(data_dir, "user", "add", "alice", "--password", "hunter2", code=2)
    assert not os.path.exists(os.path.join(data_dir, "security", "users.json"))


def test_errors_are_one_line_and_change_nothing(data_dir):
    ok(data_dir, "user", "add", "alice", input=b"pw1\n")
    err = fails(data_dir, "user", "add", "alice", input=b"other\n")
    assert "user 'alice' exists" in err and "rivven user passwd alice" in err
    assert login(data_dir, "alice", "pw1")
    assert "no password on stdin" in fails(data_dir, "user", "add", "bob", input=b"")
    assert "no password on stdin" in fails(data_dir, "user", "add", "bob", input=b"\n")
    long = b"x" * 1100
    err = fails(data_dir, "user", "add", "bob", input=long + b"\n")
    assert "longer than the 1024-byte limit" in err and "xxxxxxxx" not in err
    assert "4095 is not in the range 4096<=x<=16384" in fails(
        data_dir, "user", "add", "bob", "--iterations", "4095", input=b"pw\n", code=2)
    assert "SCRAM-SHA-1" in fails(data_dir, "user", "add", "bob", "--mechanism", "SCRAM-SHA-1",
                                  input=b"pw\n", code=2)
    assert "user name ' bob'" in fails(data_dir, "user", "add", " bob", input=b"pw\n")
    assert "no user 'carol'" in fails(data_dir, "user", "describe", "carol")
    assert "no user 'carol'" in fails(data_dir, "user", "passwd", "carol", input=b"pw\n")
    assert [u["name"] for u in json.loads(ok(data_dir, "user", "list", "--json").stdout)] == \
        ["alice"]


def test_passwd_keeps_mechanisms_and_iterations_unless_told(data_dir):
    ok(data_dir, "user", "add", "alice", "--iterations", "8192", input=b"old\n")
    out = ok(data_dir, "user", "passwd", "alice", input=b"new\n").stdout.decode()
    assert out == ("user alice password changed (SCRAM-SHA-256 8192 iterations, "
                   "SCRAM-SHA-512 8192 iterations)\n")
    assert login(data_dir, "alice", "new") and not login(data_dir, "alice", "old")
    ok(data_dir, "user", "passwd", "alice", "-m", "SCRAM-SHA-256", "--iterations", "4096",
       input=b"newer\n")
    d = json.loads(ok(data_dir, "user", "describe", "alice", "--json").stdout)
    assert d["credentials"] == [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]
    assert login(data_dir, "alice", "newer")


def test_delete_asks_off_a_terminal_needs_yes(data_dir):
    ok(data_dir, "user", "add", "alice", input=b"pw\n")
    assert "pass --yes" in fails(data_dir, "user", "delete", "alice")
    assert login(data_dir, "alice", "pw")
    assert ok(data_dir, "user", "delete", "alice", "--yes").stdout == b"user alice deleted\n"
    assert not login(data_dir, "alice", "pw")
    assert "no user 'alice'" in fails(data_dir, "user", "delete", "alice", "--yes")
    assert ok(data_dir, "user", "list", "--json").stdout.strip() == b"[]"


def test_at_a_terminal_the_password_is_asked_twice_hidden(data_dir):
    code, out, err, echoed = on_a_terminal(data_dir, "user", "add", "alice",
                                           answers=[b"s3cret-pw", b"s3cret-pw"])
    assert code == 0, err
    assert b"Password for alice: " in err and b"Again, to confirm: " in err
    assert b"s3cret-pw" not in echoed + out + err  # (not echoed, not printed)
    assert login(data_dir, "alice", "s3cret-pw")
    code, out, err, echoed = on_a_terminal(data_dir, "user", "add", "bob",
                                           answers=[b"one-pw", b"two-pw"])
    assert code == 1 and b"error: the two passwords differ: nothing was changed" in err
    assert b"one-pw" not in echoed + out + err and b"two-pw" not in err
    assert not login(data_dir, "bob", "one-pw")


def test_the_clis_password_bound_is_the_engines():
    from engine.security.users import MAX_PASSWORD
    from rivven_cli import user

    assert user.MAX_PASSWORD == MAX_PASSWORD


@pytest.mark.parametrize("cmd", [["user", "list"], ["user", "describe", "alice"]])
def test_a_damaged_users_file_is_one_line(data_dir, cmd):
    ok(data_dir, "user", "add", "alice", input=b"pw\n")
    with open(os.path.join(data_dir, "security", "users.json"), "wb") as f:
        f.write(b"{not json")
    err = fails(data_dir, *cmd, code=3)  # (DamagedMetadata's exit code)
    assert "users.json is damaged" in err and "restore it from a backup" in err
