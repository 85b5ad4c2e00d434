"""One exception hierarchy. Every error says what went wrong, where, and how to fix it."""

from __future__ import annotations


class RivvenError(Exception):
    """Base of every error the engine raises on purpose."""

    exit_code = 1


class InvalidArgument(RivvenError):
    """A caller passed a value the engine cannot accept."""


class InvalidTopicName(InvalidArgument):
    pass


class InvalidConfig(InvalidArgument):
    pass


class UnknownTopic(RivvenError):
    pass


class TopicExists(RivvenError):
    pass


class UnknownPartition(RivvenError):
    pass


class RecordTooLarge(InvalidArgument):
    pass


class InvalidTimestamp(InvalidArgument):
    """A record timestamp outside the topic's message.timestamp.before/after.max.ms."""


class OffsetOutOfRange(RivvenError):
    """An offset outside [log start, log end]; ``start``/``end`` give the valid range."""

    def __init__(self, message: str, start: int | None = None, end: int | None = None) -> None:
        super().__init__(message)
        self.start = start
        self.end = end


class DataDirError(RivvenError):
    """The data dir is missing, not a rivven data dir, not writable, or from a newer version."""


class ReadOnlyError(RivvenError):
    pass


class CorruptRecordError(RivvenError):
    """Bytes on disk fail a checksum or a structural check; names file, position and offsets."""

    exit_code = 3

    def __init__(self, message: str, path: str | None = None, position: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class ColdObjectError(RivvenError):
    """A cold object is missing, unreadable or does not match its tier manifest entry."""

    exit_code = 3


class StorageError(RivvenError):
    """The operating system refused a write, an fsync or a rename (EIO, ENOSPC, EACCES ...)."""


class DamagedMetadata(CorruptRecordError):
    """A metadata file of the data dir (catalog, checkpoint, tier manifest, offsets log,
    marker) is unreadable, fails its checksum, or disagrees with the log: reported, never
    acted on. Exit code 3, like other damage."""


class KeyringError(RivvenError):
    """The keyring (master keys, outside the data dir) cannot be used: missing, not a regular
    file, readable by others, not owned by this user, or not a JSON object of base64 32-byte
    keys. The message names the file and the fix."""


class KeyUnavailable(RivvenError):
    """A key needed to read or write encrypted data is not at hand: no keyring, or the
    keyring lacks the master key id that wraps a topic's data key. Names the key id and the
    fix; nothing was read or written with a wrong key."""


class WrongKey(KeyUnavailable):
    """The keyring holds the master key id, but that key does not open the data key it is
    recorded to wrap (another key under the same id): nothing was decrypted with it."""


class LockTimeout(RivvenError):
    """A lock stayed held longer than the configured wait (``lock.timeout.ms``)."""


class ProducerFenced(RivvenError):
    """A newer instance of this producer (a higher epoch of its producer id, or a new
    instance of its transactional id, in any process) took over: this one can no longer
    write or commit. Nothing it wrote after it was fenced becomes visible."""


class ConsumerFenced(ProducerFenced):
    """(KIP-447.) The consumer whose offsets a transaction commits no longer holds a partition
    of them (another member of its group took it over, or it was closed): the transaction
    cannot commit them. Unlike its parent, the producer is not done for: ``abort()`` the
    transaction and go on (code that treats every ProducerFenced as fatal is still right)."""


class InvalidProducerIdMapping(ProducerFenced):
    """The producer id is not the one its transactional id has now (none was ever given, or
    a newer instance took another): Kafka's INVALID_PRODUCER_ID_MAPPING. A ProducerFenced:
    this producer can no longer write or commit."""


class InvalidTxnState(RivvenError):
    """A transactional call out of order: commit or produce without begin, begin twice,
    produce after a failed commit (abort first); also a new call of an idempotent producer
    whose last call failed and was not retried (``retry_last()`` first)."""


class GroupNotFound(RivvenError):
    """No consumer group of that name in the data dir."""


class GroupActive(RivvenError):
    """Refused: the group has live consumers."""


class GroupKindConflict(GroupActive):
    """Refused: a group is rivven-native (engine.groups.consumer) or Kafka-protocol (the
    clients of a ``rivven serve``) while it has live members, never both; or another server
    coordinates it."""


class OutOfOrderSequence(RivvenError):
    """A producer's batch does not follow its last one in a partition (a sequence gap or
    reorder): it was refused, nothing of it was written."""


def os_error(e: OSError, what: str, path: str) -> StorageError:
    """A StorageError for an OS error while doing ``what`` to ``path``: names the path, and
    says "disk full" (with the fix) for ENOSPC/EDQUOT."""
    import errno

    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"cannot {what} {path}: disk full; free space (rivven "
                            "delete-records, retention apply or topic delete work on a full "
                            "disk) and retry")
    return StorageError(f"cannot {what} {path}: {e.strerror or e} (errno {e.errno})")


def disk_full(e: BaseException | None) -> bool:
    """Is ``e`` (or what caused it) an ENOSPC/EDQUOT?"""
    import errno

    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        e = e.__cause__
    return False


def plural(n: int, one: str, many: str | None = None, thousands: bool = False) -> str:
    """A count and its noun, agreeing (every message's counts go through here):
    ``plural(1, "record")`` is ``1 record``, ``plural(2, "batch", "batches")`` ``2 batches``;
    ``thousands`` groups digits (``100,000 records``)."""
    return (f"{n:,}" if thousands else str(n)) + " " + (one if n == 1 else many or one + "s")
