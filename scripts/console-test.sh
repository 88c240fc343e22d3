#!/usr/bin/env bash
# The web console's own checks, without a browser: the type check of every module in public/
# (`// @ts-check` with JSDoc types, TypeScript's checker in strict mode) and Node's test runner
# over the pure modules (store, event application, local copy, query, EJSON order, formatting)
# in Tests/console/. Installs nodejs and node-typescript (Debian) when missing; no npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup.sh
ensure_packages nodejs node-typescript

tsc -p Tests/console/tsconfig.json
echo "console: types check ($(tsc --version), strict, public/console.js and the modules it imports)"
node --test Tests/console/*.test.mjs
