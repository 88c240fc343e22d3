/// Where a DDP client connection stands, as consumers see it.
public enum ConnectionState: Sendable, Equatable {
    case idle
    case connecting(attempt: Int)
    case connected(session: String, version: String)
    /// Waiting `delay` before attempt `attempt` (1 for the first retry); `reason` says why the
    /// last attempt ended when the protocol knows (an unusable `failed`, a handshake or
    /// heartbeat deadline, an oversized message), `nil` for a plain transport failure.
    case reconnecting(attempt: Int, delay: Duration, reason: String?)
    /// Stopped for good, by the owner only: nothing the upstream says closes a connection for good.
    case closed(reason: String)
}
