import ArgumentParser
import DDPServer
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// Serves only the embedded demo DDP server (sample data, users alice and bob), as a stand-in
/// for a Meteor app: for containers, replicas and failover tests that run bridges of their own.
struct DemoServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-server",
        abstract: "Serve only the demo DDP server (a stand-in for a Meteor app)."
    )

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free one; the chosen port is printed).")
    var port: Int = 3000

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    @Flag(help: "Toggle a task every few seconds, so there is always something changing.")
    var toggle = false

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be from 0 to 65535, got \(port)") }
    }

    func run() async throws {
        let logger = try makeLogger(logLevel)
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: logger)
        try await DemoDataSet.seed(server.core)
        let bound = try await listening(on: "\(host):\(port)", setBy: "--port") { try await server.start(host: host, port: port) }
        DemoCommand.say("demo DDP server: ws://\(host):\(bound)/websocket (users alice/secret, bob/hunter2)")
        let services: [any Service] = toggle ? [TaskToggler(core: server.core)] : [UntilShutdown()]
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        await server.stop()
    }
}

/// A service that only waits for graceful shutdown.
struct UntilShutdown: Service {
    func run() async throws {
        try? await gracefulShutdown()
    }
}
