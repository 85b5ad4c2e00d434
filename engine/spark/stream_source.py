"""Topics as a Structured Streaming source (``spark.readStream.format("rivven")``).

Offsets are Kafka's JSON form, ``{"topic": {"0": 120, "1": 98}}`` (the next offset to read per
partition), kept in the query's checkpoint by Spark: the source commits nothing anywhere.
Options, named as Kafka's source names them:

  path                 the data dir (required; reachable at this path from every executor)
  topic | topics | topicPattern   one topic, "a,b", or a regular expression matched whole
  startingOffsets      earliest | latest (default) | JSON (-2: earliest, -1: latest); a
                       partition that appears later starts at its earliest, as in Kafka
  maxOffsetsPerTrigger records per micro-batch at most, shared by partitions in proportion
                       to how far each lags
  isolationLevel       read_committed (default) | read_uncommitted
  failOnDataLoss       true (default): offsets that retention or delete-records removed
                       before they were read fail the query; false: skip to the log start
  keyring              an encrypted topic's keyring file (where the executors run)
  commitToGroup        also commit each processed micro-batch's end offsets for this
                       consumer group (for monitoring its lag; the query never reads them)
  decode               value | key | key,value: registry-encoded columns as the schema's
                       typed values (valueSubject, keySubject, valueSchemaId, keySchemaId,
                       decodeErrors: engine.spark.schema_columns)

A user schema with a subset of the columns (``readStream.schema("key binary, value
binary")``) reads only those. A micro-batch reads each partition from its start offset to its
end offset with the engine's own reader (every tier; read_committed leaves out aborted
transactions and markers), one Spark task per partition, as Arrow record batches of the
batch source's schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from . import worker

EARLIEST, LATEST = -2, -1
ROWS_PER_READ = 65536

Offsets = dict[str, dict[str, int]]


class DataLoss(RuntimeError):
    """Offsets to read are gone (retention, delete-records) and failOnDataLoss is on."""


class Range(InputPartition):
    """One task: ``[start, end)`` of one partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


def _bool(options: dict[str, str], key: str, default: bool) -> bool:
    v = options.get(key.lower())
    if v is None:
        return default
    if v.lower() not in ("true", "false"):
        raise ValueError(f"{key} is {v!r}: use true or false")
    return v.lower() == "true"


class Subscription:
    """Which topics a query reads: ``topic``, ``topics`` or ``topicPattern`` (one of them)."""

    def __init__(self, options: dict[str, str]) -> None:
        given = [k for k in ("topic", "topics", "topicpattern") if options.get(k)]
        if len(given) != 1:
            raise ValueError("the rivven stream source needs exactly one of .option('topic', "
                             "T), .option('topics', 'a,b') or .option('topicPattern', REGEX)")
        self.names: list[str] | None = None
        self.pattern: re.Pattern[str] | None = None
        if given[0] == "topicpattern":
            try:
                self.pattern = re.compile(options["topicpattern"])
            except re.error as e:
                raise ValueError(f"topicPattern {options['topicpattern']!r}: {e}") from None
        else:
            self.names = [n.strip() for n in options[given[0]].split(",") if n.strip()]

    def topics(self, eng: Any) -> list[Any]:
        """The topics' metadata now (a named topic that does not exist is an error)."""
        if self.pattern is not None:
            return [t for t in eng.topics() if self.pattern.fullmatch(t.name)]
        return [eng.topic(n) for n in self.names or ()]


def parse_offsets(raw: str) -> Offsets | str:
    """``startingOffsets``: "earliest", "latest" or Kafka's JSON ``{"t": {"0": 5}}``."""
    if raw in ("earliest", "latest"):
        return raw
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(
            isinstance(t, str) and isinstance(ps, dict) and all(
                isinstance(p, str) and p.isdigit() and type(o) is int and o >= EARLIEST
                for p, o in ps.items()) for t, ps in doc.items()):
        raise ValueError(f"startingOffsets {raw!r}: use earliest, latest or JSON such as "
                         '{"orders": {"0": 23, "1": -2}} (-2: earliest, -1: latest)')
    return doc


class Bounds:
    """Each partition's (log start, readable end) as the driver sees them now."""

    def __init__(self, eng: Any, sub: Subscription, committed: bool) -> None:
        level = "read_committed" if committed else "read_uncommitted"
        self.parts: dict[str, dict[int, tuple[int, int]]] = {}
        for meta in sub.topics(eng):
            starts = eng.offsets.start(meta.name)
            ends = eng.offsets.end(meta.name, isolation_level=level)
            self.parts[meta.name] = {p: (starts[p], ends[p]) for p in sorted(ends)}


