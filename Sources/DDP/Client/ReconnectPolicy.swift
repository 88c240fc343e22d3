import Foundation

/// How long to wait before reconnecting: exponential backoff with "full jitter" by default
/// (a uniform draw between zero and the backoff), so clients dropped together (a load
/// balancer or Meteor restart) spread out instead of coming back at once. A process-wide
/// rate limit on top of this (the bridge's reconnect pacer) bounds the arrival rate.
public struct ReconnectPolicy: Sendable, Equatable {
    /// Delay before the first retry.
    public var initialDelay: Duration
    /// Growth per failed attempt.
    public var multiplier: Double
    /// Upper bound of the delay, before jitter.
    public var maxDelay: Duration
    /// Share of the delay that is random: 1 (full jitter) draws uniformly in [0, backoff);
    /// 0.5 draws in [backoff/2, backoff); 0 is no jitter.
    public var jitter: Double

    public init(initialDelay: Duration = .seconds(1), multiplier: Double = 2, maxDelay: Duration = .seconds(30), jitter: Double = 1) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    public static let `default` = ReconnectPolicy()

    /// The delay before attempt `attempt` (0 for the first retry); `unit` is a uniform draw in [0, 1).
    public func delay(attempt: Int, unit: Double) -> Duration {
        let base = initialDelay.seconds * pow(max(multiplier, 1), Double(min(max(attempt, 0), 64)))
        let capped = min(base, maxDelay.seconds)
        let spread = min(max(jitter, 0), 1)
        let factor = 1 - spread + spread * min(max(unit, 0), 1)
        let nanoseconds = capped * factor * 1e9
        // Settings are validated, but a delay is never worth a trap: clamp into a day.
        guard nanoseconds.isFinite, nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64(min(nanoseconds, 86_400e9)))
    }
}
