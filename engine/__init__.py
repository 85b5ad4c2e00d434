"""rivven: an event-log storage engine that runs inside your Python process.

``import engine`` is light: pyarrow is imported on the first read, pyspark never.
"""

from .client.producer import Producer
from .client.read import Position
from .client.txn_producer import PreparedTransaction, TransactionalProducer
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

__version__ = "0.1.0"

__all__ = [
    "ColdObjectError", "ConsumerFenced", "CorruptRecordError", "DataDirError", "Engine",
    "InvalidArgument", "InvalidConfig",
    "InvalidTopicName", "InvalidTxnState", "OffsetOutOfRange", "OutOfOrderSequence",
    "PreparedTransaction", "ProducerFenced", "Position", "Producer", "ReadOnlyError", "Record",
    "ColumnBatch", "RecordTooLarge",
    "RivvenError", "StorageError", "TopicExists", "TransactionalProducer", "UnknownPartition",
    "UnknownTopic",
    "__version__",
]
