"""Every process's series, summed, each counted exactly once.

The rule (docs/METRICS.md): a live process's series are read from its files; a dead one's
(its keys file no longer flocked: it exited or was killed, -9 included) are merged into
``.stats/retired.json`` by the next gather and its files deleted; an engine that closes
merges its own. Counters, histograms and runs add up; a gauge (a live process's value, such
as its hot tier's bytes) goes with its process. ``retired.json`` lists the processes merged
into it whose files are not yet gone, so a merge cut short by a crash is never merged twice.
Every gather and merge holds ``.stats/meter.lock``: a reader never sees a process both
merged and live, or neither. Series of topics or groups that no longer exist are dropped at
each merge (``keep``).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..errors import DamagedMetadata, RivvenError
from ..storage import files, guard, jsondoc
from ..storage.locks import DEFAULT_WAIT, LockWait, lock_path
from . import slots
from .meter import Meter
from .names import FAILURES, LAST_DURATION, LAST_SUCCESS, RUNS, SERIES
from .slots import Labels

RETIRED = "retired.json"
LOCK = "meter.lock"
MAX_RETIRED = 256 << 20
Key = tuple[str, Labels]
Keep = Callable[[str, Labels], bool]


class Gathered(NamedTuple):
    series: dict[Key, list[float]]
    live: int  # processes read live (this one included when it counted anything)
    dead: int  # dead processes counted but not merged (a read-only gather)


def add(acc: dict[Key, list[float]], name: str, labels: Labels, values: list[float],
        live: bool) -> None:
    """Fold one process's (or the retired) values of a series into ``acc``."""
    kind = SERIES[name].kind
    if kind == "gauge" and not live:
        return  # a dead process's gauge is no one's value any more
    cur = acc.get((name, labels))
    if cur is None:
        acc[(name, labels)] = list(values)
    elif kind == "run":
        cur[RUNS] += values[RUNS]
        cur[FAILURES] += values[FAILURES]
        if values[LAST_SUCCESS] > cur[LAST_SUCCESS]:
            cur[LAST_SUCCESS] = values[LAST_SUCCESS]
            cur[LAST_DURATION] = values[LAST_DURATION]
    else:
        for i, v in enumerate(values):
            cur[i] += v


@contextlib.contextmanager
def _locked(stats_dir: str, wait: LockWait) -> Iterator[bool]:
    """Hold meter.lock; yields False (holding nothing) where it cannot be had (a read-only
    data dir): then nothing is merged."""
    with contextlib.ExitStack() as stack:
        try:
            guard.make_dir(stats_dir)
            stack.enter_context(lock_path(os.path.join(stats_dir, LOCK), wait))
            ok = True
        except (OSError, RivvenError):
            ok = False
        yield ok


def _load(stats_dir: str) -> tuple[dict[Key, list[float]], set[str]]:
    path = os.path.join(stats_dir, RETIRED)
    try:
        raw = jsondoc.read(path, "retired metrics", MAX_RETIRED)
        if raw is None:
            return {}, set()
        doc = jsondoc.unseal(raw, path, "retired metrics")
        merged = doc.get("merged")
        rows = doc.get("series")
        if doc.get("version") != 1 or not isinstance(merged, list) or not isinstance(rows, list):
            raise jsondoc.damaged(path, "retired metrics", "not a version 1 document")
    except (DamagedMetadata, OSError):
        # counting starts again from the live processes (a reset Prometheus understands);
        # the damaged file is kept aside for a look
        with contextlib.suppress(OSError):
            os.replace(path, path + ".damaged")
        return {}, set()
    out: dict[Key, list[float]] = {}
    for row in rows:
        if not isinstance(row, list) or len(row) != 3:
            continue
        key = slots.check_key(row[0], row[1])
        vals = row[2]
        if key is None or not isinstance(vals, list) or len(vals) != key[0].slots:
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               and v >= 0 for v in vals):
            out[(row[0], key[1])] = [float(v) for v in vals]
    return out, {m for m in merged if isinstance(m, str) and m.startswith(slots.PREFIX)}


