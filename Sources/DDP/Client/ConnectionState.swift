/// Where a DDP client connection stands, as consumers see it.
public enum ConnectionState: Sendable, Equatable {
    case idle
    case connecting(attempt: Int)
    case connected(session: String, version: String)
    /// Waiting `delay` before attempt `attempt` (1 for the first retry).
    case reconnecting(attempt: Int, delay: Duration)
    /// Stopped for good: closed by the owner, or no common protocol version.
    case closed(reason: String)
}
