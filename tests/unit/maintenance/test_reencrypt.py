"""Re-encryption (engine.maintenance.reencrypt, ``Engine.keys.reencrypt``) and what it leaves:
commit metadata committed before a topic encrypted is sealed and no frame of an offsets file
keeps it as text; a plaintext batch forged where the partition records only sealed ones is
damage on every read path and in ``segment verify``; the staging a killed pass leaves is
cleared by the next writable open or pass."""

from __future__ import annotations

import json
import os

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
