"""Consume-transform-produce in transactions through ``rivven serve`` with confluent-kafka, in
a process of its own, for the kill -9 test (tests/crash/test_kafka_txn_crash.py):
``python kafka_ctp_driver.py BOOTSTRAP DATA_DIR TRANSACTIONAL_ID GROUP SEED ABORTS_FILE``.

Reads ``in`` from the group's committed offsets (read from the data dir once its producer
has fenced every older one), writes each record to ``out`` (key ``partition:offset`` of
the input, value ``attempt tag:input value``) in transactions that commit the consumed
offsets with them (``send_offsets_to_transaction``), aborts about a third of them at random
(each such attempt's tag appended to ABORTS_FILE, fsynced, before the abort is asked for),
and exits 0 once every input record is committed. A refused or failed call is retried as
librdkafka says (retriable: again; abortable: abort, read again); a fatal error exits 3
(the test starts another instance, which fences this one)."""

import os
import random
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from engine import Engine


def call(fn, *args, tries=60):
    """``fn(*args)`` again while librdkafka says the error is retriable."""
    for i in range(tries):
        try:
            return fn(*args)
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and i < tries - 1:
                time.sleep(0.2)
                continue
            raise


def main(bootstrap, data_dir, tid, group, seed, aborts_file):
    rng = random.Random(int(seed))
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                  "reconnect.backoff.max.ms": 200})
    call(p.init_transactions, 30)
    with Engine.open(data_dir, read_only=True) as eng:
        try:
            start = eng.groups.committed(group)
        except Exception:  # (no offsets yet)
            start = {}
        ends = eng.end_offsets("in")
    pos = {q: start.get(("in", q), 0) for q in ends}
    print(f"START {pos} of {ends}", flush=True)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "reconnect.backoff.max.ms": 200, "fetch.message.max.bytes": 1024})
    c.assign([TopicPartition("in", q, pos[q]) for q in ends])
    rewind = False
    attempt = 0
    while any(pos[q] < ends[q] for q in ends):
        attempt += 1
        if rewind:  # (after an abort: read its records again)
            for q in ends:
                c.seek(TopicPartition("in", q, pos[q]))
            rewind = False
        batch = []
        want = rng.randint(1, 30)
        deadline = time.monotonic() + 5
        while len(batch) < want and time.monotonic() < deadline:
            batch += [m for m in c.consume(want - len(batch), 0.3) if m.error() is None]
        if not batch:
            continue
        tag = f"{tid}-{os.getpid()}-{attempt}"
        nxt = dict(pos)
        try:
            p.begin_transaction()
            for m in batch:
                p.produce("out", key=b"%d:%d" % (m.partition(), m.offset()),
                          value=tag.encode() + b":" + m.value())
                nxt[m.partition()] = max(nxt[m.partition()], m.offset() + 1)
            call(p.send_offsets_to_transaction,
                 [TopicPartition("in", q, o) for q, o in nxt.items()],
                 c.consumer_group_metadata(), 30)
            if rng.random() < 0.3:
                with open(aborts_file, "a") as f:
                    f.write(tag + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                call(p.abort_transaction, 30)
                rewind = True
                continue
            call(p.commit_transaction, 30)
            pos = nxt
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or not err.txn_requires_abort():
                print(f"FATAL {err}", flush=True)
                sys.exit(3)
            print(f"ABORTABLE {err}", flush=True)
            call(p.abort_transaction, 30)
            rewind = True  # (read the batch again in the next attempt)
    c.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:7])
