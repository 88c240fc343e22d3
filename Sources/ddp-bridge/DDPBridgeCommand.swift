import ArgumentParser
import Bridge
import Logging

@main
struct DDPBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ddp-bridge",
        abstract: "Expose a Meteor application's DDP data as REST and Server-Sent Events.",
        discussion: """
            `ddp-bridge serve --upstream ws://meteor:3000/websocket` serves REST and Server-Sent
            Events for that Meteor app; `ddp-bridge demo` runs it on an embedded demo DDP server;
            `ddp-bridge demo-server` serves only that DDP server (a stand-in for a Meteor app).
            """,
        version: BridgeApplication.version,
        subcommands: [ServeCommand.self, DemoCommand.self, DemoServerCommand.self, WatchCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}

/// The process logger at the level a command was given.
func makeLogger(_ level: String) throws -> Logger {
    guard let parsed = Logger.Level(rawValue: level) else {
        throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
    }
    var logger = Logger(label: "ddp-bridge")
    logger.logLevel = parsed
    return logger
}
