"""``rivven spark export | import``: a copy between the data dir and a Kafka-protocol cluster
spread over Spark tasks, one per source partition, for backfills one process copies too
slowly.

Each task runs the copy of its partition by the very protocol of ``rivven kafka
export|import`` (export.py, importer.py): its transactions write the records and, in the
same transaction, the next source position into the mirror group ``rivven-mirror-<name>``
(an export's on the cluster, an import's in the data dir). Only its transactional id is its
own, ``rivven-mirror-<name>/<topic>/<partition>`` (``/`` is in no mirror name nor topic
name), so the tasks run side by side, and a task killed or retried fences the attempt
before it and resumes where that one's last transaction left its partition. The group is
the one ``rivven kafka export|import`` of the same name uses: either path resumes the other.

Here, before the job: the options checked, the destination topics created with the source's
partition count and configs or checked (the same code as the one-process copy, run with no
partition to copy: the tasks never race to create a topic), the base transactional id
``rivven-mirror-<name>`` taken up (a one-process copy of the same name still running is
fenced). The job is engine.spark's job of independent tasks (tasks_job.py), each running
``copy_task`` here. After it: the tasks' results added up.

The data dir must be at the same path for the driver and every executor (local mode, or a
shared file system), as for every rivven Spark job; so must a keyring file. The client
settings (``-X``, ``--config``) travel in the job's plan, a file in the data dir's staging
folder that is removed when the job ends.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from . import cluster
from .copy import TXN_RECORDS, check_name, default_name, destinations

if TYPE_CHECKING:
    from ..engine import Engine
    from ..fetch.positions import Position
    from ..progress import Progress

JOB = "tasks_job.py"  # (engine.spark's job of independent tasks: each runs copy_task)
# a task's transactional id longer than this names its topic by a hash: in an import's data
# dir the id is a file name, percent-encoded (``/`` as ``%2F``), of at most 255 bytes
MAX_ID = 220


def task_id(name: str, topic: str, partition: int) -> str:
    """A task's transactional id: ``rivven-mirror-<name>/<topic>/<partition>``; a topic
    whose name would make it longer than ``MAX_ID`` by ``#`` and its hash instead."""
    tid = f"{cluster.transactional_id(name)}/{topic}/{partition}"
    if len(tid) <= MAX_ID:
        return tid
    digest = hashlib.sha256(topic.encode()).hexdigest()[:20]
    return f"{cluster.transactional_id(name)}/#{digest}/{partition}"


def _chosen(topic: str, count: int, partitions: Sequence[int] | None, where: str) -> list[int]:
    """The partitions of ``topic`` to copy: ``partitions`` (checked) or all ``count``."""
    if partitions is None:
        return list(range(count))
    for p in partitions:
        if not 0 <= p < count:
            raise InvalidArgument(f"topic {topic!r}{where} has no partition {p} (it has {count})")
    return sorted(set(partitions))


def _plain(pos: Position | None) -> list[Any] | None:
    return None if pos is None else [pos.kind, pos.value]


def _keyring(eng: Engine) -> str | None:
    """The keyring file the tasks open the data dir with (the engine's, when it is a file)."""
    return getattr(eng.keyring, "path", None)


def export(eng: Engine, topics: Sequence[str], bootstrap: str, name: str | None = None,
           config: Mapping[str, str] | None = None, *, to_topic: str | None = None,
           prefix: str | None = None, start: Position | None = None,
           stop: Position | None = None, at_least_once: bool = False,
           partitions: Sequence[int] | None = None, txn_records: int = TXN_RECORDS,
           timeout: float = cluster.DEFAULT_TIMEOUT, master: str = "local[*]",
           confs: list[str] | None = None, deploy_mode: str | None = None,
           progress: Progress | None = None) -> dict[str, Any]:
    """Copy ``topics`` of ``eng`` to the cluster at ``bootstrap`` on Spark, one task per
    partition (``partitions``: only these of every topic): the ``Copied`` result of the
    whole copy, with the job's timings (``master``, ``tasks``, ``spark_s``, ...)."""
    from .export import Export

    name = check_name(name or default_name("export", topics))
    routes = destinations(topics, to_topic, prefix)
    conf = cluster.settings(bootstrap, config)
    tasks: list[dict[str, Any]] = []
    size: dict[tuple[str, int], int] = {}
    for t in topics:
        for p in _chosen(t, eng.topic(t).partitions, partitions, ""):
            tasks.append({"topic": t, "partition": p, "to_topic": routes[t],
                          "transactional_id": task_id(name, t, p)})
        size.update({(t, r["partition"]): r["end_offset"] - r["start_offset"]
                     for r in eng.offsets.list_offsets(t)})
    # the biggest partitions first: Spark starts tasks in order, so one begun last never
    # holds the job up alone
    tasks.sort(key=lambda k: -size[(str(k["topic"]), int(k["partition"]))])
    _java()
    prep = Export(eng, topics, conf, name, to_topic=to_topic, prefix=prefix, start=start,
                  stop=stop, at_least_once=at_least_once, partitions={t: [] for t in topics},
                  timeout=timeout)
    return _submit(eng, prep, tasks, master, confs, deploy_mode, progress, {
        "direction": "export", "client": conf, "at_least_once": at_least_once,
        "start": _plain(start), "stop": _plain(stop), "txn_records": txn_records,
        "timeout": timeout})


