import ArgumentParser
import DDP
import DDPServer
import Foundation

/// Starts the embedded demo DDP server and follows it, so a newcomer sees live data without Meteor.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the embedded demo DDP server and print its live data (no Meteor app needed)."
    )

    @Option(help: "Port of the embedded DDP server (0 picks a free one).")
    var ddpPort: Int = 3000

    @Option(help: "Ticks per second of the demo ticker publication.")
    var tickerRate: Double = 1

    @Option(help: "Stop after this many seconds (0: run until Ctrl-C).")
    var duration: Double = 0

    @OptionGroup var options: WatchOptions

    func run() async throws {
        let logger = try makeLogger(options.logLevel)
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: logger)
        try await DemoDataSet.seed(server.core)
        let port = try await server.start(port: ddpPort)
        FileHandle.standardOutput.write(Data("demo DDP server on ws://127.0.0.1:\(port)/websocket (users alice/secret, bob/hunter2)\n".utf8))
        var watchOptions = options
        if watchOptions.subscriptions.isEmpty {
            watchOptions.subscriptions = ["tasks", "ticker:[\(tickerRate),0]"]
        }
        if watchOptions.username == nil {
            watchOptions.username = "alice"
            watchOptions.password = "secret"
        }
        let chosen = watchOptions
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await watch(url: "ws://127.0.0.1:\(port)/websocket", options: chosen, logger: logger) }
            group.addTask { try await Self.changeTasksNowAndThen(server.core) }
            group.addTask {
                if duration > 0 {
                    try await Task.sleep(for: .seconds(duration))
                } else {
                    await Self.waitForSignal()
                }
            }
            _ = try await group.next()
            group.cancelAll()
        }
        await server.stop()
    }

    /// Every few seconds a task is toggled, so the stream shows `changed` events with details.
    static func changeTasksNowAndThen(_ core: ServerCore) async throws {
        var done = false
        while !Task.isCancelled {
            try await Task.sleep(for: .seconds(5))
            done.toggle()
            try await core.update("tasks", ["_id": "task-a1"], ["$set": ["done": .bool(done)]])
        }
    }

    /// Returns on SIGINT or SIGTERM.
    static func waitForSignal() async {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        let sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber)
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
        for await _ in stream { break }
        sources.forEach { $0.cancel() }
    }
}
