# syntax=docker/dockerfile:1
# ddp-bridge: the static binary made by scripts/package.sh (the Swift runtime, Foundation, glibc,
# libcrypto and zlib linked in; the web console and the HTTP contract built in), on an empty
# image, as a non-root user. The image holds the same binary as the release tarball; nothing is
# compiled here, and there is no shell or package manager in it.
#
#   scripts/package.sh && docker build -t ddp-bridge .
#
# Configure it with DDP_BRIDGE_* variables, a settings file (DDP_BRIDGE_CONFIG) or mounted
# secrets (DDP_BRIDGE_SECRETS_DIR=/run/secrets); see `ddp-bridge serve --help`. The few files
# beside the binary are made on BASE_IMAGE, a build argument, so the same file builds with a
# local stand-in where no registry is reachable (scripts/container-check.sh makes one: a minimal
# Debian root):
#
#   podman build --format docker --build-arg BASE_IMAGE=localhost/ddp-bridge-base:bookworm -t ddp-bridge .
ARG BASE_IMAGE=debian:bookworm-slim

# The files the binary reads besides itself: the CA certificates (for a wss:// upstream), the
# user and group 10001 by name, how host names are looked up, /tmp, and the data folder, owned
# by the user (COPY --from keeps owners).
FROM ${BASE_IMAGE} AS files
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/var/lib/ddp-bridge \
    && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
    && echo 'ddp:x:10001:10001:ddp-bridge:/nonexistent:/sbin/nologin' > /rootfs/etc/passwd \
    && echo 'ddp:x:10001:' > /rootfs/etc/group \
    && echo 'hosts: files dns' > /rootfs/etc/nsswitch.conf \
    && chmod 1777 /rootfs/tmp \
    && chown 10001:10001 /rootfs/var/lib/ddp-bridge \
    && chmod 0750 /rootfs/var/lib/ddp-bridge

FROM scratch
COPY --from=files /rootfs/ /
# Owned by the user however the builder copies owners (podman keeps them; say it for any).
COPY --from=files --chown=10001:10001 /rootfs/var/lib/ddp-bridge /var/lib/ddp-bridge
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
