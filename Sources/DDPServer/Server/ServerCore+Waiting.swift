import NIOPosix
import Timing

extension ServerCore {
    /// Someone waiting until a condition on the server's state holds (``waitUntil(timeout:_:)``).
    struct ConditionWaiter {
        let condition: @Sendable (isolated ServerCore) -> Bool
        let waiter: ContinuationBox<Void>
    }

    /// Waits until `condition` holds for the server's state: checked at once, then on the actor
    /// after each change (a connection opened or closed, a message handled, a method begun, a
    /// publication's data or `ready`), so a test waits for what the server saw (the subscriptions
    /// a client made, a call under way) rather than polling it. Throws
    /// ``Timing/DeadlineError/timedOut`` after `timeout`, ``Timing/DeadlineError/cancelled``
    /// when the caller is cancelled.
    public func waitUntil(timeout: Duration, _ condition: @escaping @Sendable (isolated ServerCore) -> Bool) async throws {
        if condition(self) { return }
        let waiter = ContinuationBox<Void>()
        nextConditionWaiter += 1
        let number = nextConditionWaiter
        conditionWaiters[number] = ConditionWaiter(condition: condition, waiter: waiter)
        defer { conditionWaiters[number] = nil }
        try await Self.wait(for: waiter, timeout: timeout)
    }

    /// Suspends until `waiter` is resumed, or `timeout` passes, or the caller is cancelled.
    private static func wait(for waiter: ContinuationBox<Void>, timeout: Duration) async throws {
        try await withDeadline(timeout, clock: .system, on: MultiThreadedEventLoopGroup.singleton.any()) { continuation in
            waiter.store(continuation)
        } end: { end in
            waiter.resume(with: .failure(end))
        }
    }

    /// After a change: every waiter whose condition holds now goes on.
    func stateChanged() {
        guard !conditionWaiters.isEmpty else { return }
        for (number, entry) in conditionWaiters where entry.condition(self) {
            conditionWaiters[number] = nil
            entry.waiter.resume(with: .success(()))
        }
    }
}
