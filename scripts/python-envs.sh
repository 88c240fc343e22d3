# Sourced: the Python environments the checks use, each made once in .build/ with its pinned
# packages from PyPI (quiet when it is there). scripts/prefetch.sh makes them all ahead of time.

# ensure_venv FOLDER CHECK PACKAGE…: FOLDER made and the packages installed unless CHECK (Python
# statements) runs in it.
ensure_venv() {
    local folder=$1 check=$2
    shift 2
    "$folder/bin/python" -c "$check" >/dev/null 2>&1 && return 0
    [ -x "$folder/bin/python" ] || python3 -m venv "$folder"
    "$folder/bin/pip" install --quiet --disable-pip-version-check "$@"
}

# The contract check (schemathesis, the spec validator, the Dockerfile parser) and the browser test (Selenium).
pyenv_checks() {
    ensure_venv .build/pyenv "import dockerfile, schemathesis, openapi_spec_validator, yaml, selenium" \
        schemathesis==4.32.5 openapi-spec-validator==0.9.0 dockerfile==3.4.0 pyyaml selenium==4.51.0
}
# The official MCP SDK (scripts/mcp-sdk-test.sh).
pyenv_mcp() { ensure_venv .build/mcp-venv "import mcp" "mcp==1.30.0"; }
# The stand-in collector's OTLP types (scripts/trace-test.sh).
pyenv_otel() {
    ensure_venv .build/otel-venv "from opentelemetry.proto.collector.trace.v1 import trace_service_pb2" "opentelemetry-proto==1.45.2"
}
# The generator of a client from openapi.yaml (scripts/examples.sh).
openapi_generator=0.29.1
pyenv_openapi() {
    ensure_venv .build/openapi-venv "import importlib.metadata as m; assert m.version('openapi-python-client') == '$openapi_generator'" \
        "openapi-python-client==$openapi_generator"
}
