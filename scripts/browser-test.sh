#!/usr/bin/env bash
# The web console in a real browser: installs Chromium and its driver (Debian) and Selenium
# (PyPI) when missing, starts the demo bridge on loopback (port 0) and runs
# Tests/browser/console_test.py against it. Screenshots: .build/browser-artifacts/.
# Runs $DDP_BRIDGE_BIN (default: the debug build, which must exist; scripts/test.sh uses the release build).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup.sh
ensure_packages chromium chromium-driver
source scripts/python-envs.sh
pyenv_checks
venv=.build/pyenv

artifacts=.build/browser-artifacts
rm -rf "$artifacts"
source scripts/demo-bridge.sh
start_demo --login-rate-limit 1000 --public-dir public
grep -q "web console:     open $url/" "$log" || { echo "the demo did not print the console's URL:"; cat "$log"; exit 1; }
timeout 300 "$venv/bin/python" Tests/browser/console_test.py "$url" "$artifacts"
