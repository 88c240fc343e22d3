#!/usr/bin/env bash
# Checks the HTTP contract: validates openapi.yaml (and, statically, the Dockerfile), then runs a bounded schemathesis session
# against a live bridge (demo mode: the bridge on the embedded demo DDP server, loopback only).
# Runs $DDP_BRIDGE_BIN (default: the debug build, which must exist; scripts/test.sh uses the release build).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/python-envs.sh
pyenv_checks
venv=.build/pyenv
"$venv/bin/openapi-spec-validator" openapi.yaml
# The bridge serves openapi.yaml and its JSON form (openapi.json, made by scripts/openapi-json.py).
"$venv/bin/python" scripts/openapi-json.py --check
# No Docker engine runs here: the Dockerfile and compose file are checked statically.
"$venv/bin/python" scripts/check-docker.py

source scripts/demo-bridge.sh
# The demo reads serve's settings, DDP_BRIDGE_ variables included: a bad one stops it at once, named.
if refused=$(DDP_BRIDGE_PORT=70000 "${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}" demo --ddp-port 0 2>&1); then
    echo "the demo started with DDP_BRIDGE_PORT=70000"; exit 1
fi
grep -q 'port (DDP_BRIDGE_PORT) must be a whole number from 0 to 65535' <<<"$refused" || { echo "the demo ignored DDP_BRIDGE_PORT: $refused"; exit 1; }
echo "demo: DDP_BRIDGE_PORT=70000 refused at start, naming the variable"
start_demo --login-rate-limit 100000

token=$(curl -sf -X POST "$url/v1/sessions" -d '{"username":"alice","password":"secret"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -sf -X POST "$url/v1/subscriptions" -H "Authorization: Bearer $token" -d '[{"name":"tasks"},{"name":"typed"}]' >/dev/null

# DELETE /v1/session would end the session the run authenticates with, and GET /v1/events
# streams without end (its bodies are not JSON to check); both are covered by Tests/BridgeTests
# and the curl check below. Bounded: 30 examples per operation, 10 s per request.
"$venv/bin/schemathesis" run openapi.yaml --url "$url" -H "Authorization: Bearer $token" \
    --max-examples 30 --request-timeout 10 --generation-deterministic \
    --exclude-operation-id deleteSession --exclude-operation-id events --exclude-operation-id publicEvents

# End to end with curl -N: a stream that holds a ticker subscription (endless, 20 changes a
# second: a counted ticker may finish before the stream attaches when the machine is loaded)
# sees its changes.
stream=$(curl -sN --max-time 4 "$url/v1/events?subscribe=ticker&params=%5B20,0%5D" -H "Authorization: Bearer $token" || true)
changes=$(printf '%s\n' "$stream" | grep -c '^event: changed' || true)
if [ "$changes" -lt 5 ] || ! printf '%s\n' "$stream" | grep -q '^retry: '; then
    echo "curl -N: expected a retry hint and at least 5 changed events, got:"; printf '%s\n' "$stream"; exit 1
fi
echo "curl -N: $changes changed events received"

# Public fan-out (the demo makes tasks public): two readers without a session share one
# upstream subscription; a write through the session reaches both.
readers=()
for n in 1 2; do
    curl -sN --max-time 3 "$url/v1/public/events?subscribe=tasks&collections=tasks&snapshot=true" >"$log.public$n" &
    readers+=($!)
done
sleep 1
curl -sf -X PATCH "$url/v1/collections/tasks/task-a1" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"text":"seen by the public"}' >/dev/null
wait "${readers[@]}" || true
for n in 1 2; do
    grep -q '^event: snapshot' "$log.public$n" && grep -q 'seen by the public' "$log.public$n" || {
        echo "public reader $n: expected a snapshot and the change, got:"; cat "$log.public$n"; exit 1
    }
done
rm -f "$log.public1" "$log.public2"
echo "curl -N (public, no session): two readers, snapshot and the change each"

# The README's Python consumer, against the same stream: snapshot, marker, ticks.
fresh=$(curl -sf -X POST "$url/v1/sessions" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
python3 examples/sse_consumer.py "$url" "$fresh" --subscribe ticker --params '[20,3]' --max-events 6 >"$log.py"
grep -q ' snapshot ' "$log.py" && [ "$(grep -c ' changed ' "$log.py")" -ge 3 ] || { echo "the Python consumer failed:"; cat "$log.py"; exit 1; }
echo "examples/sse_consumer.py: $(grep -c ' changed ' "$log.py") changes applied"; rm -f "$log.py"

# A newcomer's steps: /readyz and /metrics answer, then Ctrl-C (SIGINT) stops the demo
# cleanly with a stream open: the stream is told, the process exits 0 in bounded time.
curl -sf "$url/readyz" >/dev/null || { echo "/readyz did not answer 200"; exit 1; }
# Read whole first: `curl | grep -q` fails under pipefail when grep stops reading early (curl gets SIGPIPE).
metrics=$(curl -sf "$url/metrics") || { echo "/metrics did not answer 200"; exit 1; }
grep -q '^ddp_bridge_sessions ' <<<"$metrics" || { echo "/metrics lacks ddp_bridge_sessions"; exit 1; }
curl -sN --max-time 30 "$url/v1/events" -H "Authorization: Bearer $token" >"$log.tail" 2>/dev/null &
tail_pid=$!
sleep 1
kill -INT $bridge
for _ in $(seq 1 200); do kill -0 $bridge 2>/dev/null || break; sleep 0.1; done
if kill -0 $bridge 2>/dev/null; then echo "the demo was still running 20 s after SIGINT"; exit 1; fi
code=0; wait $bridge || code=$?
wait $tail_pid || true
trap 'rm -f "$log" "$log.tail"' EXIT
[ "$code" -eq 0 ] || { echo "the demo exited $code after SIGINT:"; tail -20 "$log"; exit 1; }
grep -q 'shutting-down' "$log.tail" || { echo "the open stream was not told of the shutdown:"; cat "$log.tail"; exit 1; }
echo "SIGINT: the demo stopped cleanly (exit 0), its open stream told 'shutting-down'"
