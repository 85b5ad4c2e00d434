"""Copies killed with -9 at random moments, round after round, while the source keeps growing:
``rivven kafka export --follow`` into a ``rivven serve`` (read_committed and require_stable as
Kafka's), ``rivven kafka import --follow`` from tansu. After a last run to the end, the
destination holds every committed source record exactly once, in order, partition by
partition."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter

from helpers import RIVVEN, ROOT
from helpers.bridge import content, kafka_content
from helpers.kafka import start_server
from helpers.kafka_clients import confluent_consume
from helpers.tansu import tansu_fixture  # noqa: F401  (the "tansu" fixture)

import engine
from engine import Record
from engine.bridge import cluster

PARTS = 3
ROUNDS = 20
TOPIC = "orders"
EXPORT_ROUNDS = 24


class Appender(threading.Thread):
    """Appends to the source until stopped, while copies run and are killed: plain batches
    (tombstones and headers among them), committed and aborted transactions over several
    partitions; every record's key is unique, so a record copied twice shows."""

    def __init__(self, eng: engine.Engine, seed: int) -> None:
        super().__init__(daemon=True)
        self.eng, self.rng = eng, random.Random(seed)
        self.stop = threading.Event()
        self.n = self.committed = 0  # (records made; of them, those not aborted)
        self.error: BaseException | None = None

    def records(self, k: int) -> list[Record]:
        out = []
        for _ in range(k):
            self.n += 1
            value = None if self.n % 17 == 0 else b"a%d" % self.n * self.rng.randint(1, 8)
            out.append(Record(b"a%d" % self.n, value,
                              (("i", b"%d" % self.n),) if self.n % 3 == 0 else (),
                              1_700_001_000_000 + self.n))
        return out

    def run(self) -> None:
        rng = self.rng
        tp = self.eng.producer(transactional_id="src-appender")
        try:
            while not self.stop.wait(rng.uniform(0.001, 0.02)):
                kind = rng.random()
                if kind < 0.7:
                    recs = self.records(rng.randint(1, 60))
                    self.eng.produce(TOPIC, recs, partition=rng.randrange(PARTS))
                    self.committed += len(recs)
                    continue
                tp.begin()
                n = 0
                for p in rng.sample(range(PARTS), rng.randint(1, PARTS)):
                    recs = self.records(rng.randint(1, 30))
                    tp.produce(TOPIC, recs, partition=p)
                    n += len(recs)
                if kind < 0.8:
                    tp.abort()
                else:
                    tp.commit()
                    self.committed += n
        except BaseException as e:  # (the test fails on it after joining)
            self.error = e
        finally:
            tp.close()


def differences(got: dict[int, list[tuple]], want: dict[int, list[tuple]]) -> str:
    """What the destination lacks or holds twice, per partition (keys are unique)."""
    out = []
    for p in sorted(want):
        g, w = [r[0] for r in got.get(p, [])], [r[0] for r in want[p]]
        missing = sorted(set(w) - set(g))
        twice = sorted(k for k, c in Counter(g).items() if c > 1)
        if missing or twice or g != w:
            out.append(f"[{p}] {len(g)} records for {len(w)}: missing {missing[:5]} "
                       f"({len(missing)}), twice {twice[:5]} ({len(twice)})")
    return "; ".join(out)


def left_open(d: engine.Engine) -> int:
    """The offsets of the destination's open transactions: its high watermarks past its last
    stable offsets (0 before the first copy creates the topic)."""
    try:
        hw, lso = d.offsets.end(TOPIC), d.offsets.end(TOPIC, "read_committed")
    except engine.UnknownTopic:
        return 0
    return sum(hw[p] - lso[p] for p in hw)


def test_an_export_killed_at_random_while_the_source_grows_copies_each_record_once(tmp_path):
    """Copies killed with -9 at random moments (starting, fencing the copy killed before,
    reading the positions, in the middle of a transaction, between its positions sent and
    its commit) while records are appended (plain ones, tombstones, headers, committed and
    aborted transactions), then one copy to the end: the destination holds every committed
    record once, in order, and the records of the transactions kills left open as aborted
    ones. At least EXPORT_ROUNDS kills, more (up to twice as many) until enough of them left
    records in an open transaction, one its positions too. (The positions are read between
    rounds non-stable, from the destination's data dir: a stable read waits for the
    transaction a kill left open with them until the next copy aborts it.)"""
    src_dir = str(tmp_path / "src")
    source = engine.Engine.open(src_dir)
    dest = start_server(str(tmp_path / "dst"))
    try:
        source.create_topic(TOPIC, PARTS)
        for p in range(PARTS):
            source.produce_batch(TOPIC, [b"x%d" % i for i in range(3000)],
                                 keys=[b"b%d-%d" % (p, i) for i in range(3000)], partition=p)
        _export_rounds(source, src_dir, dest, tmp_path)
    finally:
        dest.kill()
        source.close()


