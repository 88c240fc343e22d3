# syntax=docker/dockerfile:1
# Build: a release build of ddp-bridge with the Swift 6 toolchain.
FROM swift:6.1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product ddp-bridge --static-swift-stdlib \
    && cp "$(swift build -c release --show-bin-path)/ddp-bridge" /ddp-bridge

# Runtime: a slim Debian with the shared libraries the binary links, as a non-root user.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libssl3 zlib1g ca-certificates && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home ddp
COPY --from=build /ddp-bridge /usr/local/bin/ddp-bridge
USER ddp
ENTRYPOINT ["/usr/local/bin/ddp-bridge"]
CMD ["demo", "--ddp-port", "3000"]
