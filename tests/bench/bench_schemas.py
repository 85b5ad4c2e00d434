#!/usr/bin/env python3
"""The schema registry's HTTP listener: ``GET /schemas/ids/{id}`` lookups per second over
keep-alive connections with a warm cache (issue 33's goal: >= 50,000/s), and the server's
CPU per request.

The server runs in a process of its own (``engine.schemas.server.serve`` over the data dir's
registry, or an in-memory one where the engine has none), on the standard asyncio loop and
on uvloop (when installed). The client is another process: ``--conns`` (8) keep-alive
connections on one epoll loop writing pre-built request bytes and counting answers by their
length (every answer is the same size), so that it costs less than the server. Each case
runs ``--seconds`` (5) after a warm-up:

  serial     one request at a time per connection (the next sent when the answer is in)
  pipelined  ``--depth`` (16) requests in flight per connection
  auth       pipelined, with HTTP basic auth and an ACL authorizer (a SCRAM user, a
             Describe ACL on the subject's topic)

Per case: answers per second, the server's CPU per answer (user + system from
/proc/<pid>/stat, in us) and the client's. The machine's cores are shared: the server's
CPU per answer is the figure that carries over (1e6 / it = what one core can answer).

Usage: python tests/bench/bench_schemas.py [--seconds 5] [--conns 8] [--depth 16]
       [--loops asyncio,uvloop] [--cases serial,pipelined,auth] [--json]
This is a benchmark script, not a pytest module (it holds no tests).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (HERE, ROOT, os.path.join(ROOT, "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_engine import log, print_rows  # noqa: E402

TARGET = 50_000
SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": f"f{i}", "type": t} for i, t in enumerate(
        ["long", "string", "double", "int", "boolean", "string", "long", "float", "string",
         "bytes"])]})
USER, PASSWORD = "bench", "bench-password-1"


# ---------------------------------------------------------------------- the server process
def serve_main(loop: str, data_dir: str, auth: bool) -> None:
    """(the server process) Register the schema (``auth``: add the user and its ACL), listen,
    print the port, serve until SIGTERM."""
    from engine import Engine
    from engine.schemas.access import Access
    from engine.schemas.http import Api
    from engine.schemas.server import serve

    eng = Engine.open(data_dir)
    registry: Any = getattr(eng, "schemas", None)
    if registry is None:  # (an engine without a registry yet: the tests' in-memory one)
        from helpers.schema_http import FakeRegistry
        registry = FakeRegistry()
    sid = registry.register("orders-value", SCHEMA)["id"]
    access = None
    if auth:
        from engine.security.acl import Acl
        eng.users.add(USER, PASSWORD)
        eng.acls.add([Acl.make("Topic", "orders", "Literal", f"User:{USER}", "*", "Describe",
                               "Allow")])
        access = Access.from_data_dir(eng.users, eng.acls, enabled=True)
    api = Api(registry, access)

    def ready(listener: Any) -> None:
        print(json.dumps({"port": listener.port, "id": sid}), flush=True)
    serve(api, "127.0.0.1", 0, loop=loop, on_ready=ready)
    eng.close()


class Server:
    def __init__(self, loop: str, auth: bool) -> None:
        # (the client process never opens an engine: its threads would compete with the
        # client's for the GIL, and count in its CPU)
        self.dir = tempfile.mkdtemp(prefix="bench-schemas-")
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", loop, "--data-dir", self.dir]
            + (["--auth"] if auth else []), stdout=subprocess.PIPE, env=env, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {loop} server did not start")
        info = json.loads(line)
        self.port, self.id = info["port"], info["id"]

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------- the client
def request_bytes(sid: int, auth: bool) -> bytes:
    import base64
    extra = b""
    if auth:
        extra = b"Authorization: Basic " + base64.b64encode(
            f"{USER}:{PASSWORD}".encode()) + b"\r\n"
    return (b"GET /schemas/ids/%d?subject=orders-value HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Accept: application/vnd.schemaregistry.v1+json\r\n" % sid) + extra + b"\r\n"


def answer_size(port: int, req: bytes) -> int:
    """The length of one answer (all are the same: the Date header has a fixed width)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise SystemExit(f"the server answered {head.decode()}")
    length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0]
                 .split(b":")[1])
    while len(body) < length:
        body += s.recv(65536)
    s.close()
    return len(head) + 4 + length


