"""What a partition's transactions came to, from its batches and markers (a test helper:
read_committed does this for readers; here the markers themselves are looked at).

A data batch of a producer is decided by the next control batch of that producer in the
partition: COMMIT or ABORT; with none after it, it is still open.
"""

from __future__ import annotations

from engine.format import control
from engine.format.records import MAGIC_PRODUCER


def frames(path: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each frame of a transactional id's state log (or any framelog)."""
    raw, out, pos = open(path, "rb").read(), [], 0
    while pos + 8 <= len(raw):
        end = pos + 8 + int.from_bytes(raw[pos:pos + 4], "little")
        out.append((pos, end))
        pos = end
    return out


def headers(eng, topic: str, partition: int):
    """Every batch of the partition: ``(header, buf, start)``, in offset order."""
    log = eng._find.partition(topic, partition)
    start, end = log.offsets()
    offset = start
    while offset < end:
        moved = False
        for ref in log.batches(offset):
            yield ref.header, ref.buf, ref.start
            offset = ref.header.base_offset + ref.header.last_offset_delta + 1
            moved = True
        if not moved:
            break


def batches(eng, topic: str, partition: int) -> list[tuple]:
    """``(kind, producer id, epoch, base offset, last offset, base sequence)`` per batch;
    kind: "plain", "data" (transactional), "COMMIT" or "ABORT"."""
    out = []
    for h, buf, start in headers(eng, topic, partition):
        if h.magic != MAGIC_PRODUCER:
            kind = "plain"
        elif h.is_control:
            kind = control.NAMES[control.marker_type(h, buf, start)]
        else:
            kind = "data" if h.is_transactional else "idempotent"
        out.append((kind, h.producer_id, h.producer_epoch, h.base_offset,
                    h.base_offset + h.last_offset_delta, h.base_sequence))
    return out


def markers(eng, topic: str, partition: int) -> list[tuple[str, int, int]]:
    """``(COMMIT|ABORT, producer id, epoch)`` of every marker, in offset order."""
    return [(k, pid, ep) for k, pid, ep, *_ in batches(eng, topic, partition)
            if k in ("COMMIT", "ABORT")]


def outcomes(eng, topic: str, partition: int) -> dict[int, str]:
    """Offset of every record of a transactional batch -> "committed", "aborted" or
    "open"; plain records -> "plain"."""
    out: dict[int, str] = {}
    pending: dict[int, list[tuple[int, int]]] = {}
    for kind, pid, _, base, last, _ in batches(eng, topic, partition):
        if kind == "data":
            pending.setdefault(pid, []).append((base, last))
        elif kind in ("COMMIT", "ABORT"):
            for b, e in pending.pop(pid, []):
                for o in range(b, e + 1):
                    out[o] = "committed" if kind == "COMMIT" else "aborted"
        else:
            for o in range(base, last + 1):
                out[o] = "plain"
    for ranges in pending.values():
        for b, e in ranges:
            for o in range(b, e + 1):
                out[o] = "open"
    return out


def committed_values(eng, topic: str, partition: int) -> list[bytes]:
    """The values a read_committed reader would get: plain and committed records."""
    fate = outcomes(eng, topic, partition)
    end = eng.end_offsets(topic)[partition]
    recs = eng.read(topic, partition, 0, max(end, 1)) if end else []
    return [r.value for r in recs if fate.get(r.offset) in ("plain", "committed")]


def fates(eng, topic: str, partition: int) -> set[str]:
    """The outcomes of the partition's transactional records, as a set."""
    return {f for f in outcomes(eng, topic, partition).values() if f != "plain"}
