#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds, runs every
# test (Swift Testing), checks the running server against openapi.yaml (schemathesis),
# then a seconds-long smoke run of the benchmark harness.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

swift build --build-tests
mkdir -p .build
swift test --disable-xctest 2>&1 | tee .build/test-output.txt

# The HTTP contract: openapi.yaml is valid and the running server keeps it.
scripts/contract-test.sh

# Benchmarks are not tests; this short run only keeps the harness from rotting.
swift build -c release --product ddp-bench
GIT_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" .build/release/ddp-bench 0.02 .build/bench-smoke

summary=$(grep -E 'Test run with [0-9]+ tests? .* passed' .build/test-output.txt | tail -n 1 || true)
count=$(echo "$summary" | sed -E 's/.*Test run with ([0-9]+) tests?.*/\1/')
if [ -z "$summary" ] || [ -z "$count" ]; then
    echo "no passing test run found" >&2
    exit 1
fi
echo "swift-testing: $count passed, 0 failed"
