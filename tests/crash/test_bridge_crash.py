"""``rivven kafka import --follow`` killed with -9 at random moments, round after round, while a
producer keeps appending to the cluster (tansu): after a last run to the end, the data dir
holds every record of the cluster exactly once, in order, partition by partition."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

from helpers import RIVVEN, ROOT
from helpers.bridge import kafka_content
from helpers.tansu import tansu_fixture  # noqa: F401  (the "tansu" fixture)

import engine

PARTS = 3
ROUNDS = 20


def producing(bootstrap: str, stop: threading.Event, sent: list[int]) -> None:
    """Records with unique values to every partition until ``stop`` (a few thousand a
    second, in batches: steps of the copy always have some to take)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        for _ in range(200):
            p.produce("t", b"%08d" % i, b"k%d" % (i % 50), i % PARTS,
                      headers=[("n", b"%d" % i)] if i % 3 == 0 else None,
                      timestamp=1_700_000_000_000 + i)
            i += 1
        p.poll(0)
        time.sleep(0.05)
    assert p.flush(30) == 0
    sent.append(i)


def stored(d: str) -> int:
    """Offsets the data dir's topic has (records and markers; 0 before it exists)."""
    try:
        with engine.Engine.open(d) as eng:
            return sum(eng.offsets.end("t").values())
    except Exception:  # noqa: BLE001 (the first rounds may end before the topic is made)
        return 0


def held(d: str) -> dict[int, list[tuple]]:
    with engine.Engine.open(d) as eng:
        out = {}
        for p in range(PARTS):
            rows, pos = [], 0
            while batch := eng.read("t", p, pos, 50_000, isolation_level="read_committed"):
                rows += [(r.key, r.value, tuple(tuple(h) for h in r.headers), r.timestamp)
                         for r in batch]
                pos = batch[-1].offset + 1
            out[p] = rows
        return out


def test_an_import_killed_at_random_copies_each_record_once(tansu, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    admin.create_topics([NewTopic("t", PARTS, -1)])["t"].result(30)
    d = str(tmp_path / "data")
    env = dict(os.environ, RIVVEN_DATA_DIR=d, PYTHONPATH=str(ROOT))
    cmd = [*RIVVEN, "kafka", "import", "t", "-b", tansu.bootstrap, "--interval", "0.2"]
    stop, sent = threading.Event(), []
    feeder = threading.Thread(target=producing, args=(tansu.bootstrap, stop, sent))
    feeder.start()
    rng = random.Random(32)
    killed_with_progress = 0
    before = 0
    try:
        for _ in range(ROUNDS):
            proc = subprocess.Popen([*cmd, "--follow"], env=env, cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.8, 2.5))  # (startup is ~0.7 s: some die in it)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            now = stored(d)
            killed_with_progress += now > before
            before = now
    finally:
        stop.set()
        feeder.join(60)
    assert sent, "the producer failed"
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    want = kafka_content(tansu.bootstrap, "t", PARTS)
    assert sum(map(len, want.values())) == sent[0]
    got = held(d)
    for p in range(PARTS):
        values = [row[1] for row in got[p]]
        assert len(values) == len(set(values)), f"partition {p}: a record twice"
        assert got[p] == want[p], f"partition {p}: {len(got[p])} held, {len(want[p])} sent"
    assert killed_with_progress >= ROUNDS // 4, "too few rounds were killed mid-copy"
