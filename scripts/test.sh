#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds, runs every
# test (Swift Testing; the fault campaign runs there with 200 faults), fuzzes for a minute, checks the running server against openapi.yaml (schemathesis),
# fails over between two replicas behind HAProxy with a PostgreSQL session store, runs the
# resource campaign (one client trying to take what the others need),
# runs the client examples and a generated client, tests the console's modules and drives the web
# console in headless Chromium, then a seconds-long smoke run of the
# benchmark harness.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's duration, printed at the end (before the closing count), or when a stage fails.
stage_name="set-up"
stage_started=$SECONDS
stage_times=()
stage() {
    stage_times+=("$(printf '%6d s  %s' $((SECONDS - stage_started)) "$stage_name")")
    stage_name=$1
    stage_started=$SECONDS
}
report_stages() {
    [ -n "$stage_name" ] || return 0
    stage ""
    echo "test.sh: time by stage"
    printf '%s\n' "${stage_times[@]}"
    echo "$(printf '%6d s' "$SECONDS")  in all"
    stage_name=""
}

source scripts/setup.sh

# What the later stages download (Debian packages, Python environments, the bare Debian root),
# fetched in the background, at the lowest priority, while the first build uses the cores
# (scripts/prefetch.sh; at most 15 minutes). It is waited for before the tests, so it never runs
# beside them; a run that stops early waits for it too (an install is not cut off halfway).
mkdir -p .build
timeout 900 nice -n 19 ionice -c 3 scripts/prefetch.sh > .build/prefetch.log 2>&1 &
prefetch=$!
observability=""
release=""
# The background jobs are process groups of their own (setsid): stopped as a whole, and waited
# for (a build left running would hold .build-release's lock for the next run).
stop_group() {
    [ -n "$1" ] || return 0
    kill -- "-$1" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 -- "-$1" 2>/dev/null || true
}
stop_background() {
    stop_group "$observability"
    stop_group "$release"
    wait "$prefetch" 2>/dev/null || true
}
trap 'report_stages; stop_background' EXIT
# Killed (CI's time limit, ^C): exit, so the EXIT trap stops the background jobs.
trap 'exit 143' TERM HUP
trap 'exit 130' INT

# `swift test` with a time limit: a test that never ends fails the run after `limit` seconds,
# naming the tests that started and never ended, instead of holding it until CI's own limit.
bounded_swift_test() {
    local limit=$1 output=$2
    shift 2
    local rc
    set +e
    timeout --signal=INT --kill-after=30 "$limit" swift test "$@" 2>&1 | tee "$output"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "swift test did not end within $limit s:" >&2
        python3 scripts/unfinished-tests.py "$output" >&2
    fi
    return "$rc"
}

# Formatting: the toolchain's swift-format with the checked-in .swift-format; fix with
# `swift format format -i -r Sources Tests Fuzz Package.swift`.
stage "format"
swift format lint --strict -r Sources Tests Fuzz Package.swift

# Every relative link and anchor in the README and docs/ points somewhere.
stage "links"
python3 scripts/check-links.py

stage "debug build"
swift build --build-tests
mkdir -p .build
# The downloads started at the beginning are done (no stage installs anything, and nothing runs
# beside the tests).
if ! wait "$prefetch"; then
    echo "test.sh: fetching ahead failed (each stage installs what it needs itself); .build/prefetch.log:" >&2
    tail -n 20 .build/prefetch.log >&2
fi
stage "Swift tests"
bounded_swift_test 900 .build/test-output.txt --disable-xctest

# A release build of one product in the background (scripts/setup.sh's release_build, in
# .build-release), at the lowest priority, within `limit` seconds; waited for by wait_release.
start_release_build() {
    local product=$1 limit=$2
    setsid timeout "$limit" nice -n 19 bash -c "source scripts/setup.sh && release_build --product $product" > .build/release-build.log 2>&1 &
    release=$!
}
wait_release() {
    local built=0
    wait "$release" || built=$?
    release=""
    tail -n 2 .build/release-build.log
    if [ "$built" != 0 ]; then
        echo "test.sh: the release build failed; .build/release-build.log:" >&2
        tail -n 40 .build/release-build.log >&2
        exit 1
    fi
}

