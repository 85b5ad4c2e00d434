"""Bad input never takes ``rivven serve`` down: malformed, truncated and oversized frames,
unknown APIs and versions, bodies that do not decode, corrupt record batches, clients that
never read, send half a frame or nothing, thousands of idle connections, too many
connections. Each gets Kafka's error answer or a closed connection for that client only, a
log line names the client and the reason, and every other client goes on. Real server
processes, raw frames encoded by kafka-python's generated classes."""

import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from helpers import ROOT, run_rivven
from helpers.kafka import FAST, READY, start_server
from helpers.kafka_wire import (
    Wire,
    api_versions,
    batch,
    encode,
    fetch,
    healthy,
    metadata,
    produce,
    raw,
    rss_bytes,
)
from kafka.protocol.admin.cluster import UpdateFeaturesRequest
from kafka.record.util import calc_crc32c

from engine import Engine


def _data(tmp_path, partitions: int = 2) -> str:
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", str(partitions), check=True)
    return d


def _wait_log(served, text: str, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        log = served.log()
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the server's log:\n{served.log()[-4000:]}")


def _stored(d: str, topic: str = "t") -> list:
    with Engine.open(d, read_only=True) as eng:
        return [(p, r.offset, r.key, r.value) for p in range(eng.topic(topic).partitions)
                for r in eng.read(topic, p, 0, 100_000)]


# (what the client sends, what the log line says of it)
BAD_FRAMES = [
    ("a frame past socket.request.max.bytes", struct.pack(">i", 2_000_000),
     "a request frame of 2000000 bytes (socket.request.max.bytes=1048576)"),
    ("a negative frame size", struct.pack(">i", -5), "a request frame of -5 bytes"),
    ("a frame too short for a header", struct.pack(">i", 3) + b"abc",
     "a request frame of 3 bytes"),
    ("a client id past the frame", struct.pack(">ihhih", 10, 3, 1, 7, 100),
     "client id runs past the request"),
    ("a flexible header cut short", raw(3, 12), "a malformed request header"),
    ("an API key Kafka does not have", raw(999, 0), "an unknown API (key 999 v0)"),
    ("a version past Kafka's schemas", raw(3, 99, flexible=True),
     "an API not served (key 3 v99)"),
    ("an API not served whose answer has no error code", raw(27, 0),
     "an API not served (key 27 v0)"),
    ("a body cut short", raw(3, 1, b"\0\0\0\x01\0\x05abc"),
     "a malformed Metadata v1 request (correlation id 1)"),
    ("a body that is not a Produce request", raw(0, 9, b"\xff" * 40, flexible=True),
     "a malformed Produce v9 request"),
    ("an array count past the body", raw(3, 1, b"\x7f\xff\xff\xff"),
     "a malformed Metadata v1 request"),
]


def test_each_bad_frame_closes_only_its_connection_with_a_log_line(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "socket.request.max.bytes=1048576"))
    try:
        steady = Wire(s.bootstrap)  # one client that stays connected through all of it
        before = healthy(s.bootstrap, "t")
        for i, (what, data, said) in enumerate(BAD_FRAMES):
            w = Wire(s.bootstrap)
            w.send(data)
            assert w.closed_by_server(10), f"{what}: the connection stayed open"
            log = _wait_log(s, f"closing {w.address}: ")
            line = next(x for x in log.splitlines() if f"closing {w.address}: " in x)
            assert said in line, (what, line)
            w.close()
            av = steady.call(api_versions(correlation_id=i + 2), 18, 3)
            assert av.error_code == 0, what
        assert s.proc.poll() is None
        assert healthy(s.bootstrap, "t") == before + 1
        assert "Traceback" not in s.log()
        steady.close()
    finally:
        s.kill()