def drive(port: int, req: bytes, size: int, conns: int, depth: int, seconds: float) -> int:
    """Answers received in ``seconds`` with ``depth`` requests in flight per connection."""
    sel = selectors.DefaultSelector()
    socks = []
    pending = {}
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ)
        s.sendall(req * depth)
        pending[s] = 0  # bytes of answers received, not yet a whole answer
    done = 0
    deadline = time.monotonic() + seconds
    batch = [req * k for k in range(depth + 1)]
    while True:
        for key, _ in sel.select(1.0):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                b = s.recv(1 << 18)
            except BlockingIOError:
                continue
            if not b:
                raise SystemExit("the server closed a connection")
            have = pending[s] + len(b)
            whole, pending[s] = divmod(have, size)
            if whole:
                done += whole
                s.send(batch[whole] if whole <= depth else req * whole)
        if time.monotonic() >= deadline:
            break
    for s in socks:
        s.close()
    return done


def measure(server: Server, req: bytes, size: int, conns: int, depth: int,
            seconds: float) -> dict[str, Any]:
    drive(server.port, req, size, conns, depth, 0.5)  # warm-up
    c0, t0 = server.cpu_s(), time.monotonic()
    own0 = sum(os.times()[:2])
    n = drive(server.port, req, size, conns, depth, seconds)
    t = time.monotonic() - t0
    cpu = server.cpu_s() - c0
    own = sum(os.times()[:2]) - own0
    return {"answers": n, "per_s": n / t, "server_us": cpu / n * 1e6, "client_us": own / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--loops", default="asyncio,uvloop")
    ap.add_argument("--cases", default="serial,pipelined,auth",
                    help="which of serial, pipelined, auth (comma-separated)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", help=argparse.SUPPRESS)
    ap.add_argument("--auth", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve_main(a.serve, a.data_dir, a.auth)
        return
    loops = [x for x in a.loops.split(",") if x]
    if "uvloop" in loops:
        try:
            import uvloop  # noqa: F401
        except ImportError:
            log("uvloop is not installed: the asyncio loop only")
            loops.remove("uvloop")
    results: dict[str, Any] = {}
    rows: list[tuple[str, str, str]] = []
    for loop in loops:
        rows.append((f"-- {loop} loop (GET /schemas/ids/N, warm cache, {a.conns} connections)",
                     "", ""))
        for name, case, depth, auth in (("serial", "serial", 1, False),
                                        ("pipelined", "pipelined", a.depth, False),
                                        ("auth", "auth+acl pipelined", a.depth, True)):
            if name not in a.cases.split(","):
                continue
            server = Server(loop, auth)
            try:
                req = request_bytes(server.id, auth)
                size = answer_size(server.port, req)
                log(f"{loop} {case}: {a.seconds:g} s ...")
                r = measure(server, req, size, a.conns, depth, a.seconds)
            finally:
                server.stop()
            results[f"{loop} {case}"] = r
            label = case if depth == 1 else f"{case} (depth {depth})"
            rows.append((label, f"{r['per_s']:,.0f}/s",
                         f"server {r['server_us']:.1f} us/answer (~{1e6 / r['server_us']:,.0f}"
                         f"/s per core), client {r['client_us']:.1f} us"))
    best = max((r["per_s"] for r in results.values()), default=0.0)
    rows.append(("-- goal", "", ""))
    rows.append((f">= {TARGET:,}/s", f"{best:,.0f}/s", "met" if best >= TARGET else "NOT met"))
    if a.json:
        print(json.dumps(results, indent=1))
    else:
        print_rows(rows, sys.stdout)


if __name__ == "__main__":
    main()
