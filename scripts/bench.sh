#!/usr/bin/env bash
# The benchmark harness, in a release build: micro-benchmarks, SSE throughput and latency,
# REST (with wrk), session scale, public fan-out and its baseline, nchan in nginx
# (deploy/nchan/nginx.conf). Writes bench-results/results.{json,md} and plot.svg.
# Options pass through, e.g. --only sse,latency or --smoke.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ensure_packages wrk
ensure_packages nginx libnginx-mod-nchan
release_build --product ddp-bench && release_build --product ddp-bridge
GIT_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$release_dir/ddp-bench" --out bench-results "$@"
