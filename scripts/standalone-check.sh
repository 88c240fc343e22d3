#!/usr/bin/env bash
# The release package on a machine with nothing else: a minimal Debian root (debootstrap
# --variant=minbase; no Swift, no libcrypto, no checkout), made once and kept, gets only the
# tarball from scripts/package.sh. Inside it (chroot, sharing this machine's loopback) the
# package's checksum holds, the binary starts the demo from a folder with no files, serves the web
# console built into it, the contract, /healthz and /readyz, `ddp-bridge probe` (the image's health
# check) says healthy, and `ddp-bridge check` passes against the demo's DDP server, logged in and
# subscribed. Then the binary alone, in a root holding nothing but itself (and /proc), runs and
# reaches the demo. Each check prints PASS or FAIL; the exit status
# is 1 if any failed. Needs root (chroot); loopback only; every wait bounded.
#
#   scripts/standalone-check.sh [TARBALL]      (default: the newest dist/ddp-bridge-*.tar.gz)
#   scripts/standalone-check.sh --root-only    (only make the Debian root, if it is not there)
#
# STANDALONE_ROOT (default /var/tmp/ddp-bridge-standalone-root) is where the Debian root is kept;
# REBUILD_ROOT=1 makes it again; DEBIAN_MIRROR names the mirror.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
set +e  # setup.sh stops at a failure; here each check goes on and is counted

ROOT=${STANDALONE_ROOT:-/var/tmp/ddp-bridge-standalone-root}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root_only=0
[ "${1:-}" = --root-only ] && { root_only=1; shift; }
if [ "$root_only" = 0 ]; then
    tarball=${1:-$(ls -t dist/ddp-bridge-*.tar.gz 2>/dev/null | head -n 1)}
    [ -n "$tarball" ] && [ -r "$tarball" ] || { echo "standalone-check: no package (run scripts/package.sh first)" >&2; exit 2; }
    name=$(basename "$tarball" .tar.gz)
fi

passed=0
failed=0
check() {  # check NAME CONDITION-STATUS [DETAIL]
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1${3:+ — $3}"; failed=$((failed + 1)); fi
}

# The root is run as root (chroot): one another user could have made or changed is not used.
if [ -e "$ROOT" ] && { [ "$(stat -c %u "$ROOT")" != 0 ] || [ -n "$(find "$ROOT" -maxdepth 0 -perm /022)" ]; }; then
    echo "standalone-check: $ROOT is not root's alone (owner $(stat -c %U "$ROOT"), mode $(stat -c %a "$ROOT")); remove it or set STANDALONE_ROOT" >&2
    exit 1
fi
# (The marker names the root's recipe: a root made by an older recipe, with libssl3, is made again.)
marker="$ROOT/.ddp-bridge-root-minbase"
if [ "${REBUILD_ROOT:-0}" = 1 ] || [ ! -e "$marker" ]; then
    ensure_packages debootstrap
    # A /proc left mounted by an interrupted run is unmounted first, and rm stays on this file system.
    umount "$ROOT/proc" 2>/dev/null || true
    rm -rf --one-file-system "$ROOT"
    . /etc/os-release
    echo "standalone-check: making a minimal Debian $VERSION_CODENAME root in $ROOT"
    debootstrap_log=$(mktemp)
    if ! debootstrap --variant=minbase "$VERSION_CODENAME" "$ROOT" "$DEBIAN_MIRROR" > "$debootstrap_log" 2>&1; then
        tail -n 20 "$debootstrap_log" >&2
        echo "standalone-check: debootstrap failed" >&2
        exit 1
    fi
    # Only what the image's runtime needs: the package lists and documentation go. So does any
    # libcrypto apt brought (later Debian releases' apt needs one): the root exists for this
    # check alone, and a binary that needed the system's would fail here.
    rm -rf "$ROOT/var/cache/apt/archives/"*.deb "$ROOT/usr/share/doc" "$ROOT/usr/share/man"
    rm -f "$ROOT"/lib/*/libcrypto.so* "$ROOT"/usr/lib/*/libcrypto.so* "$ROOT"/lib/*/libssl.so* "$ROOT"/usr/lib/*/libssl.so*
    rm -f "$debootstrap_log"
    chmod 0755 "$ROOT"
    touch "$marker"
fi
[ "$root_only" = 0 ] || exit 0

# A machine has /etc/hosts (debootstrap writes none), for `localhost` below.
[ -e "$ROOT/etc/hosts" ] || printf '127.0.0.1 localhost\n::1 localhost\n' > "$ROOT/etc/hosts"
# A machine has /proc (the Swift runtime reads the command line from /proc/self/cmdline).
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc" || { echo "standalone-check: cannot mount /proc in $ROOT" >&2; exit 1; }
unmount_proc() { umount "$ROOT/proc" 2>/dev/null || true; }
trap unmount_proc EXIT

inside() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/nonexistent "$@"; }

rm -rf "$ROOT/opt/ddp-bridge-"* "$ROOT/tmp/"*
cp "$tarball" "$tarball.sha256" "$ROOT/tmp/"
inside sh -c "cd /tmp && sha256sum -c $name.tar.gz.sha256" >/dev/null 2>&1
check "the package's checksum holds" $?
inside tar -C /opt -xzf "/tmp/$name.tar.gz"
check "the package unpacks" $?
inside sh -c 'command -v swift || ls /opt/swift /usr/lib/swift' >/dev/null 2>&1
[ $? != 0 ]
check "the root has no Swift" $?
inside sh -c 'ls /lib/*/libcrypto.so* /usr/lib/*/libcrypto.so*' >/dev/null 2>&1
[ $? != 0 ]
check "the root has no libcrypto (the binary carries its own)" $?
bin=/opt/$name/ddp-bridge

