"""Every process's series, summed, each counted exactly once.

The rule (docs/METRICS.md): a live process's series are read from its files; a dead one's
(its keys file no longer flocked: it exited or was killed, -9 included) are merged into
``.stats/retired.json`` by the next gather and its files deleted; an engine that closes
merges its own. Counters, histograms and runs add up; a gauge (a live process's value, such
as its hot tier's bytes) goes with its process. ``retired.json`` lists the processes merged
into it whose files are not yet gone, so a merge cut short by a crash is never merged twice.
Every gather and merge holds ``.stats/meter.lock``: a reader never sees a process both
merged and live, or neither; a gather that cannot have the lock in time fails rather than
read without it. Series of topics or groups that no longer exist are dropped at each merge
(``keep``, asked once the lock is held). A file that cannot be read now (not damaged: a
descriptor limit, a permission) fails the gather: nothing is merged as empty or reset. A
damaged one never stops it: a file set holding values no process counts (``slots.
check_values``: 1e300, 2^63, negative, NaN, an inconsistent histogram), or whose keys or
values file is not a regular file (a FIFO), is set aside (``<file>.damaged``, counted by
``rivven_metrics_files_set_aside``) and named in ``Gathered.problems``, as a damaged
``retired.json`` is; a merge whose sum would leave the range sets the dead process's files
aside instead. So ``retired.json`` only ever holds what ``check_values`` accepts.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..errors import DamagedMetadata, LockTimeout, RivvenError, StorageError
from ..fs import guard, jsondoc
from ..fs.locks import DEFAULT_WAIT, LockWait, lock_path
from . import slots
from .meter import Meter
from .names import FAILURES, LAST_DURATION, LAST_SUCCESS, RUNS, SERIES
from .slots import Labels, SlotFile

RETIRED = "retired.json"
LOCK = "meter.lock"
MAX_RETIRED = 256 << 20
MAX_VALUE = slots.MAX_VALUE
Key = tuple[str, Labels]
Keep = Callable[[str, Labels], bool]
Values = list[tuple[str, Labels, list[float]]]


class Gathered(NamedTuple):
    series: dict[Key, list[float]]
    live: int  # processes read live (this one included when it counted anything)
    dead: int  # dead processes counted but not merged (a read-only gather)
    problems: list[str] = []  # damaged files met (set aside when the gather could write)


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
    """Hold meter.lock; yields False (holding nothing) where it cannot be made at all (a
    read-only data dir): then nothing is merged. A lock held too long by another gather
    raises LockTimeout: reading without it could count a process twice or not at all."""
    with contextlib.ExitStack() as stack:
        try:
            guard.make_dir(stats_dir)
            stack.enter_context(lock_path(os.path.join(stats_dir, LOCK), wait))
            ok = True
        except LockTimeout:
            raise
        except (OSError, RivvenError):
            ok = False
        yield ok


def _unreadable(path: str, e: OSError) -> StorageError:
    return StorageError(f"cannot read {path} ({e.strerror or e}): the metrics of the processes "
                        "that wrote to the data dir need it; check its permissions and the "
                        "open-file limit, then scrape again")


def _number(v: object) -> bool:
    """A count as JSON may hold one: an int or a finite float in [0, 2**63)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return 0 <= v < 1 << 63  # (compared as an int: a huge one never becomes a float)
    return isinstance(v, float) and math.isfinite(v) and 0 <= v < MAX_VALUE