def prorate(lags: dict[tuple[str, int], int], limit: int) -> dict[tuple[str, int], int]:
    """Up to ``limit`` records shared in proportion to each partition's lag (largest
    remainders first), never more than a partition's lag."""
    total = sum(lags.values())
    if total <= limit:
        return dict(lags)
    share = {k: lag * limit // total for k, lag in lags.items()}
    left = limit - sum(share.values())
    for k in sorted(lags, key=lambda k: (-(lags[k] * limit % total), k))[:left]:
        share[k] += 1
    return share


COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


class RivvenStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], columns: list[str] | None = None,
                 schema: Any = None) -> None:
        from .schema_columns import check_types, decode_options, plan_decoding, topics_named

        o = {k.lower(): v for k, v in options.items()}
        self.columns = list(columns or COLUMNS)
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown:
            raise ValueError(f"unknown rivven column(s) {unknown}: use {', '.join(COLUMNS)}")
        if not o.get("path"):
            raise ValueError("the rivven stream source needs .option('path', DATA_DIR)")
        self.path = o["path"]
        self.sub = Subscription(o)
        self.starting = parse_offsets(o.get("startingoffsets", "latest"))
        level = o.get("isolationlevel", "read_committed")
        if level not in ("read_committed", "read_uncommitted"):
            raise ValueError(f"isolationLevel {level!r}: use read_committed or read_uncommitted")
        self.committed = level == "read_committed"
        self.fail_on_loss = _bool(o, "failOnDataLoss", True)
        raw = o.get("maxoffsetspertrigger")
        self.max_per_trigger = None
        if raw is not None:
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"maxOffsetsPerTrigger {raw!r}: a positive number of records")
            self.max_per_trigger = int(raw)
        self.keyring = o.get("keyring")
        self.group = o.get("committogroup") or None  # offsets also committed for this group
        # (the reader schemas of decoded columns, planned here in the driver: schema_columns)
        wants, null = decode_options(o, topics_named(o))
        self.decoding = plan_decoding(self.path, self.keyring,
                                      [w for w in wants if w.column in self.columns], null)
        if schema is not None:
            check_types(schema, self.decoding)
        self._grouped: dict | None = None
        self.latest: Offsets | None = None
        self.target: Offsets | None = None  # Trigger.AvailableNow: read up to here, no further

    # ---------------------------------------------------------------- the driver
    def _bounds(self) -> Bounds:
        from engine import Engine

        with Engine.open(self.path, read_only=True, keyring=self.keyring) as eng:
            return Bounds(eng, self.sub, self.committed)

    def initialOffset(self) -> dict:
        b = self._bounds()
        out: Offsets = {}
        for topic, parts in b.parts.items():
            given = self.starting if isinstance(self.starting, dict) else None
            if given is not None and topic not in given:
                if self.sub.pattern is None:
                    raise ValueError(f"startingOffsets names no offsets for topic {topic!r}: "
                                     'add it, e.g. {"%s": {"0": -2}}' % topic)
            for p, (start, end) in parts.items():
                if given is None:
                    o = start if self.starting == "earliest" else end
                else:
                    want = given.get(topic, {}).get(str(p), EARLIEST if topic not in given
                                                    else None)
                    if want is None:
                        raise ValueError(f"startingOffsets names no offset for {topic}-{p}: "
                                         "add it (-2: earliest, -1: latest)")
                    o = start if want == EARLIEST else end if want == LATEST else want
                    if o > end:
                        raise ValueError(f"startingOffsets {topic}-{p} {o} lies past its end "
                                         f"{end}")
                    if o < start:
                        o = self._lost(topic, p, o, start)
                out.setdefault(topic, {})[str(p)] = o
        return out

    def _lost(self, topic: str, p: int, offset: int, start: int) -> int:
        """Offsets below the log start were asked for: fail, or skip to the start."""
        if self.fail_on_loss:
            raise DataLoss(
                f"{topic}-{p}: offsets {offset}..{start - 1} were removed (retention or "
                "delete-records) before this query read them; some data may have been "
                "lost. Set .option('failOnDataLoss', 'false') to skip to the log start")
        return start

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """Trigger.AvailableNow: what is there now is the end (in as many micro-batches as
        maxOffsetsPerTrigger makes it), records appended later wait for the next run."""
        b = self._bounds()
        self.target = {t: {str(p): end for p, (_, end) in parts.items()}
                       for t, parts in b.parts.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_per_trigger)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._commit_group(start)
        b = self._bounds()
        begin: dict[tuple[str, int], int] = {}
        ends: dict[tuple[str, int], int] = {}
        for topic, parts in b.parts.items():
            for p, (low, end) in parts.items():
                at = start.get(topic, {}).get(str(p))
                if at is None:
                    at = low  # a partition (or topic) new since: from its earliest
                elif at < low:
                    at = self._lost(topic, p, at, low)
                elif at > end:
                    raise DataLoss(f"{topic}-{p}: the query is at offset {at}, past the log "
                                   f"end {end}: was the topic deleted and created again?")
                if self.target is not None:
                    cap = self.target.get(topic, {}).get(str(p))
                    if cap is None:
                        continue  # (new since the run began: the next run reads it)
                    end = max(at, min(end, cap))
                begin[(topic, p)], ends[(topic, p)] = at, end
        if isinstance(limit, ReadMaxRows):
            share = prorate({k: ends[k] - begin[k] for k in begin}, limit.max_rows)
            ends = {k: begin[k] + share[k] for k in begin}
        out: Offsets = {}
        for (topic, p), e in sorted(ends.items()):
            out.setdefault(topic, {})[str(p)] = e
        self.latest = out
        return out

    def reportLatestOffset(self) -> dict | None:
        return self.latest

    def partitions(self, start: dict, end: dict) -> list[Range]:
        out = []
        for topic, parts in end.items():
            for p, e in parts.items():
                # (new since the last batch: from its log start, as latestOffset took it,
                # resolved where it is read; 0 could lie below a start retention moved)
                s = start.get(topic, {}).get(p, EARLIEST)
                if e > s:
                    out.append(Range(topic, int(p), s, e))
        return out

    def commit(self, end: dict) -> None:
        """Spark has processed everything below ``end``. The offsets live in the query's
        checkpoint; with ``commitToGroup`` they are also committed for that consumer group
        (monitoring: ``rivven group describe`` shows the query's lag), never read back."""
        self._commit_group(end)

    def _commit_group(self, done: dict) -> None:
        """(``commitToGroup``.) ``done``: offsets below which every micro-batch finished —
        what ``commit`` gets, and the start ``latestOffset`` gets (Spark calls ``commit`` for
        a batch only once the next one starts, and not at all for a query's last)."""
        if self.group is None or not done or done == self._grouped:
            return
        from engine import Engine

        plan = {(t, int(p)): o for t, parts in done.items() for p, o in parts.items()}
        with Engine.open(self.path, keyring=self.keyring) as eng:
            eng.groups.reset_offsets(self.group, None, "from-file", plan, execute=True,
                                    force=True)
        self._grouped = done

    # ---------------------------------------------------------------- the executors
    def read(self, partition: Range) -> Iterator[Any]:  # type: ignore[override]
        if not self.decoding:
            return read_range(self.path, partition, self.committed, self.fail_on_loss,
                              self.keyring, self.columns)
        from .schema_columns import Decoders

        decoders = Decoders(self.decoding)
        cols = self.columns if "offset" in self.columns else [*self.columns, "offset"]
        return (decoders.batch(b, partition.topic, partition.partition, self.columns)
                for b in read_range(self.path, partition, self.committed, self.fail_on_loss,
                                    self.keyring, cols))