def test_an_api_or_version_not_served_gets_kafkas_error_answer_on_an_open_connection(served):
    w = Wire(served.bootstrap)
    # ApiVersions past the versions served: answered v0, UNSUPPORTED_VERSION and the list
    w.send(raw(18, 99, flexible=True, correlation_id=7))
    got = w.read()
    assert got is not None and got[:4] == struct.pack(">i", 7)
    assert struct.unpack(">h", got[4:6])[0] == 35  # UNSUPPORTED_VERSION
    # an API Kafka has and rivven does not serve (ElectLeaders v1): its answer, error 35
    w.send(raw(43, 1, struct.pack(">bii", 0, -1, 1000), correlation_id=8))
    got = w.read()
    assert got is not None and got[:4] == struct.pack(">i", 8)
    assert struct.unpack(">ih", got[4:10]) == (0, 35)  # throttle_time_ms, error_code
    # the connection goes on
    assert w.call(api_versions(correlation_id=9), 18, 3).error_code == 0
    assert f"ElectLeaders v1 from {w.address} answered UNSUPPORTED_VERSION" in served.log()
    w.close()


def _crc_fixed(b: bytearray) -> bytes:
    b[17:21] = struct.pack(">I", calc_crc32c(bytes(b[21:])))
    return bytes(b)


def _corrupt_batches() -> list[tuple[str, bytes]]:
    good = batch(3)
    flipped = bytearray(good)
    flipped[-2] ^= 0x40  # a bit of the last record: CRC mismatch
    more = bytearray(good)
    more[57:61] = struct.pack(">i", 1000)  # claims 1000 records; CRC made right
    negative = bytearray(good)
    negative[57:61] = struct.pack(">i", -1)
    fewer = bytearray(good)
    fewer[57:61] = struct.pack(">i", 2)  # bytes of a third record follow the count
    delta = bytearray(good)
    delta[23:27] = struct.pack(">i", -7)  # last offset delta
    magic1 = bytearray(good)
    magic1[16] = 1
    long = bytearray(good)
    long[8:12] = struct.pack(">i", 1 << 30)  # a length past the request
    return [("a bit flipped", bytes(flipped)), ("1000 records claimed", _crc_fixed(more)),
            ("-1 records claimed", _crc_fixed(negative)),
            ("2 records claimed of 3", _crc_fixed(fewer)),
            ("a negative last offset delta", _crc_fixed(delta)),
            ("magic 1", _crc_fixed(magic1)), ("cut short", good[:-5]),
            ("a length past the request", bytes(long)),
            ("zeros", b"\0" * 70), ("one byte", b"\x01")]


def test_corrupt_batches_are_answered_corrupt_message_and_nothing_is_stored(served):
    d = served.data_dir
    base = healthy(served.bootstrap, "t")
    before = _stored(d)
    w = Wire(served.bootstrap)
    for i, (what, records) in enumerate(_corrupt_batches()):
        r = w.call(produce("t", 0, records, correlation_id=i + 2), 0, 9)
        part = r.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (2, -1), (what, part)  # CORRUPT_MESSAGE
    w.close()
    assert healthy(served.bootstrap, "t") == base + 1
    after = _stored(d)
    assert after[:len(before)] == before and len(after) == len(before) + 1
    assert f"Produce v9 from {w.address} answered CORRUPT_MESSAGE" in served.log()


def test_idle_connections_and_half_sent_frames_are_closed_after_the_idle_time(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "connections.max.idle.ms=1000"))
    try:
        idle = Wire(s.bootstrap)
        size_only = Wire(s.bootstrap)
        size_only.send(struct.pack(">i", 100))
        half = Wire(s.bootstrap)
        half.send(metadata(["t"])[:12])
        busy = Wire(s.bootstrap)
        slow = Wire(s.bootstrap)  # a frame arriving a byte at a time is not idle (as Kafka)
        slow_frame = api_versions(correlation_id=77)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 3:  # a client that talks keeps its connection
            n += 1
            assert busy.call(api_versions(correlation_id=n), 18, 3).error_code == 0
            slow.send(slow_frame[n - 1:n])
            time.sleep(0.3)
        slow.send(slow_frame[n:])
        got = slow.read()
        assert got is not None and got[:4] == struct.pack(">i", 77)
        for w in (idle, size_only, half):
            assert w.closed_by_server(5)
        log = s.log()
        assert f"closing {idle.address}: idle for connections.max.idle.ms=1000" in log
        assert (f"closing {size_only.address}: a request frame of 100 bytes not received whole: "
                "nothing more of it for connections.max.idle.ms=1000 (0 received)") in log
        assert f"closing {half.address}: a request frame of" in log
        assert busy.call(api_versions(correlation_id=99), 18, 3).error_code == 0
        healthy(s.bootstrap, "t")
    finally:
        s.kill()


