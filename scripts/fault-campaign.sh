#!/usr/bin/env bash
# The long fault campaign: a faulty TCP proxy kills, stalls and truncates the bridge's upstream
# connections (FAULTS of them, 2000 by default) while writers change data and SSE consumers keep
# local copies; then checks that every copy equals REST and the upstream, every session answers
# within 5 s, and memory stayed bounded. The test command runs a bounded 200-fault form of it.
# Usage: scripts/fault-campaign.sh [FAULTS]   (figures: .build/fault-campaign.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
faults="${1:-2000}"
swift build --build-tests
mkdir -p .build
DDP_BRIDGE_CAMPAIGN_FAULTS="$faults" swift test --skip-build --disable-xctest --filter FaultCampaignTests 2>&1 | tee .build/fault-campaign-output.txt
grep -a "fault-campaign:" .build/fault-campaign-output.txt > .build/fault-campaign.txt || true
echo "date: $(date -u +%Y-%m-%dT%H:%MZ) commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >> .build/fault-campaign.txt
cat .build/fault-campaign.txt
