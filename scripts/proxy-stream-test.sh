#!/usr/bin/env bash
# Event streams through the example proxy configurations, deploy/nginx.conf and deploy/Caddyfile:
# each event arrives when it is sent, never compressed; a control with buffering forced on shows
# the measure can fail. What is checked: scripts/proxy_stream_test.py.
#
#   DDP_BRIDGE_BIN=.build/release/ddp-bridge scripts/proxy-stream-test.sh [--only nginx|caddy]
#
# Installs what is missing (Debian: nginx, caddy, curl; their services are not started).
# Everything listens on 127.0.0.1 on free ports; the whole run is cut at 120 s, and any process
# the driver left is killed here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ensure_packages nginx caddy curl python3
export DDP_BRIDGE_BIN=${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}
[ -x "$DDP_BRIDGE_BIN" ] || { echo "FAIL the bridge binary — $DDP_BRIDGE_BIN is missing"; exit 1; }

work=$(mktemp -d /tmp/ddp-proxy-streams.XXXXXX)
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

timeout --kill-after=5 120 python3 scripts/proxy_stream_test.py --work "$work" --bin "$DDP_BRIDGE_BIN" "$@" &
driver=$!
wait "$driver"
