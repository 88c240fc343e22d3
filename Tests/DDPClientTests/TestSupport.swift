import DDP
import DDPClient
import DDPServer
import FaultKit
import Foundation
import Logging
import Synchronization

/// A demo-data DDP server on a free loopback port.
func startDemoServer(_ configure: (inout DDPServerConfiguration) -> Void = { _ in }) async throws -> LocalDDPServer {
    var configuration = DemoDataSet.configuration
    configure(&configuration)
    let server = LocalDDPServer(configuration: configuration, logger: Logger(label: "test-server"))
    try await DemoDataSet.seed(server.core)
    try await server.start()
    return server
}

/// Everything a client reported, for assertions, and what a test waits on: each event is a
/// signal (``changes``), so a wait checks its condition as the client reports, not on a timer.
final class ClientEventRecorder: Sendable {
    private let events = Mutex<[DDPClientEvent]>([])
    /// Signalled after each event (also by tests, for what they record beside it).
    let changes = ChangeSignal()

    func append(_ event: DDPClientEvent) {
        events.withLock { $0.append(event) }
        changes.signal()
    }
    var all: [DDPClientEvent] { events.withLock { $0 } }
    func clear() { events.withLock { $0 = [] } }

    /// Waits (bounded) until `condition` holds for the events reported so far.
    func wait(_ what: String, timeout: Duration = .seconds(10), until condition: ([DDPClientEvent]) -> Bool) async throws {
        try await changes.wait(what, timeout: timeout) { condition(all) }
    }

    /// Waits (bounded) until `condition` holds, checked now and after each event: for what the
    /// client's own state says (a state it reports, read on its actor after the report).
    func waitFor(_ what: String, timeout: Duration = .seconds(10), until condition: () async throws -> Bool) async throws {
        try await changes.wait(what, timeout: timeout, until: condition)
    }

    /// How many times the client reported `reconnecting`.
    var reconnects: Int { states.filter { if case .reconnecting = $0 { true } else { false } }.count }

    var documentChanges: [DocumentChange] {
        all.flatMap { if case .documentsChanged(let c) = $0 { return c.map(\.change) } else { return [] } }
    }

    var states: [ConnectionState] {
        all.compactMap { if case .stateChanged(let s) = $0 { return s } else { return nil } }
    }
}

/// Runs a client for the duration of `body`, then closes it.
func withClient<T: Sendable>(
    _ url: String, configure: (inout DDPClientOptions) -> Void = { _ in },
    _ body: @Sendable (DDPClient, ClientEventRecorder) async throws -> T
) async throws -> T {
    var options = DDPClientOptions(url: url)
    options.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .milliseconds(50), multiplier: 2, maxDelay: .milliseconds(400))
    configure(&options)
    let log = ClientEventRecorder()
    let client = DDPClient(options: options, logger: Logger(label: "test-client"), events: ClosureEventSink { log.append($0) })
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        let result: Result<T, any Error>
        do {
            try await log.waitFor("connected") { await client.isConnected }
            result = .success(try await body(client, log))
        } catch {
            result = .failure(error)
        }
        await client.close()
        for try await _ in group {}
        return try result.get()
    }
}
