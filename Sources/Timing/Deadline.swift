import NIOConcurrencyHelpers
public import NIOCore

/// How a wait with a deadline ended on this side: its time ran out, or its task was cancelled.
/// The one error of ``withDeadline(_:clock:on:register:end:)``; each caller says what it means
/// to its own callers (a 504, an unreachable upstream, a store that failed).
public enum DeadlineError: Error, Sendable, Hashable, CustomStringConvertible {
    case timedOut
    case cancelled

    public var description: String {
        switch self {
        case .timedOut: "the deadline passed"
        case .cancelled: "the wait was cancelled"
        }
    }
}

/// The deadline primitive. Suspends on a continuation that `register` files away, until whoever
/// holds it resumes it, or until `end` takes it back: with ``DeadlineError/timedOut`` when
/// `limit` passes on `clock` (a timer on `loop`), or ``DeadlineError/cancelled`` when the task
/// is cancelled. `end` resumes the continuation (with the error, or what the caller makes of
/// it) if it still holds it. The timer is armed after `register`, so neither it nor a
/// cancellation can come first and be lost.
public func withDeadline<T: Sendable>(
    _ limit: Duration, clock: BridgeClock, on loop: any EventLoop,
    register: (CheckedContinuation<T, any Error>) -> Void,
    end: @escaping @Sendable (DeadlineError) -> Void
) async throws -> T {
    let timer = NIOLockedValueBox<BridgeClock.Timer?>(nil)
    defer { timer.withLockedValue { $0?.cancel() } }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            register(continuation)
            timer.withLockedValue { $0 = clock.schedule(after: limit, on: loop) { end(.timedOut) } }
            if Task.isCancelled { end(.cancelled) }
        }
    } onCancel: {
        end(.cancelled)
    }
}

/// `body`'s value, or ``DeadlineError/timedOut`` after `limit` (``DeadlineError/cancelled``
/// when the caller is cancelled); the body runs in a task of its own, cancelled then, so a call
/// that ignores cancellation cannot hold up the caller. A value that arrives too late goes to
/// `discardLate` (a store opened after its deadline is closed), never dropped unseen.
public func withDeadline<T: Sendable>(
    _ limit: Duration, clock: BridgeClock, on loop: any EventLoop, discardLate: (@Sendable (T) async -> Void)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let waiter = ContinuationBox<T>()
    let work = NIOLockedValueBox<Task<Void, Never>?>(nil)
    defer { work.withLockedValue { $0?.cancel() } }
    return try await withDeadline(limit, clock: clock, on: loop) { continuation in
        waiter.store(continuation)
        let task = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            if !waiter.resume(with: result), case .success(let late) = result { await discardLate?(late) }
        }
        work.withLockedValue { $0 = task }
    } end: { end in
        waiter.resume(with: .failure(end))
    }
}

/// A continuation held until the first of several parties resumes it; the others find it gone.
public final class ContinuationBox<T: Sendable>: Sendable {
    private enum State: Sendable {
        case empty
        case waiting(CheckedContinuation<T, any Error>)
        /// Resumed before it was stored: the value waits for it.
        case early(Result<T, any Error>)
        case done
    }

    private let state = NIOLockedValueBox<State>(.empty)

    public init() {}

    public func store(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLockedValue { state -> Result<T, any Error>? in
            switch state {
            case .empty:
                state = .waiting(continuation)
                return nil
            case .early(let result):
                state = .done
                return result
            case .waiting, .done:
                return nil
            }
        }
        if let early { continuation.resume(with: early) }
    }

    /// `true` when this call resumed it (or will, once it is stored); `false` when another did.
    @discardableResult
    public func resume(with result: Result<T, any Error>) -> Bool {
        let (taken, continuation) = state.withLockedValue { state -> (Bool, CheckedContinuation<T, any Error>?) in
            switch state {
            case .empty:
                state = .early(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .done
                return (true, continuation)
            case .early, .done:
                return (false, nil)
            }
        }
        continuation?.resume(with: result)
        return taken
    }
}
