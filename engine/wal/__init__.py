"""Layer 6 — the write-ahead log: one stream per writing process, group commit, recovery
(``Engine.recovery``).

May import: ``engine.storage``, ``engine.counters``, ``engine.fs``, ``engine.format`` and the
base modules.

- ``records``: the WAL file format (framed records), scanning a file
- ``stream``: ``WalStream``, this process's stream (group-committed fdatasync)
- ``inventory``: every stream of a data dir from outside: dead or live, info, verify, inspect
- ``replay``: replaying dead streams into the segments, cutting their torn tails
- ``owner``: ``WalOwner``, an engine's stream, interval syncer and checkpoints
- ``recovery``: ``Recovery`` (``Engine.recovery``): replay, tails, streams, what opening
  partitions mended, and what a writable open runs first; ``results``: what it returns, typed
"""

from .inventory import (
           all_streams,
           dead_streams,
           inspect_file,
           stream_info,
           torn_tail,
           truncate_torn_tail,
           verify_stream,
)
from .replay import merge_by_offset
from .stream import RECOVERY_LOCK, WalStream, stream_files
from .wal_file import FRAME, FRAME_SIZE, SUFFIX, WalRecord, WalTail, encode_batch_record, scan_file

__all__ = ["FRAME", "FRAME_SIZE", "RECOVERY_LOCK", "SUFFIX", "WalRecord", "WalStream", "WalTail",
           "all_streams", "dead_streams", "encode_batch_record", "inspect_file",
           "merge_by_offset", "scan_file", "stream_files", "stream_info", "torn_tail",
           "truncate_torn_tail", "verify_stream"]