def _store(stats_dir: str, series: dict[Key, list[float]], merged: set[str]) -> None:
    rows = [[name, dict(labels), vals] for (name, labels), vals in sorted(series.items())
            if SERIES[name].kind != "gauge"]
    doc = {"version": 1, "merged": sorted(merged), "series": rows}
    files.write_atomic(os.path.join(stats_dir, RETIRED), jsondoc.seal(doc))


def gather(stats_dir: str, own: Meter | None = None, keep: Keep | None = None,
           wait: LockWait = DEFAULT_WAIT) -> Gathered:
    """Every process's series summed; dead processes merged into retired.json on the way
    (unless the data dir cannot be written)."""
    with _locked(stats_dir, wait) as writable:
        retired, merged = _load(stats_dir)
        live_sets: list[list[tuple[str, Labels, list[float]]]] = []
        dead: list[tuple[str, list[tuple[str, Labels, list[float]]]]] = []
        present = set(slots.process_files(stats_dir))
        for ident in present:
            if ident in merged:
                if writable:  # merged, but its files outlived a crash: finish the cleanup
                    slots.remove_process(stats_dir, ident)
                continue
            if own is not None and ident == own.ident:
                live_sets.append(own.values())
                continue
            state = slots.is_live(stats_dir, ident)
            if state is None:
                continue
            values = slots.read_process(stats_dir, ident)
            if state:
                live_sets.append(values)
            else:
                dead.append((ident, values))
        n_dead = 0
        if dead and writable:
            for _, values in dead:
                for name, labels, vals in values:
                    add(retired, name, labels, vals, live=False)
            if keep is not None:
                retired = {k: v for k, v in retired.items() if keep(*k)}
            idents = {i for i, _ in dead}
            still = {m for m in merged if m in present}  # (a merge that was cut short)
            try:
                _store(stats_dir, retired, still | idents)
            except (OSError, RivvenError):
                n_dead = len(dead)  # counted below as they are; merged next time
            else:
                for ident in idents:
                    slots.remove_process(stats_dir, ident)
                dead = []
        total: dict[Key, list[float]] = {}
        for (name, labels), vals in retired.items():
            add(total, name, labels, vals, live=False)
        for values in live_sets:
            for name, labels, vals in values:
                add(total, name, labels, vals, live=True)
        for _, values in dead:  # (read-only: dead and unmerged, counted as they are)
            n_dead = len(dead)
            for name, labels, vals in values:
                add(total, name, labels, vals, live=False)
        if keep is not None:
            total = {k: v for k, v in total.items() if keep(*k)}
        return Gathered(total, len(live_sets), n_dead)


def retire(meter: Meter, wait: LockWait = DEFAULT_WAIT) -> None:
    """An engine closing: merge its own series into retired.json and delete its files
    (listed as merged until they are gone, so a crash in between never counts them twice).
    Where that cannot be done the files stay and the next gather merges them."""
    stats_dir = meter.stats_dir
    if stats_dir is None or meter.slots.keys_fd < 0:
        meter.close_files(remove=False)
        return
    try:
        with _locked(stats_dir, wait) as writable:
            if not writable:
                raise OSError("cannot lock")
            retired, merged = _load(stats_dir)
            for name, labels, vals in meter.values():
                add(retired, name, labels, vals, live=False)
            present = set(slots.process_files(stats_dir))
            _store(stats_dir, retired, {m for m in merged if m in present} | {meter.ident})
            meter.close_files(remove=True)
    except (OSError, RivvenError):
        meter.close_files(remove=False)  # its flock goes with it: merged as a dead process


def retired_idents(stats_dir: str) -> set[str]:
    """(tests, tools) the processes retired.json says it holds and whose files remain."""
    return _load(stats_dir)[1]
