"""rivven: an event-log storage engine that runs inside your Python process.

``import engine`` is light: pyarrow is imported on the first read, pyspark never.
"""

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
from .fetch.positions import Position
from .format.records import ColumnBatch, Record
from .produce.idempotent import IdempotentProducer
from .produce.transactional import PreparedTransaction, TransactionalProducer

Producer = IdempotentProducer  # (``engine.Producer``: the name earlier releases exported)

__version__ = "0.1.0"

__all__ = [
    "ColdObjectError", "ColumnBatch", "ConsumerFenced", "CorruptRecordError", "DataDirError",
    "Engine", "IdempotentProducer", "InvalidArgument", "InvalidConfig", "InvalidTopicName",
    "InvalidTxnState", "OffsetOutOfRange", "OutOfOrderSequence", "Position",
    "PreparedTransaction", "Producer", "ProducerFenced", "ReadOnlyError", "Record",
    "RecordTooLarge", "RivvenError", "StorageError", "TopicExists", "TransactionalProducer",
    "UnknownPartition", "UnknownTopic", "__version__",
]
