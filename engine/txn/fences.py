"""KIP-447's fence on a transaction's group offsets: the consumer whose offsets they are must
still hold the partitions' leases (engine.groups.membership) when they are sent and when the
transaction commits. A lease is a flock, so while it is held no other member of the group has
read the partition: a member that lost one can never commit offsets for it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConsumerFenced, InvalidArgument, plural

if TYPE_CHECKING:
    from ..groups.consumer import Consumer


def check_consumer(consumer: Consumer, data_dir: str, group: str,
                   partitions: Iterable[tuple[str, int]]) -> None:
    """KIP-447's fence: ``consumer`` (a member of ``group`` on this data dir) still holds the
    lease of each of ``partitions``, so no other member has read them since it did: else
    ConsumerFenced. (A lease is a flock: held, nobody else can have it.)"""
    if consumer.group != group:
        raise InvalidArgument(f"consumer {consumer.member_id} is a member of group "
                              f"{consumer.group!r}, not {group!r}: pass the consumer whose "
                              "group the offsets are for")
    if os.path.realpath(consumer.engine.path) != os.path.realpath(data_dir):
        raise InvalidArgument(f"consumer {consumer.member_id} reads the data dir "
                              f"{consumer.engine.path}, not {data_dir}")
    held = set() if consumer.closed else set(consumer.assignment())
    lost = sorted(set(partitions) - held)
    if lost:
        names = ", ".join(f"{t}-{p}" for t, p in lost[:5]) + (", ..." if len(lost) > 5 else "")
        raise ConsumerFenced(
            f"consumer {consumer.member_id} of group {group!r} no longer holds {names} "
            f"({plural(len(lost), 'partition')}: another member took them over, or it was "
            "closed): their offsets cannot be committed with this transaction; abort() it and "
            "read them again from the group's committed offsets")

