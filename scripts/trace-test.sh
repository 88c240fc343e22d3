#!/usr/bin/env bash
# The bridge's traces as an OpenTelemetry collector receives them: a small OTLP/HTTP receiver
# (PyPI's opentelemetry-proto, in .build/otel-venv) and the demo bridge with --otlp-endpoint
# (scripts/trace_check.py says what is checked; ~5 s). Runs $DDP_BRIDGE_BIN (default: the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-envs.sh
pyenv_otel
venv=.build/otel-venv
timeout 120 "$venv/bin/python" scripts/trace_check.py
