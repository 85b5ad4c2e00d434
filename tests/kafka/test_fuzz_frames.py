"""Fuzzing ``rivven serve``'s listener with hypothesis: random frames, and real requests of
many APIs (encoded by kafka-python's generated classes: Produce with real record batches,
Fetch, Metadata, ApiVersions, ListOffsets, JoinGroup, SyncGroup, OffsetCommit, ...) with
bytes flipped, set, cut and added, their size, API key and version changed, and bytes inside
a record batch changed with its CRC made right again (so the batch's own checks are reached).
All against one real server process: it must stay up, answer a fresh client after every
few cases, keep its memory bounded and leave the records stored before unchanged.

Derandomized (the same cases every run): ``make test`` runs 300 of them (a few seconds),
``make fuzz`` the long campaign (RIVVEN_FUZZ_FRAMES=20000: about two minutes)."""

import collections
import os
import re
import socket
import struct
import time

import pytest
from helpers import run_rivven
from helpers.kafka import FAST, start_server
from helpers.kafka_wire import (
    Wire,
    api_versions,
    batch,
    encode,
    fetch,
    healthy,
    metadata,
    produce,
    rss_bytes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.record.util import calc_crc32c

from engine import Engine

CASES = int(os.environ.get("RIVVEN_FUZZ_FRAMES") or 300)


def _gzip_batch() -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20)
    for i in range(20):
        b.append(timestamp=1_700_000_000_000 + i, key=b"gz%d" % i, value=b"v" * 50)
    b.close()
    return bytes(b.buffer())


def _idempotent_batch() -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    b.set_producer_state(producer_id=1000, producer_epoch=0, base_sequence=0,
                         is_transactional=False)
    for i in range(3):
        b.append(timestamp=1_700_000_000_000, key=None, value=b"i%d" % i)
    b.close()
    return bytes(b.buffer())


def _seeds() -> list[tuple[str, bytes, bytes | None]]:
    """(what, frame, the record batch inside it or None)."""
    from engine.kafka.protocol import Messages

    m = Messages()
    R = m.request  # (the generated request classes by API key)
    out: list[tuple[str, bytes, bytes | None]] = []
    for codec_batch in (batch(3), _gzip_batch(), _idempotent_batch()):
        for v in (3, 9):
            out.append((f"Produce v{v}", produce("t", 0, codec_batch, version=v), codec_batch))
    for v in (4, 12):
        out.append((f"Fetch v{v}", fetch("t", 0, 0, version=v, max_wait_ms=50), None))
    for v in (1, 9, 12):
        out.append((f"Metadata v{v}", metadata(["t"], version=v), None))
    out.append(("Metadata v12 all", metadata(None, version=12), None))
    for v in (0, 3):
        out.append((f"ApiVersions v{v}", api_versions(v), None))
    LO = R[2]
    for v in (1, 7):
        out.append((f"ListOffsets v{v}", encode(LO(version=v, replica_id=-1, isolation_level=0,
                                                  topics=[LO.ListOffsetsTopic(name="t", partitions=[
                                                      LO.ListOffsetsTopic.ListOffsetsPartition(
                                                          partition_index=0, current_leader_epoch=-1,
                                                          timestamp=-2)])]), v), None))
    FC = R[10]
    out.append(("FindCoordinator v1", encode(FC(version=1, key="g", key_type=0), 1), None))
    out.append(("FindCoordinator v4", encode(FC(version=4, key_type=0, coordinator_keys=["g"]),
                                             4), None))
    JG = R[11]
    for v in (5, 9):
        out.append((f"JoinGroup v{v}", encode(JG(
            version=v, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=b"\0\1\0\0\0\1\0\1t")],
            reason=None), v), None))
    SG = R[14]
    out.append(("SyncGroup v5", encode(SG(
        version=5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=[SG.SyncGroupRequestAssignment(member_id="m", assignment=b"\0\1")]), 5),
        None))
    out.append(("Heartbeat v4", encode(R[12](version=4, group_id="g", generation_id=1,
                                             member_id="m", group_instance_id=None), 4), None))
    LG = R[13]
    out.append(("LeaveGroup v5", encode(LG(version=5, group_id="g", members=[
        LG.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]), 5), None))
    OC = R[8]
    for v in (2, 8):
        out.append((f"OffsetCommit v{v}", encode(OC(
            version=v, group_id="g", generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(
                name="t", partitions=[OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    commit_timestamp=-1, committed_metadata="")])]), v), None))
    OF = R[9]
    out.append(("OffsetFetch v6", encode(OF(version=6, group_id="g", topics=[
        OF.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])], require_stable=False),
        6), None))
    out.append(("InitProducerId v4", encode(R[22](
        version=4, transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1), 4), None))
    CT = R[19]
    out.append(("CreateTopics v5 (validate only)", encode(CT(
        version=5, topics=[CT.CreatableTopic(name="fz", num_partitions=1, replication_factor=1,
                                             assignments=[], configs=[])],
        timeout_ms=1000, validate_only=True), 5), None))
    DC = R[32]
    out.append(("DescribeConfigs v4", encode(DC(version=4, resources=[DC.DescribeConfigsResource(
        resource_type=2, resource_name="t", configuration_keys=None)], include_synonyms=False,
        include_documentation=False), 4), None))
    out.append(("ListGroups v4", encode(R[16](version=4, states_filter=[]), 4), None))
    out.append(("DescribeGroups v5", encode(R[15](version=5, groups=["g"],
                                                  include_authorized_operations=False), 5), None))
    out.append(("DescribeCluster v0", encode(R[60](
        version=0, include_cluster_authorized_operations=False), 0), None))
    return out