def import_(eng: Engine, topics: Sequence[str], bootstrap: str, name: str | None = None,
            config: Mapping[str, str] | None = None, *, to_topic: str | None = None,
            prefix: str | None = None, start: Position | None = None,
            stop: Position | None = None, partitions: Sequence[int] | None = None,
            txn_records: int = TXN_RECORDS, timeout: float = cluster.DEFAULT_TIMEOUT,
            master: str = "local[*]", confs: list[str] | None = None,
            deploy_mode: str | None = None, progress: Progress | None = None
            ) -> dict[str, Any]:
    """Copy ``topics`` of the cluster at ``bootstrap`` into ``eng`` on Spark, one task per
    source partition: as ``export``, the other way."""
    from ..errors import UnknownTopic
    from .importer import Import

    name = check_name(name or default_name("import", topics))
    routes = destinations(topics, to_topic, prefix)
    conf = cluster.settings(bootstrap, config)
    src = cluster.Cluster(conf, timeout)
    counts = src.partitions(list(routes))
    tasks = []
    for t, n in counts.items():
        if n is None:
            raise UnknownTopic(f"topic {t!r} does not exist on {src.where}: check its name "
                               "(kafka-topics --list)")
        tasks += [{"topic": t, "partition": p, "to_topic": routes[t],
                   "transactional_id": task_id(name, t, p)}
                  for p in _chosen(t, n, partitions, f" on {src.where}")]
    _java()
    prep = Import(eng, topics, conf, name, to_topic=to_topic, prefix=prefix, start=start,
                  stop=stop, partitions={t: [] for t in topics}, timeout=timeout)
    return _submit(eng, prep, tasks, master, confs, deploy_mode, progress, {
        "direction": "import", "client": conf, "start": _plain(start), "stop": _plain(stop),
        "txn_records": txn_records, "timeout": timeout})


def _java() -> None:
    from ..spark.submit import check_java

    check_java()  # (before anything is created: no Java, nothing done)


def _submit(eng: Engine, prep: Any, tasks: list[dict[str, Any]], master: str,
            confs: list[str] | None, deploy_mode: str | None, progress: Progress | None,
            common: dict[str, Any]) -> dict[str, Any]:
    """``prep`` (the copy of no partition) opened and closed: the destination topics made
    or checked, the base transactional id taken up; then the job, one task per partition
    (``copy_task``); the results added up."""
    from ..spark.submit import task_runner

    t0 = time.monotonic()
    try:
        prep.open()
    finally:
        prep.close()
    out: dict[str, Any] = {"master": master, "command": None, "tasks": len(tasks)}
    kind = common["direction"]
    job = {"kind": kind, "topic": ",".join(prep.routes)[:200],
           "function": f"{__name__}:copy_task",
           "common": {**common, "data_dir": eng.path, "name": prep.name,
                      "keyring": _keyring(eng)}}
    copies = task_runner(eng, f"rivven-{kind}-{prep.name}", JOB, job, "results", master,
                         confs, deploy_mode, False, progress, out)(tasks)
    assert copies is not None  # (not a dry run)
    base = prep.result()
    return {**base, **total(copies, base), "seconds": round(time.monotonic() - t0, 3), **out}


def copy_task(common: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """(A Spark task: engine/spark/tasks_job.py.) One source partition copied to its end by
    ``rivven kafka export|import``'s protocol under the task's own transactional id: its
    ``Copied`` result. The data dir is opened here and closed before the task ends:
    read-only for an export, writable for an import."""
    from ..engine import Engine
    from ..fetch.positions import Position
    from .copy import run

    def position(raw: list[Any] | None) -> Position | None:
        return None if raw is None else Position(str(raw[0]), int(raw[1]))

    export = common["direction"] == "export"
    options: dict[str, Any] = {
        "to_topic": task["to_topic"], "start": position(common.get("start")),
        "stop": position(common.get("stop")),
        "partitions": {task["topic"]: [task["partition"]]},
        "transactional_id": task["transactional_id"], "txn_records": common["txn_records"],
        "timeout": common["timeout"]}
    with Engine.open(common["data_dir"], read_only=export,
                     keyring=common.get("keyring")) as eng:
        copy: Any
        if export:
            from .export import Export

            copy = Export(eng, [task["topic"]], common["client"], common["name"],
                          at_least_once=common["at_least_once"], **options)
        else:
            from .importer import Import

            copy = Import(eng, [task["topic"]], common["client"], common["name"], **options)
        return dict(run(copy))


def total(copies: Sequence[Mapping[str, Any]], base: Mapping[str, Any]) -> dict[str, Any]:
    """The tasks' results as one: counts added, partitions side by side (sorted), the
    warnings of each said once."""
    warnings = list(base["warnings"])
    for c in copies:
        warnings += [w for w in c["warnings"] if w not in warnings]
    return {
        "transactional_id": (None if not base["exactly_once"] else
                             f"{base['transactional_id']}/<topic>/<partition>"),
        "records": sum(c["records"] for c in copies),
        "bytes": sum(c["bytes"] for c in copies),
        "transactions": sum(c["transactions"] for c in copies),
        "warnings": warnings,
        "partitions": sorted((p for c in copies for p in c["partitions"]),
                             key=lambda p: (p["topic"], p["partition"]))}
