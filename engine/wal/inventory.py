"""The streams of a data dir, looked at from outside: which are dead, what each holds, and
checks of their files (``rivven wal list|inspect|verify|recover``). Nothing here changes a live
stream."""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import CorruptRecordError
from ..format.decode import Opener, body_of, decode_records, layout
from ..fs import guard
from ..fs.locks import open_lock_file, try_lock
from .results import StreamInfo
from .stream import LOCK, stream_files
from .wal_file import FRAME, FRAME_SIZE, MAX_RECORD, WalTail, frame_crc, scan_file


def pid_alive(stream: str) -> bool:
    pid = stream.partition("-")[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


STREAM_NAME = re.compile(r"[0-9]+-[0-9a-f]{8}")  # <pid>-<8 hex digits> (WalStream.id)


def dead_streams(data_dir: str, own: str | None = None) -> list[tuple[str, int]]:
    """``(stream_dir, lock_fd)`` for streams whose lock could be taken: their process is gone.
    The caller holds those locks until it closes the fds. Only real directories named like a
    stream are looked at (and maybe removed); ``wal/`` itself as a link is UnexpectedLink."""
    root = os.path.join(data_dir, "wal")
    out: list[tuple[str, int]] = []
    if not guard.real_dir(root):
        return out
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if name == own or not STREAM_NAME.fullmatch(name):
            continue
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                continue  # (a link is no stream of ours: left alone, never followed)
        except FileNotFoundError:
            continue
        fd = open_lock_file(os.path.join(d, LOCK))  # (re)created if a crash removed it
        if not try_lock(fd):
            os.close(fd)  # its process is alive
        elif not stream_files(d):
            guard.remove_tree(data_dir, d)  # a half-made or half-removed stream
            os.close(fd)
        else:
            out.append((d, fd))
    return out


def all_streams(data_dir: str) -> list[str]:
    root = os.path.join(data_dir, "wal")
    if not os.path.isdir(root):
        return []
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if os.path.isdir(os.path.join(root, n))]


def stream_info(stream_dir: str) -> StreamInfo:
    """One stream: files, bytes, records, whether its process looks alive.

    Liveness here comes from the pid in the stream's name, not from probing its lock: a probe
    would briefly make a dead stream look live to a process opening the data dir.
    """
    fs = stream_files(stream_dir)
    live = pid_alive(os.path.basename(stream_dir))
    records = 0
    used = 0  # up to where the records end (a zero-filled file is longer)
    parts: set[tuple[str, int]] = set()
    torn: dict[str, Any] | None = None
    for f in fs:
        try:
            for rec in scan_file(f):
                records += 1
                used += rec.size
                parts.add((rec.topic, rec.partition))
        except WalTail as t:
            if not t.zero and not (live and f == fs[-1] and not settled_findings(
                    f, [{"position": t.position, "message": t.reason}])):
                torn = {"file": f, "position": t.position, "reason": t.reason}
        except FileNotFoundError:
            pass  # deleted by a checkpoint meanwhile
    return {"stream": os.path.basename(stream_dir), "path": stream_dir, "live": live,
            "files": len(fs), "bytes": used, "records": records,
            "partitions": sorted(f"{t}-{p}" for t, p in parts), "torn_tail": torn}


SETTLE_TRIES = 10  # re-reads of a live stream's current file before a finding counts
SETTLE_S = 0.05  # ... this far apart (a stalled writer is not damage)


def file_findings(path: str) -> list[dict] | None:
    """The problems of one WAL file (framing, CRC, the batch inside); None once it is gone."""
    try:
        return [{"file": path, "position": r["position"], "message": r["error"]}
                for r in inspect_file(path) if "error" in r]
    except FileNotFoundError:
        return None


def settled_findings(path: str, found: list[dict]) -> list[dict]:
    """(The current file of a live stream.) The findings that stay put while the file is read
    again: a write in flight (a record not all there yet, or zeros before bytes a later write
    put further on) is gone or has moved on within microseconds; damage stays where it is."""
    for _ in range(SETTLE_TRIES):
        if not found:
            break
        time.sleep(SETTLE_S)
        again = file_findings(path)
        if again is None:
            return []
        seen = {(x["position"], x["message"]) for x in found}
        found = [x for x in again if (x["position"], x["message"]) in seen]
    return found


