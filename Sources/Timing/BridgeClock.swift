public import Foundation
import NIOConcurrencyHelpers
public import NIOCore

/// The one clock of the bridge and its DDP client: every instant read, every timer and every
/// sleep goes through it. ``system`` is the system's continuous clock with NIO timers; a
/// ``driven()`` clock flows with it and a test moves it forward by hand (``advance(by:)``):
/// the timers and sleeps that fall due then fire at once, on their loops, so a backoff, a
/// heartbeat, an idle expiry or a sweep is reached by a jump instead of a wait.
public final class BridgeClock: Sendable {
    private struct Pending: Sendable {
        let due: ContinuousClock.Instant
        /// The delay it was set with (what ``waitUntilArmed(delay:timeout:on:)`` looks for).
        let delay: Duration
        let loop: any EventLoop
        let body: @Sendable () -> Void
        var timer: Scheduled<Void>?
    }

    private struct Driven: Sendable {
        var offset: Duration = .zero
        var pending: [Int: Pending] = [:]
        var nextID = 0
        /// Tests waiting for a timer of a delay to be set (``waitUntilArmed(delay:timeout:on:)``).
        var armWaiters: [Int: (delay: Duration, waiter: ContinuationBox<Void>)] = [:]
    }

    /// `nil` for the system clock.
    private let driven: NIOLockedValueBox<Driven>?

    private init(driven: Bool) { self.driven = driven ? NIOLockedValueBox(Driven()) : nil }

    /// The system's clock: instants from `ContinuousClock`, timers on the loops' own clock.
    public static let system = BridgeClock(driven: false)

    /// A clock a test moves forward by hand; it flows as usual meanwhile.
    public static func driven() -> BridgeClock { BridgeClock(driven: true) }

    /// The current instant (monotonic).
    public var now: ContinuousClock.Instant {
        guard let driven else { return .now }
        return .now + driven.withLockedValue { $0.offset }
    }

    /// The wall-clock time, for what outlives the process (a stored session's expiry) and logs.
    public var wallClock: Date {
        guard let driven else { return Date() }
        return Date().addingTimeInterval(driven.withLockedValue { $0.offset }.seconds)
    }

    /// Runs `body` on `loop` once `delay` has passed on this clock: the one way a timer is set
    /// (a NIO timer, a heap entry on the loop; no Swift task and no sleep). The delay is clamped
    /// to zero … one day, so a figure from settings or from outside cannot trap in the conversion.
    @discardableResult
    public func schedule(after delay: Duration, on loop: any EventLoop, _ body: @escaping @Sendable () -> Void) -> Timer {
        let amount = TimeAmount(min(max(delay, .zero), .seconds(86_400)))
        guard let driven else { return Timer(kind: .system(loop.scheduleTask(in: amount, body))) }
        let (id, armed) = driven.withLockedValue { state -> (Int, [ContinuationBox<Void>]) in
            state.nextID += 1
            state.pending[state.nextID] = Pending(due: .now + state.offset + delay, delay: delay, loop: loop, body: body)
            let armed = state.armWaiters.filter { $0.value.delay == delay }
            for waiter in armed.keys { state.armWaiters[waiter] = nil }
            return (state.nextID, armed.values.map(\.waiter))
        }
        for waiter in armed { waiter.resume(with: .success(())) }
        let timer = loop.scheduleTask(in: amount) { self.fire(id) }
        let kept = driven.withLockedValue { state -> Bool in
            guard state.pending[id] != nil else { return false }
            state.pending[id]?.timer = timer
            return true
        }
        if !kept { timer.cancel() }
        return Timer(kind: .driven(self, id))
    }

    /// Sets a timer that fires every `interval` until cancelled (the next is set when one fires,
    /// so a jump of the clock fires it once, not once per interval jumped over).
    public func repeating(every interval: Duration, on loop: any EventLoop, _ body: @escaping @Sendable () -> Void) -> RepeatingTimer {
        let repeating = RepeatingTimer()
        repeating.arm(clock: self, interval: interval, loop: loop, body: body)
        return repeating
    }

