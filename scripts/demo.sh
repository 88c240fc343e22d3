#!/usr/bin/env bash
# Starts ddp-bridge's demo: the embedded demo DDP server with sample data, the bridge in front of
# it, and a live client (`ddp-bridge demo --watch`) printing each change of the demo's tasks as it
# arrives. Installs what is missing first, and builds quietly: the compiler's output is shown only
# when the build fails. Extra arguments go to `ddp-bridge demo` (`--no-watch`: no live client).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
echo "demo: building ddp-bridge (a first build takes about 5 minutes on 2 cores)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift build --product ddp-bridge >"$log" 2>&1; then
    cat "$log" >&2
    echo "demo: the build failed (its output is above)" >&2
    exit 1
fi
rm -f "$log"
trap - EXIT
exec .build/debug/ddp-bridge demo --watch "$@"