# The release build of the bridge, self-contained (static: Package.swift): the package, the
# contract and browser checks run against it (so release-only faults show up). It starts here,
# beside the heavy tests (one test at a time, about one core), fuzzing and the stages run against
# the debug binary, and is waited for after them: nice 19 leaves the tests their cores, and their
# timing, while the build takes what they leave.
start_release_build ddp-bridge 2400
# Heavy tests (tens of thousands of documents) run on their own, so their load does not
# disturb the timing of the others.
# They include the fault campaign (200 faults through a faulty proxy), the 6,000 Minimongo vectors
# through the query engine (with the index and the live query), a heavy query, a large snapshot,
# probes answered while every worker of the concurrency pool is blocked, and the event loops'
# lateness while the in-process DDP server publishes 30,000 documents, and 1,000 sessions back
# right after their upstream returns.
stage "heavy Swift tests"
DDP_BRIDGE_HEAVY_TESTS=1 bounded_swift_test 1200 .build/test-output-heavy.txt --disable-xctest --skip-build --no-parallel \
    --filter "aConsumerThatStopsReadingIsCutOffWithAReason|anAgentThatStopsReadingItsStreamIsCutWithAReason|FaultCampaignTests|MinimongoVectorTests|MinimongoVectorHTTPTests|aHeavyQueryNeitherHoldsUp|aSnapshotLargerThanTheStreamBuffer|aLiveQueryWithAnExpensiveSelector|aQueryOverDocumentsThatAreExpensiveOneByOne|probesAreAnsweredWhileEveryConcurrencyWorkerIsBusy|probesOnNewConnectionsAreAnsweredWhileEveryConcurrencyWorkerIsBusy|aStreamThatNeedsNothingWaitedForOpensWhileEveryConcurrencyWorkerIsBusy|aLargePublicationDoesNotHoldTheEventLoops|sessionsInABackoffComeBackAsSoonAsTheUpstreamReturns"

# Fuzzing, bounded (one sanitizer build for every target, two targets at a time): each libFuzzer target (EJSON, DDP messages, selectors, query strings, the front
# door's decision on a request head) for 15 s, seeded with
# the recorded transcripts; a crash fails the run (scripts/fuzz.sh for longer runs).
stage "fuzzing"
scripts/fuzz.sh --seconds 15

# While the release build goes on: the stages that check behaviour rather than speed, against the
# debug build's binary (the release binary gets the package, failover, contract, observability,
# browser, resource and benchmark stages below). Each mostly waits on its processes, so the build beside
# them takes the cores they leave.
export DDP_BRIDGE_BIN=.build/debug/ddp-bridge

# Ports taken: serve, demo and demo-server end at once naming the address, setting and cause;
# the demo starts beside a Meteor app on port 3000. Then `ddp-bridge check` from another folder
# against demo-server: each step's line, and each failure's cause and fix.
stage "ports"
python3 scripts/port_check.py
python3 scripts/upstream_check.py
# The README's first screen (your own app): its commands, run against demo-server standing in for the app.
python3 scripts/readme_first_screen.py

# MCP through the official Python SDK (PyPI's `mcp`, in a venv of its own), then the example
# agent (examples/mcp_agent.py), against the demo bridge (~15 s).
stage "MCP SDK"
scripts/mcp-sdk-test.sh

# Traces through a stand-in OpenTelemetry collector (an OTLP/HTTP receiver decoding with PyPI's
# opentelemetry-proto): a method call's span is the child of the client's traceparent, with its
# upstream call as its own child; a stream's span covers its opening, its token redacted (~5 s).
stage "tracing"
scripts/trace-test.sh

# The TLS + HTTP/2 front (deploy/haproxy-tls.cfg beside haproxy.cfg) with a self-signed certificate
# made by the test: curl --http2 sees a stream's events arrive one by one, and headless Chromium
# opens ten EventSource streams from one page over HTTP/2 (one connection) where HTTP/1.1 opens
# six (~10 s; cut at 150 s).
stage "TLS front"
scripts/tls-front-test.sh

# The example nginx and Caddy configurations (deploy/nginx.conf, deploy/Caddyfile) in front of a
# bridge: a ticker's events arrive one by one through each, never compressed, JSON is; a control
# (nginx with buffering forced on and the stream gzipped) shows the measure can fail (~55 s).
stage "proxies"
scripts/proxy-stream-test.sh

# Client examples (Python, Node, Go, Swift, shell) and a client generated from openapi.yaml,
# each against the demo: their local copies must equal what REST returns, live and resumed.
stage "examples"
scripts/examples.sh

