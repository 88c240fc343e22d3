# syntax=docker/dockerfile:1
# ddp-bridge: a release build on the Swift 6 image, run on a slim Debian as a non-root user.
# Configure it with DDP_BRIDGE_* environment variables (see `ddp-bridge serve --help`).

FROM swift:6.1-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so they are cached while only the sources change.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product ddp-bridge --static-swift-stdlib \
    && install -D "$(swift build -c release --show-bin-path)/ddp-bridge" /out/ddp-bridge

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 zlib1g ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin ddp
COPY --from=build /out/ddp-bridge /usr/local/bin/ddp-bridge
# The web console, served at / (DDP_BRIDGE_PUBLIC_DIR=none serves no console).
COPY public /app/public
WORKDIR /app
USER 10001:10001
ENV DDP_BRIDGE_HOST=0.0.0.0 \
    DDP_BRIDGE_PORT=8080 \
    DDP_BRIDGE_PUBLIC_DIR=/app/public
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${DDP_BRIDGE_PORT}/healthz" || exit 1
ENTRYPOINT ["/usr/local/bin/ddp-bridge"]
CMD ["serve"]
