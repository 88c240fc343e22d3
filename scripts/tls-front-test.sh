#!/usr/bin/env bash
# The TLS + HTTP/2 front (deploy/haproxy.cfg with deploy/haproxy-tls.cfg) in front of two bridge
# replicas, checked with curl and headless Chromium: ten EventSource streams from one page over
# HTTP/2, against six over HTTP/1.1. What is checked: scripts/tls_front_test.py.
#
#   DDP_BRIDGE_BIN=.build/release/ddp-bridge scripts/tls-front-test.sh
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

work=$(mktemp -d /tmp/ddp-tls-front.XXXXXX)
driver=""
cleanup() {
    local code=$? pgid
    trap - EXIT INT TERM
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
        kill -TERM "$driver" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$driver" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$driver" 2>/dev/null || true
    fi
    if [ -f "$work/pids" ]; then
        while read -r pgid; do
            kill -0 -- "-$pgid" 2>/dev/null && kill -KILL -- "-$pgid" 2>/dev/null || true
        done <"$work/pids"
    fi
    rm -rf "$work"
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timeout --kill-after=5 150 "$venv/bin/python" scripts/tls_front_test.py --work "$work" --bin "$DDP_BRIDGE_BIN" &
driver=$!
wait "$driver"
