#!/usr/bin/env bash
# Builds the ddp-bridge image from this repository's Dockerfile with podman and checks it
# running, from outside: /healthz, /readyz with and without an upstream, the HEALTHCHECK, the
# user it runs as, the commit it names (--version, ddp_bridge_build_info: the packaged binary's),
# the console built into the binary, a session and an event stream driven through it, sessions kept in the
# data volume across containers, a clean stop on SIGTERM (timed), the image size; then
# deploy/compose.demo.yaml with podman-compose, its session key from an env file made here: a
# session made before `compose restart`, and before `down` and `up` (the volume kept), still
# answers with its old token, and its stream resumes from Last-Event-ID. Each check prints PASS
# or FAIL; the exit status is 1 if any failed. All traffic stays on loopback and podman's local
# networks.
#
#   scripts/container-check.sh [--context DIR] [--no-build] [--skip-compose]
#
# --context DIR   build from DIR instead of this repository (a clean checkout, say)
# --no-build      check the image already tagged $IMAGE (default localhost/ddp-bridge:check)
# --skip-compose  leave out the podman-compose part
#
# The image: scripts/package.sh makes the release binary here (dist/ddp-bridge), and the
# Dockerfile puts it on an empty image, with a few files made on BASE_IMAGE. Unset (the
# default), a local stand-in for that base is made once and kept, as no image registry is
# reachable on the machines this project is built on:
#   localhost/ddp-bridge-base:bookworm   a minimal Debian root (debootstrap --variant=minbase)
# Where a registry is reachable: BASE_IMAGE=debian:bookworm-slim. REBUILD_BASE_IMAGES=1 makes
# the stand-in again.
#
# podman runs with a containers.conf of its own (CONTAINERS_CONF, written to $STATE_DIR,
# default /var/tmp/ddp-bridge-container): default ulimits at the host's (nofile at most 65536,
# nproc at most 4096; podman's own defaults are above what a container may set here and fail
# with "setrlimit RLIMIT_NOFILE: Operation not permitted"), and an OCI runtime that is installed
# and starts containers here (CONTAINER_RUNTIME names one, installed when missing; otherwise
# crun if installed, else runc, which this script installs; crun refuses cgroups in hybrid mode).
# Containers find each other by name on the check's network: with podman's CNI backend that
# needs the dnsname plugin, which this script installs. The output says which runtime and
# network backend were used.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

CONTEXT=$REPO
BUILD=1
COMPOSE=1
while [ $# -gt 0 ]; do
    case "$1" in
        --context) CONTEXT=$(cd "$2" && pwd) || exit 2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --skip-compose) COMPOSE=0; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

IMAGE=${IMAGE:-localhost/ddp-bridge:check}
STATE_DIR=${STATE_DIR:-/var/tmp/ddp-bridge-container}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-5400}
RUN_ID=ddpcheck-$$
NETWORK=$RUN_ID-net
mkdir -p "$STATE_DIR"

failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { # check "description" command...: PASS when the command succeeds
    local description=$1
    shift
    if "$@"; then pass "$description"; else fail "$description"; fi
}
note() { echo "---- $*"; }

# ---- What podman needs (Debian packages) ---------------------------------------------------
# scripts/setup.sh: ensure_packages (and the build's own packages, for the host build).
source scripts/setup.sh
set +e
# golang-github-containernetworking-plugin-dnsname: container names resolve on a CNI network.
ensure_packages podman podman-compose debootstrap iptables curl ca-certificates runc uidmap \
    golang-github-containernetworking-plugin-dnsname
if [ -n "${CONTAINER_RUNTIME:-}" ] && ! command -v "$CONTAINER_RUNTIME" >/dev/null 2>&1; then ensure_packages "$CONTAINER_RUNTIME"; fi
set -uo pipefail

