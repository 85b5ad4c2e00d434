"""A consumer-group member in a process of its own (tests/kafka/test_kafka_groups.py kills it with
-9, or stops it with SIGTERM: it then closes, leaving the group).

    python kafka_member.py KIND BOOTSTRAP GROUP TOPIC ASSIGNOR NAME [SLEEP_MS]

KIND: confluent (librdkafka) or kafka-python. It commits each record's offset + 1 on its
own, synchronously, after taking it, and writes one line per event to stdout, flushed:

    A p     partition p assigned         V p     partition p revoked
    R p o   record o of p taken          C p x   offset x of p committed (answered: done)
    E p x   the commit of x failed (a rebalance took the partition, or it was fenced)
"""

from __future__ import annotations

import os
import signal
import sys
import time

stop = False


def out(*fields: object) -> None:
    sys.stdout.write(" ".join(map(str, fields)) + "\n")
    sys.stdout.flush()


def on_term(*_: object) -> None:
    global stop
    stop = True


def confluent(bootstrap: str, group: str, topic: str, assignor: str, name: str,
              pause: float) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "partition.assignment.strategy": assignor, "session.timeout.ms": 3000,
                  "heartbeat.interval.ms": 300, "max.poll.interval.ms": 60000})

    def assigned(consumer: object, parts: list) -> None:
        for p in parts:
            out("A", p.partition)

    def revoked(consumer: object, parts: list) -> None:
        for p in parts:
            out("V", p.partition)

    c.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while not stop:
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            continue
        out("R", m.partition(), m.offset())
        try:
            c.commit(offsets=[TopicPartition(topic, m.partition(), m.offset() + 1)],
                     asynchronous=False)
            out("C", m.partition(), m.offset() + 1)
        except KafkaException as e:
            out("E", m.partition(), m.offset() + 1, str(e.args[0].name()))
        if pause:
            time.sleep(pause)
    c.close()
    out("closed")


def kafka_python(bootstrap: str, group: str, topic: str, assignor: str, name: str,
                 pause: float) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    cls = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
           "cooperative-sticky": CooperativeStickyAssignor}[assignor]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      partition_assignment_strategy=[cls], session_timeout_ms=3000,
                      heartbeat_interval_ms=300, max_poll_records=20)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: list) -> None:
            for p in assigned:
                out("A", p.partition)

        def on_partitions_revoked(self, revoked: list) -> None:
            for p in revoked:
                out("V", p.partition)

    c.subscribe([topic], listener=Listener())
    while not stop:
        # (a long poll: kafka-python 3.0.12 loses a join that completes after poll() returned
        # - it never takes the assignment and stops heartbeating - and a rebalance waits up
        # to a session timeout for a member that died)
        polled = c.poll(timeout_ms=5000)
        for tp, records in polled.items():
            for r in records:
                if stop or tp not in c.assignment():
                    break
                out("R", r.partition, r.offset)
                try:
                    c.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                    out("C", r.partition, r.offset + 1)
                except KafkaError as e:
                    out("E", r.partition, r.offset + 1, type(e).__name__)
                    break  # (the rest of this batch: the partition's new owner reads it)
                if pause:
                    time.sleep(pause)
    c.close()
    out("closed")


if __name__ == "__main__":
    import faulthandler

    faulthandler.register(signal.SIGUSR1)  # (a member that hangs: its threads' stacks)
    if os.environ.get("KAFKA_MEMBER_DEBUG"):
        import logging

        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(message)s")
        for name in os.environ["KAFKA_MEMBER_DEBUG"].split(","):
            logging.getLogger(name).setLevel(logging.DEBUG)
    signal.signal(signal.SIGTERM, on_term)
    kind, bootstrap, group, topic, assignor, name = sys.argv[1:7]
    pause = int(sys.argv[7]) / 1000 if len(sys.argv) > 7 else 0.0
    {"confluent": confluent, "kafka-python": kafka_python}[kind](
        bootstrap, group, topic, assignor, name, pause)