    /// Suspends for `duration` on this clock; throws `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration, on loop: any EventLoop) async throws {
        try Task.checkCancellation()
        guard duration > .zero else { return }
        let waiter = ContinuationBox<Void>()
        do {
            try await withDeadline(duration, clock: self, on: loop) {
                waiter.store($0)
            } end: { end in
                switch end {
                case .timedOut: waiter.resume(with: .success(()))
                case .cancelled: waiter.resume(with: .failure(CancellationError()))
                }
            }
        } catch let error as DeadlineError where error == .cancelled {
            throw CancellationError()
        }
    }

    /// Moves a ``driven()`` clock forward: what falls due runs now, each on its own loop, in the
    /// order of its due instant. Nothing happens on the system clock.
    public func advance(by amount: Duration) {
        guard let driven else { return }
        let due = driven.withLockedValue { state -> [Pending] in
            state.offset += max(amount, .zero)
            let now = ContinuousClock.now + state.offset
            let fired = state.pending.filter { $0.value.due <= now }
            for id in fired.keys { state.pending[id] = nil }
            return fired.values.sorted { $0.due < $1.due }
        }
        for pending in due {
            pending.timer?.cancel()
            pending.loop.execute(pending.body)
        }
    }

    /// How many timers and sleeps wait on a ``driven()`` clock (a test's way to know one is set).
    public var pendingCount: Int { driven?.withLockedValue { $0.pending.count } ?? 0 }

    /// Returns once a timer or sleep of `delay` waits on a ``driven()`` clock (at once when one
    /// does already): a test moves the clock only once what it means to fire is set, without
    /// polling ``pendingCount``. Throws ``DeadlineError/timedOut`` when none is set within
    /// `timeout` of real time (a timer on `loop`), ``DeadlineError/cancelled`` when the caller is
    /// cancelled; on the system clock it returns at once (nothing is kept to look at).
    public func waitUntilArmed(delay: Duration, timeout: Duration, on loop: any EventLoop) async throws {
        guard let driven else { return }
        let waiter = ContinuationBox<Void>()
        let number = driven.withLockedValue { state -> Int? in
            guard !state.pending.values.contains(where: { $0.delay == delay }) else { return nil }
            state.nextID += 1
            state.armWaiters[state.nextID] = (delay, waiter)
            return state.nextID
        }
        guard let number else { return }
        defer { driven.withLockedValue { _ = $0.armWaiters.removeValue(forKey: number) } }
        try await withDeadline(timeout, clock: .system, on: loop) { continuation in
            waiter.store(continuation)
        } end: { end in
            waiter.resume(with: .failure(end))
        }
    }

    private func fire(_ id: Int) {
        guard let pending = driven?.withLockedValue({ $0.pending.removeValue(forKey: id) }) else { return }
        pending.body()
    }

    fileprivate func cancel(_ id: Int) {
        let pending = driven?.withLockedValue { $0.pending.removeValue(forKey: id) }
        pending?.timer?.cancel()
    }

    /// A timer set by ``schedule(after:on:_:)``.
    public struct Timer: Sendable {
        fileprivate enum Kind: Sendable {
            case system(Scheduled<Void>)
            case driven(BridgeClock, Int)
        }

        fileprivate let kind: Kind

        /// The body does not run (unless it already has).
        public func cancel() {
            switch kind {
            case .system(let scheduled): scheduled.cancel()
            case .driven(let clock, let id): clock.cancel(id)
            }
        }
    }
}

/// A timer that fires every interval until ``cancel()``.
public final class RepeatingTimer: Sendable {
    private let state = NIOLockedValueBox<(cancelled: Bool, current: BridgeClock.Timer?)>((false, nil))

    fileprivate init() {}

    fileprivate func arm(clock: BridgeClock, interval: Duration, loop: any EventLoop, body: @escaping @Sendable () -> Void) {
        let timer = clock.schedule(after: interval, on: loop) { [weak self] in
            guard let self, !self.state.withLockedValue({ $0.cancelled }) else { return }
            body()
            self.arm(clock: clock, interval: interval, loop: loop, body: body)
        }
        let cancelled = state.withLockedValue { state -> Bool in
            if !state.cancelled { state.current = timer }
            return state.cancelled
        }
        if cancelled { timer.cancel() }
    }

    public func cancel() {
        let current = state.withLockedValue { state -> BridgeClock.Timer? in
            state.cancelled = true
            defer { state.current = nil }
            return state.current
        }
        current?.cancel()
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
