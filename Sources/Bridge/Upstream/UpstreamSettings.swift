import DDP
import DDPClient

/// The part of the configuration every upstream connection of the bridge is made with (a
/// session's, a public pool connection's, the readiness probe's): where the Meteor app is, how it
/// is reached, and the DDP settings.
struct UpstreamSettings: Sendable, Equatable {
    /// `ws://host:port/websocket` or `wss://…`.
    var url: String
    var tls: DDPClientOptions.TLS
    /// Negotiate `permessage-deflate`.
    var compression: Bool
    /// Largest message accepted from the upstream, in bytes.
    var maxMessageSize: Int
    /// Heartbeats, reconnect backoff, the most documents a connection's cache may hold.
    var ddp: DDPClientConfiguration

    /// A connection's options, with `protocolConfiguration` (``ddp`` as the connection adapts
    /// it), paced by `pacer`, on the runtime's clock and failure log.
    func options(protocolConfiguration: DDPClientConfiguration, pacer: ReconnectPacer, runtime: BridgeRuntime) -> DDPClientOptions {
        DDPClientOptions(
            url: url, protocolConfiguration: protocolConfiguration, tls: tls, compression: compression, maxMessageSize: maxMessageSize,
            pacer: pacer, failureLog: runtime.upstreamFailureLog, clock: runtime.clock)
    }
}
