/// Where a DDP client connection stands, as consumers see it.
public enum ConnectionState: Sendable, Equatable {
    case idle
    case connecting(attempt: Int)
    case connected(session: String, version: String)
    /// Waiting `delay` before attempt `attempt` (1 for the first retry); `cause` says why the
    /// last attempt ended (refused, a deadline, an upgrade answered with another status, an
    /// unusable `failed`, …), `nil` when nobody could tell.
    case reconnecting(attempt: Int, delay: Duration, cause: UpstreamFailure?)
    /// Stopped for good, by the owner only: nothing the upstream says closes a connection for good.
    case closed(reason: String)
}
