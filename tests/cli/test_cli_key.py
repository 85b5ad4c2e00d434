"""``rivven key`` and the keyring on the command line: status, rotate, rewrap, reencrypt with
``--json``; ``--keyring`` anywhere on the line or ``RIVVEN_KEYRING``; keyring and key errors
as one line with exit 1; a tampered batch exit 3 naming the file and position; ``segment
verify`` without keys and with ``--decrypt``."""

from __future__ import annotations

import json
import os
import struct

from helpers import new_key, run_rivven, write_keyring
from helpers.cli import run_in_process
from helpers.encryption import batches_of, forge_plaintext, marker, reseal_crc, segment_files

from engine.format.records import HEADER_SIZE


def ok(data_dir: str, *args: str, input: bytes | None = None) -> str:
    r = run_rivven(data_dir, *args, input=input)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def fails(data_dir: str, code: int, *args: str, input: bytes | None = None) -> str:
    """The one-line error of ``rivven ARGS`` (in this process) and its exit ``code``."""
    r = run_in_process(data_dir, *args, input=input)
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def encrypted_topic(data_dir: str, keyring: str, values: list[bytes]) -> None:
    ok(data_dir, "topic", "create", "t", "--config", "encryption.enable=true",
       "--config", "encryption.key.id=k1", "--keyring", keyring)
    ok(data_dir, "produce", "t", "--keyring", keyring, input=b"\n".join(values) + b"\n")


def test_status_rotate_rewrap_reencrypt_with_json(data_dir, keyring):
    encrypted_topic(data_dir, keyring, [marker(i) for i in range(5)])
    st = json.loads(ok(data_dir, "key", "status", "--json"))  # no keyring needed
    assert [(t["topic"], t["encryption"], t["cipher"], t["master_key_id"], t["current_version"])
            for t in st] == [("t", True, "aes-256-gcm", "k1", 1)]
    (k,) = st[0]["keys"]
    assert (k["version"], k["current"], k["segments"]) == (1, True, 1) and k["bytes"] > 0
    assert k["ranges"] == [{"partition": 0, "tier": "local", "base_offset": 0, "next_offset": 5,
                            "segments": 1, "bytes": k["bytes"]}]
    assert st[0]["plaintext"] == {"bytes": 0, "segments": 0, "ranges": []}
    rot = json.loads(ok(data_dir, "key", "rotate", "t", "--json", "--keyring", keyring))
    assert rot == {"topic": "t", "version": 2, "cipher": "aes-256-gcm", "master_key_id": "k1",
                   "previous_version": 1}
    ok(data_dir, "produce", "t", "--keyring", keyring, input=marker(5) + b"\n")
    table = ok(data_dir, "key", "status", "t")
    assert "v1" in table and "old" in table and "v2" in table and "current" in table
    rew = json.loads(ok(data_dir, "--keyring", keyring, "key", "rewrap", "--to", "k2", "--json"))
    assert rew == {"master_key_id": "k2", "topics": [
        {"topic": "t", "versions": 2, "previous_master_key_ids": ["k1"]}]}
    before = os.path.getsize(segment_files(data_dir, "t")[0])
    dry = json.loads(ok(data_dir, "key", "reencrypt", "t", "--dry-run", "--json",
                        "--keyring", keyring))
    assert dry["dry_run"] and dry["target_version"] == 2 and dry["would_drop"] == [1]
    assert dry["partitions"] == [{"partition": 0, "rolled": True, "local_segments": [0],
                                  "cold_segments": [], "bytes": dry["partitions"][0]["bytes"]}]
    assert os.path.getsize(segment_files(data_dir, "t")[0]) == before  # nothing changed
    out = json.loads(ok(data_dir, "key", "reencrypt", "t", "--json", "--keyring", keyring))
    assert (out["dropped_versions"], out["kept_versions"]) == ([1], [2])
    p = out["partitions"][0]
    assert (p["rolled"], p["segments_rewritten"], p["batches_rewritten"],
            p["batches_copied"]) == (True, 1, 1, 1)
    got = ok(data_dir, "consume", "t", "-n", "6", "--keyring", keyring).split()
    assert got == [marker(i).decode() for i in range(6)]
    text = ok(data_dir, "key", "reencrypt", "t", "--keyring", keyring)
    assert "PARTITION" in text  # a table, and the line of what was done (stdout, as Kafka's)
    assert text.splitlines()[-1] == "rewrote 0 segment(s) of t under v2; dropped data keys: none; " \
        "kept: v2"  # (done already)
    text = ok(data_dir, "key", "rotate", "t", "--keyring", keyring)
    assert text == "t: data key v3 (aes-256-gcm, under master key k2) is current; v2 still " \
        "opens older batches\n"


def test_the_keyring_comes_from_the_environment_or_anywhere_on_the_line(data_dir, keyring):
    encrypted_topic(data_dir, keyring, [b"a", b"b"])
    env = {"RIVVEN_KEYRING": keyring}
    r = run_rivven(data_dir, "consume", "t", "-n", "2", env=env)
    assert r.returncode == 0 and r.stdout.split() == [b"a", b"b"]
    assert ok(data_dir, "consume", "--keyring", keyring, "t", "-n", "1").split() == ["a"]


