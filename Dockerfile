# syntax=docker/dockerfile:1
# ddp-bridge: a release build on the Swift 6.3 image, run on a slim Debian as a non-root user.
# Configure it with DDP_BRIDGE_* environment variables (see `ddp-bridge serve --help`).
#
#   docker build --build-arg GIT_COMMIT=$(git rev-parse --short HEAD) -t ddp-bridge .
#
# The base images are build arguments, so the same file builds with the official images
# anywhere and with local stand-ins where no registry is reachable (scripts/container-check.sh
# makes them: a Debian root with the Swift toolchain, and a minimal Debian root):
#
#   podman build --format docker --build-arg BUILD_IMAGE=localhost/ddp-bridge-swift:6.3.1 \
#       --build-arg RUNTIME_IMAGE=localhost/ddp-bridge-base:bookworm -t ddp-bridge .
#
# A build image must have Swift 6.1 or later on its PATH and git; the runtime image must be
# Debian bookworm (or a derivative: apt-get, libssl3) to match the build image's C libraries.
ARG BUILD_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
# The C libraries the package links (libcrypto, zlib) and pkg-config to find them; installed
# only when missing (a stand-in build image may carry them already).
RUN dpkg -s libssl-dev zlib1g-dev pkg-config >/dev/null 2>&1 \
    || (apt-get update \
        && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev pkg-config \
        && rm -rf /var/lib/apt/lists/*)
WORKDIR /src
# Dependencies first, so they are cached while only the sources change. The build folder is
# a cache mount: a rebuild after a change to the sources recompiles only what changed.
COPY Package.swift ./
RUN --mount=type=cache,id=ddp-bridge-build,target=/src/.build,sharing=locked \
    swift package resolve
COPY Plugins ./Plugins
COPY Sources ./Sources
COPY Tests ./Tests
# The commit being built, for `ddp-bridge --version` and the ddp_bridge_build_info metric: the
# context has no .git, so the BuildInfo plugin reads it from .build-commit, written here
# (`--build-arg GIT_COMMIT=$(git rev-parse --short HEAD)`; unknown when not given). Declared
# here, so a new commit does not invalidate the dependency layers above.
ARG GIT_COMMIT=unknown
# Without its DWARF (a third of the binary, 65 MB): a crash's backtrace still names functions.
RUN --mount=type=cache,id=ddp-bridge-build,target=/src/.build,sharing=locked \
    printf '%s\n' "$GIT_COMMIT" > .build-commit \
    && swift build -c release --product ddp-bridge --static-swift-stdlib \
    && install -D "$(swift build -c release --show-bin-path)/ddp-bridge" /out/ddp-bridge \
    && strip --strip-debug /out/ddp-bridge

FROM ${RUNTIME_IMAGE} AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 zlib1g ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ddp \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin ddp \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/ddp-bridge
COPY --from=build /out/ddp-bridge /usr/local/bin/ddp-bridge
WORKDIR /app
USER 10001:10001
# The embedded session store (sessions.sqlite, written when DDP_BRIDGE_SESSION_KEY is set)
# lives in the data folder: a volume, so sessions survive a new container.
ENV DDP_BRIDGE_HOST=0.0.0.0 \
    DDP_BRIDGE_PORT=8080 \
    DDP_BRIDGE_DATA_DIR=/var/lib/ddp-bridge
VOLUME /var/lib/ddp-bridge
EXPOSE 8080
# SIGTERM starts a graceful shutdown: new sessions are refused, requests and streams in flight
# get DDP_BRIDGE_SHUTDOWN_GRACE (10 s by default) to finish, then the process exits with 0.
# Give the container a longer stop timeout than that grace (docker stop -t / stop_grace_period).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${DDP_BRIDGE_PORT}/healthz" || exit 1
# Before (or beside) serve, the same image checks the app it is given, once, and says what to fix:
#   docker run --rm -e DDP_BRIDGE_UPSTREAM=ws://your-app:3000/websocket ddp-bridge check
ENTRYPOINT ["/usr/local/bin/ddp-bridge"]
CMD ["serve"]
