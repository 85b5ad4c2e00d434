"""A partition's encryption at rest as its log keeps it: what opens its batches (refusing a
plaintext data batch where ``encryption.json`` records every batch sealed), what seals an
append's or a maintenance pass's batches, and the sealed ranges themselves
(engine.segments.sealed_range): moved by appends under the flock, narrowed before a swap
installs plaintext batches, recorded whole after a re-encryption. ``PartitionLog`` (log.py)
holds one and takes the locks its calls say."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..crypto.batch import Sealer
from ..crypto.topic import PlaintextBatch, TopicKeys
from ..errors import DamagedMetadata, KeyUnavailable
from ..failpoint import failpoint
from ..format.records import BatchHeader
from ..segments import filenames, sealed_range
from ..segments.segment import Segment
from ..segments.swap import SwapRefused
from .config import TopicConfig


class Sealing:
    """The keys and sealed ranges of one partition. ``config()`` is the topic's configs as
    they are now (the engine replaces them as they change); ``ignored(e)`` notes a damaged
    ``encryption.json`` that was ignored (``Engine.repairs()``)."""

    def __init__(self, directory: str, topic: str, partition: int, keys: TopicKeys | None,
                 config: Callable[[], TopicConfig],
                 ignored: Callable[[DamagedMetadata], None]) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.keys = keys
        self.config = config
        self.ignored = ignored
        self.base_opener = keys.opener_for(partition) if keys is not None else None
        # where every data batch is sealed: as it is on disk, and as this process last read
        # or wrote it under the flock
        self.tracker = sealed_range.Tracker(directory)
        self.claim: sealed_range.Ranges = ()

    def opener(self) -> Callable[[Any, int, BatchHeader, str], Any] | None:
        """What opens this partition's encrypted batches (None: a log opened without its
        topic's keys), taken once per read: where the partition records that every batch is
        sealed, it also refuses a plaintext data batch there as damage (one ``stat`` of
        ``encryption.json``; engine.crypto.topic.SealedOpener)."""
        base = self.base_opener
        if base is None:
            return None
        claim = self.tracker.current()
        if not claim:
            if self.tracker.error is not None:
                self.ignored(self.tracker.error)
            return base
        assert self.keys is not None  # (base is its opener)
        return self.keys.opener_for(self.partition, claim, self.tracker.current)

    def seal_fn(self) -> Callable[[bytearray], bytearray] | None:
        """How maintenance seals the batches it writes anew (compaction's re-encoded ones, a
        reencrypt pass): with the topic's current data key when ``encryption.enable``, else
        None (plaintext). Raises KeyUnavailable now when that key cannot be had."""
        if not self.config().encryption_enable:
            return None
        if self.keys is None:
            raise KeyUnavailable(f"{self.topic}-{self.partition} was opened without its "
                                 "topic's keys: encrypted batches need an Engine's keyring")
        keys = self.keys
        keys.sealer()
        return functools.partial(keys.seal_batch, partition=self.partition)

    def sealing(self, sealed: bool, offset: int) -> None:
        """(flock held.) A data batch, ``sealed`` or not, is about to be logged at ``offset``
        (the log end): ``encryption.json`` says so first, durably (a change of the ranges:
        rare), so that no reader ever sees a batch it contradicts."""
        claim = self.claim
        if not claim and not sealed:
            return
        new = sealed_range.after_append(claim, sealed, offset)
        if new != claim:
            self.set_claim(new)

    def set_claim(self, new: sealed_range.Ranges) -> None:
        """(flock held.) Write the partition's sealed ranges."""
        failpoint("sealed-range-write")
        sealed_range.write(self.dir, new)
        failpoint("sealed-range-written")
        self.claim = new

    def sealer(self) -> Sealer | None:
        """(flock held.) What seals a data batch appended now: the topic's current data key
        when ``encryption.enable``, else None (plaintext). Raises KeyUnavailable when it
        cannot be had, before anything is checked or written."""
        if not self.config().encryption_enable:
            return None
        if self.keys is None:
            raise KeyUnavailable(f"{self.topic}-{self.partition} was opened without its "
                                 "topic's keys (a tool): encrypted batches can only be "
                                 "appended through an Engine")
        return self.keys.sealer()

    def claim_for_swap(self, staged_dir: str, install: Sequence[int]) -> None:
        """(flock held.) Staged segments about to go in hold plaintext data batches where the
        partition records that every batch is sealed: with the topic no longer encrypting
        (a re-encryption back to plaintext, compaction re-encoding), the ranges are narrowed
        first, so no reader ever refuses them; while it encrypts, nothing of ours writes
        such a batch (a copy of a forged one: refused, nothing swapped)."""
        claim = self.tracker.current()
        if not claim:
            return
        found = [(os.path.join(staged_dir, filenames.name(b, filenames.LOG)), pos, h)
                 for b in install
                 for pos, h in sealed_range.plaintext(
                     os.path.join(staged_dir, filenames.name(b, filenames.LOG)), claim)]
        if not found:
            return
        if self.config().encryption_enable:
            path, pos, h = found[0]
            raise SwapRefused(
                f"{self.topic}-{self.partition}: the segment staged at {path} holds a plaintext "
                f"batch at offsets {h.base_offset}..{h.last_offset} (position {pos}), where "
                "every batch is sealed (encryption.json); nothing was swapped: run 'rivven "
                "segment verify --decrypt' on the partition")
        self.set_claim(sealed_range.without(claim, [(h.base_offset, h.next_offset)
                                                    for _, _, h in found]))

    def claim_sealed(self, key_usage: Callable[[], list[dict[str, Any]]],
                     segments: Callable[[], list[Segment]]) -> sealed_range.Ranges:
        """(flock held: ``PartitionLog.claim_sealed``.) After a re-encryption: record that
        every data batch is sealed when the topic encrypts and no plaintext one is left (local
        or cold; ``key_usage()``), or that none is when it does not and no sealed one is left
        (none in ``segments()``). Returns the ranges now recorded."""
        claim = self.tracker.current()
        used = {v for row in key_usage() for v in row["key_bytes"]}
        if self.config().encryption_enable and 0 not in used:
            want: sealed_range.Ranges = (sealed_range.Span(0, None),)
        elif not self.config().encryption_enable and not used - {0}:
            want = ()
            # (a pass back to plaintext rewrote every sealed batch and narrowed the ranges
            # before each swap: a plaintext batch still in them is not ours)
            for seg in segments() if claim else ():
                found = sealed_range.plaintext(seg.path, claim)
                if found:
                    pos, h = found[0]
                    raise PlaintextBatch(
                        f"the batch at offsets {h.base_offset}..{h.last_offset} in "
                        f"{seg.path} at position {pos} is plaintext where every batch of "
                        f"{self.topic}-{self.partition} is sealed (encryption.json): rivven "
                        "did not write it; run 'rivven segment verify'")
        else:
            return claim  # (a writer changed the configs meanwhile: leave it as it is)
        if want != claim:
            self.set_claim(want)
        return want
