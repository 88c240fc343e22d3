import NIOConcurrencyHelpers
import NIOPosix
import Timing

/// How a test waits for state it can watch change, without polling: whoever changes the state
/// calls ``signal()``, and ``wait(_:timeout:isolation:until:)`` checks its condition at once and
/// again after each signal, until a deadline. What an SSE reader read, what a fake upstream
/// accepted, what a client reported are waited for this way; ``eventually`` is left for state
/// only a request can see.
public final class ChangeSignal: Sendable {
    private struct State {
        /// Signals so far: a waiter that checked its condition at one count waits for the next.
        var count = 0
        var waiters: [Int: ContinuationBox<Void>] = [:]
        var nextWaiter = 0
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Something changed: every waiter checks its condition again.
    public func signal() {
        let waiters = state.withLockedValue { state -> [ContinuationBox<Void>] in
            state.count += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: .success(())) }
    }

    /// Returns once `condition` holds (checked now and after each signal); throws
    /// ``ConditionNotMet`` when it still does not after `timeout`.
    public func wait(
        _ what: String, timeout: Duration = .seconds(10), isolation: isolated (any Actor)? = #isolation,
        until condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let seen = state.withLockedValue { $0.count }
            if try await condition() { return }
            let left = deadline - .now
            guard left > .zero, try await next(after: seen, within: left) else {
                if try await condition() { return }
                throw ConditionNotMet(description: "\(what) did not hold within \(timeout)")
            }
        }
    }

    /// Waits for the first signal after `seen` signals; `false` when `limit` passed first.
    private func next(after seen: Int, within limit: Duration) async throws -> Bool {
        let waiter = ContinuationBox<Void>()
        let number = state.withLockedValue { state -> Int? in
            // A signal came since the condition was checked: check it again.
            guard state.count == seen else { return nil }
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = waiter
            return state.nextWaiter
        }
        guard let number else { return true }
        defer { state.withLockedValue { _ = $0.waiters.removeValue(forKey: number) } }
        do {
            try await withDeadline(limit, clock: .system, on: MultiThreadedEventLoopGroup.singleton.any()) { continuation in
                waiter.store(continuation)
            } end: { end in
                waiter.resume(with: .failure(end))
            }
            return true
        } catch DeadlineError.timedOut {
            return false
        } catch DeadlineError.cancelled {
            throw CancellationError()
        }
    }
}

/// Races `body` against `limit`: its value, or `nil` when `limit` passed first (the body's task
/// is cancelled then). The deadline of a wait on something a test cannot signal (a service
/// group's end, a stream's first element).
public func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    do {
        return try await withDeadline(limit, clock: .system, on: MultiThreadedEventLoopGroup.singleton.any(), body)
    } catch DeadlineError.timedOut {
        return nil
    } catch DeadlineError.cancelled {
        throw CancellationError()
    }
}
