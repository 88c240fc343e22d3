import DDP
public import DDPClient
public import Logging
public import ServiceLifecycle

/// Keeps one anonymous DDP connection to the upstream, so `/readyz` can say whether the Meteor
/// app is reachable right now (turning false and true as it goes down and comes back).
public final class ReadinessProbe: Service, Sendable {
    let client: DDPClient
    private let state: LockedState<ConnectionState>

    public init(configuration: BridgeConfiguration, logger: Logger) {
        let state = LockedState(ConnectionState.idle)
        self.state = state
        var logger = logger
        logger[metadataKey: "ddp.probe"] = "readiness"
        client = DDPClient(
            options: DDPClientOptions(
                url: configuration.upstream, protocolConfiguration: configuration.ddp,
                tls: configuration.upstreamTLS, compression: configuration.upstreamCompression),
            logger: logger,
            events: ClosureEventSink { event in
                if case .stateChanged(let connection) = event { state.withLock { $0 = connection } }
            })
    }

    public var connection: ConnectionState { state.withLock { $0 } }

    public var isReady: Bool { Self.isReady(connection) }

    /// Ready means connected (a reconnect in progress is not ready).
    static func isReady(_ connection: ConnectionState) -> Bool {
        if case .connected = connection { return true }
        return false
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown { await self.client.run() }
    }
}
