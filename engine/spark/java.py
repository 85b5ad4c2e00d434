"""The Java that ``spark-submit`` will run, found as Spark's ``bin/spark-class`` finds it, and
checked before anything starts: one line that names what is missing and how to get it, instead
of spark-class's ``JAVA_HOME is not set`` or ``CMD: bad array subscript``.

spark-class sources ``$SPARK_CONF_DIR/spark-env.sh`` (default ``$SPARK_HOME/conf``), then runs
``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set and not empty, else the ``java`` on ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from ..errors import RivvenError

MIN_VERSION = 17
INSTALL = ("install a JDK 17 (scripts/ensure-java.sh in the rivven repo, which 'make setup' "
           "runs, or 'apt-get install openjdk-17-jre-headless')")
_VERSION = re.compile(r'version "([^"]+)"')


def major(version_output: str) -> int | None:
    """The major version in ``java -version``'s output: ``1.8.0_292`` -> 8, ``11.0.2`` -> 11,
    ``17.0.15`` -> 17, ``21`` -> 21, ``17-ea`` -> 17; None when there is no version."""
    m = _VERSION.search(version_output)
    if not m:
        return None
    parts = re.split(r"[._\-+]", m.group(1))
    try:
        return int(parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0])
    except ValueError:
        return None


def java_home(env: dict[str, str], spark_home: str) -> str:
    """``JAVA_HOME`` as spark-class sees it: the environment's, after ``spark-env.sh``."""
    conf = env.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf")
    env_sh = os.path.join(conf, "spark-env.sh")
    if not env.get("SPARK_ENV_LOADED") and os.path.isfile(env_sh):
        try:
            r = subprocess.run(["bash", "-c", 'set -a; . "$0" >/dev/null 2>&1; '
                                'printf %s "${JAVA_HOME-}"', env_sh],
                               env=env, capture_output=True, text=True, timeout=30, check=False)
            return r.stdout
        except (OSError, subprocess.TimeoutExpired):
            pass  # (no bash: spark-submit cannot start either, and says so)
    return env.get("JAVA_HOME", "")


def find(env: dict[str, str], spark_home: str) -> tuple[str | None, str]:
    """``(path of the java binary or None, where it comes from)``."""
    home = java_home(env, spark_home)
    if home:
        return os.path.join(home, "bin", "java"), f"JAVA_HOME={home}"
    return shutil.which("java", path=env.get("PATH", os.defpath)), "PATH"


def check(env: dict[str, str], spark_home: str) -> str:
    """The java Spark will run, or a RivvenError (one line) that says what to do."""
    java, origin = find(env, spark_home)
    if java is None:
        raise RivvenError(f"Spark needs Java {MIN_VERSION} or newer and there is none (JAVA_HOME "
                          f"is not set and no java is on PATH): {INSTALL}, or set JAVA_HOME "
                          "to a JDK 17+")
    if origin != "PATH" and not os.path.isfile(java):
        raise RivvenError(f"{origin} has no bin/java, which Spark runs: point JAVA_HOME at a "
                          f"JDK {MIN_VERSION}+ (or unset it to use the java on PATH); to get one, "
                          f"{INSTALL}")
    try:
        r = subprocess.run([java, "-version"], env=env, capture_output=True, text=True,
                           errors="replace", timeout=60, check=False)
        out, rc = r.stderr + r.stdout, r.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        out, rc = str(e), -1
    version = major(out) if rc == 0 else None
    if version is None:
        first = next((ln.strip() for ln in out.splitlines() if ln.strip()), "no output")
        raise RivvenError(f"{java} (from {origin}) does not run ('java -version': {first[:200]})"
                          f": {INSTALL}, or set JAVA_HOME to a JDK {MIN_VERSION}+")
    if version < MIN_VERSION:
        raise RivvenError(f"Spark needs Java {MIN_VERSION} or newer; {java} (from {origin}) is "
                          f"Java {version}: {INSTALL}, then set JAVA_HOME to it (or put its "
                          "bin first on PATH)")
    return java