def verify_stream(stream_dir: str, live: bool) -> list[dict]:
    """Every problem in a stream's files. Only the current file of a live stream can hold a
    write in flight (a rotated file was fdatasynced and is never written again), so only its
    findings must first stay put (``settled_findings``)."""
    fs = stream_files(stream_dir)
    out = []
    for f in fs:
        found = file_findings(f)
        if found and live and f == fs[-1]:
            found = settled_findings(f, found)
        out += found or []
    return out


def inspect_file(path: str, records: bool = False,
                 opener_of: Callable[[str, int], Opener | None] | None = None) -> Iterator[dict]:
    """One row per WAL record (and a final row for a torn tail); with ``records``, the row of
    an intact batch carries its records (offset, timestamp, key and value as text): an
    encrypted batch's are opened by ``opener_of(topic id, partition)`` (KeyUnavailable
    when it gives none)."""
    try:
        for rec in scan_file(path, check_batches=True):
            row = {"position": rec.position, "topic": rec.topic, "partition": rec.partition,
                   "topic_id": rec.topic_id.hex(), "write_time_ns": rec.write_ns,
                   "bytes": rec.size, "crc_ok": True}
            h = rec.header  # (checked by the scan, the batch's CRC too)
            row |= {"base_offset": h.base_offset, "last_offset": h.last_offset,
                    "count": h.record_count, "key_version": h.key_version}
            if records:
                where = f" in the batch of WAL record {path}:{rec.position}"
                opener = (opener_of(rec.topic_id.hex(), rec.partition)
                          if opener_of is not None and h.is_encrypted else None)
                try:
                    body = body_of(rec.batch, 0, h, where, opener)
                    row["records"] = [{"offset": r.offset, "timestamp": r.timestamp,
                                       "key": _text(r.key), "value": _text(r.value)}
                                      for r in decode_records(body, h, layout(body, h, where),
                                                              where=where)]
                except CorruptRecordError as e:
                    row |= {"crc_ok": False, "error": str(e)}
            yield row
    except WalTail as t:
        if not t.zero:
            yield {"position": t.position, "error": t.reason, "incomplete": t.incomplete}


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def tail_of(path: str) -> WalTail | None:
    """Where the valid records of a WAL file end (their batches' CRCs checked too), when
    non-zero bytes follow them: the WalTail, else None."""
    try:
        for _ in scan_file(path, check_batches=True):
            pass
    except WalTail as t:
        return None if t.zero else t
    return None


def torn_tail(path: str) -> int | None:
    """Where the valid records of a WAL file end, when non-zero bytes follow them."""
    t = tail_of(path)
    return None if t is None else t.position


def intact_after(path: str, position: int) -> int:
    """Records with an intact frame (length and CRC; payloads unchecked) right after the
    record at ``position``, when its own frame is intact: what a cut there drops with it. (After
    a frame that fails its CRC the next record cannot be found: 0.)"""
    n = -1  # (the record at ``position`` itself)
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = position
        while pos + FRAME_SIZE <= size:
            length, _, stored = FRAME.unpack(os.pread(fd, FRAME_SIZE, pos))
            end = pos + FRAME_SIZE + length
            if (length == 0 or length > MAX_RECORD or end > size
                    or frame_crc(fd, pos, length) != stored):
                break
            n += 1
            pos = end + (-(FRAME_SIZE + length) & 7)
    return max(n, 0)


def truncate_torn_tail(path: str) -> int | None:
    """Cut a file of a dead stream where its valid records end; returns the cut position."""
    pos = torn_tail(path)
    if pos is not None:
        fd = guard.open_file(path, os.O_RDWR)
        try:
            os.ftruncate(fd, pos)
            os.fsync(fd)
        finally:
            os.close(fd)
    return pos
