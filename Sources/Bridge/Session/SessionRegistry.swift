import BridgeStore
import CoreMetrics
import DDP
import DDPClient
import Foundation
import HTTPTypes
public import Logging
import NIOCore
public import ServiceLifecycle
import Timing
import Tracing

/// Every session, by token hash (and by Meteor token hash for token-keyed sessions).
/// As a `Service`, it starts each new session's upstream connection (which then runs with no
/// task: callbacks and timers on its client's event loop), sends the streams' heartbeats, and
/// once a second closes idle sessions and releases lingering subscriptions (the sweep: one
/// child task of `run()`; the ends of sessions expiring together run side by side in a task
/// group); on shutdown it closes them all.
public final class SessionRegistry: Service, Sendable {
    struct State: Sendable {
        var sessions: [String: Session] = [:]
        var byMeteorKey: [String: Session] = [:]
        /// Sessions per client (``ClientKey``), MCP sessions included.
        var perAddress: [ClientKey: Int] = [:]
        /// MCP sessions (``MCPSessions``): each holds a place among the sessions, in all and
        /// per address, though its calls go through its user's session.
        var mcpPlaces = 0
        /// Recently closed sessions, so their token gets a clear answer (bounded): 401
        /// `session-expired` with the reason, or `login-lost`.
        var ended: [String: BridgeError] = [:]
        var endedOrder: [String] = []
        /// Failed logins per address (strict), and session creations per address (loose).
        var logins: RateLimiter<ClientKey>
        var creations: RateLimiter<ClientKey>
        /// Meteor tokens refused recently (hash → when), answered 401 without asking Meteor again.
        var refusedMeteorKeys: [String: ContinuousClock.Instant] = [:]
        /// Sessions being brought back from the store, so concurrent requests share one resume.
        var resuming: [String: Task<Session, any Error>] = [:]
        var shuttingDown = false
        /// When the store last forgot long-expired sessions (once an hour).
        var lastPurge: ContinuousClock.Instant?

        mutating func purgeDue(now: ContinuousClock.Instant) -> Bool {
            if let lastPurge, now - lastPurge < .seconds(3600) { return false }
            lastPurge = now
            return true
        }
    }

    /// What ending a session does to its stored copy.
    enum StoredEnd: Sendable {
        /// A tombstone: later requests with its token, on any replica, get 401 with the reason.
        case tombstone
        /// A tombstone only if no replica kept it alive since (its stored deadline has passed).
        case ifExpired
        /// Left as it is: the bridge stops, the session resumes on the next request.
        case keep
    }

    let settings: Settings
    let runtime: BridgeRuntime
    let logger: Logger
    let metrics: BridgeMetrics
    /// Every event stream its connection's event loop writes (session and public ones alike).
    let liveStreams: LiveStreams

    /// The streams open whose last frame is decided (cut, ended), their connections not yet closed.
    package var endingStreams: Int { liveStreams.ending }
    /// Paces every session's reconnect attempts (one bucket for the process).
    let pacer: ReconnectPacer
    /// What every session's documents may take in all, and per address.
    let budget: MemoryBudget
    /// The session store, when sessions outlive the process (a store and a key are set).
    let persistence: SessionPersistence?
    private let state: LockedState<State>
    private let started: AsyncStream<Session>
    private let starter: AsyncStream<Session>.Continuation
    private let shutdownBegan: AsyncStream<Void>
    private let shutdownBell: AsyncStream<Void>.Continuation
    static let endedMemory = 10_000
    /// Where the registry's own timers (the sweep, heartbeats, the shutdown grace) run.
    private var loop: any EventLoop { runtime.eventLoopGroup.any() }

