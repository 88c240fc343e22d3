#!/usr/bin/env bash
# libFuzzer over the pure layers: the EJSON parser and writer (round trip), DDP message decoding
# both ways (and applying server messages to a document cache), selector parsing and matching,
# value ordering (sorts) and document-id decoding. The targets are compiled into one binary with
# Sources/DDP (-sanitize=fuzzer,address; FUZZ_TARGET chooses one), run as many at once as there
# are cores, and seeded with every recorded server frame and client message of the transcripts. A crash stops the run with the input in .build-fuzz/ and exits 1:
# make it a regression test in Tests/DDPTests.
# The query target also compiles Sources/Bridge/HTTP/QueryString.swift (query strings and Last-Event-ID);
# the frontdoor target QueryString.swift and RequestClassifier.swift (the front door's decision on a head).
# Usage: scripts/fuzz.sh [--seconds N] [--target ejson|messages|selector|query|frontdoor]   (default 300 s each)
# Figures: .build-fuzz/results.md (executions, coverage, corpus per target).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
seconds=300
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --target) only="$2"; shift 2 ;;
        *) echo "usage: scripts/fuzz.sh [--seconds N] [--target ejson|messages|selector|query|frontdoor]" >&2; exit 2 ;;
    esac
done
out=.build-fuzz
mkdir -p "$out"
rm -f "$out"/fuzz-*.code
sources=$(find Sources/DDP -name '*.swift')
# Seeds: each line of the recorded transcripts (server frames and client messages), plus a few selectors.
seeds="$out/seeds"
rm -rf "$seeds"; mkdir -p "$seeds"
n=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$((n + 1)); printf '%s' "$line" > "$seeds/t$n"
done < <(cat Tests/DDPTests/Fixtures/server-frames.txt; find Tests/DDPTests/Fixtures/transcripts -name '*.jsonl' -exec cat {} + | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        record = json.loads(line)
    except ValueError:
        continue
    message = record.get("message", record) if isinstance(record, dict) else record
    print(json.dumps(message, separators=(",", ":")))
')
printf '%s' '[{"a":{"$in":[1,"x",null]},"b.c":{"$gt":2}},{"a":[1,2],"b":{"c":3}}]' > "$seeds/s1"
printf '%s' '[{"$or":[{"a":{"$exists":true}},{"d":{"$elemMatch":{"e":1}}}]},{"d":[{"e":1}]}]' > "$seeds/s2"
printf '%s' '[{"when":{"$date":1e400}},{"x":{"$InfNaN":-1},"y":{"$binary":"AAE="}}]' > "$seeds/s3"
printf '%s' 'selector=%7B%22a%22%3A%7B%22%24in%22%3A%5B1%2C2%5D%7D%7D&sort=%5B%5B%22a%22%2C%22desc%22%5D%5D&limit=10&skip=2' > "$seeds/q1"
printf '%s' 'lastEventId=+42+&snapshot=true&token=abc&selector=%ZZ&%FF%FE=1' > "$seeds/q2"
printf 'GET /v1/events?collections=tasks&lastEventId=7\nConnection: keep-alive, Close\nOrigin: http://a\n' > "$seeds/h1"
printf 'GET /healthz\nContent-Length: 0\n' > "$seeds/h2"
printf 'GET /v1/public/events?subscribe=tasks&params=%%5B%%5D\nUpgrade: websocket\nConnection: Upgrade\n' > "$seeds/h3"
summary="$out/results.md"
echo "| target | seconds | executions | exec/s | coverage (cov) | features (ft) | corpus | crashes |" > "$summary"
echo "|---|---|---|---|---|---|---|---|" >> "$summary"
targets=()
for target in ejson messages selector query frontdoor; do
    [ -z "$only" ] || [ "$only" = "$target" ] || continue
    targets+=("$target")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no target named $only" >&2; exit 2; }
# One binary for every target (FUZZ_TARGET chooses): Sources/DDP is compiled once, not per target.
binary="$out/fuzz"
swiftc -sanitize=fuzzer,address -parse-as-library -O -swift-version 6 -package-name fuzz -module-name Fuzz \
    -I Sources/CLibCrypto $sources Sources/Bridge/HTTP/QueryString.swift Sources/Bridge/HTTP/RequestClassifier.swift \
    Fuzz/targets/*.swift -lcrypto -o "$binary"
# A target's run, in the background; its log and corpus are its own.
fuzz_one() {
    local target=$1 code=0
    mkdir -p "$out/corpus-$target" "$out/crashes-$target"
    FUZZ_TARGET=$target nice -n 10 "$binary" "$out/corpus-$target" "$seeds" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$out/crashes-$target/" -print_final_stats=1 > "$out/fuzz-$target.log" 2>&1 || code=$?
    echo "$code" > "$out/fuzz-$target.code"
}
# As many at once as there are cores (each target is one process).
cores=$(nproc 2>/dev/null || echo 1)
running=0
for target in "${targets[@]}"; do
    fuzz_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$cores" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
for target in "${targets[@]}"; do
    log="$out/fuzz-$target.log"
    corpus="$out/corpus-$target"
    code=$(cat "$out/fuzz-$target.code")
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
    rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
    ft=$(grep -Eo 'ft: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
    files=$(find "$corpus" -type f | wc -l)
    crashes=$(find "$out/crashes-$target" -type f | wc -l)
    echo "| $target | $seconds | $runs | $rate | $cov | $ft | $files | $crashes |" >> "$summary"
    if [ "$code" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        echo "fuzz: $target found a crash (exit $code); see $log and $out/crashes-$target/" >&2
        tail -n 30 "$log" >&2
        status=1
    fi
done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$summary"
cat "$summary"
exit $status
