import DDP
public import DDPClient
public import Logging
import NIOCore
public import ServiceLifecycle

/// Keeps one anonymous DDP connection to the upstream, so `/readyz` can say whether the Meteor
/// app is reachable right now (turning false and true as it goes down and comes back).
public final class ReadinessProbe: Service, Sendable {
    let client: DDPClient
    private let state: LockedState<(connection: ConnectionState, failure: UpstreamFailure?)>

    /// The probe's backoff never grows past this: it is the bridge's lookout for the upstream's
    /// return, and its connecting again wakes every session waiting out a longer backoff
    /// (``DDPClient/ReconnectPacer/upstreamReturned()``).
    static let maxBackoff: Duration = .seconds(1)

    /// Its failed attempts count in `metrics` (`ddp_bridge_upstream_failures_total`) with the sessions'.
    init(
        upstream: UpstreamSettings, runtime: BridgeRuntime = BridgeRuntime(), logger: Logger, metrics: BridgeMetrics? = nil,
        pacer: ReconnectPacer = .unlimited
    ) {
        var ddp = upstream.ddp
        ddp.reconnect.maxDelay = min(ddp.reconnect.maxDelay, Self.maxBackoff)
        ddp.reconnect.initialDelay = min(ddp.reconnect.initialDelay, Self.maxBackoff)
        let state = LockedState<(connection: ConnectionState, failure: UpstreamFailure?)>((.idle, nil))
        self.state = state
        var logger = logger
        logger[metadataKey: "ddp.probe"] = "readiness"
        client = DDPClient(
            options: upstream.options(protocolConfiguration: ddp, pacer: pacer, runtime: runtime),
            logger: logger,
            events: ClosureEventSink { event in
                if case .stateChanged(let connection) = event {
                    state.withLock { $0 = (connection, connection.failure(previously: $0.failure)) }
                    if case .reconnecting(_, _, let cause) = connection { metrics?.countUpstreamFailure(cause) }
                }
            },
            eventLoop: runtime.eventLoopGroup.any())
    }

    public var connection: ConnectionState { state.withLock { $0.connection } }
    /// Why the upstream is not usable (see ``DDP/ConnectionState/failure(previously:)``).
    public var failure: UpstreamFailure? { state.withLock { $0.failure } }

    public var isReady: Bool { Self.isReady(connection) }

    /// Ready means connected (a reconnect in progress is not ready).
    static func isReady(_ connection: ConnectionState) -> Bool {
        if case .connected = connection { return true }
        return false
    }

    /// Runs until shutdown. The client's `run()` returns only when it is closed or cancelled
    /// (nothing the upstream says closes it for good), and a service that returned early would
    /// end the service group, so the probe waits for shutdown whatever happens.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            await self.client.run()
            try? await gracefulShutdown()
        }
    }
}
