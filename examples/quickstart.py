"""The main job, end to end: create a topic, produce 100k realistic order events, consume them,
and check every stored batch against what was sent; then compact a copy on Spark, tier one to
the cold store on Spark, and keep one encrypted at rest (a keyring made for the run).

    python examples/quickstart.py [--data-dir ./rivven-data] [--events 100000]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from engine import Engine

ENCRYPTED = "orders-encrypted"
TIERED = "events-tiered"
LATEST = "customers-latest"
TOPIC = "orders"


def rivven(data_dir: str, *args: str, stdin: bytes | None = None) -> str:
    cmd = [sys.executable, "-m", "rivven_cli", "--data-dir", data_dir, *args]
    print("$ rivven " + " ".join(args), flush=True)
    out = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
    sys.stderr.write(out.stderr.decode())
    if out.returncode != 0:
        sys.exit(f"step failed: rivven {' '.join(args)}")
    return out.stdout.decode()


def events(n: int, seed: int = 42) -> list[dict]:
    rng = random.Random(seed)
    skus = [f"SKU-{i:05d}" for i in range(2000)]
    t0 = int(time.time() * 1000) - n * 10
    out = []
    for i in range(n):
        customer = f"customer-{rng.randrange(5000):05d}"
        items = [{"sku": rng.choice(skus), "qty": rng.randint(1, 5),
                  "price": round(rng.uniform(1, 250), 2)} for _ in range(rng.randint(1, 3))]
        out.append({
            "key": customer,
            "value": json.dumps({"order_id": f"o-{i:08d}", "customer": customer,
                                 "status": rng.choice(["created", "paid", "shipped"]),
                                 "items": items, "currency": "EUR"}),
            "headers": {"source": rng.choice(["web", "ios", "android"])},
            "timestamp": t0 + i * 10,
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="./rivven-data")
    ap.add_argument("--events", type=int, default=100_000)
    a = ap.parse_args()
    data = a.data_dir

    with Engine.open(data) as eng:
        if TOPIC in {t.name for t in eng.topics()}:
            eng.delete_topic(TOPIC)  # the demo starts from scratch every run
    rivven(data, "topic", "create", TOPIC, "-p", "3", "-c", "compression.type=zstd",
           "-c", "segment.bytes=4194304")
    evs = events(a.events)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(e) + "\n" for e in evs))
    try:
        rivven(data, "produce", TOPIC, "--input", "json", "--file", f.name)
    finally:
        os.unlink(f.name)
    print(rivven(data, "topic", "describe", TOPIC))
    print(rivven(data, "consume", TOPIC, "-p", "0", "-n", "3", "-f", "%p:%o %k %h %v\\n"))
    lines = rivven(data, "consume", TOPIC, "--json").splitlines()
    print(f"consumed {len(lines)} records")
    print(rivven(data, "offsets", TOPIC))
    print(rivven(data, "segment", "verify", TOPIC))  # exits non-zero on any damage

    # verify: every batch is read back (CRC32C checked) and equals what was produced, per key
    sent: dict[str, list[str]] = {}
    for e in evs:
        sent.setdefault(e["key"], []).append(e["value"])
    got: dict[str, list[str]] = {}
    with Engine.open(data, read_only=True) as ro:
        for p, end in ro.end_offsets(TOPIC).items():
            table = ro.read_arrow(TOPIC, p, 0)
            assert table.num_rows == end, (p, table.num_rows, end)
            for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()):
                got.setdefault(k.decode(), []).append(v.decode())
    assert len(lines) == a.events, f"consumed {len(lines)} of {a.events}"
    assert got == sent, "stored records differ from the produced events"
    print(f"verified: {a.events} events in {len(got)} keys, per-key order preserved, all CRCs ok")

    # the maintenance job: the same events in a compacted topic, cleaned by Spark (local[*])
    with Engine.open(data) as eng:
        if LATEST in {t.name for t in eng.topics()}:
            eng.delete_topic(LATEST)
        eng.create_topic(LATEST, 3, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
        eng.produce_batch(LATEST, [e["value"].encode() for e in evs],
                          keys=[e["key"].encode() for e in evs])
        before = sum(eng.end_offsets(LATEST).values())
    print(rivven(data, "compaction", "explain", LATEST))
    print(rivven(data, "spark", "compact", LATEST))  # spark-submit --master local[*]
    print(rivven(data, "segment", "verify", LATEST))
    last: dict[str, str] = {}
    with Engine.open(data, read_only=True) as ro:
        for p in range(3):
            for r in ro.read(LATEST, p, ro.start_offsets(LATEST)[p], 10**9):
                last[r.key.decode()] = r.value.decode()
        kept = sum(len(ro.read(LATEST, p, ro.start_offsets(LATEST)[p], 10**9)) for p in range(3))
    assert last == {k: v[-1] for k, v in sent.items()}, "compaction lost a key's last value"
    assert kept < before, "compaction removed nothing"
    print(f"verified: compaction kept {kept} of {before} records; every key's last value is there")

    # tiered storage: old segments move to the cold store (file://<data dir>/cold) on Spark
    with Engine.open(data) as eng:
        if TIERED in {t.name for t in eng.topics()}:
            eng.delete_topic(TIERED)
        eng.create_topic(TIERED, 2, {"remote.storage.enable": "true", "segment.bytes": "262144",
                                     "local.retention.bytes": "524288"})
        eng.produce_batch(TIERED, [e["value"].encode() for e in evs],
                          keys=[e["key"].encode() for e in evs])
    print(rivven(data, "spark", "tier", TIERED))  # spark-submit --master local[*]
    print(rivven(data, "tier", "status", TIERED))
    print(rivven(data, "segment", "verify", "--cold", TIERED))
    back: dict[str, list[str]] = {}
    with Engine.open(data, read_only=True) as ro:  # cold segments come back through the cache
        status = ro.maintenance.tier_status(TIERED)
        for p in range(2):
            table = ro.read_arrow(TIERED, p, 0)
            for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()):
                back.setdefault(k.decode(), []).append(v.decode())
    cold = sum(s["cold_bytes"] for s in status)
    assert cold > 0, "nothing was tiered"
    assert back == sent, "tiered records differ from the produced events"
    print(f"verified: {cold:,} bytes in the cold store; all {a.events} events read back across "
          "tiers, per-key order preserved")

    # encryption at rest: master keys in a keyring outside the data dir, data keys wrapped
    keydir = tempfile.mkdtemp(prefix="rivven-demo-keys-")
    keyring = os.path.join(keydir, "keyring.json")
    with open(keyring, "w", opener=lambda p, f: os.open(p, f, 0o600)) as f:
        json.dump({"demo-1": base64.b64encode(os.urandom(32)).decode(),
                   "demo-2": base64.b64encode(os.urandom(32)).decode()}, f)
    try:
        encrypted(data, keyring, evs, sent)
    finally:
        shutil.rmtree(keydir)


def encrypted(data: str, keyring: str, evs: list[dict], sent: dict[str, list[str]]) -> None:
    with Engine.open(data) as eng:
        if ENCRYPTED in {t.name for t in eng.topics()}:
            eng.delete_topic(ENCRYPTED)  # (its keys go with it: no keyring needed)
    rivven(data, "--keyring", keyring, "topic", "create", ENCRYPTED, "-p", "2",
           "-c", "encryption.enable=true", "-c", "encryption.key.id=demo-1")
    with Engine.open(data, keyring=keyring) as eng:
        eng.produce_batch(ENCRYPTED, [e["value"].encode() for e in evs],
                          keys=[e["key"].encode() for e in evs])
        eng.keys.rotate(ENCRYPTED)  # a new data key for what comes next
        eng.produce_batch(ENCRYPTED, [e["value"].encode() for e in evs[:1000]],
                          keys=[e["key"].encode() for e in evs[:1000]])
    print(rivven(data, "key", "status", ENCRYPTED))
    print(rivven(data, "--keyring", keyring, "key", "rewrap", "--to", "demo-2"))
    print(rivven(data, "--keyring", keyring, "key", "reencrypt", ENCRYPTED))
    print(rivven(data, "--keyring", keyring, "segment", "verify", "--decrypt", ENCRYPTED))
    needle = json.loads(evs[0]["value"])["order_id"].encode()
    for d, _, names in os.walk(os.path.join(data, "topics", ENCRYPTED)):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                assert needle not in f.read(), f"plaintext in {os.path.join(d, n)}"
    back: dict[str, list[str]] = {}
    with Engine.open(data, read_only=True, keyring=keyring) as ro:
        for p in range(2):
            table = ro.read_arrow(ENCRYPTED, p, 0)
            for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()):
                back.setdefault(k.decode(), []).append(v.decode())
        st = ro.keys.status(ENCRYPTED)[0]
    assert st["plaintext"]["bytes"] == 0 and [k["version"] for k in st["keys"]] == [2]
    again = {k: list(v) for k, v in sent.items()}
    for e in evs[:1000]:
        again[e["key"]].append(e["value"])
    assert back == again, "encrypted records differ from the produced events"
    print(f"verified: {len(evs) + 1000} events encrypted at rest (no plaintext in the topic's "
          "files), rotated, rewrapped and re-encrypted, all read back")


if __name__ == "__main__":
    main()
