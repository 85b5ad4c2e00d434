"""The schema registry's HTTP/1.1 listener (engine/schemas/server.py) over real sockets:
keep-alive, pipelining answered in order (with writes on the thread pool in between),
HTTP/1.0 and Connection: close, chunked bodies, Expect: 100-continue, the bounds on heads and
bodies, malformed requests, the idle timeout, a client that does not read, TLS, uvloop, the
GET answers kept while the registry stays the same, following the registry, and ``serve``
stopped by SIGTERM."""

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from helpers import ROOT
from helpers.certs import Pki
from helpers.schema_http import (
    AVRO,
    FakeRegistry,
    call,
    exchange,
    parse_answers,
    read_answers,
    running,
)

from engine.schemas.http import Api
from engine.schemas.server import Limits, loop_factory

ID1 = b"GET /schemas/ids/1 HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def reg():
    r = FakeRegistry()
    r.register("orders-value", AVRO)
    return r


@pytest.fixture
def port(reg):
    with running(Api(reg)) as listener:
        yield listener.port


def post_bytes(path, body, extra=b""):
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s\r\n" % (path.encode(), len(body), extra) + body)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def closed_by_server(s, within=5.0):
    """Does the server close ``s`` (EOF or reset) within ``within`` seconds?"""
    s.settimeout(within)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


# ---------------------------------------------------------------------- keep-alive, order
def test_keep_alive_serves_many_requests_on_one_connection(port):
    s = connect(port)
    for _ in range(3):
        s.sendall(ID1)
        (a,) = parse_answers(read_answers(s, 1))
        assert a.status == 200 and json.loads(a.body)["schema"] == AVRO
        assert "connection" not in a.headers  # (HTTP/1.1: kept open by default)
    s.close()


