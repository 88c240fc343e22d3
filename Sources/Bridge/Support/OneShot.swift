/// A value set once, awaited by one waiter (later sets are dropped).
final class OneShot<Value: Sendable>: Sendable {
    private struct State: Sendable {
        var value: Value?
        var waiter: CheckedContinuation<Value, Never>?
    }
    private let state = LockedState(State())

    /// Whether `value` was taken (`false` when a value was set before).
    @discardableResult
    func resolve(_ value: Value) -> Bool {
        let (taken, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Value, Never>?) in
            guard state.value == nil else { return (false, nil) }
            state.value = value
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: value)
        return taken
    }

    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Value? in
                    if let value = state.value { return value }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
