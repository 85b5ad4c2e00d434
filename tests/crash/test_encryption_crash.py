"""Encryption under kill -9: a writer killed mid-produce leaves no plaintext anywhere (its WAL
holds the same sealed bytes) and every acknowledged record reads back after recovery; a
re-encryption killed at each step leaves each partition with its old segments or its new
ones, never a mix, and the next pass finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, new_key, run_rivven, write_keyring
from helpers.encryption import (
    ENC,
    batches_of,
    forge_plaintext,
    marker,
    plaintext_in,
    rows,
    segment_files,
)

from engine import Engine, Record

PRODUCER = """
import sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1], keyring=sys.argv[2])
i = 0
while True:
    v = (b"MARK-%d-" % i).ljust(32, b"x")
    p, off = eng.produce("t", [Record(key=b"k%d" % (i % 5), value=v)], partition=i % 2)[0]
    print(i, p, off, flush=True)
    i += 1
"""


@pytest.fixture
def kr(tmp_path) -> str:
    return write_keyring(str(tmp_path / "keyring.json"), {"k1": new_key()})


def test_killed_mid_produce_no_plaintext_and_every_ack_reads_back(data_dir, kr):
    with Engine.open(data_dir, keyring=kr) as eng:
        eng.create_topic("t", 2, {**ENC, "segment.bytes": "4096"})
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, data_dir, kr],
                            stdout=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    acked = []
    for line in proc.stdout:
        acked.append(tuple(int(x) for x in line.split()))
        if len(acked) >= 400:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    streams = os.listdir(os.path.join(data_dir, "wal"))
    assert any(s[0].isdigit() for s in streams)  # the dead writer's WAL stream is there
    sent = [marker(i) for i in range(len(acked) + 50)]
    assert plaintext_in([data_dir], sent) == []
    with Engine.open(data_dir, keyring=kr) as eng:  # replays the dead stream
        got = {(r[0], r[1]): r[4] for r in rows(eng, "t")}
        for i, p, off in acked:
            assert got[(p, off)] == marker(i)
    assert plaintext_in([data_dir], sent) == []


def versions_by_segment(data_dir: str, topic: str, partition: int) -> list[set[int]]:
    return [{h.key_version for _, h in batches_of(p) if not h.is_control}
            for p in segment_files(data_dir, topic, partition)]


def setup_mixed(data_dir: str, kr: str) -> list[tuple]:
    """Two partitions, each with plaintext, version-1 and version-2 segments."""
    with Engine.open(data_dir, keyring=kr) as eng:
        eng.create_topic("t", 2, {"segment.bytes": "4096"})
        n = 0
        for phase in range(3):
            if phase == 1:
                eng.alter_topic_config("t", dict(ENC))
            elif phase == 2:
                eng.keys.rotate("t")
            for _ in range(120):
                eng.produce("t", [Record(key=b"k", value=marker(n))], partition=n % 2)
                n += 1
        return rows(eng, "t")


@pytest.mark.parametrize("point", ["swap-cleaned", "swap-committed", "reencrypt-swapped"])
def test_a_reencrypt_killed_at_each_step_leaves_old_or_new_segments(data_dir, kr, point):
    before = setup_mixed(data_dir, kr)
    old = [versions_by_segment(data_dir, "t", p) for p in (0, 1)]
    assert all(any(0 in s for s in o) and any(1 in s for s in o) for o in old)
    env = dict(RIVVEN_FAILPOINT=point)
    r = run_rivven(data_dir, "key", "reencrypt", "t", "--keyring", kr, env=env, timeout=180)
    assert r.returncode == -signal.SIGKILL, r.stderr
    with Engine.open(data_dir, keyring=kr) as eng:  # (finishes a committed swap)
        assert rows(eng, "t") == before
        for p in (0, 1):
            now = versions_by_segment(data_dir, "t", p)
            new = all(s <= {2} for s in now)
            assert new or now == old[p], (p, now)  # the old segments, or all rewritten
        assert [k.version for k in eng.topic("t").keys.versions] == [1, 2]  # nothing dropped
        out = eng.keys.reencrypt("t")
        assert out["dropped_versions"] == [1]
        assert rows(eng, "t") == before
    assert all(s <= {2} for p in (0, 1) for s in versions_by_segment(data_dir, "t", p))
    assert plaintext_in([data_dir], [marker(i) for i in range(360)]) == []


def test_a_reencrypt_of_cold_segments_killed_after_the_manifest_leaves_orphans_only(
        data_dir, kr):
    with Engine.open(data_dir, keyring=kr) as eng:
        eng.create_topic("t", 1, {"segment.bytes": "4096", "remote.storage.enable": "true",
                                  "local.retention.bytes": "4096"})
        for i in range(200):
            eng.produce("t", [Record(value=marker(i))])
        eng.alter_topic_config("t", dict(ENC))
        assert sum(len(p["uploaded"]) for p in eng.maintenance.tier("t")["partitions"]) > 0
        before = rows(eng, "t")
    cold = os.path.join(data_dir, "cold")
    assert plaintext_in([cold], [marker(0)]) != []
    r = run_rivven(data_dir, "key", "reencrypt", "t", "--keyring", kr, timeout=180,
                   env={"RIVVEN_FAILPOINT": "reencrypt-cold-manifest"})
    assert r.returncode == -signal.SIGKILL, r.stderr
    with Engine.open(data_dir, keyring=kr) as eng:
        assert rows(eng, "t") == before  # the new manifest names the new objects
        st = eng.keys.status("t")[0]
        assert st["plaintext"]["bytes"] == 0
        # the old objects are orphans now: the next tier run removes them
        eng.maintenance.tier("t")
    time.sleep(0)
    assert plaintext_in([data_dir, cold], [marker(i) for i in range(200)]) == []
    assert run_rivven(data_dir, "segment", "verify", "--cold", "--decrypt",
                      "--keyring", kr).returncode == 0


def debris(data_dir: str) -> list[str]:
    """Staging folders of re-encryption passes, and temp files of the root's atomic writes."""
    root = os.path.join(data_dir, ".compaction")
    staged = [n for n in os.listdir(root) if n.startswith("reencrypt-")] \
        if os.path.isdir(root) else []
    return staged + [n for n in os.listdir(data_dir) if ".tmp." in n]


