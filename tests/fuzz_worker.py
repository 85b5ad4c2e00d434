"""Fuzzing every reader of a data dir's files, run by tests/unit/engine/test_fuzz.py in a subprocess
under a memory limit (RLIMIT_AS).

A data dir is built once (a tiered topic, a compacted topic, a compacted transactional topic
whose cleaned segments keep ABORT markers and their ``.txnindex``, a consumer group, a dead
writer's WAL stream), kept pristine, and for each case copied back into place (cold-store URIs in the
tier manifests are absolute), one of its files damaged by hypothesis — bit flips, extreme
values written over header fields, truncation, junk appended, JSON values replaced — with the
checksums optionally fixed afterwards, as an attacker would. Then every reader runs over it,
read-only and writable (crash recovery), and ``verify``. A ``RivvenError`` of any kind is a
pass (the damage was named); any other exception, a hang past ``CASE_SECONDS`` or an
allocation past the memory limit is a failure, which hypothesis shrinks and prints.

    python tests/fuzz_worker.py --cases 2000 --limit-mb 1024 [--seed N] [--kinds log_sealed,wal]
        [--per-kind] [--cli-every 10]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hseed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine import Engine, Record  # noqa: E402
from engine.errors import RivvenError  # noqa: E402
from engine.format.crc import crc32c  # noqa: E402

CASE_SECONDS = 30
HEADER = 72
# batch header fields: (offset, struct format) — see engine/format/records.py
FIELDS = [(0, "<q"), (8, "<i"), (12, "<B"), (20, "<H"), (24, "<i"), (28, "<i"), (32, "<q"),
          (40, "<q"), (48, "<q"), (56, "<h"), (60, "<i"), (64, "<i"), (68, "<i")]
EXTREMES = [0, 1, -1, 2, 5, 7, 255, 0x7F, 0x80, 0x7FFF, 0xFFFF, 0x7FFFFFFF, -0x80000000,
            0xFFFFFFFF, 10**15, (1 << 63) - 1, -(1 << 63), 1 << 40]
JSON_LITERALS = ["Infinity", "-Infinity", "NaN", "-1", "1e400", "99999999999999999999999999",
                 '"x"', '"00112233445566778899aabbccddeeff"', "[]", "{}", "null", "true",
                 "1.5", "0", '"../../../victim"', '"file:///tmp/rivven-fuzz-victim/a/b"',
                 "[" * 3000 + "]" * 3000, '"' + "é" * 300 + '"', "9000", "-9000"]
TIERED = {"remote.storage.enable": "true", "local.retention.bytes": "3000",
          "segment.bytes": "1500", "compression.type": "lz4", "index.interval.bytes": "100"}

DEAD_WRITER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from engine import Engine, Record
eng = Engine.open(sys.argv[2], settings={"checkpoint.interval.bytes": str(1 << 30),
                                         "checkpoint.interval.ms": str(1 << 30)})
for i in range(6):
    eng.produce("t", [Record(key=b"w%d" % j, value=b"dead-%d-%d" % (i, j)) for j in range(5)])
    eng.produce("c", [Record(key=b"k%d" % (j % 3), value=None if j == 4 else b"x")
                      for j in range(5)])
os.kill(os.getpid(), signal.SIGKILL)
"""


class Hang(BaseException):
    """Raised by the alarm: a case ran longer than CASE_SECONDS."""


def _alarm(signum: int, frame: object) -> None:
    raise Hang("a case ran longer than its time limit")


def inject(kind: str) -> None:
    """Plant a bug of ``kind`` in Engine.verify (the fuzz test's own test)."""
    import time

    def planted(self: Engine, *args: object, **kw: object) -> None:
        if kind == "error":
            raise KeyError("planted")
        if kind == "memory":
            bytearray(4 << 30)
        time.sleep(3600)

    Engine.verify = planted  # type: ignore[method-assign]


