#!/usr/bin/env python3
"""Writes openapi.json from openapi.yaml (the contract is written in YAML; the bridge serves both,
at /openapi.yaml and /openapi.json). With --check, fails when openapi.json is not what
openapi.yaml says (the test command runs that)."""
import json
import sys
from pathlib import Path

import yaml

root = Path(__file__).resolve().parent.parent
text = json.dumps(yaml.safe_load((root / "openapi.yaml").read_text(encoding="utf-8")), indent=2, ensure_ascii=False) + "\n"
target = root / "openapi.json"
if "--check" in sys.argv[1:]:
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        sys.exit("openapi.json is not openapi.yaml as JSON: run python3 scripts/openapi-json.py")
    print("openapi.json matches openapi.yaml")
else:
    target.write_text(text, encoding="utf-8")
