# syntax=docker/dockerfile:1
# ddp-bridge: the self-contained binary made by scripts/package.sh (the Swift runtime linked in,
# the web console and the HTTP contract built in), on a slim Debian, as a non-root user. The
# image holds the same binary as the release tarball; nothing is compiled here.
#
#   scripts/package.sh && docker build -t ddp-bridge .
#
# Configure it with DDP_BRIDGE_* variables, a settings file (DDP_BRIDGE_CONFIG) or mounted
# secrets (DDP_BRIDGE_SECRETS_DIR=/run/secrets); see `ddp-bridge serve --help`. The base image
# is a build argument, so the same file builds with a local stand-in where no registry is
# reachable (scripts/container-check.sh makes one: a minimal Debian root):
#
#   podman build --format docker --build-arg RUNTIME_IMAGE=localhost/ddp-bridge-base:bookworm -t ddp-bridge .
#
# The runtime image must be Debian bookworm or later (or a derivative: apt-get, libssl3), as the
# binary links the system's libcrypto, zlib and glibc.
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 zlib1g ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ddp \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin ddp \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/ddp-bridge
COPY dist/ddp-bridge /usr/local/bin/ddp-bridge
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
# The binary probes itself (`ddp-bridge probe`): no curl in the image.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/ddp-bridge", "probe"]
# Before (or beside) serve, the same image checks the app it is given, once, and says what to fix:
#   docker run --rm -e DDP_BRIDGE_UPSTREAM=ws://your-app:3000/websocket ddp-bridge check
ENTRYPOINT ["/usr/local/bin/ddp-bridge"]
CMD ["serve"]
