"""Run the Spark jobs with ``spark-submit`` — compaction (then its swap) and tiering (then its
commit) — and nothing of pyspark imported here.

The data dir must be reachable at the same path by the driver and every executor (local mode,
a standalone cluster on this machine, or a shared file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import clock
from ..errors import InvalidArgument, RivvenError, plural
from ..failpoint import failpoint
from ..fs import guard
from ..fs.locks import acquire, open_lock_file, try_lock
from ..maintenance import compaction
from ..progress import Progress
from . import java
from .job import PROGRESS, STARTED

if TYPE_CHECKING:
    from ..engine import Engine
    from ..maintenance.results import CompactionPlan

STAGING = ".compaction"
HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_DIR = os.path.dirname(HERE)


class SparkJobFailed(RivvenError):
    def __init__(self, message: str, log_path: str) -> None:
        super().__init__(message)
        self.log_path = log_path


def spark_submit() -> str:
    """``$SPARK_HOME/bin/spark-submit``, else the one shipped inside the installed pyspark."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise RivvenError("pyspark is not installed and SPARK_HOME is not set: run "
                              "'make setup' (or pip install pyspark)")
        home = os.path.dirname(spec.origin)
    path = os.path.join(home, "bin", "spark-submit")
    if not os.path.exists(path):
        raise RivvenError(f"{path} does not exist: point SPARK_HOME at a Spark installation")
    return path


def check_java() -> str:
    """The java spark-submit will run (as its spark-class finds it), or a RivvenError of one
    line naming what is missing and how to install it: before anything starts."""
    return java.check(environment(), os.path.dirname(os.path.dirname(spark_submit())))


