"""Raw Kafka frames for the listener's tests (tests/kafka/test_serve_limits.py, the fuzz test):
real requests encoded by kafka-python's generated message classes, a blocking socket that
sends them and reads the answers, and the server process's resident memory."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
from kafka.record.memory_records import MemoryRecordsBuilder


def encode(req: Any, version: int, correlation_id: int = 1, client_id: str = "wire-test"
           ) -> bytes:
    """A whole request frame (size, header, body) of a generated request object."""
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(version=version, header=True, framed=True))


def raw(api_key: int, version: int, body: bytes = b"", correlation_id: int = 1,
        client_id: bytes = b"wire-test", flexible: bool = False) -> bytes:
    """A frame with a v1 request header (v2: an empty tagged-field section) and ``body`` as
    it is."""
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    head += b"\x00" if flexible else b""
    return struct.pack(">i", len(head) + len(body)) + head + body


def batch(n: int = 3, key: bytes = b"k", value: bytes = b"v", base_ts: int = 1_700_000_000_000
          ) -> bytes:
    """A real magic-2 record batch of ``n`` records (kafka-python's builder)."""
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(n):
        b.append(timestamp=base_ts + i, key=key + b"%d" % i, value=value + b"%d" % i,
                 headers=[("h", b"%d" % i)])
    b.close()
    return bytes(b.buffer())


def produce(topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1,
            correlation_id: int = 1) -> bytes:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=version, transactional_id=None, acks=acks, timeout_ms=10_000,
                         topic_data=[P(name=topic, partition_data=[
                             P.PartitionProduceData(index=partition, records=records)])])
    return encode(req, version, correlation_id)


def fetch(topic: str, partition: int, offset: int, version: int = 12, max_wait_ms: int = 0,
          max_bytes: int = 1 << 20, correlation_id: int = 1) -> bytes:
    T = FetchRequest.FetchTopic
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                       max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                           last_fetched_epoch=-1, log_start_offset=-1,
                           partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")
    return encode(req, version, correlation_id)


def metadata(topics: list[str] | None = None, version: int = 9, correlation_id: int = 1) -> bytes:
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(version=version, allow_auto_topic_creation=False,
                          topics=None if topics is None else [T(name=t) for t in topics])
    return encode(req, version, correlation_id)


def api_versions(version: int = 3, correlation_id: int = 1) -> bytes:
    req = ApiVersionsRequest(version=version, client_software_name="wire-test",
                             client_software_version="1")
    return encode(req, version, correlation_id)


RESPONSES = {0: ProduceResponse, 1: FetchResponse, 3: MetadataResponse, 17: SaslHandshakeResponse,
             18: ApiVersionsResponse, 36: SaslAuthenticateResponse}


class Wire:
    """One connection to the server, blocking, with a timeout."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, rcvbuf: int | None = None,
                 source: str | None = None) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:  # (another loopback address: another client IP)
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        host_, port_ = self.sock.getsockname()[:2]
        self.address = f"{host_}:{port_}"

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> bytes | None:
        """One response frame (correlation id and body), None when the server closed."""
        head = self._exactly(4)
        if head is None:
            return None
        size = struct.unpack(">i", head)[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def call(self, data: bytes, api_key: int, version: int) -> Any:
        """Send a request, read its response, decode it (ApiVersions: header v0 always)."""
        self.send(data)
        got = self.read()
        assert got is not None, "the server closed the connection"
        cls = RESPONSES[api_key]
        flexible = cls.flexible_version_q(version) and api_key != 18
        body = got[5:] if flexible else got[4:]
        return cls.decode(body, version=version)

    def closed_by_server(self, within: float = 10.0) -> bool:
        """True once the server has closed this connection (EOF or reset) within the time."""
        deadline = time.monotonic() + within
        self.sock.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except ConnectionError:
                return True
            if not chunk:
                return True
        return False

    def close(self) -> None:
        self.sock.close()


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def healthy(bootstrap: str, topic: str, partition: int = 0) -> int:
    """A fresh client's ApiVersions, Metadata, a produce and a fetch of what it produced: the
    offset it was stored at."""
    w = Wire(bootstrap)
    try:
        av = w.call(api_versions(), 18, 3)
        assert av.error_code == 0 and av.api_keys
        md = w.call(metadata([topic]), 3, 9)
        assert [t.error_code for t in md.topics] == [0], md
        value = b"health-%d" % time.monotonic_ns()
        pr = w.call(produce(topic, partition, batch(1, value=value)), 0, 9)
        part = pr.responses[0].partition_responses[0]
        assert part.error_code == 0, pr
        fr = w.call(fetch(topic, partition, part.base_offset), 1, 12)
        got = fr.responses[0].partitions[0]
        assert got.error_code == 0 and value + b"0" in bytes(got.records), fr
        return int(part.base_offset)
    finally:
        w.close()


def tls_hello() -> bytes:
    """The first bytes a TLS client sends (its ClientHello)."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        return out.read()
    raise AssertionError("a TLS handshake completed with no server")


def wait_for(what: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``what()`` again every 0.1 s until it is true or ``timeout`` passed: its last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)
