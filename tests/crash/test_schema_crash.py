"""The schema registry under kill -9: ``rivven schema serve`` killed again and again while
four clients register over HTTP, with a second server on the same data dir answering too.
No id is ever given to two schemas or reused, no registration that was answered is lost, and
what one process registered the other serves."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest
from helpers.registry_proc import request, start_registry

from engine import Engine

pytestmark = pytest.mark.crash
CLIENTS = 4
KILLS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def schema(n: int) -> str:
    # (a few schemas shared by every client: one id each, whoever registers first)
    name = n if n >= 1000 else n % 7
    return f'{{"type":"record","name":"R{name}","fields":[{{"name":"f","type":"long"}}]}}'


def test_kill_9_while_four_clients_register_never_reuses_or_loses_an_id(tmp_path):
    data = str(tmp_path / "d")
    Engine(data).close()
    ports = [free_port(), free_port()]
    servers = [start_registry(data, ports[0]), start_registry(data, ports[1])]
    answered: dict[tuple[str, str], int] = {}  # (subject, schema) -> id
    seen_by_other: list[tuple[int, str]] = []
    lock = threading.Lock()
    enough = threading.Event()  # (set after the last kill: the clients then stop)
    per_client = [0] * CLIENTS

    def client(c: int) -> None:
        rnd = random.Random(c)
        i = -1
        while not enough.is_set():
            i += 1
            per_client[c] = i + 1
            n = 1000 * (c + 1) + i if i % 3 else i
            subject, text = f"c{c}-{i}-value", schema(n)
            while True:  # (until an answer: the server may be dead or restarting)
                port = ports[rnd.randrange(2)]
                try:
                    status, body = request(port, "POST", f"/subjects/{subject}/versions",
                                           {"schema": text}, timeout=10)
                except OSError:
                    time.sleep(0.05)
                    continue
                if status >= 500:  # (never expected: the assertion below shows it)
                    with lock:
                        answered[(subject, "ERROR")] = status
                    break
                assert status == 200, body
                with lock:
                    answered[(subject, text)] = body["id"]
                break
            other = ports[1 - ports.index(port)]
            try:  # the other server must know the id at once (it reads on for an unknown one)
                status, body = request(other, "GET", f"/schemas/ids/{answered[(subject, text)]}",
                                       timeout=10)
                if status == 200:
                    seen_by_other.append((answered[(subject, text)], body["schema"]))
            except OSError:
                pass
    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    kills = 0
    rnd = random.Random(7)
    while kills < KILLS:
        time.sleep(rnd.uniform(0.2, 0.8))
        k = rnd.randrange(2)
        servers[k].kill()
        kills += 1
        servers[k] = start_registry(data, ports[k])
    time.sleep(0.5)
    enough.set()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    for s in servers:
        s.stop()
    assert not [k for k in answered if k[1] == "ERROR"], answered
    by_schema: dict[str, set[int]] = {}
    for (_, text), sid in answered.items():
        by_schema.setdefault(text, set()).add(sid)
    assert all(len(ids) == 1 for ids in by_schema.values()), by_schema  # one id per schema
    ids = [next(iter(v)) for v in by_schema.values()]
    assert len(set(ids)) == len(ids)  # no id for two schemas
    assert len(answered) == sum(per_client) >= 100
    for sid, text in seen_by_other:
        assert text == next(t for (_, t), i in answered.items() if i == sid)
    assert len(seen_by_other) >= len(answered) // 2
    with Engine(data, read_only=True) as e:  # nothing answered was lost
        r = e.schemas
        for (subject, text), sid in answered.items():
            assert r.lookup(subject, text)["id"] == sid
        assert max(ids) <= len(by_schema) + KILLS  # (a kill may skip an id, never reuse one)