def python_launcher(dest: str) -> str:
    """The interpreter Spark runs for its Python processes: this one (it has the engine,
    pyarrow, ...). With the pip-installed pyspark's own spark-submit, a wrapper also drops the
    pyspark/py4j zips Spark puts first on PYTHONPATH, so every Python worker imports the
    installed (byte-compiled) copy of the very same files instead of compiling them from the
    zip: about a second less per Python process on a slow machine."""
    if os.environ.get("SPARK_HOME"):
        return sys.executable
    path = os.path.join(dest, "python.sh")
    with open(path, "w", opener=guard.opener) as f:
        f.write("#!/bin/sh\n"
                "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | "
                "grep -v -e '/pyspark.zip$' -e '/py4j-[^/]*-src.zip$' | paste -sd: -)\n"
                f"export PYTHONPATH\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    mode = guard.modes(dest)[0]
    os.chmod(path, mode | (mode & 0o440) >> 2)  # (executable by whoever may read it)
    return path


def environment(python: str = sys.executable) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else Spark binds to a non-loopback address
    env.setdefault("PYSPARK_PYTHON", python)  # the interpreter with engine + pyarrow
    env.setdefault("PYSPARK_DRIVER_PYTHON", python)
    return env


def engine_zip(dest: str) -> str:
    """The engine package as a zip for ``--py-files``: sources, plus bytecode compiled here.
    zipimport never writes bytecode, so without it every Python process Spark starts (the
    planners of the data source, each worker) compiles the engine again. The bytecode is
    unchecked-hash (no timestamps to match); an interpreter of another version rejects its
    magic number and compiles the source next to it."""
    import py_compile
    import tempfile

    path = os.path.join(dest, "engine.zip")
    with open(path, "wb", opener=guard.opener) as out, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z, \
            tempfile.TemporaryDirectory() as tmp:
        for root, dirs, names in os.walk(ENGINE_DIR):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for n in names:
                if n.endswith(".py"):
                    full = os.path.join(root, n)
                    arc = os.path.join("engine", os.path.relpath(full, ENGINE_DIR))
                    z.write(full, arc)
                    pyc = os.path.join(tmp, "x.pyc")
                    try:
                        py_compile.compile(full, pyc, dfile=arc, doraise=True,
                                           invalidation_mode=py_compile.PycInvalidationMode
                                           .UNCHECKED_HASH)
                    except py_compile.PyCompileError:
                        continue  # the source alone: the executor's error is clearer
                    z.write(pyc, arc + "c")
    return path


def command(plan_path: str, py_files: str, master: str, confs: list[str],
            deploy_mode: str | None, app_name: str, python: str = sys.executable,
            script: str = "job.py") -> list[str]:
    cmd = [spark_submit(), "--master", master, "--name", app_name, "--py-files", py_files,
           "--conf", "spark.ui.showConsoleProgress=true",
           "--conf", f"spark.pyspark.python={python}",
           "--conf", f"spark.pyspark.driver.python={python}"]
    if deploy_mode:
        cmd += ["--deploy-mode", deploy_mode]
    for c in confs:
        if "=" not in c:
            raise RivvenError(f"--conf {c!r} is not key=value, e.g. spark.executor.memory=4g")
        cmd += ["--conf", c]
    if not any(c.startswith("spark.driver.extraJavaOptions=") for c in confs):
        # the driver JVM (all of Spark in local mode) lives for seconds: C2's compilations
        # cost more CPU than their faster code saves (about a third of the JVM's CPU here)
        cmd += ["--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1"]
    return [*cmd, os.path.join(HERE, script), plan_path]


def _die_with_parent() -> None:
    try:  # Linux: spark-submit goes when rivven goes (kill -9 included)
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_spark(cmd: list[str], log_path: str, progress: Progress | None,
              python: str = sys.executable, progress_path: str | None = None,
              env: dict[str, str] | None = None, stop_path: str | None = None) -> int:
    """Run spark-submit, its output to ``log_path``; ``progress(what, tasks, tasks done)``
    as the job's ``progress.json`` (``progress_path``, see job.Watch) says, read every
    0.25 s while the job runs and once at its end. ``env``: more environment for it (an
    encrypted topic's keys: engine.spark.keys). ``stop_path`` (a job that runs until told):
    Ctrl-C creates that file, which the job reads as "stop cleanly", and waits for it to
    exit (a second Ctrl-C kills it); the job runs in a session of its own so the terminal's
    interrupt reaches this process alone."""
    with open(log_path, "wb", opener=guard.opener) as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**environment(python), **(env or {})},
                                preexec_fn=_die_with_parent, bufsize=0,
                                start_new_session=stop_path is not None)
        try:
            return _follow(proc, log, progress, progress_path)
        except KeyboardInterrupt:
            if stop_path is None:
                raise
            with open(stop_path, "w", opener=guard.opener):
                pass
            if progress is not None:
                progress("stopping the query (Ctrl-C again kills it)", 0, 0)
            try:
                return _follow(proc, log, progress, progress_path)
            except KeyboardInterrupt:
                proc.kill()
                proc.wait()
                raise


def _follow(proc: subprocess.Popen, log: Any, progress: Progress | None,
            progress_path: str | None) -> int:
    """Copy the job's output to ``log`` and show its progress until it exits."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    tail = b""
    started = False
    shown: dict[str, Any] | None = None
    looked = 0.0  # when progress.json was last read

    def look() -> None:
        nonlocal shown, looked
        looked = time.monotonic()
        state = read_progress(progress_path) if progress_path is not None else None
        if state is not None and state != shown and progress is not None:
            shown = state
            progress(*describe_progress(state))

    while True:
        if select.select([fd], [], [], 0.25)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            log.write(chunk)
            if not started:
                tail = (tail + chunk)[-4096:]
                if STARTED.encode() in tail:
                    started = True
                    failpoint("spark-job-running")  # tests kill the launcher while the job runs
        if progress is not None and time.monotonic() - looked >= 0.25:
            look()  # (at most every 0.25 s, not once per chunk of output)
    if progress is not None:
        look()  # the final counts
    return proc.wait()


def read_progress(path: str) -> dict[str, Any] | None:
    """The job's ``progress.json``, or None (not written yet, or unreadable)."""
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def describe_progress(state: dict[str, Any]) -> tuple[str, int, int]:
    """``progress.json`` as a progress call ``(what, tasks, tasks done)``: ``spark: planning``
    (no job yet: counts 0), ``spark: stage 2/3`` (the stages of the jobs so far, the first
    one not done), ``spark: finishing`` (no job running); a streaming job's micro-batches,
    rows, rate and lag."""
    if state.get("phase") == "streaming":
        lag = state.get("lag")
        return (f"stream: batch {state.get('batch', -1)}, {int(state.get('rows', 0)):,} rows, "
                f"{float(state.get('rows_per_s') or 0):,.0f} rows/s, lag "
                f"{'-' if lag is None else f'{int(lag):,}'}", 0, 0)
    n, k = int(state.get("stages", 0)), int(state.get("stages_done", 0))
    total, done = int(state.get("tasks", 0)), int(state.get("tasks_done", 0))
    phase = state.get("phase")
    if phase == "planning" or not n:
        return "spark: planning", 0, 0
    if phase == "finishing":
        return "spark: finishing", total, done
    return f"spark: stage {min(k + 1, n)}/{n}", total, done