output=$(mktemp)
# From / (no console files anywhere near), on free ports.
# Sessions kept in the data folder, sealed with a session key (AES-GCM by the libcrypto built in).
rm -rf "$ROOT/var/tmp/ddp-bridge-data"
key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
chroot "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/nonexistent DDP_BRIDGE_SESSION_KEY="$key" sh -c \
    "cd / && exec $bin demo --port 0 --ddp-port 0 --data-dir /var/tmp/ddp-bridge-data" > "$output" 2>&1 &
demo=$!
# The demo is stopped, within 15 s (then killed), before /proc is unmounted.
stop_demo() {
    kill "$demo" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$demo" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$demo" 2>/dev/null
    wait "$demo" 2>/dev/null
}
trap 'stop_demo; rm -f "$output"; unmount_proc' EXIT
bridge="" upstream=""
for _ in $(seq 1 150); do
    bridge=$(grep -o 'ddp-bridge: *http://127.0.0.1:[0-9]*' "$output" | grep -o 'http://.*' || true)
    upstream=$(grep -o 'ws://127.0.0.1:[0-9]*/websocket' "$output" | head -n 1 || true)
    [ -n "$bridge" ] && [ -n "$upstream" ] && break
    kill -0 $demo 2>/dev/null || break
    sleep 0.1
done
[ -n "$bridge" ]
check "the demo starts in the bare root" $? "$(tail -n 5 "$output")"
if [ -n "$bridge" ]; then
    page=$(curl -fsS --max-time 5 "$bridge/" || true)
    grep -q '<title>ddp-bridge console</title>' <<< "$page"
    check "GET / serves the console built into the binary" $?
    module=$(curl -fsS --max-time 5 "$bridge/js/app.js" || true)
    grep -q '^import ' <<< "$module"
    check "GET /js/app.js serves a module of the console" $?
    contract=$(curl -fsS --max-time 5 "$bridge/openapi.yaml" || true)
    grep -q '^openapi:' <<< "$contract"
    check "GET /openapi.yaml serves the contract" $?
    curl -fsS --max-time 5 "$bridge/healthz" >/dev/null
    check "GET /healthz" $?
    ready=1
    for _ in $(seq 1 150); do curl -fsS --max-time 2 "$bridge/readyz" >/dev/null 2>&1 && { ready=0; break; }; sleep 0.1; done
    check "GET /readyz: the demo's upstream is up" $ready
    port=${bridge##*:}
    inside "$bin" probe --port "$port" >/dev/null 2>&1
    check "ddp-bridge probe: the bridge is healthy (the image's health check)" $?
    inside "$bin" probe --port 1 --timeout 2 >/dev/null 2>&1
    [ $? = 1 ]
    check "ddp-bridge probe: exit 1 where nothing listens" $?
    # By name: `localhost` is looked up by the glibc linked into the binary (its `files` source).
    named=ws://localhost:${upstream##*:}
    said=$(inside "$bin" check --upstream "$named" --username alice --password secret --publication tasks --timeout 10 2>&1)
    check "ddp-bridge check passes against the demo's DDP server, by name ($named)" $? "$said"
    echo "$said" | sed 's/^/    /'
    # A logged-in session is saved with its login sealed (AES-GCM, the libcrypto built in): the
    # row is read from outside, and the bridge must not have said the store failed.
    session=$(curl -sS --max-time 10 -X POST "$bridge/v1/sessions" -H 'content-type: application/json' \
        -d '{"username":"alice","password":"secret"}' -w ' %{http_code}' || true)
    sealed=0
    for _ in $(seq 1 50); do
        sealed=$(python3 -c 'import sqlite3, sys
try:
    db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=2)
    print(db.execute("SELECT count(*) FROM ddp_bridge_sessions WHERE sealed_login IS NOT NULL").fetchone()[0])
except sqlite3.Error:
    print(0)' "$ROOT/var/tmp/ddp-bridge-data/sessions.sqlite")
        [ "$sealed" -ge 1 ] 2>/dev/null && break
        sleep 0.1
    done
    ! grep -q 'the session store failed' "$output" && [ "${session##* }" = 201 ] && [ "$sealed" -ge 1 ] 2>/dev/null
    check "a logged-in session is saved with its login sealed by the session key (${session##* }; rows sealed: $sealed)" $? \
        "$(grep 'session store' "$output" | tail -n 2)"
    # The binary alone: a root with nothing but the file and /proc (no libc, no shell, no /etc).
    empty=$(mktemp -d /var/tmp/ddp-bridge-empty-root.XXXXXX)
    cp "$ROOT$bin" "$empty/ddp-bridge" && mkdir "$empty/proc" "$empty/etc" && mount -t proc proc "$empty/proc"
    printf '127.0.0.1 localhost\n' > "$empty/etc/hosts"
    version=$(chroot "$empty" /ddp-bridge --version 2>&1)
    check "the binary alone, in a root holding nothing else, runs (--version: $version)" $?
    chroot "$empty" /ddp-bridge probe --port "$port" >/dev/null 2>&1
    check "the binary alone reaches the demo (probe)" $?
    said=$(chroot "$empty" /ddp-bridge check --upstream "$named" --timeout 10 2>&1)
    check "the binary alone finds localhost in /etc/hosts (no nsswitch.conf) and connects" $? "$said"
    umount "$empty/proc" 2>/dev/null
    rm -rf --one-file-system "$empty"
fi
echo "standalone-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
