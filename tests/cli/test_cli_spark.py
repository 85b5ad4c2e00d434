"""``rivven spark`` before and around Spark: a missing or old Java named before spark-submit
starts (and a failed spark-submit summarized by its cause, not by a shell artifact), and a
progress bar that follows the job's stages and tasks as they run (a real job on a terminal:
tests/spark/test_spark_progress.py)."""

import io
import json
import os
import re
import subprocess
import sys

import pytest
from helpers import RIVVEN, ROOT
from helpers.spark_progress import assert_progress_moved, progress_frames

from engine import Engine, Record
from engine.spark import job, submit

CFG = {"cleanup.policy": "compact", "segment.bytes": "3000", "min.cleanable.dirty.ratio": "0.01"}
INSTALL = ("install a JDK 17 (scripts/ensure-java.sh in the rivven repo, which 'make setup' "
           "runs, or 'apt-get install openjdk-17-jre-headless')")


# ---------------------------------------------------------------- Java
def small_topic(data_dir):
    with Engine.open(data_dir) as eng:
        eng.create_topic("t", 1, CFG)
        for i in range(0, 400, 10):
            eng.produce("t", [Record(key=b"k%d" % (j % 7), value=b"v%d" % j)
                              for j in range(i, i + 10)])


def snapshot(data_dir):
    out = {}
    for root, _, names in os.walk(data_dir):
        for n in names:
            p = os.path.join(root, n)
            if os.path.relpath(p, data_dir).startswith(".stats/"):
                continue  # counters (a refused run counts as a failed one), not data
            with open(p, "rb") as f:
                out[os.path.relpath(p, data_dir)] = f.read()
    return out


def fake_java(folder, version):
    """``folder/bin/java``: a script that prints ``version`` as ``java -version`` does."""
    os.makedirs(os.path.join(folder, "bin"))
    path = os.path.join(folder, "bin", "java")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2019-01-15' >&2\n")
    os.chmod(path, 0o755)
    return path


def spark_compact(data_dir, tmp_path, path, java_home=None):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_ENV_LOADED")}
    env.update(RIVVEN_DATA_DIR=data_dir, PYTHONPATH=str(ROOT), PATH=path,
               SPARK_CONF_DIR=str(tmp_path / "no-spark-conf"))  # (no spark-env.sh of this host)
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    return subprocess.run([*RIVVEN, "spark", "compact", "t"], env=env, cwd=ROOT,
                          capture_output=True, timeout=120)


def assert_refused(r, data_dir, before, message):
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err == f"error: {message}\n"
    assert r.stdout == b""
    assert snapshot(data_dir) == before  # nothing was changed (no staging folder either)
    assert not os.path.exists(os.path.join(data_dir, ".compaction"))


def test_no_java_at_all_is_named_with_how_to_install_it(data_dir, tmp_path):
    small_topic(data_dir)
    before = snapshot(data_dir)
    (tmp_path / "empty").mkdir()
    r = spark_compact(data_dir, tmp_path, str(tmp_path / "empty"))
    assert_refused(r, data_dir, before,
                   "Spark needs Java 17 or newer and there is none (JAVA_HOME is not set and "
                   f"no java is on PATH): {INSTALL}, or set JAVA_HOME to a JDK 17+")


def test_java_home_without_bin_java_is_named(data_dir, tmp_path):
    small_topic(data_dir)
    before = snapshot(data_dir)
    home = tmp_path / "jdk"
    home.mkdir()
    r = spark_compact(data_dir, tmp_path, os.environ["PATH"], java_home=str(home))
    assert_refused(r, data_dir, before,
                   f"JAVA_HOME={home} has no bin/java, which Spark runs: point JAVA_HOME at a "
                   "JDK 17+ (or unset it to use the java on PATH); to get one, " + INSTALL)


@pytest.mark.parametrize("version,major,where", [("1.8.0_292", 8, "PATH"),
                                                 ("11.0.2", 11, "JAVA_HOME")])
