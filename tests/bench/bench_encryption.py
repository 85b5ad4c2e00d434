#!/usr/bin/env python3
"""Encryption at rest against plain topics, in one process (goals: encrypted durable produce
>= 0.85x unencrypted; encrypted read_arrow >= 0.7x unencrypted and >= 1 GB/s).

Records: N x (10-byte key ``k%09d``, 100-byte hex value), as ``bench_engine.py`` builds them,
one partition, in calls of 1000. Each encrypted variant is a topic with
``encryption.enable=true`` under master key ``k1`` of a keyring file made for the run (mode
0600); ``--cipher``/``--ciphers`` pick aes-256-gcm (the default) and/or chacha20-poly1305.

  produce  ``produce_batch`` of ``--records`` records per run, default durable settings
           (wal.sync always: an fdatasync per call), a fresh data dir under ``--dir`` per run
           and variant; the variants take turns (the first in a run rotates), ``--runs``
           runs. Reports records/s and encrypted / plain of each run (the plain run of the
           same round), and the median ratio.
  read     ``--read-records`` records loaded once (sync off) into a plain topic and one topic
           per cipher of one data dir, read whole by ``read_arrow(topic, 0, offset, 100_000)``
           to the end, once untimed (page cache warm, keys unwrapped), then ``--runs`` rounds
           taking turns. Reports records/s, GB/s of keys+values, GB/s of the batches as
           stored, and encrypted / plain per round, with the median ratio.
  seal     ``TopicKeys.seal_batch`` and ``open_batch`` of one 1000-record batch (and the bare
           AEAD encrypt/decrypt of its body) in isolation: microseconds and GB/s of body,
           beside the plain produce call and the plain read of one batch they add to.

Usage:
  python tests/bench/bench_encryption.py [--records 200000] [--read-records 1000000]
      [--runs 5] [--dir /tmp] [--cipher aes-256-gcm] [--ciphers aes-256-gcm,chacha20-poly1305]
      [--only produce|read] [--json]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

CALL = 1000
ARROW_CHUNK = 100_000
KEY_ID = "k1"
AES = "aes-256-gcm"
CHACHA = "chacha20-poly1305"
CIPHERS = (AES, CHACHA)
TOPIC = {"plain": "plain", AES: "aes", CHACHA: "chacha"}
GOAL_PRODUCE = 0.85  # encrypted / plain durable produce_batch
GOAL_READ = 0.7  # encrypted / plain read_arrow
GOAL_READ_GBPS = 1.0  # encrypted read_arrow, keys+values
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from engine import Engine  # noqa: E402


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def make_calls(n: int, start: int = 0) -> tuple[list[list[bytes]], list[list[bytes]]]:
    """Key and value columns of ``n`` records (a multiple of CALL), CALL records per call."""
    blob = os.urandom(n * 50).hex().encode()
    kcols, vcols = [], []
    for s in range(0, n, CALL):
        kcols.append([b"k%09d" % i for i in range(start + s, start + s + CALL)])
        vcols.append([blob[i * 100:(i + 1) * 100] for i in range(s, s + CALL)])
    return kcols, vcols


def make_keyring(base: str) -> tuple[str, str]:
    """A keyring file holding one random master key ``k1`` (mode 0600), and its dir."""
    kdir = tempfile.mkdtemp(prefix="rivven-bench-enc-keys-", dir=base)
    path = os.path.join(kdir, "keyring.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, json.dumps({KEY_ID: base64.b64encode(os.urandom(32)).decode()}).encode())
    finally:
        os.close(fd)
    return path, kdir


def topic_config(variant: str) -> dict[str, str]:
    if variant == "plain":
        return {}
    cfg = {"encryption.enable": "true", "encryption.key.id": KEY_ID}
    if variant != AES:  # (aes-256-gcm is the default cipher: left unset)
        cfg["encryption.cipher"] = variant
    return cfg


def segment_bytes(d: str, topic: str) -> bytes:
    pdir = os.path.join(d, "topics", topic, "partition-0")
    out = b""
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log"):
            with open(os.path.join(pdir, name), "rb") as f:
                out += f.read()
    return out


def rotated(variants: list[str], r: int) -> list[str]:
    k = r % len(variants)
    return variants[k:] + variants[:k]


def med(xs: list[float]) -> float:
    return statistics.median(xs)


# ------------------------------------------------------------------ produce
def produce_run(base: str, keyring: str, variant: str, kcols: list[list[bytes]],
                vcols: list[list[bytes]], check: bool) -> float:
    """records/s of durable produce_batch into a new topic of a fresh data dir."""
    n = CALL * len(vcols)
    d = tempfile.mkdtemp(prefix=f"rivven-bench-enc-{TOPIC[variant]}-", dir=base)
    topic = "bench"
    try:
        with Engine.open(d, keyring=keyring) as eng:
            eng.create_topic(topic, 1, topic_config(variant))
            # warm-up (untimed): first segment, WAL stream, data key unwrapped, session derived
            eng.produce_batch(topic, vcols[0], keys=kcols[0], partition=0)
            gc.collect()
            t = time.perf_counter()
            for k, v in zip(kcols, vcols):
                eng.produce_batch(topic, v, keys=k, partition=0)
            el = time.perf_counter() - t
            end = eng.end_offsets(topic)[0]
        assert end == n + CALL, (end, n + CALL)
        if check:  # once per variant, untimed: the plaintext is on disk exactly when plain
            stored = segment_bytes(d, topic)
            found = vcols[-1][-1] in stored
            assert found == (variant == "plain"), f"{variant}: plaintext on disk = {found}"
        return n / el
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bench_produce(base: str, keyring: str, ciphers: list[str], records: int, runs: int
                  ) -> dict[str, Any]:
    kcols, vcols = make_calls(records)
    variants = ["plain", *ciphers]
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(runs):
        for v in rotated(variants, r):
            rates[v].append(produce_run(base, keyring, v, kcols, vcols, check=r == 0))
        log(f"  produce run {r + 1}/{runs}: " + "  ".join(
            f"{v} {rates[v][-1] / 1e6:.3f}M/s" for v in variants))
    ratios = {c: [e / p for e, p in zip(rates[c], rates["plain"])] for c in ciphers}
    return {
        "records": records, "runs": runs,
        "records_per_s": {v: [round(x) for x in rates[v]] for v in variants},
        "median_records_per_s": {v: round(med(rates[v])) for v in variants},
        "call_us": {v: round(1e6 * CALL / med(rates[v]), 1) for v in variants},
        "ratios": {c: [round(x, 3) for x in ratios[c]] for c in ciphers},
        "median_ratio": {c: round(med(ratios[c]), 3) for c in ciphers},
        "goal": GOAL_PRODUCE,
        "met": {c: med(ratios[c]) >= GOAL_PRODUCE for c in ciphers},
    }


# ------------------------------------------------------------------ read_arrow
def load_read(d: str, keyring: str, variants: list[str], records: int) -> tuple[int, bytes, bytes]:
    """``records`` records into one topic per variant (sync off); (key+value bytes, last key,
    last value)."""
    payload = 0
    with Engine.open(d, sync=False, keyring=keyring) as eng:
        for v in variants:
            eng.create_topic(TOPIC[v], 1, topic_config(v))
        step = 100 * CALL  # records generated at a time (memory stays small)
        for s in range(0, records, step):
            kcols, vcols = make_calls(min(step, records - s), s)
            for k, vals in zip(kcols, vcols):
                payload += sum(map(len, k)) + sum(map(len, vals))
                for v in variants:
                    eng.produce_batch(TOPIC[v], vals, keys=k, partition=0)
        for v in variants:
            assert eng.end_offsets(TOPIC[v])[0] == records
    return payload, kcols[-1][-1], vcols[-1][-1]


def read_whole(eng: Any, topic: str, n: int) -> tuple[float, Any]:
    """Seconds to read partition 0 with read_arrow in calls of ARROW_CHUNK; the last table."""
    gc.collect()
    t = time.perf_counter()
    off = 0
    tbl = None
    while off < n:
        tbl = eng.read_arrow(topic, 0, off, ARROW_CHUNK)
        if not tbl.num_rows:
            break
        off += tbl.num_rows
    el = time.perf_counter() - t
    assert off == n, (topic, off, n)
    return el, tbl


def bench_read(base: str, keyring: str, ciphers: list[str], records: int, runs: int
               ) -> dict[str, Any]:
    variants = ["plain", *ciphers]
    d = tempfile.mkdtemp(prefix="rivven-bench-enc-read-", dir=base)
    try:
        t = time.perf_counter()
        payload, last_key, last_val = load_read(d, keyring, variants, records)
        log(f"  loaded {records:,} records x {len(variants)} topics in "
            f"{time.perf_counter() - t:.1f} s")
        for v in variants:
            found = last_val in segment_bytes(d, TOPIC[v])
            assert found == (v == "plain"), f"{v}: plaintext on disk = {found}"
        secs: dict[str, list[float]] = {v: [] for v in variants}
        with Engine.open(d, read_only=True, keyring=keyring) as eng:
            stored = {v: eng.describe_topic(TOPIC[v])["partition_info"][0]["bytes"]
                      for v in variants}
            for v in variants:  # warm-up: page cache, pyarrow imported, data keys unwrapped
                _, tbl = read_whole(eng, TOPIC[v], records)
                last = tbl.slice(tbl.num_rows - 1)
                assert last.column("key")[0].as_py() == last_key, v
                assert last.column("value")[0].as_py() == last_val, v
                del tbl, last
            for r in range(runs):
                for v in rotated(variants, r):
                    secs[v].append(read_whole(eng, TOPIC[v], records)[0])
                log(f"  read round {r + 1}/{runs}: " + "  ".join(
                    f"{v} {records / secs[v][-1] / 1e6:.2f}M/s "
                    f"{payload / secs[v][-1] / 1e9:.2f}GB/s" for v in variants))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    ratios = {c: [p / e for e, p in zip(secs[c], secs["plain"])] for c in ciphers}
    m = {v: med(secs[v]) for v in variants}
    return {
        "records": records, "runs": runs, "payload_bytes": payload, "stored_bytes": stored,
        "records_per_s": {v: [round(records / s) for s in secs[v]] for v in variants},
        "payload_gb_per_s": {v: [round(payload / s / 1e9, 3) for s in secs[v]] for v in variants},
        "stored_gb_per_s": {v: [round(stored[v] / s / 1e9, 3) for s in secs[v]]
                            for v in variants},
        "median_records_per_s": {v: round(records / m[v]) for v in variants},
        "median_payload_gb_per_s": {v: round(payload / m[v] / 1e9, 3) for v in variants},
        "median_stored_gb_per_s": {v: round(stored[v] / m[v] / 1e9, 3) for v in variants},
        "batch_us": {v: round(1e6 * m[v] * CALL / records, 1) for v in variants},
        "ratios": {c: [round(x, 3) for x in ratios[c]] for c in ciphers},
        "median_ratio": {c: round(med(ratios[c]), 3) for c in ciphers},
        "goal": GOAL_READ, "goal_gb_per_s": GOAL_READ_GBPS,
        "met": {c: med(ratios[c]) >= GOAL_READ and payload / m[c] / 1e9 >= GOAL_READ_GBPS
                for c in ciphers},
    }


# ------------------------------------------------------------------ seal / open
def per_call(fn: Any, reps: int, rounds: int = 7) -> float:
    """Median over ``rounds`` of the seconds one call of ``fn`` takes (``reps`` calls each)."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append((time.perf_counter() - t) / reps)
    return med(times)


