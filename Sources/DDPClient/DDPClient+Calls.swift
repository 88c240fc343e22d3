public import DDP
import Timing

/// The connection's method calls and subscriptions: what a caller awaits, and the waiters the
/// connection's messages resume (``DDPClient``'s books).
extension DDPClient {
    // MARK: - Calls

    /// Calls a method and returns its result (`nil` when it returned nothing).
    /// Throws ``DDP/DDPError`` for the server's errors and ``DDPClientError`` for local ones
    /// (timed out, cancelled, closed); a call that ends on this side is dropped from the connection.
    public func call(
        _ name: String, params: [EJSON] = [], options: MethodOptions = .default,
        until completion: Completion = .dataVisible, timeout: Duration? = nil
    ) async throws -> EJSON? {
        try await awaitMethod(completion: completion, timeout: timeout) { machine in
            machine.callMethod(name, params: params, options: options)
        }
    }

    /// Logs in (password, resume token or raw payload); the connection stays logged in across reconnects.
    public func login(_ request: LoginRequest, timeout: Duration? = nil) async throws -> LoginResult {
        let value = try await awaitMethod(completion: .dataVisible, timeout: timeout) { $0.login(request) }
        guard let result = LoginResult(value) else { throw DDPError.meteor(500, "login returned no user id and token") }
        return result
    }

    /// Meteor's `createUser`: signs up and logs the connection in.
    public func createUser(username: String?, email: String?, password: String, profile: EJSON? = nil, timeout: Duration? = nil) async throws
        -> LoginResult
    {
        let parameter = LoginRequest.createUser(username: username, email: email, password: password, profile: profile)
        let value = try await awaitMethod(completion: .dataVisible, timeout: timeout) { $0.createUser(parameter) }
        guard let result = LoginResult(value) else { throw DDPError.meteor(500, "createUser returned no user id and token") }
        return result
    }

    public func logout(timeout: Duration? = nil) async throws {
        _ = try await awaitMethod(completion: .dataVisible, timeout: timeout) { $0.logout() }
    }

    func awaitMethod(
        completion: Completion, timeout: Duration?,
        start: (inout DDPConnectionStateMachine) -> (id: String, actions: [DDPConnectionStateMachine.Action])
    ) async throws -> EJSON? {
        if Task.isCancelled { throw DDPClientError.cancelled }
        let (id, actions) = start(&machine)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timer = timer(timeout) { client in client.endMethod(id, DDPClientError.timedOut) }
                methodWaiters[id] = MethodWaiter(completion: completion, continuation: continuation, timer: timer)
                perform(actions)
            }
        } onCancel: {
            onLoop { $0.endMethod(id, DDPClientError.cancelled) }
        }
    }

    /// A call that ends on this side (deadline, cancelled caller) ends in the state machine too.
    func endMethod(_ id: String, _ error: DDPClientError) {
        guard let waiter = methodWaiters.removeValue(forKey: id) else { return }
        waiter.timer?.cancel()
        waiter.continuation.resume(throwing: error)
        perform(machine.abandonMethod(id))
    }

    // MARK: - Subscriptions

    /// Subscribes; with `waitUntilReady`, returns once `ready` arrives (throws the `nosub` error otherwise).
    @discardableResult
    public func subscribe(
        _ name: String, params: [EJSON] = [], id: String? = nil, waitUntilReady: Bool = true, timeout: Duration? = nil
    ) async throws -> String {
        // With an id of its own choosing the owner may ask twice (concurrent callers sharing
        // one subscription): the second finds it, or the error that stopped it.
        if let id, machine.subscriptions[id] != nil {
            if waitUntilReady { try await self.waitUntilReady(id, timeout: timeout) }
            return id
        }
        if let id, let stop = recentStops[id] { throw stop.error }
        let (id, actions) = machine.subscribe(name, params: params, id: id)
        guard waitUntilReady else {
            perform(actions)
            return id
        }
        // The waiter is registered before `sub` goes out, so neither `ready` nor `nosub` can be missed.
        try await waitForReady(id, timeout: timeout, sending: actions)
        return id
    }

    /// Waits until an existing subscription is ready; throws its `nosub` error,
    /// ``DDPClientError/timedOut`` or ``DDPClientError/cancelled``. Returns at once when it is ready already.
    public func waitUntilReady(_ id: String, timeout: Duration? = nil) async throws {
        guard let subscription = machine.subscriptions[id] else {
            throw recentStops[id]?.error ?? DDPClientError(.subscriptionStopped, "The subscription is not active")
        }
        if subscription.ready { return }
        try await waitForReady(id, timeout: timeout, sending: [])
    }

    public func unsubscribe(_ id: String) {
        perform(machine.unsubscribe(id))
    }

    func waitForReady(_ id: String, timeout: Duration?, sending actions: [DDPConnectionStateMachine.Action]) async throws {
        if Task.isCancelled {
            perform(actions)
            throw DDPClientError.cancelled
        }
        nextWaiter += 1
        let number = nextWaiter
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timer = timer(timeout) { client in client.failReadyWaiter(id, number: number, DDPClientError.timedOut) }
                readyWaiters[id, default: []].append(ReadyWaiter(number: number, continuation: continuation, timer: timer))
                perform(actions)
            }
        } onCancel: {
            onLoop { $0.failReadyWaiter(id, number: number, DDPClientError.cancelled) }
        }
    }

    func failReadyWaiter(_ id: String, number: Int, _ error: any Error) {
        guard var waiters = readyWaiters[id], let index = waiters.firstIndex(where: { $0.number == number }) else { return }
        let waiter = waiters.remove(at: index)
        readyWaiters[id] = waiters.isEmpty ? nil : waiters
        waiter.timer?.cancel()
        waiter.continuation.resume(throwing: error)
    }

    func resumeReadyWaiters(_ id: String, _ result: Result<Void, any Error>) {
        for waiter in readyWaiters.removeValue(forKey: id) ?? [] {
            waiter.timer?.cancel()
            waiter.continuation.resume(with: result)
        }
    }
}
