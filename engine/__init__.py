"""rivven: an event-log storage engine that runs inside your Python process.

``import engine`` is light: the produce path, transactions and maintenance are imported when
first used (the producers and ``Position`` below too), pyarrow on the first Arrow read,
pyspark never.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .engine import Engine
from .errors import (
    ColdObjectError,
    ConsumerFenced,
    CorruptRecordError,
    DataDirError,
    InvalidArgument,
    InvalidConfig,
    InvalidTopicName,
    InvalidTxnState,
    OffsetOutOfRange,
    OutOfOrderSequence,
    ProducerFenced,
    ReadOnlyError,
    RecordTooLarge,
    RivvenError,
    StorageError,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from .format.records import ColumnBatch, Record

if TYPE_CHECKING:
    from .fetch.positions import Position
    from .produce.idempotent import IdempotentProducer
    from .produce.idempotent import IdempotentProducer as Producer
    from .produce.transactional import TransactionalProducer
    from .txn.decisions import PreparedTransaction

# imported on first use (``engine.Producer``: the name earlier releases gave the idempotent one)
_LAZY = {"Position": ("fetch.positions", "Position"),
         "IdempotentProducer": ("produce.idempotent", "IdempotentProducer"),
         "Producer": ("produce.idempotent", "IdempotentProducer"),
         "TransactionalProducer": ("produce.transactional", "TransactionalProducer"),
         "PreparedTransaction": ("txn.decisions", "PreparedTransaction")}


def __getattr__(name: str) -> Any:
    found = _LAZY.get(name)
    if found is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{found[0]}", __name__), found[1])
    globals()[name] = value
    return value

__version__ = "0.1.0"

__all__ = [
    "ColdObjectError", "ColumnBatch", "ConsumerFenced", "CorruptRecordError", "DataDirError",
    "Engine", "IdempotentProducer", "InvalidArgument", "InvalidConfig", "InvalidTopicName",
    "InvalidTxnState", "OffsetOutOfRange", "OutOfOrderSequence", "Position",
    "PreparedTransaction", "Producer", "ProducerFenced", "ReadOnlyError", "Record",
    "RecordTooLarge", "RivvenError", "StorageError", "TopicExists", "TransactionalProducer",
    "UnknownPartition", "UnknownTopic", "__version__",
]
