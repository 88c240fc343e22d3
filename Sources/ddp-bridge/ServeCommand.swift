import ArgumentParser
import Bridge
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Runs the bridge in front of a Meteor app: every setting has a flag and a `DDP_BRIDGE_…`
/// environment variable (the flag wins); bad values stop it at start, naming the setting.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the Meteor app at --upstream as REST and Server-Sent Events.",
        discussion: HelpText.wrap("Settings (each also read from its DDP_BRIDGE_ variable; a flag wins over it):") + "\n" + Settings.helpText()
    )

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings as --name value (listed below).", valueName: "settings"))
    var arguments: [String] = []

    /// The command line is checked while it is parsed, so an unknown setting is reported with
    /// serve's usage; the values are checked, from every source, before anything starts.
    func validate() throws {
        do throws(Settings.Invalid) {
            _ = try Settings.flags(from: arguments)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let loaded = try await LoadedSettings.load(for: Self.self, flags: Settings.flags(from: arguments))
        let settings = loaded.settings
        let (logger, level, tracing) = try loaded.startLogging(for: Self.self)
        let host = settings.host
        let (application, registry) = BridgeApplication.make(
            configuration: settings.configuration,
            http: ApplicationConfiguration(address: .hostname(host, port: settings.port), serverName: "ddp-bridge"),
            logger: logger,
            onServerRunning: { channel in
                logger.notice(
                    "ddp-bridge listening",
                    metadata: [
                        "address": "http://\(host):\(channel.localAddress?.port ?? settings.port)",
                        "upstream": "\(settings.configuration.upstream)"
                    ])
            })
        // The grace service comes last, so it hears of a shutdown first (services stop in reverse).
        let group = ServiceGroup(
            configuration: .init(
                services: [tracing].compactMap { $0 } + [
                    LiveSettings(sources: loaded.sources, level: level, logger: logger), application, registry.shutdownGrace
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await listening(on: "\(host):\(settings.port)", setBy: LoadedSettings.listeners(settings)) { try await group.run() }
    }
}