def _fill(bootstrap: str, topic: str, partition: int, nbytes: int) -> None:
    w = Wire(bootstrap)
    value = b"x" * 100_000
    for i in range(nbytes // 1_000_000 + 1):
        r = w.call(produce(topic, partition, batch(10, value=value), correlation_id=i), 0, 9)
        assert r.responses[0].partition_responses[0].error_code == 0
    w.close()


def _flood(w: Wire, data: bytes, count: int) -> threading.Thread:
    """Send ``count`` copies of a request without reading an answer (in a thread: the sends
    block once the server stops reading)."""
    def run() -> None:
        try:
            for _ in range(count):
                w.send(data)
        except OSError:
            pass  # (closed by the server)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_client_that_never_reads_stalls_alone_and_is_closed(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "connections.max.idle.ms=2000"))
    try:
        _fill(s.bootstrap, "t", 0, 3_000_000)
        rss0 = rss_bytes(s.proc.pid)
        deaf = Wire(s.bootstrap, rcvbuf=4096, timeout=30)
        flood = _flood(deaf, fetch("t", 0, 0, max_bytes=1 << 20), 300)
        time.sleep(0.5)
        for _ in range(3):  # the others go on while it stalls
            healthy(s.bootstrap, "t", 1)
        peak = rss_bytes(s.proc.pid)
        log = _wait_log(s, f"closing {deaf.address}: its answers not read for "
                           "connections.max.idle.ms=2000")
        assert deaf.closed_by_server(10)  # (reads what was sent before the close)
        flood.join(10)
        assert "Traceback" not in log
        assert peak - rss0 < 64 << 20, (rss0, peak)
        healthy(s.bootstrap, "t", 1)
    finally:
        s.kill()


def test_unread_answers_past_the_budget_close_their_connections_at_once(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "queued.max.request.bytes=2097152"))
    try:
        _fill(s.bootstrap, "t", 0, 2_000_000)
        deaf = [Wire(s.bootstrap, rcvbuf=4096, timeout=30) for _ in range(8)]
        floods = [_flood(w, fetch("t", 0, 0, max_bytes=1 << 20), 20) for w in deaf]
        t0 = time.monotonic()
        _wait_log(s, "while the unread answers of all clients pass queued.max.request.bytes "
                     "(2097152)", within=20)
        assert time.monotonic() - t0 < 15  # (not the idle time: 600 s)
        healthy(s.bootstrap, "t", 1)
        for w in deaf:
            w.close()
        for f in floods:
            f.join(10)
    finally:
        s.kill()


def test_max_connections_and_max_connections_per_ip(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "max.connections=5", "max.connections.per.ip=3"))
    try:
        one = [Wire(s.bootstrap) for _ in range(3)]
        for i, w in enumerate(one):
            assert w.call(api_versions(correlation_id=i), 18, 3).error_code == 0
        extra = Wire(s.bootstrap)
        assert extra.closed_by_server(5)
        _wait_log(s, f"connection from {extra.address} refused: max.connections.per.ip=3 "
                     "reached for 127.0.0.1")
        two = [Wire(s.bootstrap, source="127.0.0.2") for _ in range(2)]
        for i, w in enumerate(two):
            assert w.call(api_versions(correlation_id=i), 18, 3).error_code == 0
        over = Wire(s.bootstrap, source="127.0.0.3")
        assert over.closed_by_server(5)
        _wait_log(s, f"connection from {over.address} refused: max.connections=5 reached")
        one[0].close()
        time.sleep(0.3)
        again = Wire(s.bootstrap)
        assert again.call(api_versions(), 18, 3).error_code == 0
        for w in (*one[1:], *two, again):
            assert w.call(api_versions(correlation_id=5), 18, 3).error_code == 0
    finally:
        s.kill()


