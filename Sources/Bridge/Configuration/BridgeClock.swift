/// Where the session layer reads the time: the system's continuous clock, or one a test moves
/// by hand (idle expiry, subscription linger, store checks and pacing then need no wall-clock
/// wait). Timers still fire on the event loops' own clock; what they decide reads this one.
public struct BridgeClock: Sendable {
    private let read: @Sendable () -> ContinuousClock.Instant

    public init(_ read: @escaping @Sendable () -> ContinuousClock.Instant) { self.read = read }

    public var now: ContinuousClock.Instant { read() }

    public static let system = BridgeClock { .now }
}