def test_an_old_java_is_named_with_its_version(data_dir, tmp_path, version, major, where):
    small_topic(data_dir)
    before = snapshot(data_dir)
    java = fake_java(str(tmp_path / "old-jdk"), version)
    if where == "PATH":
        r = spark_compact(data_dir, tmp_path, f"{tmp_path / 'old-jdk' / 'bin'}:{os.defpath}")
        origin = "PATH"
    else:
        r = spark_compact(data_dir, tmp_path, os.environ["PATH"],
                          java_home=str(tmp_path / "old-jdk"))
        origin = f"JAVA_HOME={tmp_path / 'old-jdk'}"
    assert_refused(r, data_dir, before,
                   f"Spark needs Java 17 or newer; {java} (from {origin}) is Java {major}: "
                   f"{INSTALL}, then set JAVA_HOME to it (or put its bin first on PATH)")


def test_java_major_versions():
    from engine.spark.java import major

    assert major('java version "1.8.0_292"\nJava(TM) SE Runtime') == 8
    assert major('openjdk version "11.0.2" 2019-01-15') == 11
    assert major('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime') == 17
    assert major('openjdk version "21" 2023-09-19') == 21
    assert major('openjdk version "17-ea" 2021-03-16') == 17
    assert major("Error: could not find libjava.so") is None


def test_a_spark_env_sh_java_home_is_the_one_spark_runs(tmp_path):
    """spark-class sources $SPARK_CONF_DIR/spark-env.sh first: its JAVA_HOME wins."""
    from engine.spark.java import find

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-env.sh").write_text(f"JAVA_HOME={tmp_path / 'jdk'}\n")
    env = {"PATH": os.environ["PATH"], "SPARK_CONF_DIR": str(conf)}
    assert find(env, "/nowhere") == (str(tmp_path / "jdk" / "bin" / "java"),
                                     f"JAVA_HOME={tmp_path / 'jdk'}")


BAD_JAVA_HOME_LOG = """\
/venv/pyspark/bin/spark-class: line 71: /tmp/bin/java: No such file or directory
/venv/pyspark/bin/spark-class: line 97: CMD: bad array subscript
"""
JVM_LOG = """\
Invalid maximum heap size: -Xmxabc
Error: Could not create the Java Virtual Machine.
Error: A fatal exception has occurred. Program will exit.
"""
LOG4J_LOG = """\
WARNING: Using incubator modules: jdk.incubator.vector
26/11/26 18:18:22 INFO SparkContext: Running Spark version 4.0.0
26/11/26 18:18:22 ERROR StandaloneSchedulerBackend: Application has been killed. Reason: \
All masters are unresponsive! Giving up.
26/11/26 18:18:22 ERROR SparkContext: Error initializing SparkContext.
java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:122)
"""


def test_a_failed_spark_submit_is_summarized_by_its_first_error_not_a_shell_artifact():
    assert submit.summarize_error(BAD_JAVA_HOME_LOG) == "/tmp/bin/java: No such file or directory"
    assert submit.summarize_error(JVM_LOG) == "Invalid maximum heap size: -Xmxabc"
    assert submit.summarize_error(LOG4J_LOG) == ("Application has been killed. Reason: All "
                                                 "masters are unresponsive! Giving up.")
    # the job's own error still wins, wherever it is
    assert submit.summarize_error(LOG4J_LOG + "rivven.CompactionError: segment 3 is damaged\n"
                                  ) == "segment 3 is damaged"
    assert submit.summarize_error("") == "spark-submit printed nothing"


# excerpts of real Spark 4 logs (rivven spark stream --transform ...)
PARSE_LOG = """\
  File "/venv/pyspark/errors/exceptions/captured.py", line 262, in deco
    raise converted from None
pyspark.errors.exceptions.captured.ParseException: \n\
[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)

== SQL ==
SELEC nonsense
^^^
"""
ANALYSIS_LOG = """\
{"ts": "2026-11-29 00:31:10.255", "level": "ERROR", "logger": "SQLQueryContextLogger", \
"msg": "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name \
`nope` cannot be resolved. SQLSTATE: 42703", "context": {"errorClass": "UNRESOLVED_COLUMN"}}
pyspark.errors.exceptions.captured.AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A \
column, variable, or function parameter with name `nope` cannot be resolved. SQLSTATE: 42703; \
line 1 pos 7;
"""
STREAM_FAILED_LOG = """\
26/11/29 00:32:20 WARN ResolveWriteToStream: spark.sql.adaptive.enabled is not supported in \
streaming DataFrames/Datasets and will be disabled.
26/11/29 00:32:23 ERROR MicroBatchExecution: Query [id = 7532713c, runId = 372fa66d] terminated \
with error
org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] Division by zero. Use `try_divide` \
to tolerate divisor being 0 and return NULL instead. SQLSTATE: 22012
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.divideByZeroError(QueryExecutionErrors.scala:190)
pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] Query [id = \
7532713c, runId = 372fa66d] terminated with exception: [DIVIDE_BY_ZERO] Division by zero. Use \
`try_divide` to tolerate divisor being 0 and return NULL instead. SQLSTATE: 22012
"""


