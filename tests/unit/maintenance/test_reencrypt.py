"""Re-encryption (engine.maintenance.reencrypt, ``Engine.keys.reencrypt``) and what it leaves:
commit metadata committed before a topic encrypted is sealed and no frame of an offsets file
keeps it as text; a plaintext batch forged where the partition records only sealed ones is
damage on every read path and in ``segment verify``; the staging a killed pass leaves is
cleared by the next writable open or pass."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess

from helpers import run_rivven
from helpers.encryption import ENC, marker, plaintext_in

from engine import Engine, Record


def groups_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "groups")


# ---------------------------------------------------------------- commit metadata
def test_metadata_committed_while_plaintext_is_sealed_by_reencrypt(data_dir, keyring):
    text = marker(1, b"META").decode()
    later = marker(2, b"META").decode()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 2)
        eng.produce("t", [Record(value=b"v")], partition=0)
        eng.produce("t", [Record(value=b"v")], partition=1)
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.commit({("t", 0): 1}, metadata=text)
        c.commit({("t", 1): 1}, metadata=later)
        c.close()
        eng.alter_topic_config("t", dict(ENC))
        # a sealed commit of the same offset: the earlier frame still holds the text
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.commit({("t", 1): 1}, metadata=later)
        c.close()
        rows = {r["partition"]: r for r in eng.groups.describe("g")["partitions"]}
        assert (rows[0]["metadata"], rows[0]["metadata_encrypted"]) == (text, False)
        assert (rows[1]["metadata"], rows[1]["metadata_encrypted"]) == (later, True)
        when = rows[0]["last_commit"]
        assert plaintext_in([groups_dir(data_dir)], [text.encode(), later.encode()]) != []
        out = eng.keys.reencrypt("t")
        assert out["metadata_resealed"] == 1
        rows = {r["partition"]: r for r in eng.groups.describe("g")["partitions"]}
        assert (rows[0]["metadata"], rows[0]["metadata_encrypted"]) == (text, True)
        assert (rows[1]["metadata"], rows[1]["metadata_encrypted"]) == (later, True)
        assert rows[0]["last_commit"] == when  # (its commit time kept)
    assert plaintext_in([data_dir], [text.encode(), later.encode()]) == []
    with Engine.open(data_dir, keyring=keyring) as eng:  # what another process reads
        rows = {r["partition"]: r for r in eng.groups.describe("g")["partitions"]}
        assert [rows[p]["metadata"] for p in (0, 1)] == [text, later]
        assert [rows[p]["current_offset"] for p in (0, 1)] == [1, 1]


def test_reencrypt_on_the_command_line_reports_the_metadata_it_sealed(data_dir, keyring):
    text = marker(3, b"META").decode()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1)
        eng.produce("t", [Record(value=b"v")])
        c = eng.consumer("g", "t", enable_auto_commit=False)
        c.commit({("t", 0): 1}, metadata=text)
        c.close()
        eng.alter_topic_config("t", dict(ENC))
    r = run_rivven(data_dir, "key", "reencrypt", "t", "--json", "--keyring", keyring)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["metadata_resealed"] == 1
    assert plaintext_in([data_dir], [text.encode()]) == []
    r = run_rivven(data_dir, "group", "describe", "g", "--json", "--keyring", keyring)
    assert r.returncode == 0, r.stderr.decode()
    assert text in r.stdout.decode()


def test_a_superseded_plaintext_frame_is_scrubbed_and_off_again_opens_it(data_dir, keyring):
    """Every live commit sealed already: nothing to reseal, yet the file is rewritten; with
    encryption off again the metadata goes back to text (other topics' untouched)."""
    text = marker(4, b"META").decode()
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1)
        eng.create_topic("p", 1)
        for t in ("t", "p"):
            eng.produce(t, [Record(value=b"v")])
        c = eng.consumer("g", ["t", "p"], enable_auto_commit=False)
        c.commit({("t", 0): 1, ("p", 0): 1}, metadata=text)
        eng.alter_topic_config("t", dict(ENC))
        c.commit({("t", 0): 1}, metadata="sealed now")
        c.close()
        assert eng.keys.reencrypt("t")["metadata_resealed"] == 0
        with open(os.path.join(groups_dir(data_dir), "g", "offsets.log"), "rb") as f:
            assert f.read().count(text.encode()) == 1  # (topic p's, never encrypted)
        eng.alter_topic_config("t", {"encryption.enable": "false"})
        assert eng.keys.reencrypt("t")["metadata_resealed"] == 1
        rows = {r["topic"]: r for r in eng.groups.describe("g")["partitions"]}
        assert (rows["t"]["metadata"], rows["t"]["metadata_encrypted"]) == ("sealed now", False)
        assert (rows["p"]["metadata"], rows["p"]["metadata_encrypted"]) == (text, False)
        assert eng.keys.reencrypt("p")["metadata_resealed"] == 0  # (never encrypted)