# The web console: type check and node --test of its pure modules.
stage "console"
scripts/console-test.sh

# The rest of the release build started after the Swift tests; then the benchmark harness's
# (most of it built already, as the bridge's) goes on beside the package, failover, contract and
# browser stages, and is waited for before the resource campaign, which measures the bridge's
# memory and its loops and must have the cores to itself.
stage "release build (the rest)"
wait_release
# The binary's own path, not SwiftPM's `release` link, which the harness's build beside the
# next stages may make again.
DDP_BRIDGE_BIN=$(readlink -f "$release_dir/ddp-bridge")
export DDP_BRIDGE_BIN
start_release_build ddp-bench 1200

# The release package (scripts/package.sh: the binary must be static), then on a minimal Debian
# root with nothing else, no libcrypto either (debootstrap, made once and kept in /var/tmp): the
# demo starts from /, serves the console built in, keeps a session sealed with a key, and `check`
# passes; then the binary runs in a root holding nothing but itself (~40 s the first time, ~5 s
# after).
stage "package"
scripts/package.sh --no-build
scripts/standalone-check.sh

# Two replicas behind HAProxy (deploy/haproxy.cfg) sharing a throwaway PostgreSQL session store,
# the demo DDP server as the upstream: the replica serving a session is killed, then the other is
# drained; writes with the same token go on, the stream resumes, the copy equals REST (~15 s).
# Against the release binary: PostgreSQL through the static build's libraries.
stage "failover"
scripts/failover-test.sh

# The dashboard and alert rules (deploy/grafana, deploy/prometheus): promtool checks the rules and
# prometheus.yml, every metric they name is exported by a running bridge after some traffic, and
# Debian's Prometheus, run with the shipped prometheus.yml against that bridge, answers every query
# of the dashboard's panels (~30 s: the shipped 15 s scrape interval, two scrapes).
#
# The HTTP contract: openapi.yaml is valid and the running server keeps it. The observability
# check, which mostly waits for Prometheus's scrapes, runs beside it.
stage "contract, observability beside it"
ensure_packages prometheus
setsid python3 scripts/check-observability.py > .build/observability.log 2>&1 &
observability=$!
scripts/contract-test.sh
observed=0
wait "$observability" || observed=$?
observability=""
cat .build/observability.log
[ "$observed" = 0 ] || { echo "test.sh: the observability check failed" >&2; exit 1; }

# The whole console page in headless Chromium (Selenium) against the running demo bridge.
stage "browser"
scripts/browser-test.sh

stage "benchmark harness build (the rest)"
wait_release

# The resource campaign (~45 s): from one address, anonymous sessions loading a large publication,
# distinct public reads and idle connections until refused, while another address is never
# refused; the bridge's resident memory stays under its budget plus a margin.
stage "resource campaign"
python3 scripts/resource_campaign.py --seconds 30 --out .build/resource-campaign.json
# Then, in a run of its own (~25 s): stream requests with long queries refused over and over, and
# silent public readers with a filter each under a ~900 KB change (no loop held 50 ms; memory
# within the margin: the change is not copied per filter).
python3 scripts/resource_campaign.py --seconds 20 --only refused,filters --out .build/resource-campaign-flood.json

# Benchmarks are not tests; this seconds-long run of every part only keeps the harness from
# rotting (its figures mean nothing). wrk (Debian) drives the REST part.
stage "bench smoke"
ensure_packages wrk
"$release_dir/ddp-bench" --help | grep -q -- '--load-same-priority' || { echo "ddp-bench --help did not print its usage" >&2; exit 1; }
if "$release_dir/ddp-bench" --no-such-option 2>/dev/null; then echo "ddp-bench accepted an unknown option" >&2; exit 1; fi
GIT_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" timeout 600 "$release_dir/ddp-bench" --smoke --out .build/bench-smoke

report_stages
count=0
for output in .build/test-output.txt .build/test-output-heavy.txt; do
    summary=$(grep -E 'Test run with [0-9]+ tests? .* passed' "$output" | tail -n 1 || true)
    n=$(echo "$summary" | sed -E 's/.*Test run with ([0-9]+) tests?.*/\1/')
    if [ -z "$summary" ] || [ -z "$n" ]; then
        echo "no passing test run found in $output" >&2
        exit 1
    fi
    count=$((count + n))
done
echo "swift-testing: $count passed, 0 failed"
