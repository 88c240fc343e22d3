#!/usr/bin/env bash
# Installs what building ddp-bridge needs, when it is missing, on a Debian machine with
# Swift 6 (the project's machine kind): libssl-dev (SHA-256, secure random), zlib1g-dev
# (WebSocket compression), pkg-config, and openssl (the TLS tests make a certificate). Source it or run it; it is quiet when all is there.
set -euo pipefail

missing=()
for package in libssl-dev zlib1g-dev pkg-config openssl; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v swift >/dev/null 2>&1; then
    if [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    else
        echo "setup: no Swift toolchain found (Swift 6.1 or later is needed: https://www.swift.org/install)" >&2
        exit 1
    fi
fi
