import CoreMetrics
import DDP
import DDPClient
import Foundation
import HTTPTypes
public import Logging
public import ServiceLifecycle

/// Every session, by token hash (and by Meteor token hash for token-keyed sessions).
/// As a `Service`, it runs each session's upstream connection in its own task group,
/// closes idle sessions and releases lingering subscriptions; on shutdown it closes them all.
public final class SessionRegistry: Service, Sendable {
    struct State: Sendable {
        var sessions: [String: Session] = [:]
        var byMeteorKey: [String: Session] = [:]
        var perAddress: [String: Int] = [:]
        /// Recently closed sessions, so their token gets a clear reason (bounded).
        var ended: [String: String] = [:]
        var endedOrder: [String] = []
        /// Failed logins per address (strict), and session creations per address (loose).
        var logins: RateLimiter
        var creations: RateLimiter
        /// Meteor tokens refused recently (hash → when), answered 401 without asking Meteor again.
        var refusedMeteorKeys: [String: ContinuousClock.Instant] = [:]
        var shuttingDown = false
    }

    let configuration: BridgeConfiguration
    let logger: Logger
    let metrics: BridgeMetrics
    /// Paces every session's reconnect attempts (one bucket for the process).
    let pacer: ReconnectPacer
    private let state: LockedState<State>
    private let started: AsyncStream<Session>
    private let starter: AsyncStream<Session>.Continuation
    private let shutdownBegan: AsyncStream<Void>
    private let shutdownBell: AsyncStream<Void>.Continuation
    static let endedMemory = 10_000