# ---------------------------------------------------------------- the pristine data dir
def build(path: str) -> dict[str, str]:
    """Make the data dir at ``path``; returns kind -> path (relative) of the file to damage."""
    with Engine.open(path) as eng:
        eng.create_topic("t", 1, TIERED)
        eng.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1200",
                                  "compression.type": "zstd", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(40):
            eng.produce("t", [Record(key=None if j == 3 else b"k%d" % (j % 5),
                                     value=None if j == 7 else b"v%d-%d" % (i, j) * 3,
                                     headers=[("h", b"x"), ("n", None)] if j % 2 else ())
                              for j in range(10)])
        eng.maintenance.tier(now=None)
        for i in range(6):
            eng.produce("t", [Record(key=b"k%d" % j, value=b"late%d" % i) for j in range(10)])
        for i in range(30):
            eng.produce("c", [Record(key=b"k%d" % (j % 4), value=None if (i + j) % 9 == 0
                                     else b"c%d" % i) for j in range(8)])
        eng.maintenance.compact("c", force=True)
        eng.create_topic("x", 1, {"cleanup.policy": "compact", "segment.bytes": "600"})
        txn = eng.producer(transactional_id="fuzz")
        for i in range(12):  # every third aborted: the pass keeps their markers and entries
            txn.begin()
            txn.produce("x", [Record(key=b"k%d" % (i % 4), value=b"x%d" % i * 8)], partition=0)
            if i % 3 == 2:
                txn.abort()
            else:
                txn.commit()
        txn.close()
        for i in range(8):
            eng.produce("x", [Record(key=b"z%d" % i, value=b"." * 60)], partition=0)
        eng.checkpoint()
        eng.maintenance.compact("x", force=True)
        c = eng.consumer("g", ["t", "c"])
        for _ in range(3):
            c.poll(50)
            c.commit()
        c.close()
    subprocess.run([sys.executable, "-c", DEAD_WRITER, ROOT, path], check=False, timeout=120)
    pdir = os.path.join("topics", "t", "partition-0")
    logs = sorted(f for f in os.listdir(os.path.join(path, pdir)) if f.endswith(".log"))
    xdir = os.path.join("topics", "x", "partition-0")
    txnindex = sorted(f for f in os.listdir(os.path.join(path, xdir)) if f.endswith(".txnindex"))
    cdir = os.path.join("topics", "c", "partition-0")
    clogs = sorted(f for f in os.listdir(os.path.join(path, cdir))
                   if f.endswith(".log") and os.path.getsize(os.path.join(path, cdir, f)))
    wal = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(path, "wal"))
           for f in fs if f.endswith(".wal")]
    stats = sorted(f for f in os.listdir(os.path.join(path, ".stats")) if f.startswith("m-"))
    values = [f for f in stats if f.endswith(".values")]  # (the dead writer's, not merged yet)
    manifest = json.load(open(os.path.join(path, pdir, "tier.json")))
    cold = manifest["segments"][1]["object"].removeprefix("file://") + ".log"
    sealed = logs[0][:-4]
    kinds = {
        "log_sealed": os.path.join(pdir, logs[0]),
        "log_active": os.path.join(pdir, logs[-1]),
        "log_compacted": os.path.join(cdir, clogs[0]),
        "index": os.path.join(pdir, sealed + ".index"),
        "timeindex": os.path.join(pdir, sealed + ".timeindex"),
        "wal": os.path.relpath(sorted(wal)[0], path),
        "offsets": os.path.join("groups", "g", "offsets.log"),
        "checkpoint": os.path.join(pdir, ".checkpoint"),
        "manifest": os.path.join(pdir, "tier.json"),
        "catalog": "topics.json",
        "marker": "rivven.json",
        "cold_log": os.path.relpath(cold, path),
        "txnindex": os.path.join(xdir, txnindex[0]),  # (of a cleaned segment)
        "stats_values": os.path.join(".stats", values[0]),
        "stats_keys": os.path.join(".stats", values[0][:-len(".values")] + ".keys"),
    }
    for k, rel in kinds.items():
        assert os.path.getsize(os.path.join(path, rel)) > 0, (k, rel)
    return kinds


