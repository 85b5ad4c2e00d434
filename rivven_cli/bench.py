"""``rivven bench produce|consume``: throughput and latency, in the spirit of
kafka-producer-perf-test, on a scratch data dir."""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

import typer

from .render import info, print_json, print_table

app = typer.Typer(no_args_is_help=True)

RecordsOpt = Annotated[int, typer.Option("--records", "-n", min=1, help="Records in all.")]
SizeOpt = Annotated[int, typer.Option("--record-size", "-s", min=0, help="Value bytes.")]
KeyOpt = Annotated[int, typer.Option("--key-size", min=0, help="Key bytes (0: no keys).")]
BatchOpt = Annotated[int, typer.Option("--batch-size", "-b", min=1, help="Records per call.")]
PartsOpt = Annotated[int, typer.Option("--partitions", min=1, help="Topic partitions.")]
CodecOpt = Annotated[str, typer.Option("--compression", "-z", help="none gzip snappy lz4 zstd")]
SyncOpt = Annotated[bool, typer.Option("--sync/--no-sync", help="fsync every produce call.")]
DirOpt = Annotated[str | None, typer.Option("--dir", help="Scratch dir (default: a temp dir).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def make_data(records: int, record_size: int, key_size: int, batch: int
              ) -> tuple[list[bytes | None] | None, list[bytes]]:
    """One batch of realistic-looking values, reused; distinct keys per record slot."""
    vals = [os.urandom(record_size // 2 + 1).hex().encode()[:record_size] for _ in range(batch)]
    keys: list[Any] | None = ([b"k%0*d" % (max(key_size - 1, 1), i) for i in range(batch)]
                       if key_size else None)
    return keys, vals


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_produce(eng: Any, topic: str, records: int, keys: Any, vals: list[bytes],
                compression: str | None) -> dict[str, Any]:
    import statistics

    batch = len(vals)
    lat = []
    done = 0
    t0 = time.perf_counter()
    while done < records:
        n = min(batch, records - done)
        t = time.perf_counter()
        eng.produce_batch(topic, vals[:n], keys=keys[:n] if keys else None,
                          compression=compression)
        lat.append(time.perf_counter() - t)
        done += n
    el = time.perf_counter() - t0
    size = sum(map(len, vals)) / batch + (len(keys[0]) if keys else 0)
    return {"records": records, "seconds": round(el, 4), "records_per_s": round(records / el),
            "mb_per_s": round(records * size / el / 1e6, 2),
            "latency_ms_avg": round(statistics.mean(lat) * 1e3, 3),
            "latency_ms_p50": round(_percentile(lat, 0.5) * 1e3, 3),
            "latency_ms_p99": round(_percentile(lat, 0.99) * 1e3, 3)}


def _scratch(d: str | None) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="rivven-bench-", dir=d)


def _remove(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _show(rows: dict[str, dict[str, Any]], json: bool) -> None:
    if json:
        print_json(rows)
        return
    cols = ["TEST", "RECORDS", "RECORDS/S", "MB/S", "AVG-MS", "P50-MS", "P99-MS"]
    print_table(cols, [[name, r["records"], f"{r['records_per_s']:,}", r["mb_per_s"],
                        r.get("latency_ms_avg"), r.get("latency_ms_p50"), r.get("latency_ms_p99")]
                       for name, r in rows.items()], right=cols[1:])


@app.command("produce")
def bench_produce(records: RecordsOpt = 1_000_000, record_size: SizeOpt = 100,
                  key_size: KeyOpt = 10, batch_size: BatchOpt = 1000, partitions: PartsOpt = 1,
                  compression: CodecOpt = "none", sync: SyncOpt = True, dir: DirOpt = None,
                  json: JsonOpt = False) -> None:
    """Produce throughput and per-call latency."""
    from engine import Engine
    from engine.errors import plural

    path = _scratch(dir)
    try:
        with Engine.open(path, sync=sync) as eng:
            eng.create_topic("bench", partitions)
            keys, vals = make_data(records, record_size, key_size, batch_size)
            info(f"producing {plural(records, 'record', thousands=True)} of {record_size} B to {partitions} "
                 f"partition(s), {batch_size} per call, sync={'on' if sync else 'off'}")
            r = run_produce(eng, "bench", records, keys, vals, compression)
    finally:
        _remove(path)
    _show({"produce": r}, json)


@app.command("consume")
def bench_consume(records: RecordsOpt = 1_000_000, record_size: SizeOpt = 100,
                  key_size: KeyOpt = 10, batch_size: BatchOpt = 1000,
                  compression: CodecOpt = "none", dir: DirOpt = None,
                  json: JsonOpt = False) -> None:
    """Read throughput through read() (Record objects) and read_arrow() (pyarrow)."""
    from engine import Engine

    path = _scratch(dir)
    rows = {}
    try:
        with Engine.open(path, sync=False) as eng:
            eng.create_topic("bench", 1)
            keys, vals = make_data(records, record_size, key_size, batch_size)
            run_produce(eng, "bench", records, keys, vals, compression)
            size = record_size + key_size
            for name, fn, per_call in (("read", eng.read, batch_size),
                                       ("read_arrow", eng.read_arrow, max(batch_size, 100_000))):
                t0 = time.perf_counter()
                off = n = 0
                while off < records:
                    got = fn("bench", 0, off, per_call)
                    k = len(got)
                    if not k:
                        break
                    off += k
                    n += k
                el = time.perf_counter() - t0
                rows[name] = {"records": n, "seconds": round(el, 4),
                              "records_per_s": round(n / el),
                              "mb_per_s": round(n * size / el / 1e6, 2)}
    finally:
        _remove(path)
    _show(rows, json)
