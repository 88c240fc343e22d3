import ArgumentParser
import Bridge
import DDP
import DDPServer
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Starts the embedded demo DDP server and the bridge in front of it, so a newcomer sees
/// the REST API work without a Meteor app.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the bridge on an embedded demo DDP server with sample data (no Meteor app needed)."
    )

    @Option(help: "Address the bridge listens on.")
    var host: String = "127.0.0.1"

    @Option(help: "Port of the bridge's HTTP server.")
    var port: Int = 8080

    @Option(help: "Port of the embedded DDP server (0 picks a free one).")
    var ddpPort: Int = 3000

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    @Flag(help: "Also follow the demo publications and print their live changes.")
    var watch = false

    @Option(help: "Session creations and logins allowed per client address per 10 seconds.")
    var loginRateLimit: Int = 10

    @Option(help: "Folder of the web console served at / (run from the project's root to find 'public').")
    var publicDir: String = "public"

    func run() async throws {
        let logger = try makeLogger(logLevel)
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: logger)
        try await DemoDataSet.seed(server.core)
        let upstreamPort = try await server.start(port: ddpPort)
        let upstream = "ws://127.0.0.1:\(upstreamPort)/websocket"
        guard loginRateLimit > 0 else { throw ValidationError("--login-rate-limit must be at least 1") }
        var bridgeConfiguration = BridgeConfiguration(upstream: upstream)
        bridgeConfiguration.loginRateLimit = (loginRateLimit, .seconds(60))
        bridgeConfiguration.publicFolder = Settings.existingFolder(publicDir)
        let consoleLine = bridgeConfiguration.publicFolder == nil
            ? "web console:     not served (no folder '\(publicDir)'; see --public-dir)"
            : "web console:     open http://\(host):PORT/ in a browser"
        let (application, registry) = BridgeApplication.make(
            configuration: bridgeConfiguration,
            http: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "ddp-bridge"),
            logger: logger,
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                Self.say("""
                    demo DDP server: \(upstream) (users alice/secret, bob/hunter2)
                    ddp-bridge:      http://\(host):\(bound)
                    \(consoleLine.replacingOccurrences(of: "PORT", with: String(bound)))

                    try:
                      curl -s -X POST http://\(host):\(bound)/v1/sessions -H 'content-type: application/json' -d '{"username":"alice","password":"secret"}'
                      curl -s -X POST http://\(host):\(bound)/v1/subscriptions -H "authorization: Bearer $TOKEN" -d '{"name":"tasks"}'
                      curl -s "http://\(host):\(bound)/v1/collections/tasks?selector=%7B%22listId%22:%22inbox%22%7D" -H "authorization: Bearer $TOKEN"
                    """)
            })
        var services: [any Service] = [application, TaskToggler(core: server.core)]
        if watch {
            var options = WatchOptions()
            options.subscriptions = ["tasks", "ticker:[1,0]"]
            options.username = "alice"
            options.password = "secret"
            services.append(Watcher(url: upstream, options: options, logger: logger))
        }
        services.append(registry.shutdownGrace)  // last: told of a shutdown first
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        await server.stop()
    }

    static func say(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}

/// Every few seconds a task is toggled, so there is always something changing.
struct TaskToggler: Service {
    let core: ServerCore

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var done = false
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(5))
                done.toggle()
                try await core.update("tasks", ["_id": "task-a1"], ["$set": ["done": .bool(done)]])
            }
        }
    }
}

/// Prints the live changes of the demo publications (`--watch`).
struct Watcher: Service {
    let url: String
    let options: WatchOptions
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            try await watch(url: url, options: options, logger: logger)
        }
    }
}