    public init(configuration: BridgeConfiguration, logger: Logger, metrics: BridgeMetrics = BridgeMetrics()) {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.pacer = ReconnectPacer(rate: configuration.reconnectRate, burst: configuration.reconnectBurst)
        self.state = LockedState(
            State(
                logins: RateLimiter(calls: configuration.loginRateLimit.calls, interval: configuration.loginRateLimit.interval),
                creations: RateLimiter(calls: configuration.sessionRateLimit.calls, interval: configuration.sessionRateLimit.interval)))
        (started, starter) = AsyncStream<Session>.makeStream()
        (shutdownBegan, shutdownBell) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    public var count: Int { state.withLock { $0.sessions.count } }

    var allSessions: [Session] { state.withLock { Array($0.sessions.values) } }

    // MARK: - Creating and finding sessions

    /// A new session with its upstream connection starting; returns it and its token.
    func create(clientAddress: String, meteorToken: String? = nil) throws(BridgeError) -> (session: Session, token: String) {
        let token = SessionToken.make()
        let hash = SessionToken.hash(token)
        let meteorKey = meteorToken.map(SessionToken.hash)
        let session = Session(
            tokenHash: hash, clientAddress: clientAddress, meteorKey: meteorKey, configuration: configuration,
            logger: logger, metrics: metrics, pacer: pacer)
        try state.withLock { state throws(BridgeError) in
            guard !state.shuttingDown else { throw .upstreamUnavailable("The bridge is shutting down") }
            guard state.sessions.count < configuration.maxSessions else {
                throw BridgeError(
                    .serviceUnavailable, "too-many-sessions", "The bridge holds its maximum of \(configuration.maxSessions) sessions", retryAfter: 30)
            }
            guard state.perAddress[clientAddress, default: 0] < configuration.maxSessionsPerAddress else {
                throw BridgeError(
                    .tooManyRequests, "too-many-sessions",
                    "This address holds its maximum of \(configuration.maxSessionsPerAddress) sessions", retryAfter: 60)
            }
            state.sessions[hash] = session
            if let meteorKey { state.byMeteorKey[meteorKey] = session }
            state.perAddress[clientAddress, default: 0] += 1
        }
        starter.yield(session)
        logger.info("session created", metadata: ["ddp.session": .string(session.id)])
        return (session, token)
    }

    /// The session of a bridge token; 401 with the reason when there is none.
    func session(token: String) throws(BridgeError) -> Session {
        let hash = SessionToken.hash(token)
        return try state.withLock { state throws(BridgeError) in
            if let session = state.sessions[hash] { return session }
            if let reason = state.ended[hash] {
                throw .unauthorized("session-expired", "This session has ended: \(reason). Create a new one with POST /v1/sessions")
            }
            throw .unauthorized("invalid-session", "Unknown session token")
        }
    }

    func session(meteorKey: String) -> Session? { state.withLock { $0.byMeteorKey[meteorKey] } }

    static let refusedMemory: Duration = .seconds(60)

    func wasRefused(meteorKey: String) -> Bool {
        state.withLock { state in
            guard let when = state.refusedMeteorKeys[meteorKey] else { return false }
            return ContinuousClock.now - when < Self.refusedMemory
        }
    }

    func rememberRefused(meteorKey: String) {
        state.withLock { state in
            if state.refusedMeteorKeys.count >= Self.endedMemory {
                let now = ContinuousClock.now
                state.refusedMeteorKeys = state.refusedMeteorKeys.filter { now - $0.value < Self.refusedMemory }
                if state.refusedMeteorKeys.count >= Self.endedMemory { state.refusedMeteorKeys.removeAll() }
            }
            state.refusedMeteorKeys[meteorKey] = .now
        }
    }

    /// Counts a session creation for an address; 429 when over the (loose) limit.
    func checkSessionRate(_ address: String) throws(BridgeError) {
        if let wait = state.withLock({ $0.creations.take(address) }) {
            throw Self.tooMany("Too many new sessions from this address; wait before trying again", wait: wait)
        }
    }

    /// Runs a login (any route: sessions, session login, the `login` and `createUser` methods,
    /// token-keyed sessions). Refused at once with 429 while the address is over its limit of
    /// failed logins; a login the upstream refuses counts as a failure.
    func login<T: Sendable>(from address: String, _ attempt: () async throws -> T) async throws -> T {
        if let wait = state.withLock({ $0.logins.wait(address) }) {
            throw Self.tooMany("Too many failed logins from this address; wait before trying again", wait: wait)
        }
        do {
            return try await attempt()
        } catch let error as DDPError {
            state.withLock { $0.logins.record(address) }
            metrics.failedLogins.increment()
            throw error
        }
    }

    private static func tooMany(_ reason: String, wait: Duration) -> BridgeError {
        // Whole milliseconds from the duration's integer parts, clamped to a day: no floating conversion.
        let (seconds, attoseconds) = wait.components
        let milliseconds = min(max(seconds, 0), 86_400) * 1000 + max(attoseconds, 0) / 1_000_000_000_000_000
        return BridgeError(
            .tooManyRequests, "too-many-requests", reason,
            details: ["timeToReset": .int(Int(clamping: milliseconds))],
            retryAfter: BridgeError.retryAfterSeconds(milliseconds: Double(milliseconds)))
    }

    /// Closes a session and forgets it; later requests with its token get `reason`.
    func end(_ session: Session, reason: String) async {
        state.withLock { state in
            guard state.sessions.removeValue(forKey: session.tokenHash) != nil else { return }
            if let key = session.meteorKey, state.byMeteorKey[key] === session { state.byMeteorKey[key] = nil }
            state.perAddress[session.clientAddress, default: 1] -= 1
            if state.perAddress[session.clientAddress]! <= 0 { state.perAddress[session.clientAddress] = nil }
            state.ended[session.tokenHash] = reason
            state.endedOrder.append(session.tokenHash)
            if state.endedOrder.count > Self.endedMemory { state.ended[state.endedOrder.removeFirst()] = nil }
        }
        logger.info("session ended", metadata: ["ddp.session": .string(session.id), "reason": .string(reason)])
        await session.close(reason: reason)
    }

    /// Drops the Meteor-token key of a session (after a logout its token no longer works).
    func forgetMeteorKey(of session: Session) {
        state.withLock { state in
            if let key = session.meteorKey, state.byMeteorKey[key] === session { state.byMeteorKey[key] = nil }
        }
    }

    // MARK: - Running

    public func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.sweep() }
                group.addTask { await self.heartbeats() }
                group.addTask {
                    // Shutdown began (see `shutdownGrace`): after the grace period, sessions whose
                    // requests are still in flight are closed under them, so the server can stop.
                    for await _ in self.shutdownBegan {
                        try? await Task.sleep(for: self.configuration.shutdownGrace)
                        await self.endAll(reason: "the bridge is shutting down")
                        return
                    }
                }
                for await session in started {
                    group.addTask { await session.run() }
                }
                await endAll(reason: "the bridge is shutting down")
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.state.withLock { $0.shuttingDown = true }
            self.starter.finish()
        }
    }

    /// Ends every session at once (each logs out with its own short timeout).
    func endAll(reason: String) async {
        let all = state.withLock { Array($0.sessions.values) }
        await withDiscardingTaskGroup { group in
            for session in all { group.addTask { await self.end(session, reason: reason) } }
        }
    }

    /// Refuses new sessions from now on and starts the grace period for requests in flight.
    func beginShutdown() {
        state.withLock { $0.shuttingDown = true }
        shutdownBell.yield()
    }

    /// A service to run beside (after) the application: when graceful shutdown begins it is told
    /// first, so new sessions are refused at once and requests in flight get `shutdownGrace` to
    /// finish while the HTTP server drains; then their sessions are closed and the server can stop.
    public var shutdownGrace: some Service { ShutdownGrace(registry: self) }

    struct ShutdownGrace: Service {
        let registry: SessionRegistry
        func run() async throws {
            do { try await gracefulShutdown() } catch { return }
            registry.beginShutdown()
        }
    }

    /// Every heartbeat interval: a comment line to every open stream.
    private func heartbeats() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: configuration.heartbeatInterval)
            for session in allSessions { session.heartbeat() }
        }
    }

    /// Once a second: close idle sessions, stop subscriptions whose linger is over.
    private func sweep() async {
        while !Task.isCancelled {
            // Never a zero step (a zero linger is allowed): that would spin.
            try? await Task.sleep(for: max(.milliseconds(50), min(.seconds(1), configuration.subscriptionLinger / 2)))
            let now = ContinuousClock.now
            let sessions = state.withLock { state in
                state.logins.prune(now: now)
                state.creations.prune(now: now)
                return Array(state.sessions.values)
            }
            for session in sessions {
                if session.isIdle(now: now) {
                    await end(session, reason: "idle for longer than \(Int(configuration.sessionIdleTimeout.seconds)) s")
                } else {
                    await session.releaseLingering(now: now)
                }
            }
        }
    }
}
