"""The data dir's security/ documents (engine/security/store.py, users.py, acls.py): 0700 and
0600 whatever the data dir's group policy, another process's change seen at once, a damaged
file named with its fix, concurrent changes from two processes all kept, no password on disk."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest
from helpers import ROOT

from engine import Engine
from engine.errors import DamagedMetadata
from engine.fs import jsondoc
from engine.security.acl import Acl

ALICE = "User:alice"


def read_acl(name="orders", who=ALICE, op="Read"):
    return Acl.make("Topic", name, "Literal", who, "*", op, "Allow")


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_files_0600_and_dir_0700_even_in_a_group_shared_data_dir(data_dir):
    os.makedirs(data_dir)
    os.chmod(data_dir, 0o2770)
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")
        assert mode(os.path.join(data_dir, "topics.json")) & 0o060  # (the data dir's policy)
        eng.users.add("alice", "pencil-1")
        eng.acls.add([read_acl()])
        sec = os.path.join(data_dir, "security")
        assert mode(sec) == 0o700
        names = sorted(os.listdir(sec))
        assert "users.json" in names and "acls.json" in names
        for name in names:  # (the lock files too: nobody else opens them)
            assert mode(os.path.join(sec, name)) == 0o600, name
        # a change rewrites the file: still 0600; a dir someone opened up is closed again
        os.chmod(sec, 0o2770)
        eng.users.passwd("alice", "pencil-2")
        assert mode(sec) == 0o700 and mode(eng.users.path) == 0o600


def test_no_password_on_disk(data_dir):
    with Engine.open(data_dir) as eng:
        eng.users.add("alice", "correct horse battery")
        raw = open(eng.users.path, "rb").read()
    assert b"correct horse" not in raw and b"alice" in raw


CHILD = textwrap.dedent("""
    import sys
    from engine import Engine
    from engine.security.acl import Acl
    data_dir, what, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Engine.open(data_dir) as eng:
        for i in range(n):
            if what.startswith("acl"):
                eng.acls.add([Acl.make("Topic", f"{what}-{i}", "Literal", "User:alice", "*",
                                       "Read", "Allow")])
            else:
                eng.users.add(f"{what}-{i}", "pw", ["SCRAM-SHA-256"], 4096)
""")


def child(data_dir, what, n=1):
    return subprocess.Popen([sys.executable, "-c", CHILD, data_dir, what, str(n)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stderr=subprocess.PIPE)


def test_another_process_change_is_seen_by_a_running_engine_at_once(data_dir):
    with Engine.open(data_dir) as eng:
        auth = eng.acls.authorizer()
        assert not auth.authorize(ALICE, "1.2.3.4", "Read", "Topic", "acl-0")
        assert eng.acls.authorizer() is auth  # (the same object while nothing changes)
        assert eng.users.credential("user-0", "SCRAM-SHA-256") is None
        for what in ("acl", "user"):
            p = child(data_dir, what)
            assert p.wait(timeout=120) == 0, p.stderr.read().decode()
        auth2 = eng.acls.authorizer()
        assert auth2 is not auth and auth2.authorize(ALICE, "1.2.3.4", "Read", "Topic", "acl-0")
        cred = eng.users.credential("user-0", "SCRAM-SHA-256")
        assert cred is not None and cred.iterations == 4096
        # and a removal too
        from engine.security.acl import AclFilter

        p = subprocess.run([sys.executable, "-c", "import sys; from engine import Engine\n"
                            "from engine.security.acl import AclFilter\n"
                            "with Engine.open(sys.argv[1]) as e: e.acls.remove([AclFilter()])\n"
                            "with Engine.open(sys.argv[1]) as e: e.users.delete('user-0')",
                            data_dir], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                           capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        assert not eng.acls.authorizer().authorize(ALICE, "1.2.3.4", "Read", "Topic", "acl-0")
        assert eng.users.credential("user-0", "SCRAM-SHA-256") is None
        assert eng.acls.list(AclFilter()) == []


def test_concurrent_adds_from_two_processes_are_all_kept(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t")  # (the data dir exists before the children race)
    n = 15
    procs = [child(data_dir, what, n) for what in ("acla", "aclb", "usera", "userb")]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    with Engine.open(data_dir, read_only=True) as eng:
        names = {a["name"] for a in eng.acls.list()}
        users = {u["name"] for u in eng.users.list()}
    assert names == {f"acl{x}-{i}" for x in "ab" for i in range(n)}
    assert users == {f"user{x}-{i}" for x in "ab" for i in range(n)}


def one_line_naming(e, path):
    text = str(e.value)
    assert "\n" not in text and path in text, text
    assert "restore it from a backup" in text, text
    return text


@pytest.mark.parametrize("content", [b"not json", b'{"version": 1, "users": {}}',
                                     b"\x00" * 10, b""])
def test_a_damaged_users_file_is_named_with_its_fix(data_dir, content):
    with Engine.open(data_dir) as eng:
        eng.users.add("alice", "pw")
        with open(eng.users.path, "wb") as f:  # (unsealed, or not JSON)
            f.write(content)
        with pytest.raises(DamagedMetadata) as e:
            eng.users.list()
        one_line_naming(e, eng.users.path)
        with pytest.raises(DamagedMetadata):  # a change does not write over it either
            eng.users.add("bob", "pw")
        assert open(eng.users.path, "rb").read() == content


def test_a_damaged_credential_or_acl_entry_is_named_with_its_fix(data_dir):
    with Engine.open(data_dir) as eng:
        eng.users.add("alice", "pw")
        eng.acls.add([read_acl()])
        with open(eng.users.path, "wb") as f:
            f.write(jsondoc.seal({"version": 1, "users": {"alice": {"SCRAM-SHA-256": {
                "salt": "!!", "iterations": 4096, "stored_key": "", "server_key": ""}}}}))
        with pytest.raises(DamagedMetadata) as e:
            eng.users.describe("alice")
        assert "bad credential" in one_line_naming(e, eng.users.path)
        with open(eng.acls.path, "wb") as f:
            f.write(jsondoc.seal({"version": 1, "acls": [{"resource_type": "Topic"}]}))
        with pytest.raises(DamagedMetadata) as e:
            eng.acls.authorizer()
        assert "entry 0" in one_line_naming(e, eng.acls.path)
        with open(eng.acls.path, "wb") as f:
            f.write(jsondoc.seal({"version": 2, "acls": []}))
        with pytest.raises(DamagedMetadata) as e:
            eng.acls.list()
        assert "version 2" in one_line_naming(e, eng.acls.path)


def test_a_security_file_that_is_not_a_regular_file_is_refused(data_dir):
    with Engine.open(data_dir) as eng:
        eng.acls.add([read_acl()])
        os.unlink(eng.acls.path)
        os.symlink("/etc/passwd", eng.acls.path)
        with pytest.raises(DamagedMetadata, match="not a regular file"):
            eng.acls.list()
