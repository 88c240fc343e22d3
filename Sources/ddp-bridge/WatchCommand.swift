import ArgumentParser

/// Follows publications of a real DDP server and prints the live changes.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Connect to a DDP server and print live changes of the given publications."
    )

    @Option(help: "The upstream DDP WebSocket URL, e.g. ws://localhost:3000/websocket (or set DDP_BRIDGE_UPSTREAM).")
    var upstream: String?

    @OptionGroup var options: WatchOptions

    func run() async throws {
        guard let url = upstream ?? ProcessInfo.processInfo.environment["DDP_BRIDGE_UPSTREAM"] else {
            throw ValidationError("set --upstream or DDP_BRIDGE_UPSTREAM")
        }
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else { throw ValidationError("--upstream must be a ws:// or wss:// URL, got '\(url)'") }
        try await watch(url: url, options: options, logger: try makeLogger(options.logLevel))
    }
}

import Foundation
