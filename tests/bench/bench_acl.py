#!/usr/bin/env python3
"""rivven serve's security costs: an ACL check with 10,000 ACLs, and SCRAM's connection setup
at 4096, 8192 and 16384 iterations (for docs/SECURITY.md).

  1 acl       ``Authorizer.authorize(principal, host, op, rtype, name)`` over ``--acls``
              (10,000) bindings of ``--principals`` (1,000) users: per user literal topics
              (Read, Write, Describe), a prefixed topic, a literal and a prefixed group, a
              transactional id, and a Deny for one user in ten; plus User:* Describe on a
              prefix and a super user. Each case is ``--calls`` checks in a loop, best of
              ``--rounds``, in ns per check: a hit (a literal Allow), a miss (a topic others
              have ACLs on), a topic no ACL names, a prefixed match, an implied operation
              (Describe by Read), a Deny, a super user; and as ratios against two baselines
              in the same process: a dict lookup of the same five values, and the hit with 10
              ACLs (its first check). Each case also as a first check (``_decide``: the
              index walked, no answer remembered), and prefixed matches of a new name every
              check (the remembered answers churn). Goal: every case <= 2 us.
  2 scram     per mechanism and iteration count: ``scram.derive`` (what `rivven user add`
              pays once, and a guesser with the file per guess), the server's side of a whole
              exchange (``ScramServer.first`` + ``final``: no PBKDF2, what `rivven serve` pays
              per connection), the client's side (kafka-python's ``ScramClient``: its PBKDF2
              is the connection's cost), and PLAIN's check (``scram.check_password``: the
              server derives, per connection). Best and median of ``--scram-runs``.

Usage: python tests/bench/bench_acl.py [--acls 10000] [--principals 1000] [--calls 200000]
       [--rounds 5] [--scram-runs 20] [--json]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import log, print_rows  # noqa: E402

from engine.security import scram  # noqa: E402
from engine.security.acl import Acl, Authorizer  # noqa: E402

TARGET_NS = 2000  # an ACL check, with 10,000 ACLs
HOST = "10.1.2.3"
SUPER = "User:admin"
DEPTS = ["orders", "payments", "inventory-events", "clickstream-raw", "audit"]


def make_acls(n: int, principals: int) -> list[Acl]:
    """~``n`` bindings over ``principals`` users, as a multi-team cluster has them."""
    rnd = random.Random(31)
    out: list[Acl] = []
    per = max(1, n // principals)
    for p in range(principals):
        who = f"User:svc-{p:04d}"
        team = f"team{p % 100:02d}"
        dept = DEPTS[p % len(DEPTS)]
        mine = [
            Acl.make("Topic", f"{team}.{dept}.{p}", "Literal", who, "*", "Read", "Allow"),
            Acl.make("Topic", f"{team}.{dept}.{p}", "Literal", who, "*", "Write", "Allow"),
            Acl.make("Topic", f"{team}.{dept}.{p}.dlq", "Literal", who, "*", "Describe",
                     "Allow"),
            # prefixes of many lengths (the index once looked up one per distinct length)
            Acl.make("Topic", f"{team}.{dept}.shared-{p % 7}" + "x" * (p % 13), "Prefixed",
                     who, "*", "Read", "Allow"),
            Acl.make("Group", f"cg-{team}-{p}", "Literal", who, "*", "Read", "Allow"),
            Acl.make("Group", f"cg-{team}-batch-", "Prefixed", who, "*", "Read", "Allow"),
            Acl.make("TransactionalId", f"tx-{team}-{p}", "Literal", who, "*", "Write", "Allow"),
            Acl.make("Topic", f"{team}.{dept}.{p}.compacted", "Literal", who,
                     f"10.0.{p % 250}.{rnd.randrange(1, 250)}", "Read", "Allow"),
            Acl.make("Topic", f"{team}.{dept}.{p}", "Literal", who, "*", "DescribeConfigs",
                     "Allow"),
        ]
        if p % 10 == 0:  # some denies
            mine.append(Acl.make("Topic", f"{team}.", "Prefixed", who, "*", "Delete", "Deny"))
        else:
            mine.append(Acl.make("Topic", f"{team}.{dept}.{p}", "Literal", who, "*", "Alter",
                                 "Allow"))
        out += mine[:per]
    out.append(Acl.make("Topic", "public.", "Prefixed", "User:*", "*", "Describe", "Allow"))
    return out


def per_check_ns(f: Any, args: tuple, calls: int, rounds: int) -> float:
    """ns per call of ``f(*args)``: ``calls`` in a loop, the best of ``rounds``."""
    best = float("inf")
    rng = range(calls)
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in rng:
            f(*args)
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def bench_acl(a: argparse.Namespace) -> dict[str, Any]:
    acls = make_acls(a.acls, a.principals)
    t0 = time.perf_counter()
    auth = Authorizer(acls, super_users=[SUPER])
    build_ms = (time.perf_counter() - t0) * 1000
    small = Authorizer(acls[:10], super_users=[SUPER])
    p = 5
    who, team, dept = f"User:svc-{p:04d}", f"team{p:02d}", DEPTS[p % len(DEPTS)]
    cases = {
        "hit (literal Allow)": (who, HOST, "Read", "Topic", f"{team}.{dept}.{p}"),
        "miss (others' topic)": (who, HOST, "Read", "Topic", f"team06.{DEPTS[6 % 5]}.6"),
        "miss (a topic no ACL names)": (who, HOST, "Read", "Topic", "nobody.has.this.topic"),
        "prefixed match": (who, HOST, "Read", "Topic", f"{team}.{dept}.shared-{p % 7}"
                           + "x" * (p % 13) + "-2026-q1"),
        "implied (Describe by Read)": (who, HOST, "Describe", "Topic", f"{team}.{dept}.{p}"),
        "group (literal)": (who, HOST, "Read", "Group", f"cg-{team}-{p}"),
        "deny (prefixed Deny)": ("User:svc-0000", HOST, "Delete", "Topic", "team00.orders.0"),
        "super user": (SUPER, HOST, "Write", "Topic", f"{team}.{dept}.{p}"),
    }
    expect = {"hit (literal Allow)": True, "miss (others' topic)": False,
              "miss (a topic no ACL names)": False, "prefixed match": True,
              "implied (Describe by Read)": True, "group (literal)": True,
              "deny (prefixed Deny)": False, "super user": True}
    for name, args in cases.items():
        assert auth.authorize(*args) is expect[name], name
    table = {cases["hit (literal Allow)"]: True}
    key = cases["hit (literal Allow)"]
    base_dict = per_check_ns(table.get, (key,), a.calls, a.rounds)
    small_args = (acls[0].principal, HOST, "Read", "Topic", acls[0].name)
    assert small.authorize(*small_args)
    base_small = per_check_ns(small._decide, small_args, a.calls, a.rounds)  # (not cached)
    out = {"acls": len(auth), "principals": a.principals, "build_ms": round(build_ms, 1),
           "prefix_lengths": {rt: len({len(p) for p in ix.prefixed})
                           for rt, ix in auth._by_type.items()},
           "baseline_dict_ns": round(base_dict, 1), "baseline_10_acls_ns": round(base_small, 1),
           "cases": {}}
    for name, args in cases.items():
        ns = per_check_ns(auth.authorize, args, a.calls, a.rounds)
        # the first check of a (principal, host, op, type, name): the index walked
        first = per_check_ns(auth._decide, args, a.calls, a.rounds)
        out["cases"][name] = {"ns": round(ns, 1), "x_dict": round(ns / base_dict, 2),
                              "x_10_acls": round(ns / base_small, 2),
                              "first_ns": round(first, 1)}
        log(f"acl {name}: {ns:.0f} ns (first check {first:.0f} ns)")
    # distinct names every check: no answer remembered (a flood of names, or a first pass)
    names = [(who, HOST, "Read", "Topic", f"{team}.{dept}.shared-{p % 7}" + "x" * (p % 13)
              + f"-{i}") for i in range(a.calls)]
    fresh = Authorizer(acls, super_users=[SUPER])
    t0 = time.perf_counter_ns()
    for args in names:
        fresh.authorize(*args)
    out["churn_prefixed_ns"] = round((time.perf_counter_ns() - t0) / a.calls, 1)
    out["worst_ns"] = max(c["ns"] for c in out["cases"].values())
    out["goal_met"] = out["worst_ns"] <= TARGET_NS
    return out


def timed(f: Any, runs: int) -> dict[str, float]:
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        xs.append((time.perf_counter() - t0) * 1000)
    return {"best_ms": round(min(xs), 3), "median_ms": round(statistics.median(xs), 3)}


def bench_scram(a: argparse.Namespace) -> dict[str, Any]:
    from kafka.net.sasl.scram import ScramClient

    out: dict[str, Any] = {}
    for mech in scram.MECHANISMS:
        for it in (4096, 8192, 16384):
            cred = scram.derive(mech, "pencil", it)

            def server_side(cred: scram.ScramCredential = cred, mech: str = mech) -> None:
                s = scram.ScramServer(mech, lambda u: cred)
                c = ScramClient("alice", "pencil", mech)
                first = c.first_message()
                t0 = time.perf_counter()
                sf = s.first(first)
                server_ms = time.perf_counter() - t0
                c.process_server_first_message(sf)
                final = c.final_message()
                t0 = time.perf_counter()
                sfin = s.final(final)
                server_side.ms.append((server_ms + time.perf_counter() - t0) * 1000)
                c.process_server_final_message(sfin)
            server_side.ms = []  # type: ignore[attr-defined]
            whole = timed(server_side, a.scram_runs)
            ms = server_side.ms  # type: ignore[attr-defined]
            row = {
                "derive": timed(lambda m=mech, i=it: scram.derive(m, "pencil", i), a.scram_runs),
                "exchange_whole": whole,
                "exchange_server_side": {"best_ms": round(min(ms), 3),
                                         "median_ms": round(statistics.median(ms), 3)},
                "plain_check": timed(lambda c=cred: scram.check_password(c, b"pencil"),
                                     a.scram_runs),
            }
            out[f"{mech} {it}"] = row
            log(f"scram {mech} {it}: derive {row['derive']['median_ms']} ms, server side "
                f"{row['exchange_server_side']['median_ms']} ms, whole exchange "
                f"{whole['median_ms']} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--principals", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scram-runs", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = {"acl": bench_acl(a), "scram": bench_scram(a)}
    if a.json:
        print(json.dumps(res, indent=2))
        return
    r = res["acl"]
    rows = [(f"-- an ACL check, {r['acls']} ACLs of {r['principals']} principals (build "
             f"{r['build_ms']} ms; prefix lengths per type {r['prefix_lengths']})", "", ""),
            ("baseline: a dict lookup of the 5 values", f"{r['baseline_dict_ns']:.0f} ns", ""),
            ("baseline: the hit with 10 ACLs", f"{r['baseline_10_acls_ns']:.0f} ns", "")]
    for name, c in r["cases"].items():
        rows.append((name, f"{c['ns']:.0f} ns", f"x{c['x_dict']} of dict, x{c['x_10_acls']} "
                     f"of 10 ACLs; first check {c['first_ns']:.0f} ns"))
    rows.append(("prefixed, a new name every check", f"{r['churn_prefixed_ns']:.0f} ns",
                 "(nothing remembered: the cache churns)"))
    rows.append(("goal <= 2 us", "met" if r["goal_met"] else "MISSED", f"worst {r['worst_ns']:.0f} ns"))
    rows.append(("-- SCRAM, median ms (best)", "", ""))
    for k, v in res["scram"].items():
        rows.append((k, f"{v['derive']['median_ms']:.2f}",
                     f"derive ({v['derive']['best_ms']:.2f}); server side "
                     f"{v['exchange_server_side']['median_ms']:.3f} "
                     f"({v['exchange_server_side']['best_ms']:.3f}); whole exchange "
                     f"{v['exchange_whole']['median_ms']:.2f}; PLAIN check "
                     f"{v['plain_check']['median_ms']:.2f}"))
    print_rows(rows, sys.stdout)


if __name__ == "__main__":
    main()