    init(settings: Settings, runtime: BridgeRuntime = BridgeRuntime(), logger: Logger, metrics: BridgeMetrics = BridgeMetrics()) {
        self.settings = settings
        self.runtime = runtime
        self.logger = logger
        self.metrics = metrics
        self.pacer = ReconnectPacer(rate: settings.reconnectRate, burst: settings.reconnectBurst, clock: runtime.clock)
        self.budget = MemoryBudget(settings.budget)
        self.liveStreams = LiveStreams(clock: runtime.clock)
        if let key = settings.sessionKey, let given = runtime.sessionStore {
            persistence = SessionPersistence(
                given: given, key: key, timeout: settings.storeTimeout, clock: runtime.clock, logger: logger, metrics: metrics,
                loop: runtime.eventLoopGroup.any())
        } else if let key = settings.sessionKey, settings.sessionStore != .memory {
            persistence = SessionPersistence(
                choice: settings.sessionStore, key: key, dataDirectory: settings.dataDirectory, timeout: settings.storeTimeout,
                clock: runtime.clock, logger: logger, metrics: metrics,
                eventLoopGroup: runtime.eventLoopGroup)
        } else {
            persistence = nil
        }
        self.state = LockedState(
            State(
                logins: RateLimiter(calls: settings.loginRateLimit.calls, interval: settings.loginRateLimit.interval),
                creations: RateLimiter(calls: settings.sessionRateLimit.calls, interval: settings.sessionRateLimit.interval)))
        (started, starter) = AsyncStream<Session>.makeStream()
        (shutdownBegan, shutdownBell) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    public var count: Int { state.withLock { $0.sessions.count } }

    /// Shutdown began: `/readyz` says 503 so a load balancer sends new work elsewhere (drain).
    var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    var allSessions: [Session] { state.withLock { Array($0.sessions.values) } }

    // MARK: - Creating and finding sessions

    /// A new session with its upstream connection starting; returns it and its token.
    func create(clientAddress: String, meteorToken: String? = nil) throws(BridgeError) -> (session: Session, token: String) {
        let token = SessionToken.make()
        let hash = SessionToken.hash(token)
        let meteorKey = meteorToken.map(SessionToken.hash)
        let user = Session.UserIdentity(
            tokenHash: hash, address: clientAddress, key: settings.clients.key(clientAddress), meteorKey: meteorKey,
            persistent: persistence != nil && meteorKey == nil)
        let session = Session(
            owner: .user(user), settings: settings.session, limits: settings.sessionLimits, runtime: runtime, logger: logger, metrics: metrics,
            budget: budget, pacer: pacer)
        try admit(session, as: user)
        logger.info("session created", metadata: ["ddp.session": .string(session.id)])
        return (session, token)
    }

    /// Counts a session in (limits checked) and starts its upstream connection.
    private func admit(_ session: Session, as user: Session.UserIdentity) throws(BridgeError) {
        let client = user.key
        try state.withLock { state throws(BridgeError) in
            guard !state.shuttingDown else { throw .upstreamUnavailable("The bridge is shutting down") }
            guard state.sessions.count + state.mcpPlaces < settings.maxSessions else {
                throw BridgeError(
                    .tooManySessions, "The bridge holds its maximum of \(settings.maxSessions) sessions", retryAfter: 30)
            }
            guard state.perAddress[client, default: 0] < settings.maxSessionsPerAddress else {
                throw BridgeError(
                    .tooManySessionsFromAddress,
                    "This address holds its maximum of \(settings.maxSessionsPerAddress) sessions", retryAfter: 60)
            }
            state.sessions[user.tokenHash] = session
            if let meteorKey = user.meteorKey { state.byMeteorKey[meteorKey] = session }
            state.perAddress[client, default: 0] += 1
        }
        starter.yield(session)
    }

    /// An MCP session takes a place among the sessions for its life, with the same limits and
    /// answers (``admit(_:as:)``).
    func takeMCPPlace(for client: ClientKey) throws(BridgeError) {
        try state.withLock { state throws(BridgeError) in
            guard !state.shuttingDown else { throw .upstreamUnavailable("The bridge is shutting down") }
            guard state.sessions.count + state.mcpPlaces < settings.maxSessions else {
                throw BridgeError(
                    .tooManySessions, "The bridge holds its maximum of \(settings.maxSessions) sessions, MCP sessions included",
                    retryAfter: 30)
            }
            guard state.perAddress[client, default: 0] < settings.maxSessionsPerAddress else {
                throw BridgeError(
                    .tooManySessionsFromAddress,
                    "This address holds its maximum of \(settings.maxSessionsPerAddress) sessions, MCP sessions included; end one with DELETE",
                    retryAfter: 60)
            }
            state.mcpPlaces += 1
            state.perAddress[client, default: 0] += 1
        }
    }

    /// An MCP session ended: its place is free.
    func releaseMCPPlace(for client: ClientKey) {
        state.withLock { state in
            state.mcpPlaces = max(0, state.mcpPlaces - 1)
            state.perAddress[client, default: 1] -= 1
            if state.perAddress[client, default: 0] <= 0 { state.perAddress[client] = nil }
        }
    }

    static func expired(_ reason: String) -> BridgeError {
        BridgeError(.sessionExpired, "This session has ended: \(reason). Create a new one with POST /v1/sessions")
    }

    /// The session of a bridge token: held here, or resumed from the store (after a restart, or
    /// when another replica held it); 401 with the reason when there is none.
    func session(token: String) async throws(BridgeError) -> Session {
        let hash = SessionToken.hash(token)
        enum Found {
            case held(Session)
            case resuming(Task<Session, any Error>)
        }
        let found = try state.withLock { state throws(BridgeError) -> Found in
            // A session being resumed is in `sessions` before its login and subscriptions are back: wait for them.
            if let resuming = state.resuming[hash] { return .resuming(resuming) }
            if let session = state.sessions[hash] { return .held(session) }
            if let answer = state.ended[hash] { throw answer }
            guard persistence != nil, !state.shuttingDown else { throw BridgeError(.invalidSession, "Unknown session token") }
            let task = Task { try await self.resume(hash) }
            state.resuming[hash] = task
            return .resuming(task)
        }
        switch found {
        case .held(let session):
            try await recheck(session)
            return session
        case .resuming(let task):
            do { return try await task.value } catch { throw BridgeError.from(error) }
        }
    }

    /// The session a session token names when this bridge holds it and nothing needs waiting for
    /// to serve it: not being resumed, not kept in a store (whose row is looked at from time to
    /// time, ``session(token:)``), its login not lost. `nil` otherwise: the request path decides.
    func heldSession(token: String) -> Session? {
        let hash = SessionToken.hash(token)
        guard let session = state.withLock({ $0.resuming[hash] == nil ? $0.sessions[hash] : nil }), !session.isPersistent,
            session.loginLost == nil
        else { return nil }
        return session
    }

    /// Another replica may have ended a session this one holds (its client's `DELETE`, an idle
    /// expiry there): at most once per `--store-check-interval`, a held stored session is looked
    /// up before it serves, and one whose row says it ended ends here too (401). A store that
    /// does not answer decides nothing: the session goes on.
    private func recheck(_ session: Session) async throws(BridgeError) {
        guard let user = session.user, user.persistent, let persistence, session.claimStoreCheck(every: settings.storeCheckInterval)
        else { return }
        guard case .found(let stored) = await persistence.load(tokenHash: user.tokenHash), let reason = stored.ended else { return }
        // Ended elsewhere: its row and its upstream login are that replica's business.
        await end(session, reason: reason, stored: .keep)
        throw Self.expired(reason)
    }

    /// A session that lost its login (``Session/loginLost``) serves nothing more: it ends (its
    /// stored copy too) and the request, and every later one with its token, gets 401 `login-lost`.
    func checkLogin(_ session: Session) async throws(BridgeError) {
        guard let lost = session.loginLost else { return }
        await end(session, reason: Self.loginLostReason, answer: lost)
        throw lost
    }

    static let loginLostReason = "its Meteor login was lost (the upstream refused its resume token after a reconnect)"

    /// Brings a stored session back: the same token, subscriptions (same ids) and login (the
    /// Meteor resume token, unsealed); its event streams start a new log, so a stream resuming
    /// from before gets a reset and a snapshot.
    private func resume(_ hash: String) async throws -> Session {
        defer { state.withLock { _ = $0.resuming.removeValue(forKey: hash) } }
        // A child span of the (first) request that needs it: the session read back from the store.
        return try await withSpan("session.resume", ofKind: .internal) { _ in try await resumeFromStore(hash) }
    }

    private func resumeFromStore(_ hash: String) async throws -> Session {
        guard let persistence else { throw BridgeError(.invalidSession, "Unknown session token") }
        let stored: StoredSession
        switch await persistence.load(tokenHash: hash) {
        case .absent: throw BridgeError(.invalidSession, "Unknown session token")
        case .unavailable:
            throw BridgeError(
                .sessionStoreUnavailable, "This session is not held here and the session store does not answer; try again",
                retryAfter: 5)
        case .found(let record): stored = record
        }
        if let reason = stored.ended { throw Self.expired(reason) }
        guard stored.expiresAt > StoredSession.milliseconds(runtime.clock.wallClock) else {
            throw Self.expired("idle for longer than \(settings.session.idleTimeout.wholeSeconds) s")
        }
        guard let loginToken = persistence.loginToken(of: stored) else {
            // Another key sealed it: a replica started with the wrong --session-key. The session
            // is left in the store for the bridges that hold its key (it was ended for good here).
            logger.error(
                "a stored session's login does not unseal with this bridge's --session-key; is it the key the other replicas use?",
                metadata: ["ddp.token_hash": .string(String(hash.prefix(8)))])
            metrics.sessionKeyMismatches.increment()
            throw BridgeError(
                .sessionKeyMismatch,
                "This session was sealed with another session key than this bridge's; a bridge with that key can serve it", retryAfter: 5)
        }
        let user = Session.UserIdentity(
            tokenHash: hash, address: stored.clientAddress, key: settings.clients.key(stored.clientAddress), meteorKey: nil, persistent: true)
        let session = Session(
            owner: .user(user), settings: settings.session, limits: settings.sessionLimits, runtime: runtime, logger: logger, metrics: metrics,
            budget: budget, pacer: pacer,
            createdAt: Date(timeIntervalSince1970: Double(stored.createdAt) / 1000))
        session.adopt(stored)
        try admit(session, as: user)
        do {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            if let loginToken {
                do {
                    _ = try await session.login(.resume(token: loginToken), timeout: settings.requestTimeout)
                    session.adopt(stored)
                } catch let error as DDPError where error.error == .number(403) {
                    await end(session, reason: "its Meteor login is no longer valid", stored: .tombstone)
                    throw Self.expired("its Meteor login is no longer valid")
                }
            }
            await session.resubscribe(stored.subscriptions, timeout: settings.requestTimeout)
        } catch {
            // Anything but a refused login (the upstream is down, say): the stored session stays for a later try.
            await end(session, reason: "could not be resumed", stored: .keep, forget: true)
            throw error
        }
        metrics.sessionsResumed.increment()
        logger.info(
            "session resumed from the store",
            metadata: ["ddp.session": .string(session.id), "subscriptions": .stringConvertible(stored.subscriptions.count)])
        await save(session)
        return session
    }

    /// Writes a session to the store now (after a login, logout, subscribe or unsubscribe), so a
    /// restart or another replica finds it as the client last saw it.
    ///
    /// One write at a time per session: saves asked for while one is written wait for the next
    /// write, which covers them all (each caller is answered after a write that began after it
    /// asked). A burst of 40 subscribes was 40 writes of the whole row; it is two.
    func save(_ session: Session) async {
        guard session.isPersistent, let persistence else { return }
        guard await session.leadSave() else { return }  // another caller's write covered this one
        var served: [CheckedContinuation<Bool, Never>] = []
        while true {
            if let (record, loginToken) = session.storeRecord() {
                if await persistence.save(record, loginToken: loginToken) {
                    metrics.storeSaves.increment()
                } else {
                    session.markDirty()
                }
            }
            for waiter in served { waiter.resume(returning: false) }
            served = session.nextSaveBatch()
            if served.isEmpty { return }
        }
    }

    func session(meteorKey: String) -> Session? { state.withLock { $0.byMeteorKey[meteorKey] } }

    static let refusedMemory: Duration = .seconds(60)

    func wasRefused(meteorKey: String) -> Bool {
        state.withLock { state in
            guard let when = state.refusedMeteorKeys[meteorKey] else { return false }
            return runtime.clock.now - when < Self.refusedMemory
        }
    }

    func rememberRefused(meteorKey: String) {
        state.withLock { state in
            if state.refusedMeteorKeys.count >= Self.endedMemory {
                let now = runtime.clock.now
                state.refusedMeteorKeys = state.refusedMeteorKeys.filter { now - $0.value < Self.refusedMemory }
                if state.refusedMeteorKeys.count >= Self.endedMemory { state.refusedMeteorKeys.removeAll() }
            }
            state.refusedMeteorKeys[meteorKey] = runtime.clock.now
        }
    }

    /// Counts a session creation for a client; 429 when over the (loose) limit.
    func checkSessionRate(_ client: ClientKey) throws(BridgeError) {
        if let wait = state.withLock({ $0.creations.take(client, now: runtime.clock.now) }) {
            throw Self.tooMany("Too many new sessions from this address; wait before trying again", wait: wait)
        }
    }

    /// Runs a login (any route: sessions, session login, the `login` and `createUser` methods,
    /// token-keyed sessions). Refused at once with 429 while the address is over its limit of
    /// failed logins; a login the upstream refuses counts as a failure.
    func login<T: Sendable>(from client: ClientKey, _ attempt: () async throws -> T) async throws -> T {
        if let wait = state.withLock({ $0.logins.wait(client, now: runtime.clock.now) }) {
            throw Self.tooMany("Too many failed logins from this address; wait before trying again", wait: wait)
        }
        do {
            return try await attempt()
        } catch let error as DDPError {
            state.withLock { $0.logins.record(client, now: runtime.clock.now) }
            metrics.failedLogins.increment()
            throw error
        }
    }

    private static func tooMany(_ reason: String, wait: Duration) -> BridgeError {
        // Whole milliseconds from the duration's integer parts, clamped to a day: no floating conversion.
        // Not `wholeMilliseconds` then a clamp: only the seconds are clamped, so past a day the sub-second part stays.
        let (seconds, attoseconds) = wait.components
        let milliseconds = min(max(seconds, 0), 86_400) * 1000 + max(attoseconds, 0) / 1_000_000_000_000_000
        return BridgeError(
            .tooManyRequests, reason,
            details: ["timeToReset": .int(Int(clamping: milliseconds))],
            retryAfter: BridgeError.retryAfterSeconds(milliseconds: Double(milliseconds)))
    }

    /// Closes a session and forgets it; later requests with its token get 401 `session-expired`
    /// with `reason`, or `answer` (unless `forget`: a later request may resume it from the store).
    /// `stored`: what happens to its stored copy (``StoredEnd``).
    func end(_ session: Session, reason: String, stored: StoredEnd = .tombstone, forget: Bool = false, answer: BridgeError? = nil) async {
        guard let user = session.user else { return }  // the registry holds users' sessions only
        let removed = state.withLock { state -> Bool in
            guard state.sessions[user.tokenHash] === session else { return false }
            state.sessions[user.tokenHash] = nil
            if let key = user.meteorKey, state.byMeteorKey[key] === session { state.byMeteorKey[key] = nil }
            state.perAddress[user.key, default: 1] -= 1
            if state.perAddress[user.key, default: 0] <= 0 { state.perAddress[user.key] = nil }
            guard !forget else { return true }
            state.ended[user.tokenHash] = answer ?? Self.expired(reason)
            state.endedOrder.append(user.tokenHash)
            if state.endedOrder.count > Self.endedMemory { state.ended[state.endedOrder.removeFirst()] = nil }
            return true
        }
        guard removed else { return }
        logger.info("session ended", metadata: ["ddp.session": .string(session.id), "reason": .string(reason)])
        let keep = user.persistent && stored == .keep
        if user.persistent, let persistence, stored != .keep {
            let bound: Int64? = stored == .ifExpired ? StoredSession.milliseconds(runtime.clock.wallClock) : nil
            await persistence.end(tokenHash: user.tokenHash, reason: reason, onlyIfExpiredBy: bound)
        }
        // A session kept in the store keeps its upstream login, for the resume.
        await session.close(reason: reason, keepLogin: keep)
    }

    /// Drops the Meteor-token key of a session (after a logout its token no longer works).
    func forgetMeteorKey(of session: Session) {
        state.withLock { state in
            if let key = session.user?.meteorKey, state.byMeteorKey[key] === session { state.byMeteorKey[key] = nil }
        }
    }

    // MARK: - Running

    public func run() async throws {
        if let persistence {
            await persistence.start()
            logger.info("sessions are kept in the session store", metadata: ["store": .string(persistence.name)])
        } else if settings.sessionStore != .memory {
            logger.notice("sessions are kept in memory only (no --session-key): a restart ends them")
        }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.sweep() }
                group.addTask { await self.heartbeats() }
                group.addTask {
                    // Shutdown began (see `shutdownGrace`): after the grace period, sessions whose
                    // requests are still in flight are closed under them, so the server can stop.
                    for await _ in self.shutdownBegan {
                        try? await self.runtime.clock.sleep(for: self.settings.shutdownGrace, on: self.loop)
                        await self.endAll(reason: "the bridge is shutting down", stored: .keep)
                        return
                    }
                }
                for await session in started {
                    await session.start()
                }
                await endAll(reason: "the bridge is shutting down", stored: .keep)
                group.cancelAll()
            }
            // The streams written from event loops have had their last event; bounded, their
            // connections close before the process goes.
            await liveStreams.waitUntilClosed(within: settings.shutdownGrace)
        } onGracefulShutdown: {
            self.liveStreams.shutDown()
            self.state.withLock { $0.shuttingDown = true }
            self.starter.finish()
        }
        if let persistence { await persistence.shutdown() }
    }

    /// Ends every session at once (each logs out with its own short timeout, unless it is kept
    /// in the store: it is saved as it is, for the next start or another replica).
    func endAll(reason: String, stored: StoredEnd = .tombstone) async {
        let all = state.withLock { Array($0.sessions.values) }
        // The last saves try the store even within its pause after a failure: a session changed
        // while the store was failing is written now, or its next life resumes an older one.
        if stored == .keep, let persistence { await persistence.tryAgainNow() }
        await withDiscardingTaskGroup { group in
            for session in all {
                group.addTask {
                    if stored == .keep { await self.save(session) }
                    await self.end(session, reason: reason, stored: stored)
                }
            }
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
            try? await runtime.clock.sleep(for: settings.heartbeatInterval, on: loop)
            for session in allSessions { session.heartbeat() }
        }
    }

    /// Once a second: close idle sessions, stop subscriptions whose linger is over.
    private func sweep() async {
        while !Task.isCancelled {
            // Never a zero step (a zero linger is allowed): that would spin.
            try? await runtime.clock.sleep(for: max(.milliseconds(50), min(.seconds(1), settings.session.subscriptionLinger / 2)), on: loop)
            await sweepOnce()
        }
    }

    /// One pass of the sweep at the runtime's clock's time (tests that move the clock
    /// call it rather than wait for the next pass).
    func sweepOnce() async {
        let now = runtime.clock.now
        let sessions = state.withLock { state in
            state.logins.prune(now: now)
            state.creations.prune(now: now)
            return Array(state.sessions.values)
        }
        // Expiries are decided first; their ends (a store write, an upstream logout: seconds
        // each when the store or the upstream is slow) run side by side, and beside the
        // linger releases and saves of the others. One after another, N sessions expiring
        // together held the sweep for N times that.
        // A session that lost its login ends now, with no request needed (its streams had their
        // last event when it was lost).
        let lost = sessions.compactMap { session in session.loginLost.map { (session, $0) } }
        let idle = sessions.filter { $0.loginLost == nil && $0.isIdle(now: now) }
        let ending = Set((idle + lost.map(\.0)).map(ObjectIdentifier.init))
        let reason = "idle for longer than \(settings.session.idleTimeout.wholeSeconds) s"
        await withDiscardingTaskGroup { group in
            for (session, answer) in lost { group.addTask { await self.end(session, reason: Self.loginLostReason, answer: answer) } }
            for session in idle { group.addTask { await self.end(session, reason: reason, stored: .ifExpired) } }
            for session in sessions where !ending.contains(ObjectIdentifier(session)) {
                await session.releaseLingering(now: now)
                await saveIfChanged(session)
            }
        }
        if let persistence, state.withLock({ $0.purgeDue(now: now) }) { await persistence.purge() }
    }

    /// Saves a session whose login or user changed, or whose idle deadline moved on by more than
    /// a tenth of the idle timeout (at most a minute): a replica that resumes it after a crash
    /// may see it idle that much early.
    private func saveIfChanged(_ session: Session) async {
        guard session.isPersistent, let persistence else { return }
        let slack = min(settings.session.idleTimeout / 10, .seconds(60))
        guard let (record, loginToken) = session.storeRecord(onlyIfChanged: true, slack: slack) else { return }
        if await !persistence.save(record, loginToken: loginToken) { session.markDirty() }
    }
}
