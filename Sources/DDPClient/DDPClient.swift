public import DDP
import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import WSClient
import WSCompression

/// A DDP client connection over a WebSocket: the I/O shell around
/// ``DDP/DDPConnectionStateMachine``. It lives as long as ``run()``: connects, reconnects
/// with backoff, answers pings, and reports what happens through `onEvent`, synchronously
/// and in order (no buffer between the connection and its owner).
public actor DDPClient {
    /// How a method call waits.
    public enum Completion: Sendable {
        /// Until `result` and `updated`: the call's writes are visible (read-your-writes).
        case dataVisible
        /// Until `result` only.
        case result
    }

    public let options: DDPClientOptions
    private let logger: Logger
    private let onEvent: @Sendable (DDPClientEvent) -> Void
    private var machine: DDPConnectionStateMachine
    private var outbox: AsyncStream<Outgoing>.Continuation?
    private var methodWaiters: [String: (Completion, CheckedContinuation<EJSON?, any Error>)] = [:]
    private var readyWaiters: [String: [(number: Int, continuation: CheckedContinuation<Void, any Error>)]] = [:]
    private var nextWaiter = 0
    /// Recent `nosub` errors by subscription id (bounded), for waiters that arrive after it.
    private var recentStops: [String: DDPError] = [:]
    private var recentStopOrder: [String] = []
    private var reconnectDelay: Duration?
    private var closed = false
    public private(set) var state: ConnectionState = .idle

    enum Outgoing: Sendable {
        case frame(String)
        case close
    }

    public init(options: DDPClientOptions, logger: Logger, onEvent: @escaping @Sendable (DDPClientEvent) -> Void = { _ in }) {
        self.options = options
        var logger = logger
        logger[metadataKey: "ddp.url"] = .string(options.url)
        self.logger = logger
        self.onEvent = onEvent
        self.machine = DDPConnectionStateMachine(configuration: options.protocolConfiguration)
    }

    // MARK: - Reading state

    /// Reads the merged document view inside the actor, without copying it.
    public func withCache<T: Sendable>(_ body: (DocumentCache) throws -> T) rethrows -> T { try body(machine.cache) }
    public var userID: String? { machine.userID }
    public var loginToken: String? { machine.loginToken }
    public var tokenExpires: Double? { machine.tokenExpires }
    public var subscriptions: [String: DDPConnectionStateMachine.Subscription] { machine.subscriptions }
    public var isConnected: Bool { machine.isConnected }

    // MARK: - Running

    /// Connects and keeps the connection up until ``close(reason:)`` or cancellation.
    public func run() async {
        perform(machine.start())
        while !closed && !Task.isCancelled {
            await connectOnce()
            if closed || Task.isCancelled { break }
            guard let delay = reconnectDelay else { break }
            reconnectDelay = nil
            await sleepUnlessClosed(delay)
            perform(machine.reconnectTimerFired())
        }
        if !closed { close(reason: "stopped") }
    }

    /// Closes for good: pending calls fail, ``run()`` returns.
    public func close(reason: String = "closed") {
        perform(machine.close(reason: reason))
        closed = true
        outbox?.yield(.close)
    }

    private func connectOnce() async {
        var configuration = WebSocketClientConfiguration(
            maxFrameSize: options.maxMessageSize,
            additionalHeaders: options.handshakeHeaders,
            closeTimeout: .seconds(2)
        )
        if options.compression {
            configuration.extensions = [WebSocketExtensionFactory.perMessageDeflate(maxDecompressedFrameSize: options.maxMessageSize).build()]
        }
        let tlsConfiguration = try? makeTLSConfiguration()
        let maxSize = options.maxMessageSize
        let tick = Self.tickInterval(options.protocolConfiguration)
        do {
            try await WebSocketClient.connect(url: options.url, configuration: configuration, tlsConfiguration: tlsConfiguration, logger: logger) {
                inbound, outbound, _ in
                let outgoing = await self.transportOpened()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await item in outgoing {
                            switch item {
                            case .frame(let text): try await outbound.write(.text(text))
                            case .close:
                                try? await outbound.close(.normalClosure, reason: nil)
                                throw CancellationError()
                            }
                        }
                    }
                    group.addTask {
                        while !Task.isCancelled {
                            try await Task.sleep(for: tick)
                            await self.tick()
                        }
                    }
                    group.addTask {
                        for try await message in inbound.messages(maxSize: maxSize) {
                            await self.receive(Self.decode(message))
                        }
                        throw CancellationError()
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
        } catch {
            logger.debug("upstream connection ended", metadata: ["error": "\(error)"])
        }
        outbox?.finish()
        outbox = nil
        perform(machine.transportClosed(at: .now, unit: Double.random(in: 0..<1)))
    }

    private func makeTLSConfiguration() throws -> TLSConfiguration? {
        guard options.url.hasPrefix("wss:") || options.url.hasPrefix("https:") else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = options.tls.caFile { tls.trustRoots = .file(caFile) }
        if options.tls.allowSelfSigned { tls.certificateVerification = .none }
        return tls
    }

    private static func tickInterval(_ configuration: DDPClientConfiguration) -> Duration {
        min(.seconds(1), min(configuration.heartbeatInterval, configuration.heartbeatTimeout) / 4)
    }

    private func sleepUnlessClosed(_ delay: Duration) async {
        let deadline = ContinuousClock.now + delay
        while !closed && !Task.isCancelled && ContinuousClock.now < deadline {
            try? await Task.sleep(for: min(.milliseconds(50), deadline - ContinuousClock.now))
        }
    }

    private func transportOpened() -> AsyncStream<Outgoing> {
        let (stream, continuation) = AsyncStream<Outgoing>.makeStream()
        outbox = continuation
        if closed { continuation.yield(.close) }
        perform(machine.transportOpened(at: .now))
        return stream
    }

    private func tick() { perform(machine.tick(at: .now)) }

    /// Decoding runs in the connection's task, outside the actor.
    private nonisolated static func decode(_ message: WebSocketMessage) -> Result<ServerMessage?, any Error> {
        Result {
            switch message {
            case .text(var text):
                return try text.withUTF8 { try ServerMessage.decode(EJSONParser.parse($0)) }
            case .binary(let buffer):
                return try buffer.withUnsafeReadableBytes { try ServerMessage.decode(EJSONParser.parse($0.bindMemory(to: UInt8.self))) }
            }
        }
    }

    private func receive(_ decoded: Result<ServerMessage?, any Error>) {
        switch decoded {
        case .success(let message?):
            logger.trace("received", metadata: ["ddp.msg": "\(message)"])
            perform(machine.received(message, at: .now))
        case .success(nil):
            break
        case .failure(let error):
            logger.warning("ignored an unreadable message from the upstream", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Calls

    /// Calls a method and returns its result (`nil` when it returned nothing).
    /// Throws ``DDP/DDPError`` for the server's errors and ``DDPClientError`` for local ones.
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
    public func createUser(username: String?, email: String?, password: String, profile: EJSON? = nil, timeout: Duration? = nil) async throws -> LoginResult {
        let parameter = LoginRequest.createUser(username: username, email: email, password: password, profile: profile)
        let value = try await awaitMethod(completion: .dataVisible, timeout: timeout) { $0.createUser(parameter) }
        guard let result = LoginResult(value) else { throw DDPError.meteor(500, "createUser returned no user id and token") }
        return result
    }

    public func logout(timeout: Duration? = nil) async throws {
        _ = try await awaitMethod(completion: .dataVisible, timeout: timeout) { $0.logout() }
    }

    /// Subscribes; with `waitUntilReady`, returns once `ready` arrives (throws the `nosub` error otherwise).
    @discardableResult
    public func subscribe(
        _ name: String, params: [EJSON] = [], id: String? = nil, waitUntilReady: Bool = true, timeout: Duration? = nil
    ) async throws -> String {
        let (id, actions) = machine.subscribe(name, params: params, id: id)
        guard waitUntilReady else {
            perform(actions)
            return id
        }
        // The waiter is registered before `sub` goes out, so neither `ready` nor `nosub` can be missed.
        let number = takeWaiterNumber()
        try await withDeadline(timeout) {
            try await self.waitForReady(id, number: number, sending: actions)
        } onTimeout: { client in
            client.failReadyWaiter(id, number: number, DDPClientError.timedOut)
        }
        return id
    }

    /// Waits until an existing subscription is ready; throws its `nosub` error, or
    /// ``DDPClientError/timedOut``. Returns at once when it is ready already.
    public func waitUntilReady(_ id: String, timeout: Duration? = nil) async throws {
        guard let subscription = machine.subscriptions[id] else {
            throw recentStops[id] ?? DDPError.meteor("subscription-stopped", "The subscription is not active")
        }
        if subscription.ready { return }
        let number = takeWaiterNumber()
        try await withDeadline(timeout) {
            try await self.waitForReady(id, number: number, sending: [])
        } onTimeout: { client in
            client.failReadyWaiter(id, number: number, DDPClientError.timedOut)
        }
    }

    public func unsubscribe(_ id: String) {
        perform(machine.unsubscribe(id))
    }

    private func takeWaiterNumber() -> Int {
        nextWaiter += 1
        return nextWaiter
    }

    private func waitForReady(_ id: String, number: Int, sending actions: [DDPConnectionStateMachine.Action]) async throws {
        try await withCheckedThrowingContinuation { continuation in
            readyWaiters[id, default: []].append((number, continuation))
            perform(actions)
        }
    }

    private func failReadyWaiter(_ id: String, number: Int, _ error: any Error) {
        guard let index = readyWaiters[id]?.firstIndex(where: { $0.number == number }) else { return }
        readyWaiters[id]!.remove(at: index).continuation.resume(throwing: error)
        if readyWaiters[id]!.isEmpty { readyWaiters[id] = nil }
    }

    private func failReadyWaiters(_ id: String, _ error: any Error) {
        for waiter in readyWaiters.removeValue(forKey: id) ?? [] { waiter.continuation.resume(throwing: error) }
    }

    private func awaitMethod(
        completion: Completion, timeout: Duration?,
        start: (inout DDPConnectionStateMachine) -> (id: String, actions: [DDPConnectionStateMachine.Action])
    ) async throws -> EJSON? {
        let (id, actions) = start(&machine)
        return try await withDeadline(timeout) {
            try await self.waitForMethod(id, completion: completion, actions: actions)
        } onTimeout: { client in
            client.methodWaiters.removeValue(forKey: id)?.1.resume(throwing: DDPClientError.timedOut)
        }
    }

    private func waitForMethod(_ id: String, completion: Completion, actions: [DDPConnectionStateMachine.Action]) async throws -> EJSON? {
        try await withCheckedThrowingContinuation { continuation in
            methodWaiters[id] = (completion, continuation)
            perform(actions)
        }
    }

    /// Runs `body`; if `timeout` passes first, calls `onTimeout` (which must make `body` finish).
    private func withDeadline<T: Sendable>(
        _ timeout: Duration?, _ body: @escaping @Sendable () async throws -> T, onTimeout: @escaping @Sendable (isolated DDPClient) -> Void
    ) async throws -> T {
        guard let timeout else { return try await body() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { await self.runIsolated(onTimeout) }
                return nil
            }
            while let next = try await group.next() {
                if let value = next {
                    group.cancelAll()
                    return value
                }
            }
            throw DDPClientError.timedOut
        }
    }

    private func runIsolated(_ body: @Sendable (isolated DDPClient) -> Void) { body(self) }

    // MARK: - Performing actions

    private func perform(_ actions: [DDPConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .openTransport:
                break  // run() opens the next transport
            case .send(let message):
                logger.trace("sending", metadata: ["ddp.msg": "\(message)"])
                outbox?.yield(.frame(String(decoding: message.encode(), as: UTF8.self)))
            case .closeTransport:
                outbox?.yield(.close)
            case .scheduleReconnect(let delay):
                reconnectDelay = delay
            case .stateChanged(let newState):
                state = newState
                logger.debug("connection state", metadata: ["ddp.state": "\(newState)"])
                onEvent(.stateChanged(newState))
            case .methodResult(let id, let outcome):
                if let waiter = methodWaiters[id], waiter.0 == .result {
                    methodWaiters[id] = nil
                    waiter.1.resume(with: outcome.mapError { $0 as any Error })
                }
            case .methodCompleted(let id, let outcome):
                if let waiter = methodWaiters.removeValue(forKey: id) {
                    waiter.1.resume(with: outcome.mapError { $0 as any Error })
                }
            case .subscriptionReady(let id):
                for waiter in readyWaiters.removeValue(forKey: id) ?? [] { waiter.continuation.resume() }
                onEvent(.subscriptionReady(id: id))
            case .subscriptionStopped(let id, let error):
                if let error {
                    recentStops[id] = error
                    recentStopOrder.append(id)
                    if recentStopOrder.count > 256 { recentStops[recentStopOrder.removeFirst()] = nil }
                }
                failReadyWaiters(id, error ?? DDPError.meteor("subscription-stopped", "The subscription stopped before it was ready"))
                onEvent(.subscriptionStopped(id: id, error: error))
            case .documentsChanged(let changes):
                let documents = changes.map { machine.cache.document($0.collection, $0.id) }
                onEvent(.documentsChanged(changes, documents: documents))
            case .userChanged(let userID):
                onEvent(.userChanged(userId: userID))
            case .resumeRefused(let error):
                logger.info("the upstream refused the resume token; the session is anonymous now", metadata: ["error": "\(error.error)"])
                onEvent(.resumeRefused(error))
            case .protocolError(let reason, _):
                logger.warning("the upstream reported a protocol error", metadata: ["reason": "\(reason)"])
                onEvent(.protocolError(reason: reason))
            }
        }
        if case .closed = state {
            for (_, waiter) in methodWaiters { waiter.1.resume(throwing: DDPClientError.closed("closed")) }
            methodWaiters = [:]
            for id in Array(readyWaiters.keys) { failReadyWaiters(id, DDPClientError.closed("closed")) }
        }
    }
}
