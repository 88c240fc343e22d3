#!/usr/bin/env bash
# The MCP endpoint through the official Python SDK (`mcp`, PyPI, in .build/mcp-venv) against the
# demo bridge on loopback (scripts/mcp_sdk_test.py says what is checked; ~10 s).
# Runs $DDP_BRIDGE_BIN (default: the debug build, which must exist).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-envs.sh
pyenv_mcp
venv=.build/mcp-venv
source scripts/demo-bridge.sh
start_demo --login-rate-limit 100000
timeout 120 "$venv/bin/python" scripts/mcp_sdk_test.py "$url"
# The example agent, as an operator runs it: connected, the tools, a query, and the update of
# the document it watches, made meanwhile over REST.
token=$(curl -sf -X POST "$url/v1/sessions" -d '{"username":"alice","password":"secret"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
out=$(mktemp)
timeout 60 "$venv/bin/python" examples/mcp_agent.py "$url" "$token" myTasks tasks task-a2 4 >"$out" 2>&1 &
agent=$!
for _ in $(seq 1 100); do grep -q '^watching' "$out" && break; sleep 0.1; done
sleep 1
curl -sf -X PATCH "$url/v1/collections/tasks/task-a2" -H "Authorization: Bearer $token" -d '{"done":true}' >/dev/null
wait "$agent"
cat "$out"
grep -q '^query: {"documents"' "$out" || { echo "FAIL: the example agent's query"; exit 1; }
grep -q '^updated: ddp://tasks/task-a2' "$out" || { echo "FAIL: the example agent heard no update"; exit 1; }
rm -f "$out"
echo "examples/mcp_agent.py: passed"
