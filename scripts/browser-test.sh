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
log=$(mktemp)
"${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}" demo --port 0 --ddp-port 0 --login-rate-limit 1000 --public-dir public >"$log" 2>&1 &
bridge=$!
trap 'kill -INT $bridge 2>/dev/null; wait $bridge 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
    url=$(grep -oE 'ddp-bridge: +http://[0-9.:]+' "$log" | awk '{print $2}' || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "${url:-}" ] || { echo "the demo bridge did not start:"; cat "$log"; exit 1; }
grep -q "web console:     open $url/" "$log" || { echo "the demo did not print the console's URL:"; cat "$log"; exit 1; }
timeout 300 "$venv/bin/python" Tests/browser/console_test.py "$url" "$artifacts"
