#!/usr/bin/env bash
# Makes the release package: one static binary (the Swift runtime, Foundation, glibc, libstdc++,
# zlib and the system's libcrypto linked in; the web console and the HTTP contract built in),
# with the README, the settings example and the CHANGELOG, as
#   dist/ddp-bridge-<version>-linux-<arch>.tar.gz  and  dist/ddp-bridge-<version>-linux-<arch>.tar.gz.sha256
# the binary alone as dist/ddp-bridge (what the Dockerfile copies into the image), and its
# symbols, for reading a crash's addresses, as dist/ddp-bridge-<version>-linux-<arch>.debug.
# The binary needs no library at all: it must have no dynamic loader and name no library
# (readelf), else the script fails.
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

if [ "$BUILD" = 1 ]; then release_build --product ddp-bridge; fi
binary=$(readlink -f "$release_dir/ddp-bridge" || true)
[ -x "$binary" ] || { echo "package: no release binary at $binary (build it, or leave out --no-build)" >&2; exit 1; }

# Package.swift links the release binary with -static-executable: no dynamic loader (no INTERP
# header), no library needed at run time.
headers=$(readelf --program-headers --dynamic "$binary")
if grep -q -e INTERP -e NEEDED <<< "$headers"; then
    echo "package: the binary is not static (see Package.swift's linker settings); it loads:" >&2
    ldd "$binary" >&2 || true
    exit 1
fi
echo "package: the binary is static (no dynamic loader, no library needed)"

version=$("$binary" --version | awk '{print $1}')
arch=$(uname -m)
name="ddp-bridge-$version-linux-$arch"
rm -rf "dist/$name" "dist/$name.tar.gz" "dist/$name.tar.gz.sha256"
mkdir -p "dist/$name"
# Without its symbols and DWARF (more than half of the file); they are kept beside it, linked by
# name and checksum (gdb and `addr2line -e` read them), to turn a crash's addresses into names.
rm -f "dist/$name.debug"
objcopy --only-keep-debug "$binary" "dist/$name.debug"
strip -o "dist/$name/ddp-bridge" "$binary"
(cd dist && objcopy --add-gnu-debuglink="$name.debug" "$name/ddp-bridge")
cp README.md CHANGELOG.md deploy/bridge.env.example "dist/$name/"
tar -C dist --owner=0 --group=0 --numeric-owner -czf "dist/$name.tar.gz" "$name"
(cd dist && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
cp "dist/$name/ddp-bridge" dist/ddp-bridge
rm -rf "dist/$name"
echo "package: dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1); the binary $(du -h dist/ddp-bridge | cut -f1); its symbols dist/$name.debug)"
cat "dist/$name.tar.gz.sha256"
