import Bridge
import DDP
import DDPClient
import DDPServer
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

// The in-process upstream and bridge each part measures against.

let quietLogger: Logger = {
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    return logger
}()

/// The in-process demo DDP server.
func startUpstream() async throws -> LocalDDPServer {
    let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: quietLogger)
    try await DemoDataSet.seed(server.core)
    try await server.start()
    return server
}

/// The project's DDP client, connected to `url` (bounded wait); cancel the task to stop it.
func connectedClient(url: String) async throws -> (DDPClient, Task<Void, Never>) {
    let client = DDPClient(options: DDPClientOptions(url: url), logger: quietLogger)
    let runner = Task { await client.run() }
    let deadline = ContinuousClock.now + .seconds(20)
    while await !client.isConnected {
        guard ContinuousClock.now < deadline else {
            runner.cancel()
            throw BenchError("the DDP client did not connect")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
    return (client, runner)
}

/// A Hummingbird application run in its own service group, on a loopback port.
struct RunningServer: Sendable {
    let port: Int
    let group: ServiceGroup
    let task: Task<Void, any Error>

    static func start<A: ApplicationProtocol>(_ make: (@escaping @Sendable (any Channel) async -> Void) -> A, extra: [any Service] = []) async throws
        -> RunningServer
    {
        let (ports, sink) = AsyncStream<Int>.makeStream()
        let application = make { channel in sink.yield(channel.localAddress?.port ?? 0) }
        let group = ServiceGroup(configuration: .init(services: [application] + extra, logger: quietLogger))
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw BenchError("a server did not start") }
        return RunningServer(port: port, group: group, task: task)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// The bridge in this process, in front of `upstream`.
func startBridge(upstream: String, configure: (inout BridgeConfiguration) -> Void = { _ in }) async throws -> RunningServer {
    var configuration = BridgeConfiguration(upstream: upstream)
    configuration.loginRateLimit = (1_000_000, .seconds(10))
    configuration.sessionRateLimit = (1_000_000, .seconds(10))
    configuration.maxSessionsPerAddress = 100_000
    configuration.maxSessions = 100_000
    // The harness's clients share this process and one address: the bridge's connection bounds
    // would count the harness's own sockets' peers.
    configuration.maxConnections = 10_000_000
    configuration.maxConnectionsPerAddress = 10_000_000
    configuration.maxStreamsPerSession = 1_000
    configuration.streamBufferLimit = 64 << 20
    configuration.console = .none
    configure(&configuration)
    return try await RunningServer.start { onRunning in
        BridgeApplication.make(
            configuration: configuration, http: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)), logger: quietLogger,
            onServerRunning: onRunning
        ).application
    }
}
