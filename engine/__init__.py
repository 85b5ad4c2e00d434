"""rivven: an event-log storage engine that runs inside your Python process.

``import engine`` is light: pyarrow is imported on the first read, pyspark never.
"""

from .engine import Engine
from .errors import (
    CorruptRecordError,
    DataDirError,
    InvalidArgument,
    InvalidConfig,
    InvalidTopicName,
    OffsetOutOfRange,
    ReadOnlyError,
    RecordTooLarge,
    RivvenError,
    StorageError,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
)
from .format.records import Record

__version__ = "0.1.0"

__all__ = [
    "CorruptRecordError", "DataDirError", "Engine", "InvalidArgument", "InvalidConfig",
    "InvalidTopicName", "OffsetOutOfRange", "ReadOnlyError", "Record", "RecordTooLarge",
    "RivvenError", "StorageError", "TopicExists", "UnknownPartition", "UnknownTopic",
    "__version__",
]
