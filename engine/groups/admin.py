"""Consumer-group administration: list, describe, reset offsets, delete (``rivven group``)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, RivvenError, UnknownTopic
from . import membership
from .offset_store import OffsetStore

if TYPE_CHECKING:
    from ..engine import Engine

RESET_MODES = ("to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration", "shift-by")


class GroupNotFound(RivvenError):
    pass


class GroupActive(RivvenError):
    """Refused: the group has live consumers."""


def _store(eng: Engine, group: str) -> OffsetStore:
    return OffsetStore(membership.group_dir(eng.path, group),
                       sync=eng.settings.wal_sync != "none")


def _exists(eng: Engine, group: str) -> bool:
    return os.path.isdir(membership.group_dir(eng.path, group))


def _offsets(eng: Engine, topic: str) -> dict[int, tuple[int, int]] | None:
    try:
        meta = eng.topic(topic)
    except UnknownTopic:
        return None
    return {p: eng.partition_log(topic, p).offsets() for p in range(meta.partitions)}


def committed(eng: Engine, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets (no log offsets, members or leases looked at)."""
    _check_exists(eng, group)
    return {tp: c.offset for tp, c in _store(eng, group).refresh().items()}


def _check_exists(eng: Engine, group: str) -> None:
    if not _exists(eng, group):
        raise GroupNotFound(f"group {group!r} does not exist; 'rivven group list' shows the "
                            "groups")


def describe(eng: Engine, group: str) -> dict[str, Any]:
    """Per partition the group reads or has committed: current, log start/end, lag, owner."""
    _check_exists(eng, group)
    gdir = membership.group_dir(eng.path, group)
    members = membership.live_members(gdir)
    committed = _store(eng, group).refresh()
    owners = membership.lease_owners(gdir)
    topics = {t for t, _ in committed} | {t for m in members for t in m.get("topics", ())}
    rows = []
    for t in sorted(topics):
        offs = _offsets(eng, t)
        parts = sorted(set(offs or ()) | {p for tt, p in committed if tt == t})
        for p in parts:
            c = committed.get((t, p))
            start, end = offs[p] if offs and p in offs else (None, None)
            lag = None if c is None or end is None else max(0, end - c.offset)
            rows.append({"topic": t, "partition": p,
                         "current_offset": None if c is None else c.offset,
                         "log_start_offset": start, "log_end_offset": end, "lag": lag,
                         "last_commit": None if c is None else c.timestamp,
                         "metadata": None if c is None else c.metadata,
                         "consumer": owners.get((t, p))})
    return {"group": group, "state": "Active" if members else "Empty",
            "members": [{k: m.get(k) for k in ("member_id", "client_id", "host", "pid", "topics",
                                                "joined")} for m in members],
            "partitions": rows,
            "total_lag": sum(r["lag"] for r in rows if r["lag"] is not None)}


def list_groups(eng: Engine) -> list[dict[str, Any]]:
    out = []
    for g in membership.group_names(eng.path):
        d = describe(eng, g)
        out.append({"group": g, "state": d["state"], "members": len(d["members"]),
                    "topics": sorted({r["topic"] for r in d["partitions"]}),
                    "total_lag": d["total_lag"]})
    return out


def _refuse_if_active(eng: Engine, group: str, what: str, topic: str | None = None,
                      hint: str = "") -> None:
    members = membership.live_members(membership.group_dir(eng.path, group))
    if topic is not None:
        members = [m for m in members if topic in m.get("topics", ())]
    if members:
        ids = ", ".join(str(m.get("member_id")) for m in members[:3])
        raise GroupActive(f"group {group!r} has {len(members)} active consumer(s) ({ids}); "
                          f"stop them before {what}{hint}")


def plan_reset(eng: Engine, group: str, targets: dict[str, list[int] | None] | None,
               mode: str, value: int | None = None) -> list[dict[str, Any]]:
    """Rows ``topic, partition, prior, new, clamped`` for a reset of ``targets`` (topic ->
    partitions, None = all; ``targets=None`` = every topic the group has committed). ``value``:
    the offset (to-offset), the resolved time in ms (to-datetime, by-duration) or the shift."""
    if mode not in RESET_MODES:
        raise InvalidArgument(f"unknown reset mode {mode!r}; use one of {', '.join(RESET_MODES)}")
    committed = _store(eng, group).refresh() if _exists(eng, group) else {}
    if targets is None:
        targets = {}
        for t, p in committed:
            targets.setdefault(t, []).append(p)
        if not targets:
            raise InvalidArgument(f"group {group!r} has no committed offsets; name topics with "
                                  "--topic")
    rows = []
    for t in sorted(targets):
        offs = _offsets(eng, t)
        if offs is None:
            raise UnknownTopic(f"topic {t!r} does not exist; 'rivven topic list' shows topics")
        parts = targets[t] if targets[t] is not None else sorted(offs)
        for p in sorted(set(parts)):
            if p not in offs:
                raise InvalidArgument(f"partition {p} does not exist in topic {t!r} (it has "
                                      f"partitions 0..{len(offs) - 1})")
            start, end = offs[p]
            c = committed.get((t, p))
            prior = None if c is None else c.offset
            if mode == "to-earliest":
                want = start
            elif mode == "to-latest":
                want = end
            elif mode == "to-offset":
                want = int(value)
            elif mode == "shift-by":
                if prior is None:
                    raise InvalidArgument(f"cannot shift {t}-{p}: group {group!r} has no committed "
                                          "offset there; use --to-offset or --to-earliest")
                want = prior + int(value)
            else:
                found = eng.offset_for_time(t, p, int(value))
                want = end if found is None else found
            new = min(max(want, start), end)
            rows.append({"topic": t, "partition": p, "prior": prior, "new": new,
                         "requested": want, "clamped": new != want,
                         "log_start_offset": start, "log_end_offset": end})
    return rows


def apply_reset(eng: Engine, group: str, rows: list[dict[str, Any]], force: bool = False) -> None:
    if not force:
        _refuse_if_active(eng, group, "resetting its offsets", hint=" (or pass --force)")
    _store(eng, group).commit({(r["topic"], r["partition"]): r["new"] for r in rows})


def delete_group(eng: Engine, group: str) -> dict[str, Any]:
    if not _exists(eng, group):
        raise GroupNotFound(f"group {group!r} does not exist")
    _refuse_if_active(eng, group, "deleting it")
    gdir = membership.group_dir(eng.path, group)
    committed = _store(eng, group).refresh()
    trash = os.path.join(os.path.dirname(gdir), f".deleted-{os.path.basename(gdir)}-{os.getpid()}")
    os.replace(gdir, trash)  # one atomic step: the group is there or gone
    shutil.rmtree(trash, ignore_errors=True)
    return {"group": group, "deleted_offsets": len(committed)}


def delete_offsets(eng: Engine, group: str, topic: str) -> dict[str, Any]:
    if not _exists(eng, group):
        raise GroupNotFound(f"group {group!r} does not exist")
    _refuse_if_active(eng, group, f"deleting its offsets of {topic!r}", topic)
    store = _store(eng, group)
    gone = [tp for tp in store.refresh() if tp[0] == topic]
    if not gone:
        raise InvalidArgument(f"group {group!r} has no committed offsets for topic {topic!r}")
    store.commit({}, delete=gone)
    return {"group": group, "topic": topic, "partitions": sorted(p for _, p in gone)}
