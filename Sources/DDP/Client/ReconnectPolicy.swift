import Foundation

/// How long to wait before reconnecting: exponential backoff with jitter, so clients
/// dropped together (a load balancer restart) do not all come back at once.
public struct ReconnectPolicy: Sendable, Equatable {
    /// Delay before the first retry.
    public var initialDelay: Duration
    /// Growth per failed attempt.
    public var multiplier: Double
    /// Upper bound of the delay, before jitter.
    public var maxDelay: Duration
    /// Spread of the delay: 0.5 means ±25% around the nominal value.
    public var jitter: Double

    public init(initialDelay: Duration = .seconds(1), multiplier: Double = 2, maxDelay: Duration = .seconds(30), jitter: Double = 0.5) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    public static let `default` = ReconnectPolicy()

    /// The delay before attempt `attempt` (0 for the first retry); `unit` is a uniform draw in [0, 1).
    public func delay(attempt: Int, unit: Double) -> Duration {
        let base = initialDelay.seconds * pow(multiplier, Double(min(attempt, 64)))
        let capped = min(base, maxDelay.seconds)
        let factor = 1 - jitter / 2 + jitter * min(max(unit, 0), 1)
        return .nanoseconds(Int64(capped * factor * 1e9))
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    public var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
