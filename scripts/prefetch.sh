#!/usr/bin/env bash
# What the test command's later stages download, fetched while its first build runs (they wait
# on the network and the disk, the build on the cores): the Debian packages those stages install,
# the Python environments (scripts/python-envs.sh) and the bare Debian root of the package check.
# Each stage still makes sure of what it needs, so this only moves the waiting earlier; its
# output goes to .build/prefetch.log. scripts/test.sh waits for it before the first stage that
# installs anything.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/python-envs.sh
ensure_packages debootstrap prometheus wrk nginx caddy curl jq procps golang nodejs node-typescript haproxy postgresql \
    chromium chromium-driver iproute2 python3-venv
pyenv_checks
pyenv_mcp
pyenv_otel
pyenv_openapi
scripts/standalone-check.sh --root-only
echo "prefetch: done"
