#!/usr/bin/env bash
# Runs the micro-benchmarks in a release build and writes bench-results/ejson.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
swift build -c release --product ddp-bench
GIT_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" .build/release/ddp-bench "${1:-0.3}" bench-results
