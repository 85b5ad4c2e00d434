"""A client that pipelines requests on one connection: Produce requests that wait one after
the other are stored together (one WAL fsync) and every answer comes back in order, with the
offsets the records were given in request order; other requests between them keep their
place."""

import socket
import struct

from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from engine import Engine

PRODUCE_V = 7
METADATA_V = 8


def batch(first: int, n: int, pad: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
    for i in range(n):
        b.append(i, 1_700_000_000_000, b"k%d" % (first + i),
                 b"v%d" % (first + i) + b"." * (pad // n), [])
    return bytes(b.build())


def frame(key: int, version: int, corr: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", key, version, corr, 4) + b"test"
    return struct.pack(">i", len(head) + len(body)) + head + body


def produce(corr: int, parts: dict[int, bytes], acks: int = -1) -> bytes:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=PRODUCE_V, transactional_id=None, acks=acks, timeout_ms=30000,
                         topic_data=[P(name="t", partition_data=[
                             P.PartitionProduceData(index=p, records=r) for p, r in parts.items()])])
    return frame(0, PRODUCE_V, corr, bytes(req.encode(version=PRODUCE_V)))


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "the server closed the connection"
            out += chunk
        return out

    size = struct.unpack(">i", exactly(4))[0]
    data = exactly(size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def closed(sock: socket.socket) -> bool:
    """The server closed it (a reset: it had unread bytes of ours)."""
    try:
        return sock.recv(10) == b""
    except ConnectionResetError:
        return True


def test_pipelined_produce_requests_are_answered_in_order(served):
    host, port = served.bootstrap.split(":")
    sock = socket.create_connection((host, int(port)), 10)
    sock.settimeout(30)
    # 40 Produce requests (to both partitions), a Metadata request in the middle, and an
    # acks=0 request (no answer), all sent before any answer is read
    out, corr, expect = [], 0, []
    for i in range(40):
        corr += 1
        out.append(produce(corr, {0: batch(100 * i, 10), 1: batch(100 * i + 50, 3)}))
        expect.append(("produce", corr))
        if i == 20:
            corr += 1
            meta = MetadataRequest(version=METADATA_V, topics=None,
                                   allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False)
            out.append(frame(3, METADATA_V, corr, bytes(meta.encode(version=METADATA_V))))
            expect.append(("metadata", corr))
        if i == 30:
            corr += 1
            out.append(produce(corr, {0: batch(9000, 2)}, acks=0))
    sock.sendall(b"".join(out))
    bases = {0: [], 1: []}
    for kind, want in expect:
        try:
            got, payload = read_answer(sock)
        except AssertionError:
            raise AssertionError(served.log()) from None
        assert got == want
        if kind == "metadata":
            assert {t.name for t in MetadataResponse.decode(payload, version=METADATA_V).topics} \
                == {"t"}
            continue
        resp = ProduceResponse.decode(payload, version=PRODUCE_V)
        for p in resp.responses[0].partition_responses:
            assert p.error_code == 0
            bases[p.index].append(p.base_offset)
    sock.close()
    # every request's records at the offsets it was answered, in request order
    assert bases[1] == [3 * i for i in range(40)]
    assert bases[0] == [10 * i + (2 if i > 30 else 0) for i in range(40)]
    with Engine.open(served.data_dir, read_only=True) as eng:
        keys = [r.key for r in eng.read("t", 0, 0, 10_000)]
    want = [b"k%d" % (100 * i + j) for i in range(31) for j in range(10)] + \
        [b"k9000", b"k9001"] + [b"k%d" % (100 * i + j) for i in range(31, 40) for j in range(10)]
    assert keys == want


def test_a_malformed_request_among_pipelined_ones_closes_only_after_those_before(served):
    host, port = served.bootstrap.split(":")
    sock = socket.create_connection((host, int(port)), 10)
    sock.settimeout(30)
    bad = frame(0, PRODUCE_V, 3, b"\x00\x01")  # a Produce body cut short
    sock.sendall(produce(1, {0: batch(0, 5)}) + produce(2, {0: batch(5, 5)}) + bad +
                 produce(4, {0: batch(10, 5)}))
    assert [read_answer(sock)[0] for _ in range(2)] == [1, 2]
    assert closed(sock)  # the malformed one and what came after get nothing
    sock.close()
    assert "malformed Produce v7 request (correlation id 3)" in served.log()
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert [r.key for r in eng.read("t", 0, 0, 100)] == [b"k%d" % i for i in range(10)]


def test_budget_limits_and_half_closed_clients(tmp_path):
    """With a byte budget (queued.max.request.bytes) smaller than what a client pipelines,
    frames wait for it and every request is still answered in order; a client that shuts
    its sending side after its requests still gets every answer; a frame larger than
    socket.request.max.bytes closes that connection only; an idle one is closed."""
    from helpers import run_rivven
    from helpers.kafka import FAST, start_server

    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)
    s = start_server(d, settings=(*FAST, "queued.max.request.bytes=3000",
                                  "socket.request.max.bytes=5000",
                                  "connections.max.idle.ms=1000"))
    try:
        host, port = s.bootstrap.split(":")
        sock = socket.create_connection((host, int(port)), 10)
        sock.settimeout(30)
        reqs = [produce(i + 1, {0: batch(10 * i, 10, pad=1200)}) for i in range(12)]
        assert all(1000 < len(r) < 3000 for r in reqs)
        sock.sendall(b"".join(reqs))
        sock.shutdown(socket.SHUT_WR)
        bases = []
        for i in range(12):
            corr, payload = read_answer(sock)
            assert corr == i + 1
            p = ProduceResponse.decode(payload, version=PRODUCE_V).responses[0]
            bases.append(p.partition_responses[0].base_offset)
        assert bases == [10 * i for i in range(12)]
        assert sock.recv(10) == b""
        sock.close()
        big = socket.create_connection((host, int(port)), 10)
        big.sendall(struct.pack(">i", 6000) + b"\x00" * 100)
        big.settimeout(10)
        assert closed(big)
        idle = socket.create_connection((host, int(port)), 10)
        idle.settimeout(10)
        assert closed(idle)  # (after a second without a request)
        ok = socket.create_connection((host, int(port)), 10)
        ok.settimeout(30)
        ok.sendall(produce(99, {1: batch(0, 3)}))
        assert read_answer(ok)[0] == 99
        ok.close()
        log = s.log()
        assert "a request frame of 6000 bytes (socket.request.max.bytes=5000)" in log
        assert "idle for connections.max.idle.ms" in log
    finally:
        s.kill()
