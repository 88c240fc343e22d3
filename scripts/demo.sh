#!/usr/bin/env bash
# Starts ddp-bridge's demo: the embedded demo DDP server with sample data, and a live client
# printing what it receives. Installs what is missing first. Extra arguments go to `ddp-bridge demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
swift build --product ddp-bridge
exec .build/debug/ddp-bridge demo "$@"
