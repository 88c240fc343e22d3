import DDP
import NIOConcurrencyHelpers
public import Timing

/// A process-wide token bucket for reconnect attempts: after an upstream outage every session
/// wants to come back at once, and this spreads them out to at most `rate` attempts a second
/// (after a burst of `burst`). Attempts reserve their slot and wait for it, first come first
/// served, so the arrival rate at the upstream stays bounded whatever the number of sessions.
///
/// It also carries the news that the upstream is back: connections waiting out a backoff
/// register here (``waitForReturn(_:wake:)``), and the first connection of the process to be
/// connected again (``upstreamReturned()``) wakes them all, so they retry now, through the
/// pacer, instead of at the end of backoffs that grew during the outage.
public final class ReconnectPacer: Sendable {
    public let rate: Double
    public let burst: Double
    private let clock: BridgeClock
    private let state: NIOLockedValueBox<(tokens: Double, updated: ContinuousClock.Instant)>
    /// Connections in a backoff, by an identifier of their choice: what wakes each.
    private let waiting = NIOLockedValueBox<[ObjectIdentifier: @Sendable () -> Void]>([:])

    /// `rate` attempts a second, `burst` at once; both at least 1 (`rate` ≤ 0 means unpaced).
    public init(rate: Double, burst: Int, clock: BridgeClock = .system) {
        self.rate = rate.isFinite ? rate : 0
        self.burst = Double(max(burst, 1))
        self.clock = clock
        self.state = NIOLockedValueBox((Double(max(burst, 1)), clock.now))
    }

    /// No pacing at all.
    public static let unlimited = ReconnectPacer(rate: 0, burst: 1)

    /// Takes a slot; returns how long to wait before using it (zero when one is free now).
    public func reserve() -> Duration { reserve(now: clock.now) }

    /// The same, at `now` (a test's instant).
    public func reserve(now: ContinuousClock.Instant) -> Duration {
        guard rate > 0 else { return .zero }
        return state.withLockedValue { state in
            // Callers read the clock before the lock: one that read it earlier may come second.
            // Its instant must not move the bucket back in time, or the next caller is credited
            // that interval twice (in the full parallel test run, 40 returns came ~2 slots early).
            let elapsed = max(0, (now - state.updated).seconds)
            state.tokens = min(burst, state.tokens + elapsed * rate)
            state.updated = max(state.updated, now)
            state.tokens -= 1
            guard state.tokens < 0 else { return .zero }
            // A debt of n tokens is paid off in n / rate seconds.
            return .nanoseconds(Int64(min(-state.tokens / rate, 86_400) * 1e9))
        }
    }

    /// `wake` runs (once, on any thread) when a connection of the process is connected again,
    /// unless ``forget(_:)`` came first.
    public func waitForReturn(_ id: ObjectIdentifier, wake: @escaping @Sendable () -> Void) {
        waiting.withLockedValue { $0[id] = wake }
    }

    /// The connection `id` no longer waits (its backoff ended, or it closed).
    public func forget(_ id: ObjectIdentifier) {
        _ = waiting.withLockedValue { $0.removeValue(forKey: id) }
    }

    /// A connection reached the upstream: every connection in a backoff retries now. Returns how
    /// many were woken.
    @discardableResult
    public func upstreamReturned() -> Int {
        let wakes = waiting.withLockedValue { waiting in
            defer { waiting = [:] }
            return Array(waiting.values)
        }
        for wake in wakes { wake() }
        return wakes.count
    }

    /// How many connections wait in a backoff.
    public var waitingCount: Int { waiting.withLockedValue { $0.count } }
}