def test_reencrypts_killed_at_random_points_leave_nothing_a_writable_open_keeps(data_dir, kr):
    """kill -9 of a real ``rivven key reencrypt``, 20 times at random moments (and at the
    swap's failpoint every fourth time, where its staging surely exists): each time, the next
    writable open clears what the killed pass left, and the records are as they were."""
    import random

    with Engine.open(data_dir, keyring=kr) as eng:
        eng.create_topic("t", 2, {**ENC, "segment.bytes": "65536"})
        for i in range(0, 40000, 200):
            eng.produce("t", [Record(key=b"k", value=marker(j)) for j in range(i, i + 200)],
                        partition=(i // 200) % 2)
        before = rows(eng, "t")
        eng.keys.rotate("t")
    env = dict(os.environ, RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "rivven_cli.main", "key", "reencrypt", "t", "--keyring", kr]
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, timeout=180)
    whole = time.monotonic() - t0  # (start-up included)
    rng = random.Random(29)
    left = []
    for n in range(20):
        with Engine.open(data_dir, keyring=kr) as eng:  # clears what the last kill left
            assert debris(data_dir) == [], n
            eng.keys.rotate("t")  # (work for the next pass)
        point = {"RIVVEN_FAILPOINT": "reencrypt-swapped"} if n % 4 == 3 else {}
        proc = subprocess.Popen(cmd, env={**env, **point}, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=rng.uniform(0.2, 1.2) * whole if not point else 180)
        except subprocess.TimeoutExpired:
            pass
        proc.kill()
        proc.wait()
        left.append(len(debris(data_dir)))
    assert sum(1 for x in left if x) >= 5, left  # (the kills did hit passes under way)
    with Engine.open(data_dir, keyring=kr) as eng:
        assert debris(data_dir) == []
        assert rows(eng, "t") == before
        eng.keys.reencrypt("t")
        assert rows(eng, "t") == before
        assert debris(data_dir) == []


TOGGLER = """
import sys
from engine import Engine, Record
eng = Engine.open(sys.argv[1], keyring=sys.argv[2])
i = int(sys.argv[3])
while True:
    if i % 23 == 0:  # encryption off and on: every change moves the sealed ranges first
        on = (i // 23) % 2 == 0
        eng.alter_topic_config("t", {"encryption.enable": "true" if on else "false",
                                     "encryption.key.id": "k1"})
    v = (b"MARK-%d-" % i).ljust(32, b"x")
    p, off = eng.produce("t", [Record(key=b"k", value=v)], partition=i % 2)[0]
    print(i, p, off, flush=True)
    i += 1
"""


def test_a_writer_turning_encryption_on_and_off_killed_leaves_no_false_damage(data_dir, kr):
    """kill -9 of a writer that turns encryption on and off between its appends, three
    times: every acknowledged record reads back, and no batch rivven wrote is taken for a
    forged one (the sealed ranges always move before the batches they vouch for)."""
    with Engine.open(data_dir, keyring=kr) as eng:
        eng.create_topic("t", 2, {**ENC, "segment.bytes": "4096"})
    acked: list[tuple[int, int, int]] = []
    start = 0
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", TOGGLER, data_dir, kr, str(start)],
                                stdout=subprocess.PIPE, cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        n = 0
        for line in proc.stdout:
            acked.append(tuple(int(x) for x in line.split()))
            n += 1
            if n >= 150:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        start = acked[-1][0] + 100  # (values of the next round: never one of this round's)
        with Engine.open(data_dir, keyring=kr) as eng:  # replays the dead stream
            got = {(r[0], r[1]): r[4] for r in rows(eng, "t")}
            for i, p, off in acked:
                assert got[(p, off)] == marker(i)
            doc = eng.segments.verify(["t"], decrypt=True)
            assert doc["ok"], doc["findings"]
    pdir = os.path.dirname(segment_files(data_dir, "t", 0)[0])
    assert os.path.exists(os.path.join(pdir, "encryption.json"))


def sealed_ranges(data_dir: str) -> list:
    return json.loads(run_rivven(data_dir, "key", "status", "t", "--json").stdout)[0][
        "sealed_ranges"]


@pytest.mark.parametrize("point", ["sealed-range-write", "sealed-range-written"])
def test_a_produce_killed_as_it_records_the_first_sealed_offset(data_dir, kr, point):
    """kill -9 of the first produce after encryption is turned on, before and after it records
    where the sealed batches begin (before its batch is logged): with encryption then turned
    off, the plaintext batch appended at the offset the range claims moves it first (never
    refused), and once encryption is on again the range is recorded anew and a forged batch
    in it is damage. Then the first plaintext produce after encryption is turned off again,
    killed the same way: its batch (in the WAL, replayed, or lost) is never refused."""
    def rivven(*args: str, code: int = 0, **kw) -> str:
        r = run_rivven(data_dir, *args, "--keyring", kr, **kw)
        assert r.returncode == code, r.stderr.decode()
        return r.stdout.decode()

    def alter(on: bool) -> None:
        rivven("topic", "alter-config", "t", "--set", f"encryption.enable={str(on).lower()}",
               "--set", "encryption.key.id=k1")

    rivven("topic", "create", "t")
    rivven("produce", "t", input=marker(0) + b"\n")
    alter(True)
    rivven("produce", "t", input=marker(1) + b"\n", env={"RIVVEN_FAILPOINT": point},
           code=-signal.SIGKILL)
    assert sealed_ranges(data_dir) == ([[]] if point == "sealed-range-write" else [[[1, None]]])
    alter(False)
    rivven("produce", "t", input=marker(2) + b"\n")  # (plaintext at offset 1)
    assert sealed_ranges(data_dir) == [[]]
    alter(True)
    rivven("produce", "t", input=marker(3) + b"\n")  # (sealed at offset 2)
    assert sealed_ranges(data_dir) == [[[2, None]]]
    assert rivven("consume", "t", "-n", "9").split() == [marker(i).decode() for i in (0, 2, 3)]
    rivven("segment", "verify", "--decrypt")
    alter(False)
    rivven("produce", "t", input=marker(4) + b"\n", env={"RIVVEN_FAILPOINT": point},
           code=-signal.SIGKILL)
    assert sealed_ranges(data_dir) == ([[[2, None]]] if point == "sealed-range-write"
                                       else [[[2, 3]]])
    rivven("produce", "t", input=marker(5) + b"\n")  # (at offset 3: the dead one was lost)
    assert sealed_ranges(data_dir) == [[[2, 3]]]
    assert rivven("consume", "t", "-n", "9").split() == [marker(i).decode() for i in (0, 2, 3, 5)]
    rivven("segment", "verify", "--decrypt")
    path = segment_files(data_dir, "t")[0]
    pos, h = batches_of(path)[2]
    assert h.is_encrypted and h.base_offset == 2
    forge_plaintext(path, pos, 2, h.size)
    rivven("consume", "t", "-n", "9", code=3)


@pytest.mark.parametrize("point", ["sealed-range-write", "sealed-range-written"])
def test_a_reencrypt_killed_as_it_records_every_batch_sealed(data_dir, kr, point):
    """kill -9 of a re-encryption after its swaps, before and after it records that every
    batch is sealed: the records read as they were, verify finds nothing, and the next pass
    records it (then a plaintext batch at offset 0, once plaintext, is damage)."""
    before = setup_mixed(data_dir, kr)
    assert sealed_ranges(data_dir) == [[[60, None]], [[60, None]]]  # (120 each phase, 2 partitions)
    r = run_rivven(data_dir, "key", "reencrypt", "t", "--keyring", kr, timeout=180,
                   env={"RIVVEN_FAILPOINT": point})
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert sealed_ranges(data_dir)[0] == ([[60, None]] if point == "sealed-range-write"
                                          else [[0, None]])
    with Engine.open(data_dir, keyring=kr) as eng:
        assert rows(eng, "t") == before
        assert eng.segments.verify(["t"], decrypt=True)["ok"]
        out = eng.keys.reencrypt("t")
        assert [p["sealed_from"] for p in out["partitions"]] == [0, 0]
        assert rows(eng, "t") == before
    assert sealed_ranges(data_dir) == [[[0, None]], [[0, None]]]
    path = segment_files(data_dir, "t", 0)[0]
    pos, h = batches_of(path)[0]
    assert h.is_encrypted and h.base_offset == 0
    forge_plaintext(path, pos, 0, h.size)
    r = run_rivven(data_dir, "segment", "verify", "--json")
    assert r.returncode == 3
    assert [f["kind"] for f in json.loads(r.stdout)["findings"]] == ["plaintext"]