# the job's own errors: the last one is the one that ended it
_JOB_ERRORS = (r"CompactionError: (.+)", r"\[USER_RAISED_EXCEPTION\] (.+?)(?: SQLSTATE|$)",
               r"(?:RivvenError|ValueError|OSError|FileNotFoundError)\w*: (.+)",
               r"Exception in thread \"main\" (.+)")
# anything else: the first error line is the cause, what follows are its consequences
_FIRST_ERROR = re.compile(
    r"^\S+ \S+ ERROR [\w.$]+: (.+)"  # log4j: "26/11/26 18:18:22 ERROR SparkContext: ..."
    r"|^(?:Error: )?((?:[\w.$]+(?:Exception|Error)\b|Invalid |Could not |Unrecognized ).+)"
    r"|^Error: (.+)"
    r"|^\S+: line \d+: (.+)")  # bash (spark-class): "/x/bin/java: No such file or directory"
_ARTIFACTS = re.compile(r"bad array subscript|^at [\w.$<>/]+\(|^Traceback |^File \"")


def summarize_error(log_text: str) -> str:
    """The line of a Spark log that says what went wrong: the job's own error, else the first
    error line (the JVM's, log4j's or spark-class's), never a shell artifact that follows it
    (``CMD: bad array subscript``)."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    for pat in _JOB_ERRORS:
        for ln in reversed(lines):
            m = re.search(pat, ln)
            if m:
                return m.group(1)[:400]
    for ln in lines:
        m = _FIRST_ERROR.search(ln)
        if m and not _ARTIFACTS.search(ln):
            return next(g for g in m.groups() if g)[:400]
    lines = [ln for ln in lines if not _ARTIFACTS.search(ln)]
    return lines[-1][:400] if lines else "spark-submit printed nothing"


def clean_stale(data_dir: str) -> None:
    """Remove staging folders of runs that are gone (their lock is free)."""
    root = os.path.join(data_dir, STAGING)
    if not guard.real_dir(root):  # (a link: UnexpectedLink, never listed nor emptied)
        return
    names = os.listdir(root)
    for n in names:
        d = os.path.join(root, n)
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):  # the Spark log of a failed run: kept a week
            if time.time() - st.st_mtime > 7 * 86400:  # (a link: the link itself goes)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(d)
            continue
        try:
            fd = guard.open_file(os.path.join(d, "lock"), os.O_RDWR)
        except FileNotFoundError:  # an in-process pass (no lock) or a log file
            if time.time() - st.st_mtime > 3600:
                guard.remove_tree(data_dir, d)
            continue
        try:
            if try_lock(fd):
                guard.remove_tree(data_dir, d)
        finally:
            os.close(fd)


def _sanity(plan: CompactionPlan, rows: list[dict[str, Any]]) -> None:
    """Refuse output that cannot be right: every group written, and the last record of the
    cleaned range survives unless it is a tombstone past its horizon (or the range holds
    aborted transactions, whose records go, or markers only)."""
    got = sorted(r["base_offset"] for r in rows)
    want = sorted(g[0]["base_offset"] for g in plan["groups"])
    n_in = sum(r["records_in"] for r in rows)
    n_out = sum(r["records_out"] for r in rows)
    if got != want or (n_in and not n_out and plan["tombstone_bound"] < plan["cleanable_end"]
                       and not plan.get("aborted")):
        raise compaction.CompactionError(
            f"the job's output for partition {plan['partition']} is incomplete ({len(got)} of "
            f"{plural(len(want), 'segment')}, {n_out} of {plural(n_in, 'record')}); nothing was swapped")


def compact(eng: Engine, topic: str, partitions: list[int] | None = None,
            master: str = "local[*]", confs: list[str] | None = None,
            deploy_mode: str | None = None, dry_run: bool = False, force: bool = False,
            progress: Progress | None = None) -> dict[str, Any]:
    """Plan, run the Spark job, swap: one compaction pass over ``topic`` (a run of the
    ``rivven_compaction_*`` metrics unless ``dry_run``)."""
    args = (eng, topic, partitions, master, confs, deploy_mode, dry_run, force, progress)
    if dry_run:
        return _compact(*args)
    with eng.meter.get("rivven_compaction", topic=topic).timed():
        return _compact(*args)


def _compact(eng: Engine, topic: str, partitions: list[int] | None, master: str,
             confs: list[str] | None, deploy_mode: str | None, dry_run: bool, force: bool,
             progress: Progress | None) -> dict[str, Any]:
    t0 = time.time()
    now = clock.now_ms()
    cfg = eng.topic(topic).typed
    plans = eng.maintenance.compaction_plan(topic, partitions, force, now)
    todo = [p for p in plans if not p["skip"]]
    out: dict[str, Any] = {"topic": topic, "master": master, "plans": plans, "dry_run": dry_run,
                           "partitions": [], "command": None}
    if not cfg.compacted:
        raise RivvenError(f"topic {topic!r} has cleanup.policy={cfg.cleanup_policy}: compaction "
                          f"needs compact; 'rivven topic alter-config {topic} --set "
                          "cleanup.policy=compact'")
    if not todo and not dry_run:
        out["seconds"] = time.time() - t0
        return out
    if not dry_run:
        check_java()
    meta = eng.topic(topic)
    job = {"data_dir": eng.path, "topic": topic, "now": now, "partitions": todo,
           "topic_id": meta.id, "seal": cfg.encryption_enable}
    with submission(eng, f"rivven-compact-{topic}", "job.py", job, master, confs or [],
                    deploy_mode, dry_run, progress, out) as (result, staging):
        if result is None:
            return out
        t2 = time.time()
        for p in todo:
            rows = result["partitions"].get(str(p["partition"]), [])
            _sanity(p, rows)
            swapped = eng.maintenance.apply_compaction(topic, p, os.path.join(staging, str(p["partition"])),
                                           now, compaction.min_tombstone(rows))
            out["partitions"].append({"partition": p["partition"], **swapped,
                                      **compaction.summarize(rows),
                                      "tombstones_kept": sum(r["tombstones_kept"] for r in rows)})
        out["swap_s"] = time.time() - t2
    out["seconds"] = time.time() - t0
    return out


@contextlib.contextmanager
def submission(eng: Engine, app_name: str, script: str, job: dict[str, Any], master: str,
               confs: list[str], deploy_mode: str | None, dry_run: bool,
               progress: Progress | None, out: dict[str, Any], stoppable: bool = False
               ) -> Iterator[tuple[dict[str, Any] | None, str]]:
    """Stage ``job`` (plus the engine zip) in DATA/.compaction/<run>/, run ``script`` with
    spark-submit and yield ``(result.json, staging folder)`` for the caller to apply; yields
    ``(None, folder)`` on a dry run (``out["command"]`` is the exact command, runnable until
    the next run cleans up; for an encrypted topic with ``RIVVEN_KEYRING`` set). A failed job
    raises SparkJobFailed naming the kept Spark log.
    A job on an encrypted topic (``job["topic_id"]`` whose catalog entry has data keys) gets
    them in its environment (engine.spark.keys), and Spark encrypts its shuffle files."""
    env, confs = job_keys(eng, job, confs, deploy_mode)
    clean_stale(eng.path)
    # (a bounded name: a topic's name may have 249 characters, a file name at most 255 bytes)
    run_id = f"{(job.get('topic') or 'all')[:40]}-{clock.now_ms()}-{os.getpid()}"
    staging = os.path.join(eng.path, STAGING, run_id)
    guard.make_dirs(eng.path, os.path.dirname(staging))
    if not guard.make_dir(staging):
        raise RivvenError(f"staging folder {staging} exists already; run the job again")
    lock_file = os.path.join(staging, "lock")
    lock = open_lock_file(lock_file)
    acquire(lock, lock_file, eng.lock_wait)  # (a new file: nobody else holds it)
    keep_staging = False
    try:
        plan_path = os.path.join(staging, "plan.json")
        with open(plan_path, "w", opener=guard.opener) as f:
            json.dump({**job, "staging": staging, "progress": progress is not None and not dry_run}, f)
        python = python_launcher(staging)
        cmd = command(plan_path, os.path.join(staging, "engine.zip"), master, confs,
                      deploy_mode, app_name, python, script)
        out["command"] = cmd
        engine_zip(staging)
        if dry_run:
            keep_staging = True
            yield None, staging
            return
        log_path = os.path.join(eng.path, STAGING, f"{run_id}.spark.log")
        t1 = time.time()
        rc = run_spark(cmd, log_path, progress, python, os.path.join(staging, PROGRESS), env,
                       os.path.join(staging, "stop") if stoppable else None)
        out["spark_s"] = time.time() - t1
        out["spark_log"] = log_path
        result_path = os.path.join(staging, "result.json")
        if rc != 0 or not os.path.exists(result_path):
            with open(log_path, errors="replace") as f:
                text = f.read()
            raise SparkJobFailed(f"the Spark job failed (exit {rc}): {summarize_error(text)}; "
                                 f"the log is untouched; full Spark output: {log_path}",
                                 log_path)
        with open(result_path) as f:
            result = json.load(f)
        for k in ("startup_s", "plan_s", "exec_s", "job_s"):
            out[k] = result.get(k)
        yield result, staging
        os.unlink(log_path)
    finally:
        if not keep_staging:
            guard.remove_tree(eng.path, staging)
        os.close(lock)


def job_keys(eng: Engine, job: dict[str, Any], confs: list[str], deploy_mode: str | None
             ) -> tuple[dict[str, str], list[str]]:
    """The environment and confs a job on ``job["topic_id"]`` needs: nothing for a topic
    that never encrypted; else its data keys, unwrapped here (the keyring stays with the
    launcher), in ``RIVVEN_SPARK_KEYS``, and ``spark.io.encryption.enabled=true`` (the
    shuffles carry keys and values) unless a ``--conf`` says otherwise."""
    from .keys import ENV, export

    tid = job.get("topic_id")
    meta = next((m for m in eng.topics() if m.id == tid), None) if tid else None
    if meta is None or meta.keys is None:
        return {}, confs
    if deploy_mode == "cluster":
        raise RivvenError(f"topic {meta.name!r} is encrypted: its Spark jobs run with "
                          "--deploy-mode client (the default), where the driver gets the "
                          "topic's keys from this process; cluster mode would need the "
                          "keyring on the cluster")
    keys = eng.keys.topic_keys(meta.name).portable()
    if not any(c.startswith("spark.io.encryption.enabled=") for c in confs):
        confs = [*confs, "spark.io.encryption.enabled=true"]
    return {ENV: export(keys)}, confs


def tier(eng: Engine, topic: str | None = None, master: str = "local[*]",
         confs: list[str] | None = None, deploy_mode: str | None = None, dry_run: bool = False,
         progress: Progress | None = None) -> dict[str, Any]:
    """One tiering pass whose copies run as a Spark job, one task per segment."""
    extra: dict[str, Any] = {"master": master, "command": None}
    if not dry_run:
        check_java()  # (before the pass plans: it may tidy the cold store first)

    copier = task_runner(eng, f"rivven-tier-{topic or 'all'}", "tier_job.py",
                         {"data_dir": eng.path, "topic": topic}, "copies", master, confs,
                         deploy_mode, dry_run, progress, extra)
    out = eng.maintenance.tier(topic, dry_run=dry_run, copier=copier)
    return {**extra, **out}


def task_runner(eng: Engine, app_name: str, script: str, job: dict[str, Any], answer: str,
                master: str, confs: list[str] | None, deploy_mode: str | None, dry_run: bool,
                progress: Progress | None, out: dict[str, Any]
                ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]:
    """A job that runs a list of tasks on Spark, as ``Engine.tier`` and ``Engine.reencrypt``
    take one: the tasks go into ``job``'s plan, the list ``result[answer]`` comes back (None
    on a dry run)."""
    def run(tasks: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        with submission(eng, app_name, script, {**job, "tasks": tasks}, master, confs or [],
                        deploy_mode, dry_run, progress, out) as (result, _):
            return None if result is None else result[answer]

    return run


def reencrypt(eng: Engine, topic: str, master: str = "local[*]", confs: list[str] | None = None,
              deploy_mode: str | None = None, dry_run: bool = False,
              progress: Progress | None = None) -> dict[str, Any]:
    """A re-encryption pass (``Engine.reencrypt``) whose rewrites run as a Spark job, one task
    per segment; the swaps, manifest writes and the drop of unused data keys happen here."""
    extra: dict[str, Any] = {"master": master, "command": None}
    meta = eng.topic(topic)
    if not dry_run:
        check_java()

    runner = task_runner(eng, f"rivven-reencrypt-{topic}", "reencrypt_job.py",
                         {"data_dir": eng.path, "topic": topic, "topic_id": meta.id}, "results",
                         master, confs, deploy_mode, dry_run, progress, extra)
    out = eng.keys.reencrypt(topic, dry_run=dry_run, runner=runner)
    if dry_run:
        runner([])  # (the exact command the pass would run)
    return {**extra, **out}


STREAMS = ".streams"  # default checkpoints of `rivven spark stream`, in the data dir


def stream(eng: Engine, source: str, dest: str, transform: str | None = None,
           checkpoint: str | None = None, master: str = "local[*]",
           confs: list[str] | None = None, deploy_mode: str | None = None,
           available_now: bool = False, trigger_ms: int = 1000,
           starting_offsets: str = "earliest", max_offsets: int | None = None,
           dry_run: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """A streaming copy ``source`` -> ``dest`` (through ``transform``, SQL over the view
    ``input``) on Spark, exactly once, until Ctrl-C (or, ``available_now``, until caught
    up). Its offsets live in ``checkpoint`` (default: DATA/.streams/SOURCE--DEST)."""
    for t in (source, dest):
        eng.topic(t)  # (an unknown topic: one line now, not a Spark stack trace later)
    if source == dest:
        raise InvalidArgument(f"--from and --to are both {source!r}: a stream into the topic "
                              "it reads never catches up; write to another topic")
    if checkpoint is None:
        checkpoint = os.path.join(eng.path, STREAMS, f"{source}--{dest}")
        guard.make_dirs(eng.path, os.path.dirname(checkpoint))
    options = {"startingOffsets": starting_offsets}
    if max_offsets is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets)
    out: dict[str, Any] = {"master": master, "command": None, "checkpoint": checkpoint,
                           "from": source, "to": dest}
    if not dry_run:
        check_java()
    t0 = time.time()
    job: dict[str, Any] = {
        "data_dir": eng.path, "from": source, "to": dest, "transform": transform,
        "checkpoint": checkpoint, "available_now": available_now, "trigger_ms": trigger_ms,
        "source_options": options, "app_name": f"rivven-stream-{source}-{dest}"}
    with submission(eng, job["app_name"], "stream_job.py", job, master, confs or [],
                    deploy_mode, dry_run, progress, out, stoppable=True) as (result, _):
        if result is not None:
            out.update({k: result[k] for k in ("batches", "rows", "last_batch", "stopped")})
    out["seconds"] = time.time() - t0
    return out
