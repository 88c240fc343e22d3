#!/usr/bin/env bash
# Installs what building ddp-bridge needs, when it is missing, on a Debian machine with
# Swift 6 (the project's machine kind): libssl-dev (SHA-256, secure random), zlib1g-dev
# (WebSocket compression), pkg-config, and openssl (the TLS tests make a certificate). Source it or run it; it is quiet when all is there.
set -euo pipefail

# Installs the Debian packages named that are not installed yet (quiet when all are there).
ensure_packages() {
    local missing=() package sudo=""
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "setup: installing ${missing[*]}"
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_packages libssl-dev zlib1g-dev pkg-config openssl

if ! command -v swift >/dev/null 2>&1; then
    if [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    else
        echo "setup: no Swift toolchain found (Swift 6.1 or later is needed: https://www.swift.org/install)" >&2
        exit 1
    fi
fi

# The release build of the scripts (package, benchmarks, the test command): static (Package.swift
# links ddp-bridge with -static-executable in release) and in a build folder of its own, so it can
# run beside `swift test` on .build (SwiftPM holds one build folder for one command at a time).
release_dir=.build-release/release
release_build() {
    swift build -c release --scratch-path .build-release --static-swift-stdlib "$@"
}