def test_pipelined_requests_are_answered_in_order_across_writes(port, reg):
    """GETs, a register (on the thread pool), GETs that must see it, a 404, a delete: one
    write, the answers in the order asked."""
    new = json.dumps({"type": "string"})
    reqs = [ID1, b"GET /schemas/ids/2 HTTP/1.1\r\n\r\n",
            post_bytes("/subjects/orders-value/versions", json.dumps({"schema": new}).encode()),
            b"GET /schemas/ids/2 HTTP/1.1\r\n\r\n", b"GET /subjects/orders-value/versions HTTP/1.1\r\n\r\n",
            b"GET /nope HTTP/1.1\r\n\r\n",
            b"DELETE /subjects/orders-value/versions/1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            b"GET /subjects/orders-value/versions HTTP/1.1\r\n\r\n"] + [ID1] * 40
    got = parse_answers(exchange(port, b"".join(reqs), answers=len(reqs)))
    assert [a.status for a in got[:8]] == [200, 404, 200, 200, 200, 404, 200, 200]
    assert json.loads(got[2].body) == {"id": 2}
    assert json.loads(got[3].body)["schema"] == new
    assert json.loads(got[4].body) == [1, 2]
    assert json.loads(got[6].body) == 1
    assert json.loads(got[7].body) == [2]
    assert all(json.loads(a.body)["schema"] == AVRO for a in got[8:])
    assert len(got) == len(reqs)


def test_many_pipelined_requests_and_a_client_that_reads_late(reg):
    """More requests than are read ahead, with big answers the client does not read at
    first: reading pauses, nothing is lost, the order holds."""
    big = json.dumps({"type": "record", "name": "Big", "doc": "x" * 50_000, "fields": []})
    reg.register("big-value", big)
    with running(Api(reg), Limits(max_queued=8)) as listener:
        n = 400
        reqs = [b"GET /schemas/ids/%d HTTP/1.1\r\n\r\n" % (1 + i % 2) for i in range(n)]
        s = connect(listener.port)
        sender = threading.Thread(target=s.sendall, args=(b"".join(reqs),))
        sender.start()
        time.sleep(0.5)  # (the server fills the socket, pauses, waits)
        got = parse_answers(read_answers(s, n))
        sender.join(10)
        s.close()
    assert len(got) == n
    assert [json.loads(a.body)["schema"] == (AVRO if i % 2 == 0 else big)
            for i, a in enumerate(got)] == [True] * n


def test_a_client_that_half_closes_gets_the_answers_owed(port):
    reqs = [ID1] * 5 + [post_bytes("/subjects/h/versions", b'{"schema": "\\"long\\""}')] + [ID1] * 5
    got = parse_answers(exchange(port, b"".join(reqs), shut=True))
    assert [a.status for a in got] == [200] * 11
    assert json.loads(got[5].body) == {"id": 2}


def test_http_10_and_connection_close(port):
    # HTTP/1.0: one answer, then the server closes
    got = exchange(port, b"GET /schemas/ids/1 HTTP/1.0\r\n\r\n" + ID1)
    (a,) = parse_answers(got)
    assert a.status == 200 and a.headers["connection"] == "close"
    # HTTP/1.0 keep-alive: kept, and said so
    s = connect(port)
    s.sendall(b"GET /schemas/ids/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    (a,) = parse_answers(read_answers(s, 1))
    assert a.headers["connection"] == "keep-alive"
    s.sendall(ID1)
    assert parse_answers(read_answers(s, 1))[0].status == 200
    s.close()
    # Connection: close: that answer, nothing after it (a pipelined request is dropped)
    got = exchange(port, ID1 + b"GET /schemas/ids/1 HTTP/1.1\r\nConnection: close\r\n\r\n" + ID1)
    answers = parse_answers(got)
    assert [a.status for a in answers] == [200, 200]
    assert answers[1].headers["connection"] == "close"


def test_chunked_body_and_expect_100_continue(port):
    body = json.dumps({"schema": json.dumps({"type": "string"})}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                      for i in range(0, len(body), 7)) + b"0\r\n\r\n"
    req = (b"POST /subjects/s/versions HTTP/1.1\r\nContent-Type: application/json\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    (a,) = parse_answers(exchange(port, req, answers=1))
    assert (a.status, json.loads(a.body)) == (200, {"id": 2})
    s = connect(port)
    s.sendall(b"POST /subjects/t/versions HTTP/1.1\r\nContent-Type: application/json\r\n"
              b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
    assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    s.sendall(body)
    (a,) = parse_answers(read_answers(s, 1))
    assert (a.status, json.loads(a.body)) == (200, {"id": 2})
    s.close()


# ---------------------------------------------------------------------- bounds, bad input
def test_a_huge_body_is_refused_at_once_and_the_connection_closed(reg):
    with running(Api(reg), Limits(max_body=1 << 20, linger_s=0.5)) as listener:
        s = connect(listener.port)
        # (Content-Length says 100 MiB: answered before a byte of it is sent)
        s.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 104857600\r\n\r\n")
        (a,) = parse_answers(read_answers(s, 1))
        assert (a.status, json.loads(a.body)["error_code"]) == (413, 413)
        assert a.headers["connection"] == "close"
        assert closed_by_server(s)
        s.close()
        # chunked: refused once the chunks pass the bound; what was sent is read and dropped
        s = connect(listener.port)
        s.sendall(ID1 + b"POST /subjects/s/versions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/json\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        try:
            for _ in range(40):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = parse_answers(read_answers(s, 2))
        assert [a.status for a in got] == [200, 413]
        s.close()
        # the server goes on
        assert call(listener.port, "GET", "/schemas/ids/1").status == 200


def test_huge_heads_and_urls_are_refused(reg):
    with running(Api(reg), Limits(max_head=4096, linger_s=0.2)) as listener:
        p = listener.port
        (a,) = parse_answers(exchange(p, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n"))
        assert (a.status, json.loads(a.body)["error_code"]) == (414, 414)
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(60))
        (a,) = parse_answers(exchange(p, b"GET / HTTP/1.1\r\n" + many + b"\r\n"))
        assert (a.status, json.loads(a.body)["error_code"]) == (431, 431)
        # one header growing over many reads (httptools keeps it whole until it ends)
        s = connect(p)
        s.sendall(b"GET / HTTP/1.1\r\nX-Long: ")
        try:
            for _ in range(20):
                s.sendall(b"v" * 1000)
                time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            pass
        (a,) = parse_answers(read_answers(s, 1))
        assert a.status == 431
        s.close()


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost x\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
    b"BREW /coffee HTTP/1.1\r\n\r\n", b"GET /\x00 HTTP/1.1\r\n\r\n",
    b"POST /subjects/s/versions HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # (a TLS hello on the plain port)
])
def test_malformed_requests_get_400_after_the_answers_owed(port, raw):
    got = parse_answers(exchange(port, ID1 + raw))
    assert [a.status for a in got] == [200, 400]
    assert json.loads(got[1].body)["error_code"] == 400
    assert got[1].headers["connection"] == "close"
    assert call(port, "GET", "/schemas/ids/1").status == 200


def test_an_upgrade_request_is_answered_then_closed(port):
    got = parse_answers(exchange(port, b"GET /schemas/ids/1 HTTP/1.1\r\nConnection: Upgrade\r\n"
                                       b"Upgrade: h2c\r\n\r\n" + ID1))
    assert [a.status for a in got] == [200]


def test_idle_connections_are_closed(reg):
    with running(Api(reg), Limits(idle_s=0.3)) as listener:
        s = connect(listener.port)
        s.sendall(ID1)
        assert parse_answers(read_answers(s, 1))[0].status == 200
        t0 = time.monotonic()
        assert closed_by_server(s, 5.0)
        assert 0.2 < time.monotonic() - t0 < 3.0
        s.close()
        # (half a request counts as idle too: a slow client does not hold a connection)
        s = connect(listener.port)
        s.sendall(b"GET /schemas/ids/1 HTTP/1.1\r\n")
        assert closed_by_server(s, 5.0)
        s.close()


# ---------------------------------------------------------------------- TLS, uvloop
def test_tls(reg, tmp_path):
    pki = Pki(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.server.cert, pki.server.key)
    client = ssl.create_default_context(cafile=str(pki.ca.cert))
    with running(Api(reg), ssl_context=server) as listener:
        a = call(listener.port, "GET", "/schemas/ids/1", context=client)
        assert a.status == 200 and json.loads(a.body)["schema"] == AVRO
        got = parse_answers(exchange(listener.port, ID1 * 20 + b"GET /x HTTP/1.1\r\n\r\n",
                                     answers=21, context=client))
        assert [a.status for a in got] == [200] * 20 + [404]
        # a client that does not trust the server's CA: no answer, the server goes on
        with pytest.raises(ssl.SSLError):
            call(listener.port, "GET", "/", context=ssl.create_default_context())
        # plain HTTP on the TLS port
        s = connect(listener.port)
        s.sendall(ID1)
        assert closed_by_server(s)
        s.close()
        assert call(listener.port, "GET", "/", context=client).status == 200


def test_uvloop(reg):
    pytest.importorskip("uvloop")
    with running(Api(reg), loop="uvloop") as listener:
        got = parse_answers(exchange(listener.port, ID1 * 10 + post_bytes(
            "/subjects/x/versions", b'{"schema": "\\"int\\""}') + ID1, answers=12))
        assert [a.status for a in got] == [200] * 12
        assert json.loads(got[10].body) == {"id": 2}


def test_loop_factory():
    assert loop_factory("asyncio") is None
    with pytest.raises(ValueError, match="unknown event loop"):
        loop_factory("tokio")
    uvloop = pytest.importorskip("uvloop")
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert loop_factory("auto") is uvloop.new_event_loop


# ---------------------------------------------------------------------- the answers kept
def test_get_answers_are_kept_while_the_generation_stays(port, reg):
    assert json.loads(call(port, "GET", "/schemas/ids/1").body)["schema"] == AVRO
    calls = len(reg.calls)
    for _ in range(5):
        assert call(port, "GET", "/schemas/ids/1").status == 200
    assert len(reg.calls) == calls  # (answered from the bytes kept)
    reg.ids[1]["schema"] = "changed behind the registry's back"
    assert json.loads(call(port, "GET", "/schemas/ids/1").body)["schema"] == AVRO
    reg.generation += 1  # (what a real change does)
    assert json.loads(call(port, "GET", "/schemas/ids/1").body)["schema"] == (
        "changed behind the registry's back")
    # a different query is another answer
    got = json.loads(call(port, "GET", "/schemas/ids/1?format=serialized").body)
    assert got["schema"].startswith("serialized:")
    # a write is never kept: each runs
    for _ in range(2):
        call(port, "POST", "/subjects/orders-value/versions", {"schema": AVRO})
    assert [n for n, _ in reg.calls].count("register") == 3  # (the fixture's, then these)


def test_the_answers_kept_are_bounded(reg):
    big = json.dumps({"type": "record", "name": "Big", "doc": "x" * 20_000, "fields": []})
    reg.register("big-value", big)  # id 2
    with running(Api(reg), Limits(cache_entries=3, cache_bytes=160_000)) as listener:
        def lookups():
            return [n for n, _ in reg.calls].count("schema_by_id")
        before = lookups()
        for _ in range(3):  # (an answer over 1/16 of the bytes is never kept)
            assert call(listener.port, "GET", "/schemas/ids/2").status == 200
        assert lookups() == before + 3
        for i in range(3):
            call(listener.port, "GET", f"/schemas/ids/1?n={i}")
        assert len(listener.cache) == 3
        call(listener.port, "GET", "/schemas/ids/1?n=3")  # (past the count: all forgotten)
        assert len(listener.cache) == 1
        assert listener.cache_size <= 160_000


def test_the_registry_is_refreshed_while_listening(reg):
    with running(Api(reg), Limits(follow_s=0.02)):
        time.sleep(0.5)
    assert reg.refreshes >= 5


def test_close_answers_the_request_in_flight(reg):
    slow = threading.Event()
    real = reg.register

    def register(*a, **k):
        slow.wait(5)
        return real(*a, **k)
    reg.register = register
    with running(Api(reg)) as listener:
        s = connect(listener.port)
        s.sendall(post_bytes("/subjects/z/versions", b'{"schema": "\\"long\\""}'))
        time.sleep(0.2)
        idle = connect(listener.port)
        # (one answer on it first: the listener holds the connection before it closes, however
        # slow the machine; then it is idle)
        idle.sendall(b"GET /schemas/types HTTP/1.1\r\nHost: x\r\n\r\n")
        assert parse_answers(read_answers(idle, 1))[0].status == 200
        threading.Timer(0.3, slow.set).start()
    # (the with block closed the listener: the idle connection at once, the busy one after
    # its answer)
    (a,) = parse_answers(read_answers(s, 1))
    assert (a.status, json.loads(a.body)) == (200, {"id": 2})
    assert closed_by_server(s) and closed_by_server(idle)


# ---------------------------------------------------------------------- serve
def test_serve_runs_until_sigterm():
    code = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, "tests")
        from helpers.schema_http import FakeRegistry, AVRO
        from engine.schemas.http import Api
        from engine.schemas.server import serve
        reg = FakeRegistry()
        reg.register("orders-value", AVRO)
        serve(Api(reg), "127.0.0.1", 0, loop="auto",
              on_ready=lambda l: print(json.dumps({"port": l.port}), flush=True))
        print("stopped", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        port = json.loads(proc.stdout.readline())["port"]
        s = connect(port)  # (a keep-alive connection open at the stop)
        s.sendall(ID1)
        assert parse_answers(read_answers(s, 1))[0].status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stdout.read() == b"stopped\n"
        assert closed_by_server(s)
        s.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
