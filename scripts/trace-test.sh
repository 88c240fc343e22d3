#!/usr/bin/env bash
# The bridge's traces as an OpenTelemetry collector receives them: a small OTLP/HTTP receiver
# (PyPI's opentelemetry-proto, in .build/otel-venv) and the demo bridge with --otlp-endpoint
# (scripts/trace_check.py says what is checked; ~5 s). Runs $DDP_BRIDGE_BIN (default: the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/otel-venv
if ! "$venv/bin/python" -c "from opentelemetry.proto.collector.trace.v1 import trace_service_pb2" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "opentelemetry-proto==1.45.2"
fi
timeout 120 "$venv/bin/python" scripts/trace_check.py
