#!/usr/bin/env bash
# The metrics tests check rivven's output with Prometheus's own tools (promtool, the server).
# Install Debian's `prometheus` package (as root) when they are missing; otherwise explain.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "promtool/prometheus not found: installing Debian's prometheus package" >&2
  apt-get update -qq
  # no service start inside containers and CI: the tests start their own server
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  exit 0
fi
echo "error: the metrics tests need Prometheus's promtool and server and neither was found; install them (e.g. 'apt-get install prometheus') and rerun" >&2
exit 1
