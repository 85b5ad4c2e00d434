"""A read as Kafka's Fetch makes it: whole batches from the one holding ``offset`` on, each as
Kafka's magic-2 batch (transcoded in C: engine.format.kafka_batch.from_rivven), markers and
aborted transactions' batches included (the client leaves them out, as Kafka's clients do),
bounded by bytes, up to the high watermark or (read_committed) the last stable offset, with
the aborted transactions that overlap them and the partition's offsets at the time."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import CorruptRecordError, DamagedMetadata
from ..format import kafka_batch
from ..format.control import COMMIT, marker_type
from ..format.decode import Layout, body_of, decode_columns, layout
from ..format.records import BatchHeader
from ..storage.log import PartitionLog
from ..storage.reader import damaged_body
from ..txn import isolation
from .read_path import where


class FetchedBatch:
    """One batch: its header, the batch as Kafka's magic 2 has it (``kafka``: uncompressed, its
    producer fields and transactional flag kept, a marker as Kafka's control batch), a
    control batch's type (``marker``: COMMIT or ABORT; None for data) and its records as
    ``columns`` (offsets, timestamps, keys, values, headers; None for a marker), decoded
    when first asked for."""

    __slots__ = ("header", "kafka", "marker", "_plain", "_layout")

    def __init__(self, header: BatchHeader, kafka: Any, marker: int | None, body: Any = None,
                 lay: Layout | None = None) -> None:
        self.header = header
        self.kafka = kafka
        self.marker = marker
        self._plain = body
        self._layout = lay

    @property
    def columns(self) -> tuple[Any, Any, list, list, Any] | None:
        if self._plain is None or self._layout is None:
            return None
        return decode_columns(self._plain, self.header, self._layout)


class Fetched(NamedTuple):
    batches: list[FetchedBatch]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset) overlapping the batches


def fetch(log: PartitionLog, offset: int, max_bytes: int, committed: bool) -> Fetched:
    """Batches holding ``offset`` and after, about ``max_bytes`` of them (the first always
    whole, as Kafka sends it); OffsetOutOfRange below the log start or past its end."""
    start, end = log.offsets()
    lso = isolation.stable_end(log)
    upper = lso if committed else end
    out: list[FetchedBatch] = []
    nbytes = count = 0
    opener = log.opener
    if offset < upper:
        for ref in log.batches(offset, max_bytes=max(1, max_bytes),
                               sealed_crc=opener is None):
            h = ref.header
            if h.base_offset >= upper:
                break
            at = where(ref)
            if h.is_control:
                m = marker_type(h, ref.buf, ref.start, str(at))
                out.append(FetchedBatch(h, kafka_batch.from_marker(h, m == COMMIT), m))
            else:
                try:
                    body = body_of(ref.buf, ref.start, h, at, opener)
                    lay = layout(body, h, at)
                    kafka: Any = kafka_batch.from_rivven(h, body, lay)  # (in C)
                    if kafka is None:  # a column that does not check out raises here
                        kafka = kafka_batch.from_columns(h, decode_columns(body, h, lay, at))
                except DamagedMetadata:
                    raise
                except CorruptRecordError as e:
                    log.counts.crc_errors.inc()
                    raise damaged_body(log, ref, e) from None
                out.append(FetchedBatch(h, kafka, None, body, lay))
            nbytes += h.size
            count += h.next_offset - max(offset, h.base_offset)
            if nbytes >= max_bytes:
                break
    elif offset > end:
        next(log.batches(offset), None)  # raises OffsetOutOfRange, naming the range
    if count:
        log.counts.read(count, nbytes)
    aborted: list[tuple[int, int]] = []
    if committed and out:
        last = out[-1].header.last_offset
        _, ab = isolation.view(log, offset)
        aborted = sorted((pid, first) for pid, first, la in ab.ranges()
                         if first <= last and la >= offset)
    return Fetched(out, end, lso, start, aborted)
