#!/usr/bin/env bash
# Makes the release package: one self-contained binary (the Swift standard library and
# Foundation linked in statically; the web console and the HTTP contract built in), with the
# README, the settings example and the CHANGELOG, as
#   dist/ddp-bridge-<version>-linux-<arch>.tar.gz  and  dist/ddp-bridge-<version>-linux-<arch>.tar.gz.sha256
# and the binary alone as dist/ddp-bridge (what the Dockerfile copies into the image).
# The binary needs only the C libraries every Debian-like system has (glibc, libstdc++, zlib)
# and libcrypto (libssl3); `ldd` of it is printed, and a library outside those fails the script.
#
#   scripts/package.sh [--no-build]     (--no-build: package the release binary already built)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

BUILD=1
for argument in "$@"; do
    case "$argument" in
        --no-build) BUILD=0 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $argument (see --help)" >&2; exit 2 ;;
    esac
done

if [ "$BUILD" = 1 ]; then swift build -c release --product ddp-bridge --static-swift-stdlib; fi
binary="$(swift build -c release --show-bin-path)/ddp-bridge"
[ -x "$binary" ] || { echo "package: no release binary at $binary (build it, or leave out --no-build)" >&2; exit 1; }

# Only libraries from this list may be loaded at run time; a Swift runtime library means the build
# was not static.
allowed='^(linux-vdso|libc|libm|libdl|libpthread|librt|libutil|libstdc\+\+|libgcc_s|libz|libcrypto|ld-linux[-a-z0-9_]*)\.so'
libraries=$(ldd "$binary" | awk '{print $1}')
echo "package: the binary loads:"
echo "$libraries" | sed 's/^/  /'
if unexpected=$(echo "$libraries" | sed 's#.*/##' | grep -Ev "$allowed"); then
    echo "package: the binary loads libraries a plain Debian system may not have: $unexpected" >&2
    exit 1
fi

version=$("$binary" --version | awk '{print $1}')
arch=$(uname -m)
name="ddp-bridge-$version-linux-$arch"
rm -rf "dist/$name" "dist/$name.tar.gz" "dist/$name.tar.gz.sha256"
mkdir -p "dist/$name"
# Without its DWARF (a third of the binary): a crash's backtrace still names functions.
strip --strip-debug -o "dist/$name/ddp-bridge" "$binary"
cp README.md CHANGELOG.md deploy/bridge.env.example "dist/$name/"
tar -C dist --owner=0 --group=0 --numeric-owner -czf "dist/$name.tar.gz" "$name"
(cd dist && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
cp "dist/$name/ddp-bridge" dist/ddp-bridge
rm -rf "dist/$name"
echo "package: dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1); the binary $(du -h dist/ddp-bridge | cut -f1))"
cat "dist/$name.tar.gz.sha256"