def read_range(path: str, r: Range, committed: bool, fail_on_loss: bool,
               keyring: str | None, columns: list[str] | tuple[str, ...] = COLUMNS
               ) -> Iterator[Any]:
    """Arrow record batches (``columns`` only) of ``[r.start, r.end)`` of one partition."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from engine.errors import OffsetOutOfRange

    eng = worker.engine(path, keyring)
    level = "read_committed" if committed else "read_uncommitted"
    offset = r.start if r.start != EARLIEST else eng.offsets.start(r.topic)[r.partition]
    while offset < r.end:
        try:
            t = eng.read_arrow(r.topic, r.partition, offset, min(ROWS_PER_READ, r.end - offset),
                               isolation_level=level)
        except OffsetOutOfRange:
            start = eng.offsets.start(r.topic)[r.partition]
            if offset >= start:
                raise
            if fail_on_loss:
                raise DataLoss(f"{r.topic}-{r.partition}: offsets {offset}..{start - 1} were "
                               "removed before this query read them; set .option("
                               "'failOnDataLoss', 'false') to skip them") from None
            offset = start
            continue
        if t.num_rows == 0:
            break  # only markers or aborted records left below the end
        offsets = t.column("offset")
        if pc.max(offsets).as_py() >= r.end:
            t = t.filter(pc.less(offsets, r.end))
        n = t.num_rows
        if n:
            arrays = []
            for c in columns:
                if c == "topic":
                    arrays.append(pa.array([r.topic] * n, pa.string()))
                elif c == "partition":
                    arrays.append(pa.array([r.partition] * n, pa.int32()))
                elif c == "timestamp":
                    arrays.append(t.column(c).combine_chunks().cast(pa.int64()))
                else:
                    arrays.append(t.column(c).combine_chunks())
            yield pa.RecordBatch.from_arrays(arrays, names=list(columns))
        offset = pc.max(t.column("offset")).as_py() + 1 if n else r.end
