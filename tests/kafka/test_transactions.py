"""Idempotent and transactional producers through ``rivven serve`` with confluent-kafka
(librdkafka) and kafka-python's admin client: commits and aborts seen right by read_committed
consumers (aborted batches interleaved with committed ones in one partition), the last
stable offset in ListOffsets, fencing, consume-transform-produce with group offsets, an
idempotent retry across a server restart, and what ``kafka-transactions.sh`` asks.
(Clients and the server killed at random: tests/crash/test_kafka_txn_crash.py.)"""

import random
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from helpers import run_rivven
from helpers.kafka import start_server

from engine import Engine


def producer(served, tid=None, **conf):
    base = {"bootstrap.servers": served.bootstrap, "linger.ms": 5}
    if tid is not None:
        base["transactional.id"] = tid
    else:
        base["enable.idempotence"] = True
    return Producer({**base, **conf})


def consume(bootstrap, topic, partitions, isolation="read_committed", until=None, idle_s=3.0,
            **conf):
    """Every record from offset 0 of ``partitions`` (until ``until`` of them, or nothing new
    for ``idle_s``): ``[(partition, offset, key, value)]``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "isolation.level": isolation, **conf})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = []
    last = time.monotonic()
    deadline = last + 60
    while time.monotonic() < deadline and time.monotonic() - last < idle_s:
        if until is not None and len(got) >= until:
            break
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        got.append((m.partition(), m.offset(), m.key(), m.value()))
        last = time.monotonic()
    c.close()
    return got


def engine_read(data_dir, topic, partition, isolation):
    with Engine.open(data_dir, read_only=True) as eng:
        return [(r.offset, r.value) for r in eng.read(topic, partition, 0, 100_000,
                                                      isolation_level=isolation)]


# ---------------------------------------------------------------- commit, abort, read_committed
def test_read_committed_sees_committed_records_only_with_aborts_interleaved(served):
    """Committed and aborted transactions of two producers and plain idempotent records,
    interleaved in ONE partition: a read_committed consumer gets exactly the committed and
    plain ones, in offset order, never an aborted one (tansu showed aborted records)."""
    a, b = producer(served, "tx-a"), producer(served, "tx-b")
    plain = producer(served)
    a.init_transactions(30)
    b.init_transactions(30)
    rng = random.Random(7)
    expected, aborted = [], []
    for i in range(12):
        a.begin_transaction()
        b.begin_transaction()
        sent = {b"a": [], b"b": []}
        for j in range(rng.randint(1, 20)):
            for p, name in ((a, b"a"), (b, b"b")):
                p.produce("t", value=name + b"%d-%d" % (i, j), partition=0)
                sent[name].append(name + b"%d-%d" % (i, j))
            if j % 5 == 0:  # a's and b's batches interleave in the partition
                a.flush(10)
                b.flush(10)
        plain.produce("t", value=b"plain%d" % i, partition=0)
        plain.flush(10)
        expected.append(b"plain%d" % i)
        for p, name in ((a, b"a"), (b, b"b")):
            if rng.random() < 0.5:
                p.abort_transaction(30)
                aborted += sent[name]
            else:
                p.commit_transaction(30)
                expected += sent[name]
    assert aborted and len(expected) > 12  # (both kinds happened)
    got = consume(served.bootstrap, "t", [0])
    values = [v for _, _, _, v in got]
    assert sorted(values) == sorted(expected) and len(values) == len(set(values))
    assert not set(values) & set(aborted)
    assert [o for _, o, _, _ in got] == sorted(o for _, o, _, _ in got)
    # read_uncommitted sees everything (some aborted batches were in flight when their abort
    # purged them: those were never written), and both agree with the engine
    everything = consume(served.bootstrap, "t", [0], isolation="read_uncommitted")
    assert set(values) <= {v for *_, v in everything} <= set(expected + aborted)
    assert {v for *_, v in everything} & set(aborted)
    assert [(o, v) for _, o, _, v in got] == engine_read(served.data_dir, "t", 0,
                                                           "read_committed")
    assert [(o, v) for _, o, _, v in everything] == engine_read(served.data_dir, "t", 0,
                                                                  "read_uncommitted")


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(served):
    p = producer(served, "tx-open")
    p.init_transactions(30)
    plain = producer(served)
    for i in range(3):
        plain.produce("t", value=b"before%d" % i, partition=1)
    plain.flush(10)
    p.begin_transaction()
    for i in range(4):
        p.produce("t", value=b"open%d" % i, partition=1)
    p.flush(10)
    plain.produce("t", value=b"after", partition=1)  # past the open transaction
    plain.flush(10)
    assert [v for *_, v in consume(served.bootstrap, "t", [1], idle_s=1.5)] == \
        [b"before0", b"before1", b"before2"]
    p.commit_transaction(30)
    assert [v for *_, v in consume(served.bootstrap, "t", [1])] == \
        [b"before0", b"before1", b"before2", b"open0", b"open1", b"open2", b"open3", b"after"]


def test_a_waiting_read_committed_fetch_wakes_when_the_transaction_commits(served):
    c = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "w",
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 10000})
    c.assign([TopicPartition("t", 0, 0)])
    p = producer(served, "tx-wake")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("t", value=b"x", partition=0)
    p.flush(10)
    assert c.poll(1.0) is None
    t0 = time.monotonic()
    p.commit_transaction(30)
    m = None
    while m is None and time.monotonic() - t0 < 10:
        m = c.poll(0.2)
    c.close()
    assert m is not None and m.value() == b"x"
    assert time.monotonic() - t0 < 5  # woken by the markers, not by the 10 s wait


# ---------------------------------------------------------------- ListOffsets
def test_latest_is_the_log_end_and_read_committed_latest_the_last_stable_offset(served):
    """ListOffsets "latest" is the log end, past a whole batch (tansu answered a batch's
    base offset + 1); with read_committed it is the last stable offset."""
    plain = producer(served, **{"linger.ms": 1000})
    for i in range(5):
        plain.produce("t", value=b"p%d" % i, partition=0)  # one batch of 5
    plain.flush(10)
    p = producer(served, "tx-lso")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("t", value=b"t%d" % i, partition=0)
    p.flush(10)
    tp = TopicPartition("t", 0)

    def latest(isolation):
        c = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "lo",
                      "isolation.level": isolation})
        try:
            return c.get_watermark_offsets(tp, timeout=10, cached=False)
        finally:
            c.close()

    assert latest("read_uncommitted") == (0, 8)
    assert latest("read_committed") == (0, 5)  # the open transaction starts at 5
    p.commit_transaction(30)
    assert latest("read_uncommitted") == (0, 9)  # 8 is the commit marker
    assert latest("read_committed") == (0, 9)
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert eng.end_offsets("t")[0] == 9


# ---------------------------------------------------------------- fencing and errors
def test_a_second_producer_with_the_same_transactional_id_fences_the_first(served):
    first = producer(served, "tx-fence")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("t", value=b"zombie", partition=0)
    first.flush(10)
    second = producer(served, "tx-fence")
    second.init_transactions(30)  # aborts the first's transaction, bumps the epoch
    second.begin_transaction()
    second.produce("t", value=b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        first.produce("t", value=b"late", partition=0)
        first.flush(10)
        first.commit_transaction(30)
    err = e.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FENCED, err
    assert [v for *_, v in consume(served.bootstrap, "t", [0])] == [b"live"]
    rows = [r for r in _describe_producers(served, "t", 0)]
    assert len(rows) == 1 and rows[0].producer_epoch == 2  # fenced at 1, the new one at 2


def test_transaction_timeout_above_the_servers_maximum_is_refused(tmp_path):
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", check=True)
    s = start_server(d, settings=("group.initial.rebalance.delay.ms=0",
                                  "transaction.max.timeout.ms=5000"))
    try:
        p = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "too-long",
                      "transaction.timeout.ms": 6000})
        with pytest.raises(KafkaException) as e:
            p.init_transactions(10)
        assert e.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
        ok = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "fits",
                       "transaction.timeout.ms": 5000})
        ok.init_transactions(10)
    finally:
        s.kill()


def test_the_server_aborts_a_transaction_past_its_timeout(tmp_path):
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", check=True)
    s = start_server(d, settings=(
        "group.initial.rebalance.delay.ms=0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"))
    try:
        p = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "slow",
                      "transaction.timeout.ms": 1000})
        p.init_transactions(10)
        p.begin_transaction()
        p.produce("t", value=b"never", partition=0)
        p.flush(10)
        deadline = time.monotonic() + 15
        state = None
        while time.monotonic() < deadline and state != "CompleteAbort":
            time.sleep(0.2)
            with Engine.open(d, read_only=True) as eng:
                state = eng.txn.describe("slow")["state"]
        assert state == "CompleteAbort"  # nobody called the producer: the server did it
        assert "slow" in s.log() and "timed out" in s.log()
        with pytest.raises(KafkaException) as e:
            p.commit_transaction(10)
        assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort()
        with Engine.open(d, read_only=True) as eng:
            assert eng.read("t", 0, 0, isolation_level="read_committed") == []
            assert eng.txn.find_hanging() == []
    finally:
        s.kill()


def test_a_transactional_batch_outside_its_transaction_is_refused(served):
    """The produce check (KIP-890's verification): a batch that claims a transaction its
    partition was never added to is refused with INVALID_TXN_STATE, nothing written."""
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
    from kafka.protocol.producer.transaction import (
        InitProducerIdRequest,
        InitProducerIdResponse,
    )
    from kafka.record.memory_records import MemoryRecordsBuilder

    init = _call(served, InitProducerIdRequest(transactional_id="raw",
                                               transaction_timeout_ms=60000),
                 InitProducerIdResponse, 4)
    assert init.error_code == 0
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20,
                             transactional=True, producer_id=init.producer_id,
                             producer_epoch=init.producer_epoch, base_sequence=0)
    b.append(timestamp=None, key=None, value=b"sneaky", headers=[])
    b.close()
    records = bytes(b.buffer())
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id="raw", acks=-1, timeout_ms=10000, topic_data=[
        T(name="t", partition_data=[T.PartitionProduceData(index=0, records=records)])])
    (topic,) = _call(served, req, ProduceResponse, 9).responses
    (part,) = topic.partition_responses
    assert part.error_code == 48  # INVALID_TXN_STATE: the partition was not added
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert eng.end_offsets("t") == {0: 0, 1: 0}


def test_the_transaction_apis_answer_kafkas_error_codes(served):
    """What each request gets on the wire, version by version (the codes a client acts on)."""
    from kafka.protocol.producer.transaction import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        EndTxnRequest,
        EndTxnResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    )

    def init(version, tid="w", pid=-1, epoch=-1, timeout=60000):
        r = _call(served, InitProducerIdRequest(transactional_id=tid,
                                                transaction_timeout_ms=timeout,
                                                producer_id=pid, producer_epoch=epoch),
                  InitProducerIdResponse, version)
        return r.error_code, r.producer_id, r.producer_epoch

    def end(version, pid, epoch, commit=True, tid="w"):
        return _call(served, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                           producer_epoch=epoch, committed=commit),
                     EndTxnResponse, version).error_code

    def add(version, pid, epoch, topics, tid="w"):
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = _call(served, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in topics]),
            AddPartitionsToTxnResponse, version)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    assert init(4, tid="")[0] == 42  # INVALID_REQUEST
    assert init(4, timeout=0)[0] == 50  # INVALID_TRANSACTION_TIMEOUT
    assert init(4, timeout=900001)[0] == 50
    assert init(4, pid=-1, epoch=3)[0] == 42  # half a producer id/epoch
    err, pid, epoch = init(4)
    assert (err, epoch) == (0, 0)
    # a bump asked for with the producer's own id and epoch, and that request retried
    assert init(4, pid=pid, epoch=0) == (0, pid, 1)
    assert init(4, pid=pid, epoch=0) == (0, pid, 1)
    assert init(4, pid=pid, epoch=7)[0] == 90  # PRODUCER_FENCED
    assert init(3, pid=pid, epoch=7)[0] == 47  # (before v4: INVALID_PRODUCER_EPOCH)
    assert end(3, pid, 1) == 48  # INVALID_TXN_STATE: nothing to end
    assert end(3, pid + 1, 1) == 49  # INVALID_PRODUCER_ID_MAPPING
    assert end(3, pid, 0) == 90 and end(1, pid, 0) == 47
    assert add(1, pid, 1, [("t", [0]), ("nope", [0]), ("t", [5])]) == {
        ("t", 0): 55, ("nope", 0): 3, ("t", 5): 3}  # OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC..
    assert add(1, pid, 0, [("t", [0])]) == {("t", 0): 47}
    assert add(3, pid, 0, [("t", [0])]) == {("t", 0): 90}
    assert add(3, pid, 1, [("t", [0, 1])]) == {("t", 0): 0, ("t", 1): 0}
    offsets = _call(served, AddOffsetsToTxnRequest(transactional_id="w", producer_id=pid,
                                                   producer_epoch=1, group_id=""),
                    AddOffsetsToTxnResponse, 3).error_code
    assert offsets == 24  # INVALID_GROUP_ID
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition

    def commit_offsets(group):
        r = _call(served, TxnOffsetCommitRequest(
            transactional_id="w", group_id=group, producer_id=pid, producer_epoch=1,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=5,
                                              committed_leader_epoch=-1,
                                              committed_metadata=""),
                                            P(partition_index=9, committed_offset=5,
                                              committed_leader_epoch=-1,
                                              committed_metadata="")])]),
            TxnOffsetCommitResponse, 3)
        return {(t.name, p.partition_index): p.error_code for t in r.topics
                for p in t.partitions}

    assert commit_offsets("g") == {("t", 0): 48, ("t", 9): 3}  # g not added yet
    assert _call(served, AddOffsetsToTxnRequest(transactional_id="w", producer_id=pid,
                                                producer_epoch=1, group_id="g"),
                 AddOffsetsToTxnResponse, 3).error_code == 0
    assert commit_offsets("g") == {("t", 0): 0, ("t", 9): 3}
    assert end(3, pid, 1, commit=True) == 0
    assert end(3, pid, 1, commit=True) == 0  # retried: done already
    assert end(3, pid, 1, commit=False) == 48
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert eng.groups.committed("g") == {("t", 0): 5}
        assert eng.txn.describe("w")["state"] == "CompleteCommit"


# ---------------------------------------------------------------- consume-transform-produce
def test_consume_transform_produce_with_random_aborts_is_exactly_once(served):
    run_rivven(served.data_dir, "topic", "create", "in", "--partitions", "2", check=True)
    run_rivven(served.data_dir, "topic", "create", "out", "--partitions", "3", check=True)
    n = 400
    src = producer(served)
    for i in range(n):
        src.produce("in", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    assert src.flush(30) == 0
    rng = random.Random(11)
    aborted_attempts = ctp_run(served, "ctp", "g1", rng, abort_p=0.3)
    check_exactly_once(served, "g1", n, aborted_attempts)


def ctp_run(served, tid, group, rng, abort_p, max_txns=1000):
    """Read ``in`` from the group's committed offsets, write ``out`` in transactions that
    commit the offsets with them, abort at random: the attempts it aborted."""
    p = producer(served, tid)
    p.init_transactions(30)
    with Engine.open(served.data_dir, read_only=True) as eng:
        try:
            start = eng.groups.committed(group)
        except Exception:
            start = {}
        ends = eng.end_offsets("in")
    pos = {q: start.get(("in", q), 0) for q in ends}
    c = Consumer({"bootstrap.servers": served.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    aborted = []
    attempt = 0
    try:
        while any(pos[q] < ends[q] for q in ends) and attempt < max_txns:
            attempt += 1
            c.assign([TopicPartition("in", q, pos[q]) for q in ends])
            batch = []
            while len(batch) < rng.randint(1, 40):
                got = c.consume(40, 0.5)
                if not got:
                    break
                batch += [m for m in got if m.error() is None]
            if not batch:
                continue
            p.begin_transaction()
            tag = b"%s-%d" % (tid.encode(), attempt)
            nxt = dict(pos)
            for m in batch:
                p.produce("out", key=b"%d:%d" % (m.partition(), m.offset()),
                          value=tag + b":" + m.value())
                nxt[m.partition()] = max(nxt[m.partition()], m.offset() + 1)
            p.send_offsets_to_transaction(
                [TopicPartition("in", q, o) for q, o in nxt.items()],
                c.consumer_group_metadata(), 30)
            if rng.random() < abort_p:
                aborted.append(tag)
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                pos = nxt
    finally:
        c.close()
    return aborted


def check_exactly_once(served, group, n, aborted_attempts):
    outs = consume(served.bootstrap, "out", [0, 1, 2], until=None)
    keys = [k for _, _, k, _ in outs]
    assert len(keys) == n and len(set(keys)) == n  # every input exactly once
    tags = {v.rsplit(b":", 1)[0] for *_, v in outs}
    assert not tags & set(aborted_attempts)  # aborted never
    with Engine.open(served.data_dir, read_only=True) as eng:
        assert eng.groups.committed(group) == {("in", q): o
                                               for q, o in eng.end_offsets("in").items()}
        everything = sum(len(eng.read("out", q, 0, 100_000)) for q in range(3))
    assert everything >= n  # (aborted attempts' records are in the log, unseen)


# ---------------------------------------------------------------- idempotence across restarts
def test_an_idempotent_retry_across_a_server_restart_writes_no_duplicate(tmp_path):
    """The server dies right after a batch is durable, before it answers; the producer
    retries against the restarted server and the batch is stored once."""
    d = str(tmp_path / "data")
    run_rivven(d, "topic", "create", "t", check=True)
    s = start_server(d, env={"RIVVEN_FAILPOINT": "append.after_wal_sync"})
    port = s.bootstrap.rsplit(":", 1)[1]
    p = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True,
                  "linger.ms": 50, "message.timeout.ms": 60000,
                  "reconnect.backoff.max.ms": 200})
    delivered = []
    for i in range(10):
        p.produce("t", value=b"m%d" % i, partition=0,
                  on_delivery=lambda err, m: delivered.append((err, m.offset())))
    p.poll(0)
    s.proc.wait(30)  # killed by the failpoint: the batch is in the WAL, unanswered
    assert s.proc.returncode == -9
    s2 = start_server(d, "--listen", f"127.0.0.1:{port}")
    try:
        assert p.flush(60) == 0
        assert [e for e, _ in delivered] == [None] * 10
        assert sorted(o for _, o in delivered) == list(range(10))
        with Engine.open(d, read_only=True) as eng:
            assert [r.value for r in eng.read("t", 0, 0)] == [b"m%d" % i for i in range(10)]
    finally:
        s2.kill()


# ---------------------------------------------------------------- kafka-transactions.sh
def test_list_describe_and_describe_producers_as_kafka_transactions_sh_asks(served):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    p = producer(served, "tx-listed", **{"transaction.timeout.ms": 45000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("t", value=b"x", partition=1)
    p.flush(10)
    done = producer(served, "tx-done")
    done.init_transactions(30)
    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap)
    try:
        (listed,) = admin.list_transactions().values()
        states = {t.transactional_id: (t.state.value, t.producer_id) for t in listed}
        assert states["tx-listed"][0] == "Ongoing" and states["tx-done"][0] == "Empty"
        (only,) = admin.list_transactions(state_filters=["Ongoing"]).values()
        assert [t.transactional_id for t in only] == ["tx-listed"]
        (none,) = admin.list_transactions(producer_id_filters=[123456789]).values()
        assert none == []
        # (as Kafka, an id with no transaction counts as started at -1: always older)
        (older,) = admin.list_transactions(duration_filter_ms=3_600_000).values()
        assert [t.transactional_id for t in older] == ["tx-done"]
        (young,) = admin.list_transactions(duration_filter_ms=0,
                                           state_filters=["Ongoing", "Bogus"]).values()
        assert [t.transactional_id for t in young] == ["tx-listed"]
        desc = admin.describe_transactions(["tx-listed"])["tx-listed"]
        assert desc.state.value == "Ongoing" and desc.transaction_timeout_ms == 45000
        assert {(tp.topic, tp.partition) for tp in desc.topic_partitions} == {("t", 1)}
        assert desc.producer_id == states["tx-listed"][1] and desc.producer_epoch == 0
        assert 0 < time.time() * 1000 - desc.transaction_start_time_ms < 60_000
        from kafka.errors import TransactionalIdNotFoundError

        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["no-such-id"])
        prod = admin.describe_producers([KTP("t", 1)])[KTP("t", 1)].active_producers
        assert [(x.producer_id, x.producer_epoch, x.last_sequence,
                 x.current_transaction_start_offset) for x in prod] == \
            [(desc.producer_id, 0, 0, 0)]
    finally:
        admin.close()
    p.commit_transaction(30)


# ---------------------------------------------------------------- raw protocol helpers
def _call(served, request, response_class, version):
    """One request on a fresh connection (kafka-python's encoder); its response."""
    host, port = served.bootstrap.rsplit(":", 1)
    request.with_header(correlation_id=1, client_id="raw-test")
    frame = request.encode(version=version, header=True, framed=True)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame)
        size = int.from_bytes(_read(sock, 4), "big")
        data = _read(sock, size)
    return response_class.decode(data, version=version, header=True)


def _read(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def _describe_producers(served, topic, partition):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap)
    try:
        return admin.describe_producers([KTP(topic, partition)])[KTP(topic, partition)] \
            .active_producers
    finally:
        admin.close()
