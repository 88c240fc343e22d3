#!/usr/bin/env bash
# The web console in a real browser: installs Chromium and its driver (Debian) and Selenium
# (PyPI) when missing, starts the demo bridge on loopback (port 0) and runs
# Tests/browser/console_test.py against it. Screenshots: .build/browser-artifacts/.
# Runs $DDP_BRIDGE_BIN (default: the debug build, which must exist; scripts/test.sh uses the release build).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup.sh
ensure_packages chromium chromium-driver
venv=.build/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import selenium" >/dev/null 2>&1 \
    || "$venv/bin/pip" install --quiet --disable-pip-version-check selenium==4.51.0

artifacts=.build/browser-artifacts
rm -rf "$artifacts"
source scripts/demo-bridge.sh
start_demo --login-rate-limit 1000 --public-dir public
grep -q "web console:     open $url/" "$log" || { echo "the demo did not print the console's URL:"; cat "$log"; exit 1; }
timeout 300 "$venv/bin/python" Tests/browser/console_test.py "$url" "$artifacts"