def _export_rounds(source: engine.Engine, src_dir: str, dest, tmp_path) -> None:
    before = sum(len(v) for v in content(source, TOPIC).values())
    env = dict(os.environ, RIVVEN_DATA_DIR=src_dir, PYTHONPATH=str(ROOT))
    argv = [*RIVVEN, "kafka", "export", TOPIC, "-b", dest.bootstrap, "--name", "k9",
            "--follow", "--transaction-records", "50"]
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    appender = Appender(source, seed)
    appender.start()
    rounds: list[str] = []  # per kill: its delay, the positions moved, what it left open
    with_records = with_offsets = moved = 0
    left_total = last = 0
    instance = None  # (producer id, epoch) of the last copy that got to its InitProducerId
    try:
        while len(rounds) < 2 * EXPORT_ROUNDS and (
                len(rounds) < EXPORT_ROUNDS or with_records < 3 or with_offsets < 1
                or moved < 8):
            # half the copies send a transaction's records in several Produce requests (a
            # batch per 10 records): kills then come between its records too
            small = rng.random() < 0.5
            with open(tmp_path / "copy.err", "wb") as err:
                proc = subprocess.Popen(argv + ["-X", "batch.num.messages=10"] * small, env=env,
                                        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
            delay = rng.uniform(0.7, 1.9)  # (a copy starts in about 0.6 s)
            time.sleep(delay)
            if proc.poll() is not None:
                text = (tmp_path / "copy.err").read_text(errors="replace")
                lines = [x for x in text.splitlines() if not x.startswith("%")]
                raise AssertionError(f"the copy exited {proc.returncode} before its kill: "
                                     + "\n".join(lines[-15:]))
            proc.kill()
            proc.wait(30)
            with engine.Engine.open(dest.data_dir, read_only=True) as d:
                left = left_open(d)
                try:
                    txn = d.txn.describe(cluster.transactional_id("k9"))
                except engine.InvalidArgument:  # (no copy got to its InitProducerId yet)
                    txn = None
                try:
                    done = sum(o["offset"] for o in d.groups.offsets(
                        cluster.mirror_group("k9")).values())
                except engine.GroupNotFound:
                    done = 0
            # what this kill left (none when the copy was killed before its InitProducerId:
            # the state is still the copy's before), its positions sent, EndTxn not: what a
            # stable read waits on
            fresh = txn is not None and (txn["producer_id"], txn["epoch"]) != instance
            instance = (txn["producer_id"], txn["epoch"]) if txn else None
            # (killed after its EndTxn(commit) was taken: the coordinator completes the commit,
            # so what is open now becomes committed, not aborted)
            committing = txn is not None and txn["state"] in ("PrepareCommit", "CompleteCommit")
            left = left if fresh and not committing else 0
            sent = bool(fresh and txn and txn["state"] == "Ongoing"
                        and any(txn["offsets"].values()))
            with_records += left > 0
            with_offsets += sent
            left_total += left
            moved += done > last
            rounds.append(f"{delay:.2f}s{' small' if small else ''} +{done - last} "
                          f"{txn['state'] if fresh and txn else '-'}"
                          f"{f' {left} open' if left else ''}{' sent' if sent else ''}")
            last = done
    finally:
        appender.stop.set()
        appender.join(30)
    assert appender.error is None, appender.error
    why = f"(seed {seed}; {appender.n} records appended; kills: {', '.join(rounds)})"
    # kills left records in open transactions, one the positions too, and between the kills
    # the copies got on
    assert with_records >= 3 and with_offsets >= 1 and moved >= 8, why
    r = subprocess.run(argv[:-3], env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    want = content(source, TOPIC)
    assert sum(len(v) for v in want.values()) == before + appender.committed
    got = held_in(dest.data_dir)
    assert got == want, f"{differences(got, want)} {why}"
    # as a read_committed Kafka consumer sees it (the killed copies' aborted transactions
    # between the records)
    wire = confluent_consume(dest.bootstrap, TOPIC, count=sum(len(v) for v in want.values()),
                             **{"isolation.level": "read_committed"})
    seen = {p: [(r.key, r.value, r.headers, r.timestamp) for r in wire if r.partition == p]
            for p in range(PARTS)}
    assert seen == want, f"read_committed: {differences(seen, want)} {why}"
    with engine.Engine.open(dest.data_dir, read_only=True) as d:
        every = sum(len(d.read(TOPIC, p, 0, 1_000_000)) for p in range(PARTS))
    # what the kills left open was aborted by the next copy (written, never read committed)
    assert every - sum(len(v) for v in want.values()) >= left_total > 0, why


def held_in(data_dir: str) -> dict[int, list[tuple]]:
    with engine.Engine.open(data_dir, read_only=True) as d:
        return content(d, TOPIC)



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
