// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility")
]

let package = Package(
    name: "ddp-bridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ddp-bridge", targets: ["ddp-bridge"]),
        .library(name: "DDP", targets: ["DDP"]),
        .library(name: "DDPClient", targets: ["DDPClient"]),
        .library(name: "DDPServer", targets: ["DDPServer"]),
        .library(name: "Timing", targets: ["Timing"])
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.0"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.0"),
        // zlib for permessage-deflate on the upstream (the same library swift-websocket's compression uses).
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.29.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        // Settings from flags, DDP_BRIDGE_* variables, a YAML or JSON file (reloaded while running) and secrets files.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: [.defaults, "YAML", "Reloading"]),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.0.0"),
        // Traces: spans in the code (swift-distributed-tracing), exported as OTLP over HTTP only.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Session stores: SQLite embedded (the default), PostgreSQL shared by replicas.
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0")
    ],
    targets: [
        // libcrypto from the system (libssl-dev): SHA-256 digests, secure random bytes, AES-256-GCM.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // EJSON, DDP messages, document cache and the client state machine. No sockets.
        .target(
            name: "DDP",
            dependencies: ["CLibCrypto", .product(name: "HashTreeCollections", package: "swift-collections")],
            swiftSettings: swiftSettings
        ),
        // The one clock (instants, timers, sleeps; a driven one for tests) and the deadline primitive.
        .target(
            name: "Timing",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        // The WebSocket shell around the DDP state machine.
        .target(
            name: "DDPClient",
            dependencies: [
                "DDP",
                "Timing",
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log")
            ],
            swiftSettings: swiftSettings
        ),
        // An in-process DDP server that follows Meteor's server (tests, benchmarks, demo).
        .target(
            name: "DDPServer",
            dependencies: [
                "DDP",
                "Timing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSCompression", package: "hummingbird-websocket"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
            ],
            swiftSettings: swiftSettings
        ),
        // Where sessions are kept between lives: the SessionStore protocol, its SQLite and PostgreSQL backends.
        .target(
            name: "BridgeStore",
            dependencies: [
                "DDP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio")
            ],
            swiftSettings: swiftSettings
        ),
        // Sessions, REST, SSE (later issues).
        .target(
            name: "Bridge",
            dependencies: [
                "DDP",
                "CLibCrypto",
                "DDPClient",
                "BridgeStore",
                "Timing",
                .product(name: "HashTreeCollections", package: "swift-collections"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel")
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildInfo", "EmbeddedDocuments"]
        ),
        // Records the commit a build is made from (BuildInfo.commit: --version, ddp_bridge_build_info).
        .plugin(name: "BuildInfo", capability: .buildTool()),
        // Builds openapi.yaml and openapi.json into the binary (served at /openapi.yaml, /openapi.json).
        .plugin(name: "EmbeddedDocuments", capability: .buildTool()),
        .executableTarget(
            name: "ddp-bridge",
            dependencies: [
                "DDP",
                "DDPClient",
                "DDPServer",
                "Bridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing")
            ],
            swiftSettings: swiftSettings,
            // The release binary is static: the Swift runtime, Foundation, glibc, libstdc++, zlib
            // and the system's libcrypto (libssl-dev's libcrypto.a) are linked in, so it runs on any
            // Linux of its architecture with nothing installed, and the image is that file on an
            // empty base (docs/OPERATIONS.md, "The release package").
            linkerSettings: [.unsafeFlags(["-static-executable"], .when(platforms: [.linux], configuration: .release))]
        ),
        // The benchmark harness (release build: scripts/bench.sh): micro-benchmarks of the hot
        // paths, and SSE, REST and session-scale figures against the in-process DDP server.
        .executableTarget(
            name: "ddp-bench",
            dependencies: [
                "DDP",
                "DDPClient",
                "DDPServer",
                "Bridge",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DDPTests",
            dependencies: ["DDP", .product(name: "HashTreeCollections", package: "swift-collections")],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DDPServerTests",
            dependencies: [
                "DDP",
                "DDPServer",
                "FaultKit",
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "Logging", package: "swift-log")
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // Fault injection for tests: a scriptable fake upstream and a faulty TCP proxy.
        .target(
            name: "FaultKit",
            dependencies: [
                "DDP",
                "Timing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSCompression", package: "hummingbird-websocket"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
            ],
            path: "Tests/FaultKit",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BridgeTests",
            dependencies: [
                "DDP",
                .product(name: "HashTreeCollections", package: "swift-collections"),
                "Bridge",
                "BridgeStore",
                "DDPServer",
                "FaultKit",
                "Timing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing")
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // The command line as a user meets it: errors with their command's usage, help text.
        .testTarget(
            name: "DDPBridgeCommandTests",
            dependencies: [
                "ddp-bridge",
                "Bridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TimingTests",
            dependencies: [
                "Timing",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DDPClientTests",
            dependencies: [
                "DDP",
                .product(name: "HashTreeCollections", package: "swift-collections"),
                "DDPClient",
                "DDPServer",
                "FaultKit",
                "Timing",
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log")
            ],
            swiftSettings: swiftSettings
        )
    ]
)