def test_keyring_and_key_errors_are_one_line_with_exit_1(data_dir, keyring, keys, tmp_path):
    encrypted_topic(data_dir, keyring, [b"x"])
    loose = write_keyring(str(tmp_path / "loose.json"), keys, mode=0o644)
    err = fails(data_dir, 1, "consume", "t", "-n", "1", "--keyring", loose)
    assert f"run 'chmod 600 {loose}'" in err
    err = fails(data_dir, 1, "consume", "t", "-n", "1")
    assert "master key 'k1'" in err and "--keyring" in err
    other = write_keyring(str(tmp_path / "other.json"), {"k2": keys["k2"]})
    err = fails(data_dir, 1, "consume", "t", "-n", "1", "--keyring", other)
    assert "master key 'k1' is not in the keyring" in err
    wrong = write_keyring(str(tmp_path / "wrong.json"), {"k1": new_key()})
    err = fails(data_dir, 1, "produce", "t", "--keyring", wrong, input=b"y\n")
    assert "does not open data key version 1 of topic 't'" in err
    err = fails(data_dir, 1, "consume", "t", "-n", "1", "--keyring", str(tmp_path / "none.json"))
    assert "does not exist" in err
    err = fails(data_dir, 1, "topic", "create", "u", "--config", "encryption.enable=true",
                "--keyring", keyring)
    assert "needs encryption.key.id" in err
    err = fails(data_dir, 1, "key", "rewrap", "--to", "k9", "--keyring", keyring)
    assert "'k9'" in err
    err = fails(data_dir, 1, "key", "rotate", "nope", "--keyring", keyring)
    assert "does not exist" in err
    assert ok(data_dir, "consume", "t", "-n", "1", "--keyring", keyring).split() == ["x"]


def test_a_tampered_batch_is_exit_3_and_verify_needs_no_key_but_decrypt_does(data_dir, keyring):
    encrypted_topic(data_dir, keyring, [marker(i) for i in range(3)])
    assert json.loads(ok(data_dir, "segment", "verify", "--json"))["ok"]
    assert json.loads(ok(data_dir, "segment", "verify", "--decrypt", "--json",
                         "--keyring", keyring))["ok"]
    err = fails(data_dir, 1, "segment", "verify", "--decrypt")
    assert "master key 'k1'" in err
    path = segment_files(data_dir, "t")[0]

    def flip(buf: bytearray) -> None:
        buf[HEADER_SIZE + 30] ^= 0x80

    reseal_crc(path, 0, flip)
    err = fails(data_dir, 3, "consume", "t", "-n", "3", "--keyring", keyring)
    assert "does not decrypt" in err and f"{path} at position 0" in err
    assert json.loads(ok(data_dir, "segment", "verify", "--json"))["ok"]  # its CRC is right
    r = run_rivven(data_dir, "segment", "verify", "--decrypt", "--json", "--keyring", keyring)
    assert r.returncode == 3
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["kind"], f["path"], f["position"]) == ("body", path, 0)
    assert "authentication tag" in f["message"]


def test_inspect_shows_key_versions_and_records_only_with_the_key(data_dir, keyring):
    encrypted_topic(data_dir, keyring, [b"hello"])
    path = segment_files(data_dir, "t")[0]
    rows = [json.loads(x) for x in ok(data_dir, "segment", "inspect", path, "--json").splitlines()]
    assert rows[0]["key_version"] == 1
    out = ok(data_dir, "segment", "inspect", path, "--records", "--json", "--keyring", keyring)
    assert json.loads(out.splitlines()[1])["value"] == "hello"
    err = fails(data_dir, 1, "segment", "inspect", path, "--records")
    assert "master key 'k1'" in err


def test_a_batch_naming_an_unknown_key_version_is_exit_3_and_verify_lists_each(data_dir,
                                                                               keyring):
    encrypted_topic(data_dir, keyring, [marker(0)])
    for i in (1, 2):
        ok(data_dir, "produce", "t", "--keyring", keyring, input=marker(i) + b"\n")
    path = segment_files(data_dir, "t")[0]
    (_, _), (p1, _), (p2, _) = batches_of(path)
    for pos, v in ((p1, 7), (p2, 9)):
        reseal_crc(path, pos, lambda buf, v=v: struct.pack_into("<H", buf, 22, v))
    err = fails(data_dir, 3, "consume", "t", "-o", "1", "-n", "1", "--keyring", keyring)
    assert "data key version 7" in err and "topics.json" in err
    r = run_rivven(data_dir, "segment", "verify", "--decrypt", "--json", "--keyring", keyring)
    assert r.returncode == 3, r.stderr.decode()
    found = json.loads(r.stdout)["findings"]
    assert [(f["kind"], f["position"]) for f in found] == [("body", p1), ("body", p2)]


def test_a_forged_plaintext_batch_is_exit_3_and_verify_reports_it(data_dir, keyring):
    encrypted_topic(data_dir, keyring, [marker(0)])
    for i in (1, 2):
        ok(data_dir, "produce", "t", "--keyring", keyring, input=marker(i) + b"\n")
    path = segment_files(data_dir, "t")[0]
    pos, h = batches_of(path)[-1]  # the last sealed batch, as plaintext (same size, CRC)
    forge_plaintext(path, pos, h.base_offset, h.size)
    err = fails(data_dir, 3, "consume", "t", "-n", "3", "--keyring", keyring)
    assert "offsets 2..2" in err and "plaintext" in err
    assert ok(data_dir, "consume", "t", "-n", "2", "--keyring", keyring).split() == [
        marker(0).decode(), marker(1).decode()]
    for extra in ((), ("--decrypt", "--keyring", keyring)):
        r = run_rivven(data_dir, "segment", "verify", "--json", *extra)
        assert r.returncode == 3, r.stderr.decode()
        (f,) = json.loads(r.stdout)["findings"]
        assert (f["kind"], f["position"], f["offsets"]) == ("plaintext", pos, [2, 2])
