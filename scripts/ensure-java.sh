#!/usr/bin/env bash
# PySpark needs Java 17+. Install it (Debian/Ubuntu, as root) when missing; otherwise explain.
set -euo pipefail
java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}
if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Java 17+ not found: installing openjdk-17-jre-headless" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "error: PySpark needs Java 17 or newer and none was found; install a JDK 17+ (e.g. 'apt-get install openjdk-17-jre-headless') and rerun" >&2
exit 1