# ---------------------------------------------------------------- damage
def batch_starts(data: bytes | bytearray, first: int = 0) -> list[int]:
    out, pos = [], first
    while pos + HEADER <= len(data):
        size = struct.unpack_from("<i", data, pos + 8)[0] + 12
        if size < HEADER or pos + size > len(data):
            break
        out.append(pos)
        pos += size
    return out


def fix_batch_crc(data: bytearray, pos: int, end: int) -> None:
    value = crc32c(bytes(data[0 + pos:16 + pos]), crc32c(bytes(data[pos + 20:end])))
    struct.pack_into("<I", data, pos + 16, value)


def fix_log(data: bytearray) -> None:
    for pos in batch_starts(data):
        fix_batch_crc(data, pos, pos + struct.unpack_from("<i", data, pos + 8)[0] + 12)


def fix_wal(data: bytearray) -> None:
    pos = 0
    while pos + 12 <= len(data):
        length = struct.unpack_from("<I", data, pos)[0]
        end = pos + 12 + length
        if length == 0 or end > len(data):
            return
        payload = pos + 12
        if length >= 30:
            nlen = struct.unpack_from("<H", data, payload + 28)[0]
            b = payload + 30 + nlen
            if b + HEADER <= end:
                size = struct.unpack_from("<i", data, b + 8)[0] + 12
                if HEADER <= size <= end - b:
                    fix_batch_crc(data, b, b + size)
        value = crc32c(bytes(data[payload:end]), crc32c(bytes(data[pos + 4:pos + 8])))
        struct.pack_into("<I", data, pos + 8, value)
        pos = end + (-(12 + length) & 7)


def fix_offsets(data: bytearray) -> None:
    pos = 0
    while pos + 8 <= len(data):
        length = struct.unpack_from("<I", data, pos)[0]
        end = pos + 8 + length
        if end > len(data):
            return
        struct.pack_into("<I", data, pos + 4, crc32c(bytes(data[pos + 8:end])))
        pos = end


def fix_txnindex(data: bytearray) -> None:
    for pos in range(0, len(data) - 39, 40):  # (engine/segments/txn_index.py's entries)
        struct.pack_into("<I", data, pos + 32, crc32c(bytes(data[pos:pos + 32])))


def fix_json(data: bytearray) -> bytearray:
    from engine.fs import jsondoc

    try:
        doc = json.loads(bytes(data))
    except (ValueError, RecursionError):
        return data
    if isinstance(doc, dict) and jsondoc.CRC_KEY in doc:
        try:
            return bytearray(jsondoc.seal(doc))
        except (ValueError, TypeError):
            return data
    return data


JSON_KINDS = {"checkpoint", "manifest", "catalog", "marker"}
LOG_KINDS = {"log_sealed", "log_active", "log_compacted", "cold_log"}
SCALAR = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*"|true|false|null')


