#!/usr/bin/env bash
# Set up nsaudit on a fresh machine: Java 17, Maven, Chromium and Prometheus (apt, when missing), the Java jars
# of jars/ (Maven Central) and .venv/ with the pinned packages.
# Idempotent and quick when nothing changed: the venv is rebuilt only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v javac >/dev/null 2>&1; then
    echo "setup: javac not found (the interop tests compile a Java client), installing openjdk-17-jdk-headless with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
fi

# the report's browser test renders it in headless Chromium (through playwright, which is told to
# use this binary: its own browser download needs more than the package registries)
if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then
    echo "setup: chromium not found, installing it with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi

# the metrics tests scrape with a real Prometheus and check the shipped alert rules with promtool
# (both in Debian's prometheus package; its service is not started)
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "setup: prometheus not found, installing it with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

# Apache RocketMQ's jars (interop tests) and delta-spark's, from Maven Central into jars/*/lib
# (cached in ~/.m2; a no-op when the poms did not change)
if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: mvn not found, installing maven with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq maven >/dev/null
fi
bash jars/fetch.sh

PY=${PYTHON:-python3}
stamp=.venv/.nsaudit-setup
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "setup: creating .venv (first run downloads pyspark, a few minutes)" >&2
"$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
# setuptools announces every editable install with a boxed "BuildBackendWarning: Editable installation"
# banner (a reminder, not a problem); the filter reaches the build backend through the environment.
PYTHONWARNINGS="ignore:Editable installation" \
    .venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2> >(grep -v "^WARNING: Location" >&2)
echo "$want" > "$stamp"
echo "setup: done (.venv/bin/nsaudit)" >&2
