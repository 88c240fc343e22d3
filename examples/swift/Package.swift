// swift-tools-version: 6.0
// A small consumer of ddp-bridge's event stream, in a package of its own (no dependencies).
import PackageDescription

let package = Package(
    name: "SSEConsumer",
    platforms: [.macOS(.v13)],
    targets: [
        .executableTarget(
            name: "sse-consumer",
            path: "Sources/SSEConsumer",
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        )
    ]
)