def damage(path: str, kind: str, mutations: list[tuple], fix: bool) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    for m in mutations:
        op = m[0]
        n = len(data)
        if op == "flip" and n:
            data[m[1] % n] ^= 1 << m[2]
        elif op == "write" and n:
            pos = m[1] % n
            data[pos:pos + len(m[2])] = m[2]
        elif op == "field" and kind == "txnindex" and n >= 40:  # an entry's field
            pos = m[1] % (n // 40) * 40 + m[2] % 4 * 8
            struct.pack_into("<q", data, pos, max(-(1 << 63), min(m[3], (1 << 63) - 1)))
        elif op == "field" and kind in LOG_KINDS:
            starts = batch_starts(data)
            if starts:
                off, fmt = FIELDS[m[2] % len(FIELDS)]
                pos = starts[m[1] % len(starts)] + off
                bits = struct.calcsize(fmt) * 8
                lo = -(1 << (bits - 1)) if fmt[-1].islower() else 0
                value = m[3] % (1 << bits) + lo if not lo <= m[3] < lo + (1 << bits) else m[3]
                struct.pack_into(fmt, data, pos, value)
        elif op == "truncate":
            del data[m[1] % (n + 1):]
        elif op == "append":
            data += m[1]
        elif op == "json" and kind in JSON_KINDS:
            found = list(SCALAR.finditer(data))
            if found:
                hit = found[m[1] % len(found)]
                data[hit.start():hit.end()] = m[2].encode()
    if fix:
        if kind in LOG_KINDS:
            fix_log(data)
        elif kind == "wal":
            fix_wal(data)
        elif kind == "offsets":
            fix_offsets(data)
        elif kind == "txnindex":
            fix_txnindex(data)
        elif kind in JSON_KINDS:
            data = fix_json(data)
    with open(path, "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- every reader
def attempt(fn, *args, **kw):
    """Call a reader: a RivvenError is a named failure (fine), anything else propagates."""
    try:
        return fn(*args, **kw)
    except RivvenError:
        return None


def read_everything(eng: Engine) -> None:
    topics = attempt(eng.topics) or []
    for meta in topics:
        for p in range(meta.partitions):
            offsets = attempt(eng.partition_offsets, meta.name, p)
            if offsets is None:
                continue
            start, end = offsets
            pos = start
            for _ in range(40):  # bounded: a damaged log may claim a huge range
                recs = attempt(eng.read, meta.name, p, pos, 200)
                if not recs:
                    break
                pos = recs[-1].offset + 1
            attempt(eng.read_arrow, meta.name, p, start, 500)
            attempt(eng.read, meta.name, p, start, 500, isolation_level="read_committed")
            attempt(eng.read_columns, meta.name, p, max(start, end - 5), 50)
            attempt(eng.offset_for_time, meta.name, p, 0)
            attempt(eng.offset_for_time, meta.name, p, 1 << 60)
            attempt(eng.segment_list, meta.name, p)
        attempt(eng.describe_topic, meta.name)
        attempt(eng.list_offsets, meta.name)
    attempt(eng.verify)
    attempt(eng.verify_cold)
    attempt(eng.list_groups)
    attempt(eng.describe_group, "g")
    attempt(eng.committed_offsets, "g")
    attempt(eng.tier_status)
    attempt(eng.wal_streams)
    attempt(eng.metrics, [])


def write_a_little(eng: Engine) -> None:
    attempt(eng.produce, "t", [Record(key=b"after", value=b"damage")])
    attempt(eng.produce, "c", [Record(key=b"k1", value=b"after")])
    c = attempt(eng.consumer, "g", ["t", "c"])
    if c is not None:
        try:
            attempt(c.poll, 20)
            attempt(c.commit)
        finally:
            attempt(c.close)
    attempt(eng.checkpoint)


INPUT = os.path.join(ROOT, "README.md")  # (lines to produce)
CLI_COMMANDS = [
    ["topic", "list"], ["topic", "describe", "t"], ["segment", "list", "t"],
    ["segment", "verify"], ["segment", "verify", "--cold", "--json"], ["offsets", "t"],
    ["consume", "t", "-o", "beginning", "-n", "30"], ["consume", "c", "-g", "g", "-n", "5"],
    ["group", "list"], ["group", "describe", "g"], ["tier", "status"], ["wal", "list"],
    ["wal", "verify"], ["retention", "apply", "--dry-run"], ["segment", "recover", "--dry-run"],
    ["wal", "recover", "--dry-run"], ["produce", "t", "--file", INPUT], ["wal", "checkpoint"],
    ["metrics"],
]


def run_commands(path: str) -> None:
    """The ``rivven`` commands (in this process, through Typer's runner) over the damage:
    each exits 0, 1 or 3 with no internal error (rendering included)."""
    from typer.testing import CliRunner

    from rivven_cli.main import app

    runner = CliRunner()
    for args in CLI_COMMANDS:
        r = runner.invoke(app, ["--data-dir", path, *args])
        out = r.stdout + r.stderr
        if r.exit_code not in (0, 1, 3) or "internal error" in out or (
                r.exception is not None and not isinstance(r.exception, SystemExit)):
            raise AssertionError(f"rivven {' '.join(args)} exited {r.exit_code}: {out[-2000:]}"
                                 ) from r.exception


def exercise(path: str) -> None:
    eng = attempt(Engine.open, path, read_only=True)
    if eng is not None:
        try:
            read_everything(eng)
        finally:
            attempt(eng.close)
    eng = attempt(Engine.open, path)
    if eng is not None:
        try:
            read_everything(eng)
            write_a_little(eng)
        finally:
            attempt(eng.close)


# ---------------------------------------------------------------- hypothesis
positions = st.integers(0, 1 << 20)
values = st.sampled_from(EXTREMES) | st.integers(-(1 << 63), (1 << 63) - 1)
raw_bytes = st.sampled_from([b"\xff" * 8, b"\x00" * 8, struct.pack("<q", -1),
                             struct.pack("<i", 0x7FFFFFFF), struct.pack("<q", 10**15)]) | \
    st.binary(min_size=1, max_size=16)
mutation = st.one_of(
    st.tuples(st.just("flip"), positions, st.integers(0, 7)),
    st.tuples(st.just("write"), positions, raw_bytes),
    st.tuples(st.just("field"), positions, st.integers(0, 64), values),
    st.tuples(st.just("truncate"), positions),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=200)),
    st.tuples(st.just("json"), positions, st.sampled_from(JSON_LITERALS)),
)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--limit-mb", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kinds", default="")
    ap.add_argument("--case-seconds", type=int, default=CASE_SECONDS)
    ap.add_argument("--cli-every", type=int, default=0,
                    help="also run the rivven commands over every Nth case (0: never)")
    ap.add_argument("--per-kind", action="store_true",
                    help="split the cases evenly between the kinds (one campaign per kind)")
    ap.add_argument("--inject", choices=["error", "memory", "hang"],
                    help="plant a bug in verify, to show that each kind of failure is caught")
    args = ap.parse_args()
    if args.inject:
        inject(args.inject)
    resource.setrlimit(resource.RLIMIT_AS, (args.limit_mb << 20, args.limit_mb << 20))
    logging.getLogger("rivven").setLevel(logging.ERROR)  # (warnings about the damage: expected)
    signal.signal(signal.SIGALRM, _alarm)
    work = tempfile.mkdtemp(prefix="rivven-fuzz-")
    live = os.path.join(work, "data")
    pristine = os.path.join(work, "pristine")
    kinds = build(live)
    shutil.copytree(live, pristine, symlinks=True)
    chosen = [k for k in args.kinds.split(",") if k] or sorted(kinds)
    counts: dict[str, int] = {}

    def campaign(among: list[str], cases: int, seed: int | None) -> None:
        """``cases`` damaged copies of files of the kinds ``among``, each run over
        (derandomized unless ``seed``)."""

        @settings(max_examples=cases, deadline=None, database=None,
                  derandomize=args.seed is None, print_blob=True,
                  phases=[Phase.explicit, Phase.generate, Phase.shrink],
                  suppress_health_check=list(HealthCheck))
        @given(kind=st.sampled_from(among), mutations=st.lists(mutation, min_size=1, max_size=3),
               fix=st.booleans())
        def case(kind: str, mutations: list[tuple], fix: bool) -> None:
            shutil.rmtree(live)
            shutil.copytree(pristine, live, symlinks=True)
            damage(os.path.join(live, kinds[kind]), kind, mutations, fix)
            counts[kind] = counts.get(kind, 0) + 1
            signal.alarm(args.case_seconds)
            try:
                exercise(live)
                if args.cli_every and sum(counts.values()) % args.cli_every == 0:
                    shutil.rmtree(live)
                    shutil.copytree(pristine, live, symlinks=True)
                    damage(os.path.join(live, kinds[kind]), kind, mutations, fix)
                    run_commands(live)
            finally:
                signal.alarm(0)

        if seed is not None:
            case = hseed(seed)(case)
        case()

    try:
        if args.per_kind:  # (a short run: every kind its share, whatever the first draws are)
            for kind in chosen:  # (a fixed seed of its own: the same cases every run)
                campaign([kind], max(1, args.cases // len(chosen)),
                         (args.seed or 0) + zlib.crc32(kind.encode()))
        else:
            campaign(chosen, args.cases, args.seed)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED after {sum(counts.values())} cases: {counts}", flush=True)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"OK {sum(counts.values())} cases: {json.dumps(counts, sort_keys=True)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