# ---------------------------------------------------------------- staging of dead passes
def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_writable_open_clears_the_staging_and_temp_files_of_dead_processes(data_dir):
    Engine.open(data_dir).close()
    root = os.path.join(data_dir, ".compaction")
    os.makedirs(root, exist_ok=True)
    gone, mine, held = dead_pid(), os.getpid(), dead_pid()
    dead = [os.path.join(root, f"{kind}-{gone}-{os.urandom(6).hex()}")
            for kind in ("reencrypt", "local")]
    for d in dead:  # a rewrite under way when the process was killed
        os.makedirs(os.path.join(d, "t-0123456789ab-0", ".w-1-x"))
        with open(os.path.join(d, "t-0123456789ab-0", "00000000000000000000.log"), "wb") as f:
            f.write(b"x" * 1000)
        open(os.path.join(d, "lock"), "wb").close()
    os.makedirs(os.path.join(dead[0] + "0"))  # (not a staging name: left alone)
    live = os.path.join(root, f"reencrypt-{mine}-{os.urandom(6).hex()}")  # this process's
    os.makedirs(live)
    locked = os.path.join(root, f"reencrypt-{held}-{os.urandom(6).hex()}")  # a live holder
    os.makedirs(locked)                      # in another pid namespace: its lock is held
    fd = os.open(os.path.join(locked, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    spark_run = os.path.join(root, f"t-1700000000000-{gone}")  # the Spark launcher's rule
    os.makedirs(spark_run)
    tmp_dead = os.path.join(data_dir, f"topics.json.tmp.{gone}")
    tmp_live = os.path.join(data_dir, f"topics.json.tmp.{mine}")
    for p in (tmp_dead, tmp_live):
        open(p, "wb").close()
    try:
        Engine.open(data_dir, read_only=True).close()  # (a read-only open changes nothing)
        assert all(os.path.exists(d) for d in dead) and os.path.exists(tmp_dead)
        Engine.open(data_dir).close()
        assert not any(os.path.exists(d) for d in dead) and not os.path.exists(tmp_dead)
        assert all(os.path.exists(p) for p in (live, locked, spark_run, dead[0] + "0",
                                               tmp_live))
    finally:
        os.close(fd)


def test_a_pass_clears_dead_staging_and_removes_its_own(data_dir, keyring):
    with Engine.open(data_dir, keyring=keyring) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "2048"})
        for i in range(50):
            eng.produce("t", [Record(value=marker(i))])
        eng.alter_topic_config("t", dict(ENC))
        root = os.path.join(data_dir, ".compaction")
        left = os.path.join(root, f"reencrypt-{dead_pid()}-{os.urandom(6).hex()}")
        os.makedirs(left)  # killed after this engine opened
        out = eng.keys.reencrypt("t")
        assert out["partitions"][0]["segments_rewritten"] > 0
        assert os.listdir(root) == []
