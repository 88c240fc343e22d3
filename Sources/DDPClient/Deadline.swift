import DDP
import NIOConcurrencyHelpers
public import NIOCore

extension EventLoop {
    /// Runs `body` on this loop once `delay` has passed: the one way a wait in the bridge gets
    /// its deadline (a NIO timer, a heap entry on the loop; no Swift task and no sleep). The
    /// delay is clamped to zero … one day, so a figure from settings or from outside cannot trap
    /// in the conversion.
    @discardableResult
    public func scheduleDeadline(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> Scheduled<Void> {
        scheduleTask(in: TimeAmount(min(max(delay, .zero), .seconds(86_400))), body)
    }
}

/// Suspends on a continuation that `register` files away, until whoever holds it resumes it,
/// or until `end` takes it back: with `nil` when `timeout` passes on `loop` (the caller's own
/// timeout error), or with ``DDP/DDPClientError/cancelled`` when the task is cancelled. The
/// timer is armed after `register`, so neither it nor a cancellation can come first and be lost.
public func withDeadline(
    on loop: any EventLoop, _ timeout: Duration,
    register: (CheckedContinuation<Void, any Error>) -> Void,
    end: @escaping @Sendable ((any Error)?) -> Void
) async throws {
    let timer = NIOLockedValueBox<Scheduled<Void>?>(nil)
    defer { timer.withLockedValue { $0?.cancel() } }
    try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            register(continuation)
            timer.withLockedValue { $0 = loop.scheduleDeadline(after: timeout) { end(nil) } }
            if Task.isCancelled { end(DDPClientError.cancelled) }
        }
    } onCancel: {
        end(DDPClientError.cancelled)
    }
}