SEEDS = _seeds()

OPS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 1 << 20), st.sampled_from([0, 1, 0x7F, 0x80, 0xFF])),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20)),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("size"), st.sampled_from([-1, 0, 7, 8, 1 << 20, (1 << 31) - 1]) |
              st.integers(-(1 << 31), (1 << 31) - 1)),
    st.tuples(st.just("key"), st.integers(-2, 80)),
    st.tuples(st.just("version"), st.integers(-1, 20)),
    st.tuples(st.just("fix size"), st.just(0)),
)
# inside a seed's record batch, its CRC made right after (reaching the batch's own checks)
BATCH_OPS = st.tuples(st.sampled_from(["flip", "set"]), st.integers(0, 1 << 20),
                      st.integers(0, 255))


def _mutate(seed: int, batch_ops: list, ops: list) -> bytes:
    _, frame, records = SEEDS[seed]
    data = bytearray(frame)
    if records is not None and batch_ops:
        at = bytes(data).find(records)
        b = bytearray(records)
        for kind, pos, v in batch_ops:
            p = 12 + pos % max(1, len(b) - 12)  # (past base offset and length: CRC'd bytes or
            b[p] = b[p] ^ (1 << (v % 8)) if kind == "flip" else v % 256  # the CRC's own)
        if len(b) > 21:
            b[17:21] = struct.pack(">I", calc_crc32c(bytes(b[21:])))
        data[at:at + len(b)] = b
    for op, arg, *more in ops:
        if op in ("flip", "set") and data:
            p = arg % len(data)
            data[p] = data[p] ^ (1 << more[0]) if op == "flip" else more[0]
        elif op == "cut":
            del data[arg % (len(data) + 1):]
        elif op == "extend":
            data += arg
        elif op == "size" and len(data) >= 4:
            data[0:4] = struct.pack(">i", arg)
        elif op == "key" and len(data) >= 6:
            data[4:6] = struct.pack(">h", arg)
        elif op == "version" and len(data) >= 8:
            data[6:8] = struct.pack(">h", arg)
        elif op == "fix size" and len(data) >= 4:
            data[0:4] = struct.pack(">i", len(data) - 4)
    return bytes(data)


CASE = st.one_of(
    st.binary(max_size=400).map(lambda b: ("random bytes", b)),
    st.binary(max_size=400).map(lambda b: ("a random frame", struct.pack(">i", len(b)) + b)),
    st.tuples(st.integers(0, len(SEEDS) - 1), st.lists(BATCH_OPS, max_size=3),
              st.lists(OPS, min_size=1, max_size=4)).map(
        lambda t: (SEEDS[t[0]][0] + " mutated", _mutate(*t))),
)


