"""A topic to consume and a consumer process's output: shared by tests/unit/groups and
tests/crash/test_groups_crash.py."""

from engine import Engine, Record


def fill(data_dir, partitions=3, n=100, topic="t", cfg=None):
    with Engine.open(data_dir) as eng:
        eng.create_topic(topic, partitions, cfg or {})
        for p in range(partitions):
            eng.produce(topic, [Record(key=b"k", value=b"%d-%d" % (p, i)) for i in range(n)],
                        partition=p)


def pairs(out: bytes) -> list[tuple[int, int]]:
    """(partition, offset) of each complete line (a kill may cut the last one short)."""
    return [tuple(map(int, line.split())) for line in out.decode().split("\n")[:-1]]