def bench_seal(base: str, keyring: str, ciphers: list[str], reps: int) -> dict[str, Any]:
    from engine.crypto.ciphers import aead
    from engine.format.encode import encode_batch
    from engine.format.records import HEADER_SIZE, read_header

    kcols, vcols = make_calls(CALL)
    plain = encode_batch(kcols[0], vcols[0], int(time.time() * 1000)).assign(0)
    body_len = read_header(plain, 0).stored_length
    body = bytes(memoryview(plain)[HEADER_SIZE:HEADER_SIZE + body_len])
    out: dict[str, Any] = {"batch_bytes": len(plain), "body_bytes": body_len}
    d = tempfile.mkdtemp(prefix="rivven-bench-enc-seal-", dir=base)
    try:
        with Engine.open(d, keyring=keyring) as eng:
            for c in ciphers:
                eng.create_topic(TOPIC[c], 1, topic_config(c))
                tk = eng.keys.topic_keys(TOPIC[c])
                sealed = tk.seal_batch(plain, 0)
                h = read_header(sealed, 0)
                assert bytes(tk.open_batch(sealed, 0, h)) == body
                a = aead(c, os.urandom(32))
                nonce, ad = os.urandom(12), os.urandom(100)
                ct = a.encrypt(nonce, body, ad)
                res = {
                    "seal_batch": per_call(lambda tk=tk: tk.seal_batch(plain, 0), reps),
                    "open_batch": per_call(lambda tk=tk, s=sealed, h=h: tk.open_batch(s, 0, h),
                                           reps),
                    "aead_encrypt": per_call(lambda a=a, n=nonce, ad=ad: a.encrypt(n, body, ad),
                                             reps),
                    "aead_decrypt": per_call(lambda a=a, n=nonce, ad=ad, ct=ct: a.decrypt(n, ct, ad),
                                             reps),
                }
                out[c] = {k: {"us": round(s * 1e6, 1), "gb_per_s": round(body_len / s / 1e9, 2)}
                          for k, s in res.items()}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out