def test_a_spark_error_is_summarized_by_its_message_not_its_class_name():
    # the message on the line after the exception's name: the message, not "ParseException:"
    assert submit.summarize_error(PARSE_LOG) == (
        "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. (line 1, pos 0)")
    assert submit.summarize_error(ANALYSIS_LOG) == (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nope` cannot be resolved.")
    # the cause, not the log4j line announcing it nor the query's wrapper of it
    assert submit.summarize_error(STREAM_FAILED_LOG) == (
        "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and "
        "return NULL instead.")
    # an error without a class whose message is on the next line: both
    assert submit.summarize_error("Traceback (most recent call last):\n  x\n"
                                  "py4j.protocol.Py4JError: \nAn error occurred calling o1\n"
                                  ) == "py4j.protocol.Py4JError: An error occurred calling o1"


# ---------------------------------------------------------------- progress
class FakeTracker:
    """Spark's status tracker as pyspark.status shows it, driven by the test."""

    def __init__(self):
        self.jobs = {}  # id -> (status, stage ids)
        self.stages = {}  # id -> (tasks, completed, active)

    def getActiveJobsIds(self):
        return sorted(j for j, (s, _) in self.jobs.items() if s == "RUNNING")

    def getJobIdsForGroup(self, group=None):
        return list(self.jobs)

    def getJobInfo(self, jid):
        from pyspark.status import SparkJobInfo

        status, stages = self.jobs[jid]
        return SparkJobInfo(jid, stages, status)

    def getStageInfo(self, sid):
        from pyspark.status import SparkStageInfo

        if sid not in self.stages:
            return None
        n, done, active = self.stages[sid]
        return SparkStageInfo(sid, 0, f"stage {sid}", n, active, done, 0)


class FakeSpark:
    def __init__(self, tracker):
        self.sparkContext = self
        self.tracker = tracker

    def statusTracker(self):
        return self.tracker


def test_the_driver_reports_stages_and_tasks_as_they_complete(tmp_path):
    pytest.importorskip("pyspark")
    t = FakeTracker()
    path = str(tmp_path / "progress.json")
    w = job.Watch(FakeSpark(t), path)

    def state():
        w.poll()
        with open(path) as f:
            return json.load(f)

    assert state()["phase"] == "planning" and w.first_job_at is None
    t.jobs[0] = ("RUNNING", [0, 1, 2])
    t.stages.update({0: (4, 0, 2), 1: (4, 0, 0)})  # stage 2 not known yet
    assert state() == {"phase": "running", "stages": 3, "stages_done": 0, "tasks": 8,
                       "tasks_done": 0, "tasks_running": 2}
    assert w.first_job_at is not None
    t.stages.update({0: (4, 4, 0), 1: (4, 1, 2), 2: (2, 0, 0)})
    assert submit.describe_progress(state()) == ("spark: stage 2/3", 10, 5)
    # the job ends; a stage it skipped (its output was there already) leaves the count
    t.jobs[0] = ("SUCCEEDED", [0, 1, 2])
    t.stages.update({1: (4, 4, 0), 2: (2, 0, 0)})
    assert state() == {"phase": "finishing", "stages": 2, "stages_done": 2, "tasks": 8,
                       "tasks_done": 8, "tasks_running": 0}
    t.stages.clear()  # a finished job's stages are counted for good (Spark may forget them)
    t.jobs[1] = ("RUNNING", [3])
    t.stages[3] = (5, 2, 3)
    assert submit.describe_progress(state()) == ("spark: stage 3/3", 13, 10)


def test_progress_descriptions():
    d = submit.describe_progress
    assert d({"phase": "planning", "stages": 0}) == ("spark: planning", 0, 0)
    assert d({"phase": "running", "stages": 3, "stages_done": 0, "tasks": 8,
              "tasks_done": 0}) == ("spark: stage 1/3", 8, 0)
    assert d({"phase": "running", "stages": 3, "stages_done": 3, "tasks": 8,
              "tasks_done": 8}) == ("spark: stage 3/3", 8, 8)
    assert d({"phase": "finishing", "stages": 3, "stages_done": 3, "tasks": 8,
              "tasks_done": 8}) == ("spark: finishing", 8, 8)
    assert submit.read_progress("/nonexistent/progress.json") is None


def test_the_launcher_follows_the_jobs_progress_file(tmp_path):
    """run_spark with a stand-in for spark-submit that writes progress.json step by step,
    each step once the launcher has reported the one before (no timing involved)."""
    path = tmp_path / "progress.json"
    steps = [{"phase": "planning", "stages": 0},
             {"phase": "running", "stages": 2, "stages_done": 0, "tasks": 6, "tasks_done": 0},
             {"phase": "running", "stages": 2, "stages_done": 0, "tasks": 6, "tasks_done": 3},
             {"phase": "running", "stages": 2, "stages_done": 1, "tasks": 6, "tasks_done": 4},
             {"phase": "finishing", "stages": 2, "stages_done": 2, "tasks": 6,
              "tasks_done": 6}]
    fake = tmp_path / "spark-submit"
    fake.write_text(
        "import json, os, sys, time\n"
        f"steps, path, seen = {steps!r}, {str(path)!r}, {str(tmp_path / 'seen')!r}\n"
        "print('log line', flush=True)\n"
        "for i, s in enumerate(steps):\n"
        "    json.dump(s, open(path + '.tmp', 'w')); os.replace(path + '.tmp', path)\n"
        "    while not os.path.exists(f'{seen}{i}'):\n"
        "        time.sleep(0.01)\n")
    calls = []

    def progress(what, total, done):
        calls.append((what, total, done))
        open(f"{tmp_path / 'seen'}{len(calls) - 1}", "w").close()

    rc = submit.run_spark([sys.executable, str(fake)], str(tmp_path / "spark.log"), progress,
                          progress_path=str(path))
    assert rc == 0
    assert calls == [("spark: planning", 0, 0), ("spark: stage 1/2", 6, 0),
                     ("spark: stage 1/2", 6, 3), ("spark: stage 2/2", 6, 4),
                     ("spark: finishing", 6, 6)]
    assert (tmp_path / "spark.log").read_bytes() == b"log line\n"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_shows_the_stage_the_tasks_and_the_elapsed_time(monkeypatch):
    from rivven_cli.progress import progress_bar

    for calls, shown in (([("spark: planning", 0, 0)], r"spark: planning .*0/\? tasks 0:00:0\d"),
                         ([("spark: stage 1/3", 8, 0), ("spark: stage 2/3", 8, 5)],
                          r"spark: stage 2/3 .*5/8 tasks 0:00:0\d")):
        term = Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        monkeypatch.setenv("COLUMNS", "120")
        with progress_bar(tasks=True, label="spark: starting") as update:
            for c in calls:
                update(*c)
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.getvalue())
        assert re.search(shown, text), text


def test_progress_frames_parse_what_the_terminal_showed():
    frames = ["spark: starting ━━━━━━━━ 0/? tasks 0:00:00",
              "spark: planning ━━━━━━━━ 0/? tasks 0:00:04",
              "spark: stage 1/3 ━━━━━━━━ 0/8 tasks 0:00:08",
              "spark: stage 2/3 ━━━╺━━━━ 2/8 tasks 0:00:09",
              "noise",
              "spark: finishing ━━━━━━━━ 8/8 tasks 0:00:09"]
    assert progress_frames(frames)[3] == ("spark: stage 2/3", 2, "8", 9)
    assert_progress_moved(frames)
    with pytest.raises(AssertionError):  # stuck at 0 until the end: what a user once saw
        assert_progress_moved([f.replace("2/8", "0/8") for f in frames])


def test_stop_is_quiet_when_the_job_ends_before_any_look(tmp_path):
    """(A Watch stopped at once still leaves a whole progress.json, or none.)"""
    pytest.importorskip("pyspark")
    w = job.Watch(FakeSpark(FakeTracker()), str(tmp_path / "p.json"))
    w.start()
    w.stop()
    assert not w.is_alive()
    assert json.loads((tmp_path / "p.json").read_text())["phase"] == "planning"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
