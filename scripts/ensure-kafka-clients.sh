#!/usr/bin/env bash
# The Kafka-protocol tests (tests/kafka/) drive rivven serve with real clients. confluent-kafka
# and kafka-python come with the venv; this brings the other two:
#  - kcat, from Debian's `kcat` package (it bundles librdkafka 2.0.2: older API versions);
#  - Kafka's own Java client: kafka-clients 3.9.1 and the codec jars it needs (lz4, snappy,
#    zstd, slf4j) ship inside the PyPI wheel shigawire-apache-flink-libraries; pip downloads
#    the wheel (not installed: ~90 MB of Flink) into .cache/ and the five jars are unpacked to
#    .cache/kafka-java/lib/ (tests/helpers/kafka_clients.py looks there). javac comes with
#    scripts/ensure-java.sh's JDK.
# Idempotent: does nothing when both are there. Usage: ensure-kafka-clients.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"
WHEEL_PIN="shigawire-apache-flink-libraries==2.0.0.post1"
CACHE=.cache/kafka-java
LIB="$CACHE/lib"
JARS="kafka-clients.jar lz4-java.jar snappy-java.jar zstd-jni.jar slf4j-api.jar"

if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "kcat not found: installing Debian's kcat package" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null
  else
    echo "error: the Kafka-protocol tests need kcat and it was not found; install it (e.g. 'apt-get install kcat') and rerun" >&2
    exit 1
  fi
fi

have_jars() {
  for j in $JARS; do [ -s "$LIB/$j" ] || return 1; done
}
if ! have_jars; then
  echo "Kafka's Java client not found in $LIB: downloading $WHEEL_PIN (its jars only)" >&2
  mkdir -p "$CACHE"
  if ! "$PY" -m pip download -q --no-deps -d "$CACHE" "$WHEEL_PIN" >&2; then
    echo "error: cannot download $WHEEL_PIN with $PY -m pip (it carries Kafka's Java client for the Kafka-protocol tests); check the network or the package index and rerun" >&2
    exit 1
  fi
  "$PY" - "$CACHE" "$LIB" $JARS <<'PYEOF'
import glob, os, sys, zipfile
cache, lib, jars = sys.argv[1], sys.argv[2], sys.argv[3:]
wheel = sorted(glob.glob(os.path.join(cache, "shigawire_apache_flink_libraries-*.whl")))[-1]
os.makedirs(lib, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for j in jars:
        tmp = os.path.join(lib, j + ".part")
        with z.open("pyflink/lib/" + j) as src, open(tmp, "wb") as dst:
            dst.write(src.read())
        os.replace(tmp, os.path.join(lib, j))  # whole jars only, even when interrupted
os.remove(wheel)  # the jars are what the tests use; the wheel is 90 MB
PYEOF
fi
if ! command -v javac >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "javac not found: installing openjdk-17-jdk-headless (the Java client tests compile tests/kafka/java/KafkaTool.java)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless >/dev/null
    exit 0
  fi
  echo "error: the Java client tests compile tests/kafka/java/KafkaTool.java and javac was not found; install a JDK 17+ (e.g. 'apt-get install openjdk-17-jdk-headless') and rerun" >&2
  exit 1
fi