def _load(stats_dir: str, writable: bool, problems: list[str] | None = None
          ) -> tuple[dict[Key, list[float]], set[str]]:
    """retired.json's series and merged processes; a damaged one (or one that is not a
    regular file) is set aside (``writable``) and said in ``problems``: counting starts
    again."""
    path = os.path.join(stats_dir, RETIRED)
    try:
        raw = slots.read_regular(path, MAX_RETIRED)
        if raw is None:
            raise jsondoc.damaged(path, "retired metrics", f"larger than {MAX_RETIRED >> 20} MiB")
        doc = jsondoc.unseal(raw, path, "retired metrics")
        merged = doc.get("merged")
        rows = doc.get("series")
        if doc.get("version") != 1 or not isinstance(merged, list) or not isinstance(rows, list):
            raise jsondoc.damaged(path, "retired metrics", "not a version 1 document")
    except FileNotFoundError:
        return {}, set()
    except (DamagedMetadata, slots.Damaged) as e:
        # counting starts again from the live processes (a reset Prometheus understands);
        # the damaged file is kept aside for a look
        line = str(e) if isinstance(e, slots.Damaged) else e.args[0]
        if writable:
            try:
                os.replace(path, path + slots.DAMAGED)
                line += f"; set aside as {RETIRED}{slots.DAMAGED}, counting starts again"
            except OSError:
                pass
        if problems is not None:
            problems.append(line)
        return {}, set()
    except OSError as e:
        raise _unreadable(path, e) from e
    out: dict[Key, list[float]] = {}
    for row in rows:
        if not isinstance(row, list) or len(row) != 3:
            continue
        key = slots.check_key(row[0], row[1])
        vals = row[2]
        if key is None or not isinstance(vals, list) or len(vals) != key[0].slots:
            continue
        if all(_number(v) for v in vals) and slots.check_values(
                key[0], [float(v) for v in vals]) is None:
            out[(row[0], key[1])] = [float(v) for v in vals]
    return out, {m for m in merged if isinstance(m, str) and m.startswith(slots.PREFIX)}


def _store(stats_dir: str, series: dict[Key, list[float]], merged: set[str]) -> None:
    """retired.json replaced whole (a temporary file, renamed). Not fsynced: counters are
    not data, and whatever a machine crash leaves of the two renames and deletions (this
    file, the merged processes' files) counts a process once or not at all, never twice."""
    rows = [[name, dict(labels), vals] for (name, labels), vals in sorted(series.items())
            if SERIES[name].kind != "gauge"]
    doc = {"version": 1, "merged": sorted(merged), "series": rows}
    path = os.path.join(stats_dir, RETIRED)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        fd = guard.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(jsondoc.seal(doc))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read(stats_dir: str, ident: str, writable: bool, problems: list[str]
          ) -> tuple[bool, Values] | None:
    """(live?, values) of a process's files; None when they are gone, or damaged: then the
    problem is added to ``problems`` and (``writable``) the files are set aside — a dead
    process's both, a live one's only a file that is not a regular file (it counts on in
    its own; its damaged values are left out of this scrape)."""
    live: bool | None = None
    try:
        live = slots.is_live(stats_dir, ident)
        values = slots.read_process(stats_dir, ident) if live is not None else None
    except slots.Damaged as e:
        problems.append(_set_aside(stats_dir, ident, e, writable, live is not True))
        return None
    except OSError as e:
        raise _unreadable(e.filename or os.path.join(stats_dir, ident + ".keys"), e) from e
    return None if live is None or values is None else (live, values)


def _set_aside(stats_dir: str, ident: str, e: slots.Damaged, writable: bool, whole: bool
               ) -> str:
    """(``writable``) Set aside the damaged file (``whole``: the process's file set); the
    problem's line, naming the file to blame and what became of it."""
    line = f"{e.path}: {e.why}"
    if not writable:
        return line + "; left out of this scrape (the data dir cannot be written: nothing merged)"
    try:
        if whole:
            moved = slots.set_aside(stats_dir, ident)
        elif not stat.S_ISREG(os.lstat(e.path).st_mode):  # (no process's file)
            os.replace(e.path, e.path + slots.DAMAGED)
            moved = [e.path + slots.DAMAGED]
        else:  # a live process maps it: set aside once that process is gone
            return line + "; left out of this scrape while its process lives"
    except OSError as err:
        return line + f"; left out of this scrape (cannot set it aside: {err.strerror or err})"
    return (line + "; set aside as " + " and ".join(os.path.basename(m) for m in moved)
            + " (never merged: look, then delete)")


