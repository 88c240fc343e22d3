#!/usr/bin/env bash
# Checks the HTTP contract: validates openapi.yaml, then runs a bounded schemathesis session
# against a live bridge (demo mode: the bridge on the embedded demo DDP server, loopback only).
# Expects the debug build to exist (scripts/test.sh builds it first).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.build/pyenv
if ! "$venv/bin/schemathesis" --version >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check schemathesis==4.32.5 openapi-spec-validator==0.9.0
fi
"$venv/bin/openapi-spec-validator" openapi.yaml

log=$(mktemp)
.build/debug/ddp-bridge demo --port 0 --ddp-port 0 --login-rate-limit 100000 >"$log" 2>&1 &
bridge=$!
trap 'kill -INT $bridge 2>/dev/null; wait $bridge 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
    url=$(grep -oE 'ddp-bridge: +http://[0-9.:]+' "$log" | awk '{print $2}' || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "${url:-}" ] || { echo "the demo bridge did not start:"; cat "$log"; exit 1; }

token=$(curl -sf -X POST "$url/v1/sessions" -d '{"username":"alice","password":"secret"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -sf -X POST "$url/v1/subscriptions" -H "Authorization: Bearer $token" -d '[{"name":"tasks"},{"name":"typed"},{"name":"bulk","params":[20]}]' >/dev/null

# DELETE /v1/session would end the session the run authenticates with; its behaviour is
# covered by Tests/BridgeTests. Bounded: 30 examples per operation, 10 s per request.
"$venv/bin/schemathesis" run openapi.yaml --url "$url" -H "Authorization: Bearer $token" \
    --max-examples 30 --request-timeout 10 --generation-deterministic --exclude-operation-id deleteSession
