#!/usr/bin/env bash
# Event streams through the example proxy configurations, deploy/nginx.conf and deploy/Caddyfile:
# each event arrives when it is sent, never compressed; a control with buffering forced on shows
# the measure can fail. What is checked: scripts/proxy_stream_test.py.
#
#   DDP_BRIDGE_BIN=.build-release/release/ddp-bridge scripts/proxy-stream-test.sh [--only nginx|caddy]
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

source scripts/driver.sh
run_driver ddp-proxy-streams 120 python3 scripts/proxy_stream_test.py --bin "$DDP_BRIDGE_BIN" "$@"
