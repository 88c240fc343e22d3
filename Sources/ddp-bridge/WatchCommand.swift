import ArgumentParser
import Bridge
import DDP
import DDPClient
import Foundation
import Logging

/// Follows publications of a real DDP server and prints the live changes.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Follow publications of a DDP server and print their live changes."
    )

    @Option(help: "The upstream DDP WebSocket URL, e.g. ws://localhost:3000/websocket (or set DDP_BRIDGE_UPSTREAM).")
    var upstream: String?

    @OptionGroup var options: WatchOptions

    func run() async throws {
        guard let url = upstream ?? ProcessInfo.processInfo.environment["DDP_BRIDGE_UPSTREAM"] else {
            throw ValidationError("set --upstream or DDP_BRIDGE_UPSTREAM")
        }
        if let problem = Settings.upstreamURLProblem(url) { throw ValidationError("--upstream \(problem)") }
        try await watch(url: url, options: options, logger: try makeLogger(options.logLevel))
    }
}

/// Prints what a client reports, one line per event, as EJSON.
struct ChangePrinter: Sendable {
    func print(_ event: DDPClientEvent) {
        switch event {
        case .stateChanged(let state): line("connection", describe(state))
        case .documentsChanged(let changes):
            for change in changes {
                switch change.change {
                case .added(let c, let id, let fields): line("added", "\(c)/\(id) \(EJSON.object(fields))")
                case .changed(let c, let id, let fields, let cleared, _):
                    line("changed", "\(c)/\(id) \(EJSON.object(fields))" + (cleared.isEmpty ? "" : " cleared \(cleared)"))
                case .removed(let c, let id, _): line("removed", "\(c)/\(id)")
                case .moved(let c, let id, let before): line("moved", "\(c)/\(id) before \(before ?? "end")")
                }
            }
        case .subscriptionReady(let id): line("ready", id)
        case .subscriptionStopped(let id, let error): line("nosub", id + (error.map { " \($0)" } ?? ""))
        case .loginChanged(let login): line("user", login?.userId ?? "(logged out)")
        case .resumeRefused(let error): line("resume", "refused: \(error)")
        case .protocolError(let reason): line("error", reason)
        }
    }

    private func describe(_ state: ConnectionState) -> String {
        switch state {
        case .idle: "idle"
        case .connecting(let attempt): attempt == 0 ? "connecting" : "connecting (attempt \(attempt))"
        case .connected(let session, let version): "connected (session \(session), DDP \(version))"
        case .reconnecting(let attempt, let delay, let cause):
            "reconnecting in \(String(format: "%.1f", delay.seconds)) s (attempt \(attempt))" + (cause.map { ": \($0)" } ?? "")
        case .closed(let reason): "closed: \(reason)"
        }
    }

    private func line(_ kind: String, _ text: String) {
        let padded = kind.padding(toLength: 10, withPad: " ", startingAt: 0)
        FileHandle.standardOutput.write(Data("\(padded) \(text)\n".utf8))
    }
}

/// Connects, logs in, subscribes and prints changes until cancelled.
func watch(url: String, options: WatchOptions, logger: Logger) async throws {
    let printer = ChangePrinter()
    let client = DDPClient(options: DDPClientOptions(url: url), logger: logger, events: ClosureEventSink { printer.print($0) })
    let subscriptions = try options.subscriptions.map(WatchOptions.parseSubscription)
    let password = options.password ?? ProcessInfo.processInfo.environment["DDP_BRIDGE_PASSWORD"]
    if options.username != nil && password == nil { throw ValidationError("--username needs --password or DDP_BRIDGE_PASSWORD") }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        do {
            if let username = options.username, let password {
                _ = try await client.login(.password(user: .username(username), password: password))
            }
            for (name, params) in subscriptions {
                try await client.subscribe(name, params: params)
            }
            while true { try await Task.sleep(for: .seconds(3600)) }
        } catch {
            await client.close(reason: "stopped")
            throw error
        }
    }
}