# ---- Cleanup: this run's containers, volume, network, compose project, files ----------------
WORK=$(mktemp -d)
STREAM_PIDS=()
cleanup() {
    local pid name
    for pid in "${STREAM_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for name in "$RUN_ID-upstream" "$RUN_ID-bridge" "$RUN_ID-bridge2" "$RUN_ID-alone"; do
        timeout 60 podman rm -f -v -t 0 "$name" >/dev/null 2>&1
    done
    timeout 60 podman volume rm -f "$RUN_ID-data" >/dev/null 2>&1
    timeout 60 podman network rm -f "$NETWORK" >/dev/null 2>&1
    if [ -n "${COMPOSE_UP:-}" ]; then
        record_compose_volumes
        (cd "$REPO" && timeout 120 podman-compose -p "$RUN_ID" -f deploy/compose.demo.yaml down -v -t 0 >/dev/null 2>&1)
    fi
    compose_leftovers remove
    rm -rf "$WORK"
}
# The volumes of the compose project's containers, anonymous ones included (down -v leaves those).
record_compose_volumes() {
    podman ps -a -q --filter "label=io.podman.compose.project=$RUN_ID" 2>/dev/null | xargs -r podman inspect \
        -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' >>"$WORK/compose-volumes" 2>/dev/null
}
# What a compose project leaves (podman-compose 1.0's down leaves its network and the
# containers' anonymous volumes): listed, or removed with `remove`.
compose_leftovers() {
    local containers volumes networks
    containers=$(podman ps -a -q --filter "label=io.podman.compose.project=$RUN_ID" 2>/dev/null)
    volumes=$(podman volume ls -q --filter "label=io.podman.compose.project=$RUN_ID" 2>/dev/null
        cat "$WORK/compose-volumes" 2>/dev/null)
    volumes=$(for volume in $volumes; do podman volume exists "$volume" && echo "$volume"; done)
    networks=$(podman network ls -q --filter "name=^${RUN_ID}_" 2>/dev/null)
    if [ "${1:-}" = remove ]; then
        [ -n "$containers" ] && timeout 60 podman rm -f -v -t 0 $containers >/dev/null 2>&1
        [ -n "$volumes" ] && timeout 60 podman volume rm -f $volumes >/dev/null 2>&1
        [ -n "$networks" ] && timeout 60 podman network rm -f $networks >/dev/null 2>&1
        return 0
    fi
    echo $containers $volumes $networks | wc -w
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- podman's configuration for this run ---------------------------------------------------
limit() { # limit S|H n|u CAP: the host's soft or hard limit, at most CAP
    local value
    value=$(ulimit "-$1$2")
    if [ "$value" = unlimited ] || [ "$value" -gt "$3" ]; then value=$3; fi
    echo "$value"
}
write_conf() { # write_conf RUNTIME NOFILE NPROC
    cat >"$STATE_DIR/containers.conf" <<EOF
# Written by scripts/container-check.sh: limits a container here may set, and a runtime that works.
[containers]
default_ulimits = ["nofile=$2", "nproc=$3"]
[engine]
runtime = "$1"
EOF
}
export CONTAINERS_CONF=$STATE_DIR/containers.conf
# podman build keeps HEALTHCHECK only in the Docker image format (podman-compose builds too).
export BUILDAH_FORMAT=docker
# The runtimes to try, in order: the one named, else those installed (crun first).
RUNTIMES=${CONTAINER_RUNTIME:-$(for r in crun runc; do command -v "$r" >/dev/null 2>&1 && printf '%s ' "$r"; done)}
RUNTIME=${RUNTIMES%% *}
if [ -z "$RUNTIME" ]; then
    echo "FAIL no OCI runtime installed (crun or runc)"
    exit 1
fi
write_conf "$RUNTIME" "$(limit S n 65536):$(limit H n 65536)" "$(limit S u 4096):$(limit H u 4096)"

# The first runtime and limits that start a container here: crun refuses cgroups in hybrid
# mode (v1 and v2 mounted at once), where runc works; limits above what this process may set
# fail with "setrlimit ...: Operation not permitted" (seen with nproc over 32768 here, although
# the shell's limit is higher); 1024:4096 and 1000:1000, measured to work, are the fallback.
configure_podman() { # configure_podman IMAGE COMMAND... (a command the image has, that exits 0)
    local limits runtime image=$1
    shift
    for limits in "$(limit S n 65536):$(limit H n 65536) $(limit S u 4096):$(limit H u 4096)" "1024:4096 1000:1000"; do
        for runtime in $RUNTIMES; do
            # shellcheck disable=SC2086 # two words: nofile and nproc
            write_conf "$runtime" $limits
            if timeout 60 podman run --rm --entrypoint "$1" "$image" "${@:2}" >/dev/null 2>"$WORK/probe-$runtime.err"; then
                RUNTIME=$runtime
                return 0
            fi
        done
    done
    return 1
}

# ---- Stand-in base images ------------------------------------------------------------------
BASE_TAG=localhost/ddp-bridge-base:bookworm

stale() { # stale TAG FINGERPRINT: the image is missing, broken, or made from something else
    [ "${REBUILD_BASE_IMAGES:-0}" = 1 ] && return 0
    podman image exists "$1" || return 0
    image_is_whole "$1" || { podman rmi -f "$1" >/dev/null 2>&1; return 0; }
    [ -z "$2" ] && return 1
    [ "$(podman image inspect -f '{{index .Labels "ddp-bridge.fingerprint"}}' "$1" 2>/dev/null)" != "$2" ]
}

debian_sources() { # debian_sources ROOT: the suites and apt settings debian:bookworm-slim has
    cat >"$1/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
    # No package caches or translations kept, no documentation installed.
    cat >"$1/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$1/etc/apt/apt.conf.d/docker-no-languages"
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' >"$1/etc/dpkg/dpkg.cfg.d/docker-slim"
    rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/*
}

import_root() { # import_root ROOT TAG FINGERPRINT [--change ...]
    local root=$1 tag=$2 fingerprint=$3
    shift 3
    [ -x "$root/bin/sh" ] || { echo "no /bin/sh in $root" >"$STATE_DIR/import.log"; return 1; }
    if tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' \
        --change "LABEL ddp-bridge.fingerprint=${fingerprint:-none}" "$@" - "$tag" >/dev/null 2>"$STATE_DIR/import.log" &&
        image_is_whole "$tag"; then
        return 0
    fi
    # Never leave a half-made stand-in behind: the next run would take it for made.
    podman rmi -f "$tag" >/dev/null 2>&1
    return 1
}

image_is_whole() { # image_is_whole TAG: the image's root has a shell (read without running it)
    local mount whole=1
    mount=$(podman image mount "$1" 2>/dev/null) || return 1
    [ -x "$mount/bin/sh" ] && whole=0
    podman image unmount "$1" >/dev/null 2>&1
    return $whole
}

make_base_image() {
    stale "$BASE_TAG" "" || { pass "stand-in runtime base $BASE_TAG (cached)"; return; }
    local root=$STATE_DIR/rootfs-base started=$SECONDS
    rm -rf "$root"
    if timeout 1200 debootstrap --variant=minbase bookworm "$root" "$DEBIAN_MIRROR" >"$STATE_DIR/debootstrap-base.log" 2>&1 &&
        debian_sources "$root" && import_root "$root" "$BASE_TAG" ""; then
        pass "stand-in runtime base $BASE_TAG made ($((SECONDS - started)) s)"
    else
        fail "stand-in runtime base $BASE_TAG (see $STATE_DIR/debootstrap-base.log)"
    fi
    rm -rf "$root"
}

# ---- Helpers -------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
status_of() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
wait_status() { # wait_status URL STATUS SECONDS
    local deadline=$((SECONDS + $3))
    while [ $SECONDS -lt $deadline ]; do
        [ "$(status_of "$1")" = "$2" ] && return 0
        sleep 0.5
    done
    return 1
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1" 2>/dev/null; }
container_state() { podman inspect -f "$2" "$1" 2>/dev/null; }

# A session and a stream through the bridge at BASE: token, subscription, a read, and at least
# one change event on /v1/events within a bound (the demo toggles a task every 5 s).
drive_session() { # drive_session LABEL BASE
    local label=$1 base=$2 token body count events
    token=$(curl -s --max-time 10 -X POST "$base/v1/sessions" -d '{"username":"alice","password":"secret"}' | json_field token)
    check "$label: POST /v1/sessions gives a token" test -n "$token"
    [ -n "$token" ] || return 1
    body=$(curl -s --max-time 10 -X POST "$base/v1/subscriptions" -H "authorization: Bearer $token" -d '{"name":"tasks"}')
    check "$label: POST /v1/subscriptions tasks is ready ($(echo "$body" | json_field state))" \
        test "$(echo "$body" | json_field state)" = ready
    count=$(curl -s --max-time 10 "$base/v1/collections/tasks" -H "authorization: Bearer $token" | json_field count)
    check "$label: GET /v1/collections/tasks has documents (count ${count:-none})" test "${count:-0}" -gt 0
    events=$WORK/$label-events.txt
    : >"$events"
    curl -sN --max-time 15 "$base/v1/events?collections=tasks" -H "authorization: Bearer $token" >"$events" 2>/dev/null &
    local reader=$! deadline=$((SECONDS + 15))
    while [ $SECONDS -lt $deadline ] && ! grep -q '^event: changed' "$events"; do sleep 0.5; done
    kill "$reader" 2>/dev/null
    wait "$reader" 2>/dev/null
    check "$label: curl -N /v1/events?collections=tasks saw a change event ($(grep -c '^event:' "$events") events in $((15 - (deadline - SECONDS))) s)" \
        grep -q '^event: changed' "$events"
    TOKEN=$token
}

# ---- 1. Base images and the build ----------------------------------------------------------
free_gb=$(df -P -BG /var/lib/containers 2>/dev/null | awk 'NR == 2 {print $4 + 0}')
note "disk: ${free_gb:-?} GB free for podman's storage (a first build with stand-ins takes about 15 GB)"
if [ "$BUILD" = 1 ]; then
    if [ -z "${BASE_IMAGE:-}" ]; then make_base_image; BASE_IMAGE=$BASE_TAG; fi
    if [ "$failures" -gt 0 ]; then echo "container check: no base image, $failures FAILED"; exit 1; fi
    # The image holds the release package's binary: made here, on this machine, as a release is.
    note "packaging the binary (scripts/package.sh in $CONTEXT); log: $STATE_DIR/package.log"
    if (cd "$CONTEXT" && scripts/package.sh) >"$STATE_DIR/package.log" 2>&1; then
        pass "scripts/package.sh ($(grep -o 'dist/ddp-bridge-[^ ]*\.tar\.gz ([^)]*)' "$STATE_DIR/package.log" | head -n 1))"
    else
        fail "scripts/package.sh (tail of $STATE_DIR/package.log below)"
        tail -n 20 "$STATE_DIR/package.log" | sed 's/^/     /'
        exit 1
    fi
fi

# The probe runs the base (it has /bin/true), or, with --no-build, the image's own binary.
probe=("${BASE_IMAGE:-$BASE_TAG}" /bin/true)
if [ "$BUILD" = 0 ]; then probe=("$IMAGE" /usr/local/bin/ddp-bridge --version); fi
probe_image=${probe[0]}
if configure_podman "${probe[@]}"; then
    if [ "$RUNTIME" = runc ] && [ -s "$WORK/probe-crun.err" ]; then
        note "crun: $(grep -v -e syslog -e systemd "$WORK/probe-crun.err" | head -n 1 | cut -c1-100)"
    fi
    BACKEND=$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)
    note "podman $(podman --version | awk '{print $3}'), runtime $RUNTIME (of: $RUNTIMES), network backend ${BACKEND:-unknown}, $(grep default_ulimits "$CONTAINERS_CONF")"
else
    fail "no runtime and limits start a container here ($probe_image): $(grep -hv -e syslog -e systemd "$WORK"/probe-*.err | head -n 2)"
    exit 1
fi

# The commit the image is built from, as the BuildInfo plugin would name it (-modified when tracked
# files differ from it): the build context has no .git, so it comes in as GIT_COMMIT.
GIT_COMMIT=$(git -C "$CONTEXT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$GIT_COMMIT" != unknown ] && [ -n "$(git -C "$CONTEXT" status --porcelain --untracked-files=no 2>/dev/null | head -c 1)" ]; then
    GIT_COMMIT=$GIT_COMMIT-modified
fi
if [ "$BUILD" = 1 ]; then
    note "building $IMAGE from $CONTEXT (BASE_IMAGE=$BASE_IMAGE, the binary of commit $GIT_COMMIT); log: $STATE_DIR/build.log"
    old_id=$(podman image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null)
    started=$SECONDS
    if timeout "$BUILD_TIMEOUT" podman build --format docker --layers --runtime "$RUNTIME" \
        --build-arg "BASE_IMAGE=$BASE_IMAGE" \
        -t "$IMAGE" "$CONTEXT" >"$STATE_DIR/build.log" 2>&1; then
        pass "podman build of the Dockerfile ($((SECONDS - started)) s)"
    else
        fail "podman build of the Dockerfile ($((SECONDS - started)) s; tail of $STATE_DIR/build.log below)"
        tail -n 30 "$STATE_DIR/build.log" | sed 's/^/     /'
        exit 1
    fi
    # The image this tag named before is dangling now: remove it (only that one; the build's
    # intermediate layers stay, as the cache of the next build).
    new_id=$(podman image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null)
    if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then podman rmi "$old_id" >/dev/null 2>&1; fi
elif ! podman image exists "$IMAGE"; then
    fail "no image $IMAGE to check (run without --no-build)"
    exit 1
fi

size=$(podman image inspect -f '{{.Size}}' "$IMAGE")
pass "image $IMAGE: $((size / 1000000)) MB ($(podman image inspect -f '{{.Id}}' "$IMAGE" | cut -c1-12))"
check "image runs as user 10001 ($(podman image inspect -f '{{.Config.User}}' "$IMAGE"))" \
    test "$(podman image inspect -f '{{.Config.User}}' "$IMAGE" | cut -d: -f1)" = 10001
check "image has a HEALTHCHECK ($(podman image inspect -f '{{if .Config.Healthcheck}}{{join .Config.Healthcheck.Test " "}}{{end}}' "$IMAGE" | cut -c1-70))" \
    test -n "$(podman image inspect -f '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Test}}{{end}}' "$IMAGE")"
version=$(timeout 60 podman run --rm "$IMAGE" --version 2>&1 | tail -n 1)
if [ "$BUILD" = 1 ]; then
    check "ddp-bridge --version in the image names the commit built ($version; GIT_COMMIT=$GIT_COMMIT)" \
        test "$version" = "$(echo "$version" | cut -d' ' -f1) (commit $GIT_COMMIT)"
else
    check "ddp-bridge --version in the image names a commit ($version)" sh -c "echo '$version' | grep -Eq '\(commit [0-9a-f]{4,}'"
fi
check "image declares the volume /var/lib/ddp-bridge and DDP_BRIDGE_DATA_DIR" \
    sh -c "podman image inspect -f '{{.Config.Volumes}} {{.Config.Env}}' '$IMAGE' | grep -q '/var/lib/ddp-bridge:.*DDP_BRIDGE_DATA_DIR=/var/lib/ddp-bridge'"

# ---- 2. The image running ------------------------------------------------------------------
timeout 60 podman network create "$NETWORK" >/dev/null 2>>"$WORK/podman.log"
run() { # run podman-run-arguments: a container in the background on the check's network
    if ! timeout 120 podman run -d --network "$NETWORK" "$@" >/dev/null 2>"$WORK/run.err"; then
        note "podman run $*: $(grep -v -e syslog -e systemd "$WORK/run.err" | tail -n 1)"
        return 1
    fi
}
running() { [ "$(container_state "$1" '{{.State.Status}}')" = running ]; }

# Without an upstream: it points at a port where nothing listens (inside its own container);
# an unknown DDP_BRIDGE_ variable is ignored.
ALONE_PORT=$(free_port)
run --name "$RUN_ID-alone" -p "127.0.0.1:$ALONE_PORT:8080" -e DDP_BRIDGE_UPSTREAM=ws://127.0.0.1:3000/websocket \
    -e DDP_BRIDGE_NO_SUCH_SETTING=1 "$IMAGE"
check "no upstream: /healthz 200" wait_status "http://127.0.0.1:$ALONE_PORT/healthz" 200 30
check "no upstream: /readyz 503 ($(status_of "http://127.0.0.1:$ALONE_PORT/readyz"))" \
    test "$(status_of "http://127.0.0.1:$ALONE_PORT/readyz")" = 503
timeout 60 podman rm -f -v -t 0 "$RUN_ID-alone" >/dev/null 2>&1

# The demo DDP server from the same image as the upstream, on the podman network.
run --name "$RUN_ID-upstream" "$IMAGE" demo-server --host 0.0.0.0 --port 3000 --toggle
# Containers find each other by name (the bridge's upstream below is the name): with the CNI
# backend only with the dnsname plugin.
# The image has no shell or getent: its own `check` looks the name up and connects.
resolved=$(timeout 60 podman run --rm --network "$NETWORK" "$IMAGE" check --upstream "ws://$RUN_ID-upstream:3000/websocket" --timeout 20 2>&1 | grep -m 1 'connected to')
check "a container name resolves on the check's network (${BACKEND:-unknown} backend): ${resolved:-$RUN_ID-upstream not reached}" test -n "$resolved"
PORT=$(free_port)
SESSION_KEY=$(openssl rand -hex 32)
BRIDGE_ENV=(-e "DDP_BRIDGE_UPSTREAM=ws://$RUN_ID-upstream:3000/websocket" -e "DDP_BRIDGE_SESSION_KEY=$SESSION_KEY")
run --name "$RUN_ID-bridge" -p "127.0.0.1:$PORT:8080" -v "$RUN_ID-data:/var/lib/ddp-bridge" "${BRIDGE_ENV[@]}" "$IMAGE"
BASE=http://127.0.0.1:$PORT
check "/healthz 200" wait_status "$BASE/healthz" 200 30
check "/readyz 200 with the demo server as upstream" wait_status "$BASE/readyz" 200 30
if timeout 30 podman healthcheck run "$RUN_ID-bridge" >/dev/null 2>&1; then health=healthy; else health="unhealthy (exit $?)"; fi
inspected=$(container_state "$RUN_ID-bridge" '{{.State.Health.Status}}')
check "HEALTHCHECK: podman healthcheck run says $health, inspect says ${inspected:-nothing}" \
    test "$health" = healthy -a "$inspected" = healthy
pid=$(container_state "$RUN_ID-bridge" '{{.State.Pid}}')
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
check "the bridge process (pid $pid on the host) runs as uid ${uid:-unknown}, not root" test "${uid:-0}" = 10001
page=$WORK/console.html
console=$(curl -s --max-time 10 -o "$page" -w '%{http_code} %{content_type}' "$BASE/")
check "the web console at / ($console)" sh -c "echo '$console' | grep -q '^200 text/html' && grep -qi '<html' '$page'"
drive_session container "$BASE"
FIRST_TOKEN=${TOKEN:-}
build_info=$(curl -s --max-time 10 "$BASE/metrics" | grep '^ddp_bridge_build_info')
commit=$(echo "$version" | sed -E 's/.*\(commit ([^)]*)\).*/\1/')
check "ddp_bridge_build_info of the running container names the commit $commit (${build_info:-none})" \
    sh -c "echo '$build_info' | grep -qF 'commit=\"$commit\"'"
# Read from the host: the image has no shell.
volume_dir=$(podman volume inspect -f '{{.Mountpoint}}' "$RUN_ID-data" 2>/dev/null)
stored=$(ls -ln "$volume_dir" 2>/dev/null | awk '/sessions.sqlite$/ {print $3 ":" $5}')
check "sessions.sqlite written to the data volume by uid 10001 (${stored:-none})" sh -c "echo '$stored' | grep -q '^10001:'"

# SIGTERM with a stream open: the bridge refuses new sessions, gives requests in flight its
# shutdown grace (10 s by default), closes the streams and exits 0.
curl -sN --max-time 60 "$BASE/v1/events?collections=tasks" -H "authorization: Bearer $FIRST_TOKEN" >"$WORK/stop-events.txt" 2>/dev/null &
reader=$!
STREAM_PIDS+=("$reader")
sleep 1
was=$(container_state "$RUN_ID-bridge" '{{.State.Status}}')
started=$(date +%s.%N)
timeout 60 podman stop -t 30 "$RUN_ID-bridge" >/dev/null 2>>"$WORK/podman.log"
stopped=$(date +%s.%N)
wait "$reader" 2>/dev/null
took=$(python3 -c "print(f'{$stopped - $started:.1f}')")
code=$(container_state "$RUN_ID-bridge" '{{.State.ExitCode}}')
check "SIGTERM (podman stop -t 30) of the $was bridge with a stream open: exit code $code in $took s (its shutdown grace is 10 s)" \
    python3 -c "import sys; sys.exit(0 if '$was' == 'running' and '$code' == '0' and $took < 25 else 1)"
timeout 60 podman start "$RUN_ID-bridge" >/dev/null 2>>"$WORK/podman.log" && wait_status "$BASE/readyz" 200 30
was=$(container_state "$RUN_ID-bridge" '{{.State.Status}}')
started=$(date +%s.%N)
timeout 60 podman stop -t 30 "$RUN_ID-bridge" >/dev/null 2>>"$WORK/podman.log"
stopped=$(date +%s.%N)
took=$(python3 -c "print(f'{$stopped - $started:.1f}')")
code=$(container_state "$RUN_ID-bridge" '{{.State.ExitCode}}')
check "SIGTERM of the $was bridge (started again) with nothing open: exit code $code in $took s" \
    python3 -c "import sys; sys.exit(0 if '$was' == 'running' and '$code' == '0' and $took < 5 else 1)"

# A new container on the same volume and key resumes the session: the token still reads.
run --name "$RUN_ID-bridge2" -p "127.0.0.1:$PORT:8080" -v "$RUN_ID-data:/var/lib/ddp-bridge" "${BRIDGE_ENV[@]}" "$IMAGE"
wait_status "$BASE/readyz" 200 30
resumed=$(status_of "$BASE/v1/collections/tasks" -H "authorization: Bearer $FIRST_TOKEN")
check "a new container on the same data volume and key keeps the session (GET with the old token: $resumed)" test "$resumed" = 200
timeout 60 podman rm -f -v -t 0 "$RUN_ID-bridge" "$RUN_ID-bridge2" "$RUN_ID-upstream" >/dev/null 2>&1

# ---- 3. deploy/compose.demo.yaml with podman-compose ---------------------------------------
if [ "$COMPOSE" = 1 ]; then
    DEMO_PORT=$(free_port)
    # The session key in an env file, as deploy/bridge.env.example says to make it (here in this
    # run's folder, named by DDP_BRIDGE_ENV_FILE, so a deploy/bridge.env of yours is not touched).
    (umask 077 && printf 'DDP_BRIDGE_SESSION_KEY=%s\n' "$(openssl rand -hex 32)" >"$WORK/bridge.env")
    export DDP_BRIDGE_IMAGE=$IMAGE DDP_BRIDGE_DEMO_PORT=$DEMO_PORT DDP_BRIDGE_ENV_FILE=$WORK/bridge.env
    COMPOSE_UP=1
    # The services named: podman-compose 1.0 knows no profiles, and would start the observability
    # profile's Prometheus and Grafana too (images from a registry).
    timeout 300 podman-compose -p "$RUN_ID" -f deploy/compose.demo.yaml up -d --no-build meteor ddp-bridge >"$WORK/compose-up.log" 2>&1
    record_compose_volumes
    # podman-compose 1.0 answers 0 even when a container did not start: count the running ones.
    up=$(podman ps --filter "label=io.podman.compose.project=$RUN_ID" --format '{{.Names}}' 2>/dev/null | sort | tr '\n' ' ')
    if [ "$(echo $up | wc -w)" = 2 ]; then
        pass "podman-compose -f deploy/compose.demo.yaml up -d: ${up% }"
    else
        fail "podman-compose -f deploy/compose.demo.yaml up -d: running ${up:-none} (log below)"
        tail -n 20 "$WORK/compose-up.log" | sed 's/^/     /'
    fi
    check "compose: /readyz 200 through the published port $DEMO_PORT" wait_status "http://127.0.0.1:$DEMO_PORT/readyz" 200 60
    DEMO=http://127.0.0.1:$DEMO_PORT
    drive_session compose "$DEMO"
    # podman-compose labels the service as Docker does (com.docker.compose.service).
    bridge_container=$(podman ps --filter "label=io.podman.compose.project=$RUN_ID" --filter "label=com.docker.compose.service=ddp-bridge" --format '{{.Names}}' | head -n 1)
    if timeout 30 podman healthcheck run "$bridge_container" >/dev/null 2>&1; then health=healthy; else health="unhealthy (exit $?)"; fi
    check "compose: the bridge's healthcheck (the image's, under compose) says $health" test "$health" = healthy

    # A session with a subscription and a stream; then the bridge restarted (`compose restart`)
    # and its container replaced (the volume kept): the old token must still answer, with its
    # subscription, and the stream must resume from its Last-Event-ID (the event log is in
    # memory, so with a reset and a snapshot: it misses time, never state). The `meteor` stand-in
    # (demo-server) keeps its logins in memory, so it stays up meanwhile; a real Meteor app keeps
    # them in MongoDB. Last, the whole stack down and up: the volume is kept and the bridge finds
    # the session in it, but the new stand-in no longer knows its login (401 session-expired, not
    # invalid-session).
    KEPT=$(curl -s --max-time 10 -X POST "$DEMO/v1/sessions" -d '{"username":"alice","password":"secret"}' | json_field token)
    KEPT_SUB=$(curl -s --max-time 10 -X POST "$DEMO/v1/subscriptions" -H "authorization: Bearer $KEPT" -d '{"name":"tasks"}' | json_field id)
    curl -sN --max-time 3 "$DEMO/v1/events?collections=tasks&snapshot=true" -H "authorization: Bearer $KEPT" >"$WORK/kept-events.txt" 2>/dev/null
    LAST_ID=$(grep '^id: ' "$WORK/kept-events.txt" | tail -n 1 | cut -c5-)
    check "compose: a session (subscription ${KEPT_SUB:-none}) and its stream's last event id (${LAST_ID:-none})" \
        test -n "$KEPT" -a -n "$KEPT_SUB" -a -n "$LAST_ID"
    kept_session() { # kept_session LABEL: the old token, its subscription and its stream after LABEL
        local label=$1 status subs resumed
        check "compose, $label: /readyz 200 again" wait_status "$DEMO/readyz" 200 90
        status=$(status_of "$DEMO/v1/session" -H "authorization: Bearer $KEPT")
        subs=$(curl -s --max-time 10 "$DEMO/v1/subscriptions" -H "authorization: Bearer $KEPT")
        check "compose, $label: the old token still answers (GET /v1/session $status) with its subscription" \
            sh -c "[ '$status' = 200 ] && echo '$subs' | grep -q '\"id\":\"$KEPT_SUB\"'"
        curl -sN --max-time 3 "$DEMO/v1/events?collections=tasks" -H "authorization: Bearer $KEPT" \
            -H "Last-Event-ID: $LAST_ID" -D "$WORK/resumed-head.txt" >"$WORK/resumed-events.txt" 2>/dev/null
        resumed="$(head -n 1 "$WORK/resumed-head.txt" | tr -d '\r'):$(grep '^event: ' "$WORK/resumed-events.txt" | cut -c8- | uniq -c | tr -s ' \n' ' ')"
        check "compose, $label: the stream resumes from Last-Event-ID $LAST_ID ($resumed)" \
            sh -c "head -n 1 '$WORK/resumed-head.txt' | grep -q ' 200' && grep -q '^event: reset' '$WORK/resumed-events.txt' && grep -q '^event: snapshot' '$WORK/resumed-events.txt'"
        LAST_ID=$(grep '^id: ' "$WORK/resumed-events.txt" | tail -n 1 | cut -c5-)
    }
    compose() { timeout 300 podman-compose -p "$RUN_ID" -f deploy/compose.demo.yaml "$@"; }
    # podman-compose 1.0 does not read stop_grace_period: -t gives the same 30 s.
    started=$SECONDS
    compose restart -t 30 ddp-bridge >"$WORK/compose-restart.log" 2>&1
    note "podman-compose restart -t 30 ddp-bridge: exit $?, $((SECONDS - started)) s"
    kept_session "after compose restart"
    # The bridge's container replaced, as for a new image (docker compose up -d --force-recreate
    # --no-deps ddp-bridge; podman-compose 1.0's down and --force-recreate take the dependencies
    # along): stopped, removed, made again by `up`.
    old_id=$(podman inspect -f '{{.Id}}' "$bridge_container" 2>/dev/null)
    started=$SECONDS
    compose stop -t 30 ddp-bridge >"$WORK/compose-stop.log" 2>&1
    timeout 60 podman rm "$bridge_container" >/dev/null 2>&1
    compose up -d --no-build meteor ddp-bridge >"$WORK/compose-up-again.log" 2>&1
    bridge_container=$(podman ps --filter "label=io.podman.compose.project=$RUN_ID" --filter "label=com.docker.compose.service=ddp-bridge" --format '{{.Names}}' | head -n 1)
    new_id=$(podman inspect -f '{{.Id}}' "$bridge_container" 2>/dev/null)
    note "the bridge's container replaced: $((SECONDS - started)) s"
    check "compose: the bridge runs in a new container (${new_id:0:12}, was ${old_id:0:12}) on the same volume" \
        test -n "$old_id" -a -n "$new_id" -a "$new_id" != "$old_id"
    kept_session "in a new container"
    started=$SECONDS
    compose down -t 30 >"$WORK/compose-down-keep.log" 2>&1
    left=$(podman ps -a -q --filter "label=io.podman.compose.project=$RUN_ID" | wc -l)
    volume=$(podman volume ls -q | grep -x "${RUN_ID}_bridge-data")
    check "compose down (without -v): no container left ($left), the volume ${volume:-(gone)} kept" test "$left" = 0 -a -n "$volume"
    compose up -d --no-build meteor ddp-bridge >"$WORK/compose-up2.log" 2>&1
    record_compose_volumes
    note "podman-compose down and up: $((SECONDS - started)) s"
    check "compose, after down and up: /readyz 200 again" wait_status "$DEMO/readyz" 200 90
    body=$(curl -s --max-time 10 "$DEMO/v1/session" -H "authorization: Bearer $KEPT")
    check "compose, after down and up: the session is found in the kept volume and its login tried again ($(echo "$body" | json_field error): the new stand-in forgot it)" \
        test "$(echo "$body" | json_field error)" = session-expired
    if timeout 120 podman-compose -p "$RUN_ID" -f deploy/compose.demo.yaml down -v -t 30 >"$WORK/compose-down.log" 2>&1; then
        COMPOSE_UP=
        left=$(compose_leftovers)
        compose_leftovers remove
        check "podman-compose down: no container left (it left $left volumes and networks, removed now: $(compose_leftovers) left)" \
            test -z "$(podman ps -a -q --filter "label=io.podman.compose.project=$RUN_ID")" -a "$(compose_leftovers)" = 0
    else
        fail "podman-compose down"
    fi
fi

if [ "$failures" -gt 0 ]; then
    echo "container check: $failures FAILED"
    exit 1
fi
echo "container check: all passed"
