import DDP
import Timing

extension DDPClient {
    /// Someone waiting until a condition on the client holds (``waitUntil(timeout:_:)``).
    struct ConditionWaiter {
        let condition: @Sendable (isolated DDPClient) -> Bool
        let continuation: CheckedContinuation<Void, any Error>
        let timer: BridgeClock.Timer?
    }

    /// Waits until `condition` holds for this client: checked at once, then on the actor after
    /// each step of the connection (a message, a timer, a call, a close: whatever changed its
    /// state, cache or subscriptions). Throws ``DDP/DDPClientError/timedOut`` after `timeout`
    /// (on the options' clock) and ``DDP/DDPClientError/cancelled`` when the caller is
    /// cancelled. For an observer that does not own the client's events (a test watching a
    /// bridge session's connection): it waits for the step itself rather than polling.
    public func waitUntil(timeout: Duration, _ condition: @escaping @Sendable (isolated DDPClient) -> Bool) async throws {
        if condition(self) { return }
        if Task.isCancelled { throw DDPClientError.cancelled }
        nextConditionWaiter += 1
        let number = nextConditionWaiter
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timer = timer(timeout) { client in client.endConditionWaiter(number, DDPClientError.timedOut) }
                conditionWaiters[number] = ConditionWaiter(condition: condition, continuation: continuation, timer: timer)
            }
        } onCancel: {
            onLoop { $0.endConditionWaiter(number, DDPClientError.cancelled) }
        }
    }

    private func endConditionWaiter(_ number: Int, _ error: DDPClientError) {
        guard let waiter = conditionWaiters.removeValue(forKey: number) else { return }
        waiter.timer?.cancel()
        waiter.continuation.resume(throwing: error)
    }

    /// After a step: every waiter whose condition holds now goes on.
    func resumeConditionWaiters() {
        guard !conditionWaiters.isEmpty else { return }
        for (number, waiter) in conditionWaiters where waiter.condition(self) {
            conditionWaiters[number] = nil
            waiter.timer?.cancel()
            waiter.continuation.resume()
        }
    }
}