@pytest.mark.slow
def test_thousands_of_idle_connections_cost_little_memory_and_are_closed(tmp_path):
    d = _data(tmp_path)
    s = start_server(d, settings=(*FAST, "connections.max.idle.ms=4000"))
    n = 2000
    try:
        healthy(s.bootstrap, "t")
        rss0 = rss_bytes(s.proc.pid)
        conns = [Wire(s.bootstrap) for _ in range(n)]
        time.sleep(1)
        healthy(s.bootstrap, "t")  # the others still served
        per = (rss_bytes(s.proc.pid) - rss0) / n
        print(f"{n} idle connections: {per / 1024:.1f} KiB each")
        assert per < 32 << 10, per
        assert all(w.closed_by_server(15) for w in conns[:: n // 20])
        assert all(w.closed_by_server(5) for w in conns)
        # the closes are logged, throttled: a few lines, then how many were left out
        log = _wait_log(s, "more like this not logged in the last")
        assert "idle for connections.max.idle.ms=4000" in log
        assert log.count("idle for connections.max.idle.ms") < 50
        for w in conns:
            w.close()
        healthy(s.bootstrap, "t")
    finally:
        s.kill()


def test_sigterm_answers_a_long_poll_in_flight_and_exits(served):
    base = healthy(served.bootstrap, "t")
    w = Wire(served.bootstrap, timeout=30)
    w.send(fetch("t", 0, base + 1, max_wait_ms=20_000, correlation_id=5))
    time.sleep(0.5)
    t0 = time.monotonic()
    served.proc.send_signal(signal.SIGTERM)
    got = w.read()
    assert got is not None and got[:4] == struct.pack(">i", 5)  # answered, not cut off
    assert served.proc.wait(30) == 0
    assert time.monotonic() - t0 < 10
    assert "stopped" in served.log()
    assert [v for *_, v in _stored(served.data_dir)][-1].startswith(b"health-")


SLOW = textwrap.dedent("""
    import sys, time
    from engine.kafka.registry import api

    @api(57, "UpdateFeatures", 0, 1)  # (an API rivven does not serve: a slow stand-in)
    def slow(req):
        time.sleep(120)

    from rivven_cli.main import main
    sys.argv = ["rivven", *sys.argv[1:]]
    main()
""")


def test_a_second_signal_during_a_long_drain_exits_at_once(tmp_path):
    d = _data(tmp_path)
    log_path = tmp_path / "slow.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", SLOW, "--data-dir", d, "serve",
                                 "--listen", "127.0.0.1:0", "--set", FAST[0]],
                                stdout=log, stderr=log, cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 60
        while not READY.search(log_path.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        m = READY.search(log_path.read_text())
        bootstrap = f"{m.group(1)}:{m.group(2)}"
        base = healthy(bootstrap, "t")
        w = Wire(bootstrap, timeout=30)
        w.send(encode(UpdateFeaturesRequest(version=0, timeout_ms=1000, feature_updates=[]), 0))
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert proc.poll() is None  # (draining: the slow request is in flight)
        assert "waiting for 1 request(s) in flight" in log_path.read_text()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 130
        assert time.monotonic() - t0 < 5
        text = log_path.read_text()
        assert "stopped at once by a second signal with 1 request(s) still running" in text
        assert "Traceback" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # what was acknowledged is there (the next open replays the WAL)
    stored = _stored(d)
    assert stored[-1][1] == base and stored[-1][3].startswith(b"health-")


def test_a_non_loopback_listener_needs_insecure(tmp_path):
    d = _data(tmp_path)
    r = run_rivven(d, "serve", "--listen", "0.0.0.0:0")
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1, err
    assert "not a loopback address" in err and "--insecure" in err
    s = start_server(d, "--listen", "0.0.0.0:0", "--insecure")
    try:
        assert ("listening on PLAINTEXT://0.0.0.0:0 without authentication or encryption "
                "(--insecure)") \
            in s.log()
        healthy(s.bootstrap.replace("0.0.0.0", "127.0.0.1"), "t")
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("version", [3, 9])
def test_produce_with_acks_0_and_bad_acks(served, version):
    """acks=0 gets no answer (the next request's answer comes next); acks=2 is refused."""
    w = Wire(served.bootstrap)
    w.send(produce("t", 0, batch(1), version=version, acks=0, correlation_id=3))
    r = w.call(produce("t", 0, batch(1), version=version, acks=2, correlation_id=4), 0,
               version)
    assert r.responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS
    w.close()
    assert healthy(served.bootstrap, "t") >= 1
