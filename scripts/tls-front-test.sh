#!/usr/bin/env bash
# The TLS + HTTP/2 front (deploy/haproxy.cfg with deploy/haproxy-tls.cfg) in front of two bridge
# replicas, checked with curl and headless Chromium: ten EventSource streams from one page over
# HTTP/2, against six over HTTP/1.1. What is checked: scripts/tls_front_test.py.
#
#   DDP_BRIDGE_BIN=.build-release/release/ddp-bridge scripts/tls-front-test.sh
#
# Installs what is missing (Debian: haproxy, openssl, curl, chromium, chromium-driver, iproute2;
# Selenium from PyPI into .build/pyenv, as scripts/browser-test.sh does). Everything listens on
# 127.0.0.1 on free ports; the whole run is cut at 150 s, and any process the driver left is
# killed here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ensure_packages haproxy openssl curl chromium chromium-driver iproute2 python3-venv
export DDP_BRIDGE_BIN=${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}
[ -x "$DDP_BRIDGE_BIN" ] || { echo "FAIL the bridge binary — $DDP_BRIDGE_BIN is missing"; exit 1; }
venv=.build/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import selenium" >/dev/null 2>&1 \
    || "$venv/bin/pip" install --quiet --disable-pip-version-check selenium==4.51.0

source scripts/driver.sh
run_driver ddp-tls-front 150 "$venv/bin/python" scripts/tls_front_test.py --bin "$DDP_BRIDGE_BIN"
