#!/usr/bin/env python3
"""``rivven produce --value-schema`` (Avro, 10 fields) against ``rivven produce --input json``
of the same lines (issue 33's goal: >= 0.5x), through the real command, rounds alternating.

  json           each line {"value": {...10 fields}}: stored as its compact JSON text
  schema         each line the bare object, --value-schema SUBJECT: Avro in Confluent's
                 wire format
  json+schema    the json lines with --value-schema: the "value" object encoded

Per case the median records/s over ``--rounds`` (3) and its ratio to json's in the same
rounds. This is a benchmark script, not a pytest module.

Usage: python tests/bench/bench_schema_produce.py [--records 200000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "item", "type": "string"}, {"name": "qty", "type": "int"},
    {"name": "price", "type": "double"}, {"name": "paid", "type": "boolean"},
    {"name": "country", "type": "string"}, {"name": "ts", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "float"}]}


def rivven(data: str, *args: str, stdin: str | None = None) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT)
    t = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as f:
        subprocess.run([sys.executable, "-m", "rivven_cli.main", "-d", data, *args], stdin=f,
                       env=env, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d")
        bare, wrapped, avsc = (os.path.join(tmp, n) for n in ("v.jsonl", "o.jsonl", "o.avsc"))
        with open(bare, "w") as f, open(wrapped, "w") as g:
            for i in range(a.records):
                d = {"id": i, "customer": f"cust{i % 1000}", "item": f"item{i % 50}",
                     "qty": i % 7, "price": i * 0.5, "paid": i % 2 == 0, "country": "NL",
                     "ts": 1_700_000_000_000 + i, "note": None if i % 3 else f"n{i}",
                     "score": 0.25}
                f.write(json.dumps(d) + "\n")
                g.write(json.dumps({"value": d}) + "\n")
        with open(avsc, "w") as f:
            json.dump(SCHEMA, f)
        rivven(data, "schema", "register", "orders-value", "--file", avsc)
        cases = {"json": ("--input", "json", "--file", wrapped),
                 "schema": ("--value-schema", "orders-value", "--file", bare),
                 "json+schema": ("--input", "json", "--value-schema", "orders-value",
                                 "--file", wrapped)}
        rates: dict[str, list[float]] = {c: [] for c in cases}
        for r in range(a.rounds):
            order = list(cases) if r % 2 == 0 else list(reversed(cases))
            for c in order:
                topic = f"{c.replace('+', '_')}-{r}"
                rivven(data, "topic", "create", topic)
                rates[c].append(a.records / rivven(data, "produce", topic, "-q", *cases[c]))
    out = {c: {"records_per_s": round(statistics.median(v)),
               "ratio_to_json": round(statistics.median(v) / statistics.median(rates["json"]),
                                      2)} for c, v in rates.items()}
    if a.json:
        print(json.dumps(out))
        return
    for c, v in out.items():
        print(f"{c:12} {v['records_per_s']:>9,} records/s  {v['ratio_to_json']:.2f}x json")


if __name__ == "__main__":
    main()
