# Sourced by the contract and browser checks: start_demo ARGS… starts the demo bridge
# ($DDP_BRIDGE_BIN, default the debug build) on loopback with port 0 and sets `bridge` (its
# pid), `log` (its output) and `url`; it is stopped with SIGINT when the script exits.
start_demo() {
    log=$(mktemp)
    "${DDP_BRIDGE_BIN:-.build/debug/ddp-bridge}" demo --port 0 --ddp-port 0 "$@" >"$log" 2>&1 &
    bridge=$!
    trap 'kill -INT $bridge 2>/dev/null; wait $bridge 2>/dev/null || true; rm -f "$log"' EXIT
    url=""
    for _ in $(seq 1 100); do
        url=$(grep -oE 'ddp-bridge: +http://[0-9.:]+' "$log" | awk '{print $2}' || true)
        [ -n "$url" ] && break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "the demo bridge did not start:"; cat "$log"; exit 1; }
}