def _send(bootstrap: str, data: bytes) -> str:
    """Send one case on a fresh connection; wait for an answer or the close when the frame is
    whole (a long poll: at most 3 s), then hang up. What happened: answered, closed, no answer
    (a long poll, acks=0), partial (a frame not sent whole: not waited for)."""
    host, _, port = bootstrap.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    try:
        s.sendall(data)
        size = struct.unpack(">i", data[:4])[0] if len(data) >= 4 else -1
        if not 8 <= size <= len(data) - 4:
            return "partial" if size > len(data) - 4 else "bad size"
        s.settimeout(3)
        try:
            return "answered" if s.recv(1 << 16) else "closed"
        except TimeoutError:
            return "no answer"
    except ConnectionError:
        return "closed"  # (closed by the server while we sent or read)
    finally:
        s.close()


def _kept(d: str) -> list:
    with Engine.open(d, read_only=True) as eng:
        return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers))
                for r in eng.read("keep", 0, 0, 10_000)]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fuzz") / "data")
    run_rivven(d, "topic", "create", "t", "--partitions", "2", check=True)
    run_rivven(d, "topic", "create", "keep", check=True)
    s = start_server(d, settings=(*FAST, "auto.create.topics.enable=false"))
    try:
        yield s
    finally:
        s.kill()


def test_the_seeds_are_real_requests_the_server_answers(fuzzed):
    """(each seed, as kafka-python encoded it, gets an answer, or, of an API not served yet,
    the close Kafka's broker does too: the mutations start from requests that reach the
    handlers)"""
    for what, frame, _ in SEEDS:
        w = Wire(fuzzed.bootstrap)
        w.send(frame)
        if w.read() is None:
            time.sleep(0.2)
            assert f"closing {w.address}: an API not served (key " in fuzzed.log(), what
        w.close()


def test_random_and_mutated_frames_never_take_the_server_down(fuzzed):
    d, bootstrap = fuzzed.data_dir, fuzzed.bootstrap
    w = Wire(bootstrap)
    for i in range(20):
        r = w.call(produce("keep", 0, batch(1, key=b"keep", value=b"kept-%d-" % i)), 0, 9)
        assert r.responses[0].partition_responses[0].error_code == 0
    w.close()
    kept = _kept(d)
    assert len(kept) == 20
    healthy(bootstrap, "t")
    rss0 = rss_bytes(fuzzed.proc.pid)
    steady = Wire(bootstrap)  # one connection that lives through the whole run
    count = [0]
    outcomes: collections.Counter[str] = collections.Counter()

    @settings(max_examples=CASES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(CASE)
    def case(c: tuple[str, bytes]) -> None:
        what, data = c
        outcomes[_send(bootstrap, data)] += 1
        count[0] += 1
        assert fuzzed.proc.poll() is None, f"the server died after {what}: {data!r}"
        if count[0] % 25 == 0:
            av = steady.call(api_versions(correlation_id=count[0]), 18, 3)
            assert av.error_code == 0, f"no answer after {what}: {data!r}"

    t0 = time.monotonic()
    case()
    print(f"{count[0]} cases in {time.monotonic() - t0:.1f} s: {dict(outcomes)}")
    assert count[0] >= CASES // 2
    assert steady.call(api_versions(correlation_id=1), 18, 3).error_code == 0
    steady.close()
    healthy(bootstrap, "t")
    healthy(bootstrap, "t", 1)
    rss = rss_bytes(fuzzed.proc.pid)
    assert rss - rss0 < 128 << 20, (rss0, rss)
    assert _kept(d) == kept
    # a handler that raised (the client was cut off: the server went on) is still a bug
    log = fuzzed.log()
    failed = [x for x in log.splitlines()
              if re.search(r"closing \S+: (\w+ failed|\w+ response not encodable|internal)", x)]
    assert not failed and "Traceback" not in log, "\n".join(failed) + "\n" + (
        log[log.index("Traceback"):][:6000] if "Traceback" in log else "")