def gather(stats_dir: str, own: Meter | None = None, keep: Callable[[], Keep] | None = None,
           wait: LockWait = DEFAULT_WAIT) -> Gathered:
    """Every process's series summed; dead processes merged into retired.json on the way
    (unless the data dir cannot be written). ``keep()`` (asked with the lock held) says
    which series still belong to a topic or group that exists."""
    with _locked(stats_dir, wait) as writable:
        problems: list[str] = []
        retired, merged = _load(stats_dir, writable, problems)
        keeps = keep() if keep is not None else None
        live_sets: list[Values] = []
        dead: list[tuple[str, Values]] = []
        mine = own.values() if own is not None and own.slots.keys_fd < 0 else []
        if mine:
            live_sets.append(mine)  # (counting in memory alone: no file to read)
        if writable:
            slots.remove_unborn(stats_dir)
        present = set(slots.process_files(stats_dir))
        for ident in sorted(present):
            if ident in merged:
                if writable:  # merged, but its files outlived a crash: finish the cleanup
                    slots.remove_process(stats_dir, ident)
                continue
            if own is not None and ident == own.ident:
                live_sets.append(own.values())
                continue
            got = _read(stats_dir, ident, writable, problems)
            if got is None:
                continue
            if got[0]:
                live_sets.append(got[1])
            else:
                dead.append((ident, got[1]))
        if dead and writable:
            for ident, values in list(dead):
                merged_in = _merge(retired, values)
                if merged_in is None:  # (the sum would leave the range: not a real count)
                    dead.remove((ident, values))
                    problems.append(_set_aside(stats_dir, ident, slots.Damaged(
                        os.path.join(stats_dir, ident + ".values"),
                        "its counts added to retired.json's leave the range"), True, True))
                else:
                    retired = merged_in
            if keeps is not None:
                retired = {k: v for k, v in retired.items() if keeps(*k)}
            idents = {i for i, _ in dead}
            still = {m for m in merged if m in present}  # (a merge that was cut short)
            try:
                _store(stats_dir, retired, still | idents)
            except (OSError, RivvenError):
                # nothing merged: the dead stay as they are (counted below), merged next time
                retired, _ = _load(stats_dir, writable)
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
        n_dead = len(dead)
        for _, values in dead:  # (not merged: a read-only data dir, a full disk)
            for name, labels, vals in values:
                add(total, name, labels, vals, live=False)
        if keeps is not None:
            total = {k: v for k, v in total.items() if keeps(*k)}
        return Gathered(total, len(live_sets), n_dead, problems)


def _merge(retired: dict[Key, list[float]], values: Values) -> dict[Key, list[float]] | None:
    """``retired`` with a dead process's ``values`` added, or None when a sum leaves what
    ``check_values`` accepts (retired.json never holds it)."""
    out = {k: list(v) for k, v in retired.items()}
    for name, labels, vals in values:
        add(out, name, labels, vals, live=False)
        total = out.get((name, labels))
        if total is not None and slots.check_values(SERIES[name], total) is not None:
            return None
    return out


def retire(meter: Meter, wait: LockWait = DEFAULT_WAIT) -> None:
    """An engine closing: merge its own series into retired.json and delete its files
    (listed as merged until they are gone, so a crash in between never counts them twice).
    Where that cannot be done the files stay and the next gather merges them."""
    old: SlotFile = meter.detach()  # (counts from now on go nowhere: the engine is closing)
    stats_dir = meter.stats_dir
    values = old.values()
    if stats_dir is None or not values:
        old.close(remove=old.keys_fd >= 0)
        return
    try:
        with _locked(stats_dir, wait) as writable:
            if not writable:
                raise OSError("cannot lock")
            retired, merged = _load(stats_dir, writable)
            for name, labels, vals in values:  # (in memory: a value no process counts is
                if slots.check_values(SERIES[name], vals) is None:  # a broken mapping)
                    merged_in = _merge(retired, [(name, labels, vals)])
                    retired = merged_in if merged_in is not None else retired
            present = set(slots.process_files(stats_dir))
            mine = {old.ident} if old.keys_fd >= 0 else set()  # (memory alone: no files)
            _store(stats_dir, retired, {m for m in merged if m in present} | mine)
            old.close(remove=True)
    except (OSError, RivvenError):
        old.close(remove=False)  # its flock goes with it: merged as a dead process
