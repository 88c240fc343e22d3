#!/usr/bin/env bash
# Failover test: two ddp-bridge replicas behind HAProxy (deploy/haproxy.cfg), sessions in a
# throwaway PostgreSQL cluster. A session follows its event stream while writes are made; the
# replica serving it is killed (SIGKILL); writes with the same token must go on through the other
# replica, the stream must resume with Last-Event-ID, and the client's copy must end equal to what
# REST returns. Then a graceful drain (SIGTERM) of the replica serving it. Each check prints PASS
# or FAIL; the exit status is non-zero when one failed. What is checked: scripts/failover_test.py.
#
#   ./scripts/failover-test.sh                         # DDP_BRIDGE_BIN defaults to .build/debug/ddp-bridge
#   DDP_BRIDGE_BIN=.build-release/release/ddp-bridge ./scripts/failover-test.sh
#   FAILOVER_STORE=none ./scripts/failover-test.sh     # replicas without a session store: the
#                                                      # harness alone (the failover checks FAIL)
#
# Installs what is missing (Debian): haproxy, and postgresql when $PG_BIN (default
# /usr/lib/postgresql/15/bin) has no postgres. Everything listens on 127.0.0.1 on free ports;
# PostgreSQL runs as the postgres user when run as root, its files in a temporary folder
# (FAILOVER_KEEP=1 keeps it). Every wait is bounded and the whole run is cut at 110 s; the
# driver stops every process it started, and this script kills any that are left.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ensure_packages haproxy python3
export PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$PG_BIN/postgres" ] || ensure_packages postgresql
[ -x "$PG_BIN/postgres" ] || { echo "FAIL PostgreSQL — no $PG_BIN/postgres after installing postgresql (set PG_BIN)"; exit 1; }
export DDP_BRIDGE_BIN=${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}
[ -x "$DDP_BRIDGE_BIN" ] || { echo "FAIL the bridge binary — $DDP_BRIDGE_BIN is missing (swift build --product ddp-bridge)"; exit 1; }

KEEP_WORK=${FAILOVER_KEEP:-}
source scripts/driver.sh
run_driver ddp-failover 110 python3 scripts/failover_test.py --bin "$DDP_BRIDGE_BIN"
