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
        abstract: "Run the bridge on an embedded demo DDP server with sample data.",
        discussion: HelpText.wrap(
            """
            No Meteor app is needed: the demo's DDP server has users alice (password secret) and \
            bob (hunter2), and a task that changes every 5 seconds.

            Settings, as for serve (each also read from its DDP_BRIDGE_ variable; a flag wins over \
            it; the upstream is the demo's own, and it logs at notice unless told otherwise):
            """) + "\n" + Settings.helpText(excluding: ["upstream"])
    )

    @Option(help: "Port of the embedded DDP server (0, the default, picks a free one: 3000 is often a Meteor app's).")
    var ddpPort: Int = 0

    @Flag(
        inversion: .prefixedNo, exclusivity: .chooseLast,
        help: "Also follow the demo's tasks as a DDP client and print their live changes (the last of the two given wins).")
    var watch = false

    @Argument(
        parsing: .allUnrecognized, help: ArgumentHelp("The bridge's settings as --name value, as for serve (listed below).", valueName: "settings"))
    var arguments: [String] = []

    /// What the demo sets unless told otherwise: quieter logs, and two demo publications
    /// readable without a session (`/v1/public/…`). Not the ticker: its parameters set its
    /// rate, and a public reader must not be able to ask the demo for a million changes a second.
    static let presets = ["log-level": "notice", "public-publications": "tasks(*),typed"]

    /// The command line is checked while it is parsed, so an unknown setting is reported with
    /// the demo's usage; the values are checked, from every source, before anything starts.
    func validate() throws {
        _ = try flags()
    }

    /// The command line's settings; only the upstream is the demo's own.
    func flags() throws -> [String: String] {
        do throws(Settings.Invalid) {
            var flags = try Settings.flags(from: arguments, otherFlags: ["ddp-port", "watch", "no-watch"])
            guard flags["upstream"] == nil else {
                throw Settings.Invalid(description: "--upstream: the demo runs its own DDP server; use serve for another")
            }
            guard (0...65_535).contains(ddpPort) else { throw Settings.Invalid(description: "--ddp-port must be from 0 to 65535, got \(ddpPort)") }
            // The settings are checked against a stand-in port when the DDP server's is chosen at start (0).
            flags["upstream"] = "ws://127.0.0.1:\(ddpPort == 0 ? 1 : ddpPort)/websocket"
            return flags
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let loaded = try await LoadedSettings.load(for: Self.self, flags: flags(), presets: Self.presets)
        let settings = loaded.settings
        let (logger, level, tracing) = try loaded.startLogging(for: Self.self)
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: logger)
        try await DemoDataSet.seed(server.core)
        let upstreamPort = try await listening(on: "127.0.0.1:\(ddpPort)", setBy: "--ddp-port") { try await server.start(port: ddpPort) }
        let upstream = "ws://127.0.0.1:\(upstreamPort)/websocket"
        var bridgeConfiguration = settings.configuration
        bridgeConfiguration.upstream = upstream
        // The demo's methods as MCP tools, unless a tools file was given.
        if bridgeConfiguration.mcpTools.methods.isEmpty { bridgeConfiguration.mcpTools = try MCPToolCatalog.parse(DemoDataSet.mcpTools) }
        let host = settings.host
        let port = settings.port
        let consoleLine =
            bridgeConfiguration.console != .none
            ? "web console:     open http://\(host):PORT/ in a browser" : "web console:     not served (--public-dir none)"
        let watching = watch
        let (application, registry) = BridgeApplication.make(
            configuration: bridgeConfiguration,
            http: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "ddp-bridge"),
            logger: logger,
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                Self.say(
                    """
                    demo DDP server: \(upstream) (users alice/secret, bob/hunter2)
                    ddp-bridge:      http://\(host):\(bound)
                    \(consoleLine.replacingOccurrences(of: "PORT", with: String(bound)))

                    try (a session for alice, its token kept in $TOKEN):
                      export TOKEN=$(curl -s -X POST http://\(host):\(bound)/v1/sessions -H 'content-type: application/json' -d '{"username":"alice","password":"secret"}' | sed -E 's/.*"token":"([^"]+)".*/\\1/')
                      curl -s -X POST http://\(host):\(bound)/v1/subscriptions -H "authorization: Bearer $TOKEN" -d '{"name":"tasks"}'
                      curl -s -G http://\(host):\(bound)/v1/collections/tasks -H "authorization: Bearer $TOKEN" --data-urlencode 'selector={"listId":"inbox"}'
                    """ + (watching ? "\nlive client (--watch): each change of the demo's tasks, as a DDP client receives it, below\n" : ""))
            })
        var services: [any Service] =
            [tracing].compactMap { $0 } + [
                LiveSettings(sources: loaded.sources, level: level, logger: logger), application, TaskToggler(core: server.core)
            ]
        if watch {
            var options = WatchOptions()
            // The tasks change every 5 s, and whenever a client writes one: a line each, so the
            // banner above stays in view (a ticker would print a line a second).
            options.subscriptions = ["tasks"]
            options.username = "alice"
            options.password = "secret"
            services.append(Watcher(url: upstream, options: options, logger: logger))
        }
        services.append(registry.shutdownGrace)  // last: told of a shutdown first
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await listening(on: "\(host):\(port)", setBy: LoadedSettings.listeners(settings)) { try await group.run() }
        } catch {
            await server.stop()
            throw error
        }
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