# ------------------------------------------------------------------ report
def report(out: dict[str, Any], ciphers: list[str]) -> list[str]:
    lines: list[str] = []
    variants = ["plain", *ciphers]
    p = out.get("produce")
    if p:
        lines.append(f"produce_batch, wal.sync=always, {p['records']:,} records/run, "
                     f"{CALL}/call (records/s; ratio = encrypted / plain of the same run)")
        head = f"{'run':>6} " + " ".join(f"{v:>18}" for v in variants) + " " + " ".join(
            f"{'ratio ' + TOPIC[c]:>13}" for c in ciphers)
        lines.append(head)
        for r in range(p["runs"]):
            lines.append(f"{r + 1:>6} " + " ".join(
                f"{p['records_per_s'][v][r]:>18,}" for v in variants) + " " + " ".join(
                f"{p['ratios'][c][r]:>13.3f}" for c in ciphers))
        lines.append(f"{'median':>6} " + " ".join(
            f"{p['median_records_per_s'][v]:>18,}" for v in variants) + " " + " ".join(
            f"{p['median_ratio'][c]:>13.3f}" for c in ciphers))
        lines.append(f"{'us/call':>6} " + " ".join(f"{p['call_us'][v]:>18,.1f}" for v in variants))
        for c in ciphers:
            lines.append(f"  goal {c} produce >= {GOAL_PRODUCE}x plain: median "
                         f"{p['median_ratio'][c]:.3f} -> {'MET' if p['met'][c] else 'MISSED'}")
        lines.append("")
    rd = out.get("read")
    if rd:
        lines.append(f"read_arrow(topic, 0, offset, {ARROW_CHUNK:,}) of {rd['records']:,} records "
                     f"(page cache warm): records/s | GB/s keys+values | GB/s stored batches")
        lines.append("  stored bytes: " + ", ".join(f"{v} {rd['stored_bytes'][v]:,}"
                                                    for v in variants)
                     + f"; keys+values {rd['payload_bytes']:,}")
        lines.append(f"{'round':>6} " + " ".join(f"{v:>30}" for v in variants) + " " + " ".join(
            f"{'ratio ' + TOPIC[c]:>13}" for c in ciphers))

        def cell(v: str, r: int | None) -> str:
            if r is None:
                a, b, c_ = (rd["median_records_per_s"][v], rd["median_payload_gb_per_s"][v],
                            rd["median_stored_gb_per_s"][v])
            else:
                a, b, c_ = (rd["records_per_s"][v][r], rd["payload_gb_per_s"][v][r],
                            rd["stored_gb_per_s"][v][r])
            return f"{a:>12,} {b:>7.3f} {c_:>7.3f}"

        for r in range(rd["runs"]):
            lines.append(f"{r + 1:>6}   " + " ".join(cell(v, r) for v in variants) + " " + " ".join(
                f"{rd['ratios'][c][r]:>13.3f}" for c in ciphers))
        lines.append(f"{'median':>6}   " + " ".join(cell(v, None) for v in variants) + " "
                     + " ".join(f"{rd['median_ratio'][c]:>13.3f}" for c in ciphers))
        lines.append(f"{'us/batch':>8} " + " ".join(f"{rd['batch_us'][v]:>30,.1f}" for v in variants))
        for c in ciphers:
            gbps = rd["median_payload_gb_per_s"][c]
            lines.append(f"  goal {c} read_arrow >= {GOAL_READ}x plain and >= {GOAL_READ_GBPS} GB/s: "
                         f"median ratio {rd['median_ratio'][c]:.3f}, {gbps:.3f} GB/s -> "
                         f"{'MET' if rd['met'][c] else 'MISSED'}")
        lines.append("")
    s = out.get("seal")
    if s:
        lines.append(f"one batch of {CALL} records in isolation ({s['batch_bytes']:,} bytes, body "
                     f"{s['body_bytes']:,}): us | GB/s of body")
        for c in ciphers:
            lines.append(f"  {c:<18} " + "  ".join(
                f"{k} {v['us']:,.1f} us {v['gb_per_s']:.2f} GB/s" for k, v in s[c].items()))
            if p:  # what sealing adds to a plain produce call
                plain_us = p["call_us"]["plain"]
                lines.append(f"  {'':<18} produce: plain call {plain_us:,.1f} us + seal "
                             f"{s[c]['seal_batch']['us']:,.1f} us -> expected ratio "
                             f"{plain_us / (plain_us + s[c]['seal_batch']['us']):.3f}")
            if rd:  # what opening adds to a plain read of one batch
                plain_us = rd["batch_us"]["plain"]
                lines.append(f"  {'':<18} read: plain batch {plain_us:,.1f} us + open "
                             f"{s[c]['open_batch']['us']:,.1f} us -> expected ratio "
                             f"{plain_us / (plain_us + s[c]['open_batch']['us']):.3f}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per produce run")
    ap.add_argument("--read-records", type=int, default=1_000_000, help="records read per run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the data dirs go")
    ap.add_argument("--cipher", action="append", choices=CIPHERS, default=[],
                    help="a cipher to measure (repeatable; default aes-256-gcm)")
    ap.add_argument("--ciphers", default="", help="comma-separated ciphers to measure")
    ap.add_argument("--only", choices=["produce", "read"], default=None)
    ap.add_argument("--seal-reps", type=int, default=200, help="calls per timing of seal/open")
    ap.add_argument("--json", action="store_true", help="JSON on stdout, the table on stderr")
    a = ap.parse_args()
    ciphers = list(a.cipher)
    for c in filter(None, (x.strip() for x in a.ciphers.split(","))):
        if c not in CIPHERS:
            ap.error(f"unknown cipher {c!r}: use {', '.join(CIPHERS)}")
        ciphers.append(c)
    ciphers = [c for c in CIPHERS if c in ciphers] or [AES]
    for name, n in (("--records", a.records), ("--read-records", a.read_records)):
        if n < CALL or n % CALL:
            ap.error(f"{name} must be a positive multiple of {CALL}")
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    os.makedirs(a.dir, exist_ok=True)
    keyring, kdir = make_keyring(a.dir)
    out: dict[str, Any] = {"ciphers": ciphers, "runs": a.runs}
    try:
        if a.only in (None, "produce"):
            log(f"produce: {a.records:,} records x {a.runs} runs, plain and {', '.join(ciphers)}")
            out["produce"] = bench_produce(a.dir, keyring, ciphers, a.records, a.runs)
        if a.only in (None, "read"):
            log(f"read_arrow: {a.read_records:,} records x {a.runs} rounds, plain and "
                f"{', '.join(ciphers)}")
            out["read"] = bench_read(a.dir, keyring, ciphers, a.read_records, a.runs)
        log("seal/open of one batch")
        out["seal"] = bench_seal(a.dir, keyring, ciphers, a.seal_reps)
    finally:
        shutil.rmtree(kdir, ignore_errors=True)
    text = "\n".join(report(out, ciphers))
    if a.json:
        log("")
        log(text)
        print(json.dumps(out, indent=1))
    else:
        print(text)


if __name__ == "__main__":
    main()
