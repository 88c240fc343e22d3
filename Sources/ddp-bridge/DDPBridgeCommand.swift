import ArgumentParser
import Bridge
import Foundation
import Logging
import NIOCore

@main
struct DDPBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ddp-bridge",
        abstract: "Expose a Meteor app's DDP data as REST and Server-Sent Events.",
        discussion: HelpText.wrap(
            """
            `ddp-bridge serve --upstream ws://meteor:3000/websocket` serves REST and Server-Sent \
            Events for that Meteor app; `ddp-bridge demo` runs it on an embedded demo DDP server; \
            `ddp-bridge demo-server` serves only that DDP server (a stand-in for a Meteor app); \
            `ddp-bridge check --upstream ws://meteor:3000/websocket` says whether the bridge can \
            use that app, and what to fix if not.
            """),
        version: BuildInfo.description,
        subcommands: [ServeCommand.self, DemoCommand.self, DemoServerCommand.self, WatchCommand.self, CheckCommand.self, ProbeCommand.self],
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

/// Runs `body`; a listener it could not bind ends the process with status 1 and one line naming
/// the address, the setting that chooses it and the cause (`address already in use`).
func listening<T>(on address: String, setBy setting: String, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as IOError {
        FileHandle.standardError.write(
            Data("ddp-bridge: cannot listen on \(address) (\(setting)): \(String(cString: strerror(error.errnoCode)).lowercased())\n".utf8))
        throw ExitCode(1)
    }
}
