import BridgeStore
import CoreMetrics
public import DDP
public import DDPClient
import Foundation
import HTTPTypes
public import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Timing
import Tracing

/// One user's session: exactly one upstream DDP connection shared by all its requests,
/// its subscriptions, its login state and its document cache (the client's merged view).
public final class Session: Sendable {
    /// The shell's state under the session lock: the pure books, and what cannot be a value
    /// (the streams, the suspended requests, the armed timer).
    struct State: Sendable {
        var machine: SessionStateMachine
        /// Every open stream, by identity, with the feed of its loop.
        var streams: [ObjectIdentifier: StreamEntry] = [:]
        /// The feeds of the streams' event loops, with how many streams each has: the one way
        /// from the session to its streams (``LoopFeed``).
        var feeds: [ObjectIdentifier: (feed: LoopFeed, members: Int)] = [:]
        /// Requests waiting for the upstream connection to come up (see ``waitUntilConnected(timeout:)``).
        /// Each with the number of attempts begun when it came (``SessionStateMachine/attemptsBegun``).
        var connectionWaiters: [Int: (continuation: CheckedContinuation<Void, any Error>, attemptsBegun: Int)] = [:]
        var nextWaiter = 0
        /// Sends the pending batch out when its window ends (a NIO timer: no task per session).
        var flushTimer: BridgeClock.Timer?
        /// Who asked for a store write while one was under way.
        var saveWaiters: [CheckedContinuation<Bool, Never>] = []
    }

    struct StreamEntry: Sendable {
        let stream: EventStream
        let feed: LoopFeed
    }

    /// Whom a connection serves.
    enum Owner: Sendable {
        /// A user's session, made by the registry.
        case user(UserIdentity)
        /// A connection of the public fan-out's pool: anonymous, of no one address, never stored.
        case publicPool
    }

    /// What the registry keys a user's session by.
    struct UserIdentity: Sendable {
        let tokenHash: String
        /// The client address it was made from: the upstream's `X-Forwarded-For`, the stored row's.
        let address: String
        /// What the per-address limits count it by (its memory share, the sessions of its client).
        let key: ClientKey
        /// SHA-256 of the Meteor login token this session is keyed by, if any.
        let meteorKey: String?
        /// Kept in the session store (a session with a bridge token, when the bridge has a store).
        let persistent: Bool
    }

    /// A short id for logs; not the token.
    public let id: String
    let owner: Owner
    /// Who the session is, for a user's session (`nil`: a public pool connection).
    var user: UserIdentity? { if case .user(let user) = owner { user } else { nil } }
    var isPersistent: Bool { user?.persistent ?? false }
    public let client: DDPClient
    public let createdAt: Date
    let settings: Settings
    /// What the session may hold (a user's, or the public pool's).
    let limits: Limits
    let runtime: BridgeRuntime
    let state: LockedState<State>
    let logger: Logger

    let metrics: BridgeMetrics
    let budget: MemoryBudget
    /// Whom what the session holds is charged to.
    let account: BudgetAccount

    init(
        owner: Owner, settings: Settings, limits: Limits, runtime: BridgeRuntime, logger: Logger, metrics: BridgeMetrics, budget: MemoryBudget,
        pacer: ReconnectPacer = .unlimited, createdAt: Date? = nil
    ) {
        self.runtime = runtime
        self.limits = limits
        self.budget = budget
        let id = String(MeteorRandom.id().prefix(8))
        var logger = logger
        logger[metadataKey: "ddp.session"] = .string(id)
        self.id = id
        self.owner = owner
        // To the millisecond, as a store keeps it: the session reports the same instant after a restart.
        self.createdAt = Date(timeIntervalSince1970: Double(StoredSession.milliseconds(createdAt ?? runtime.clock.wallClock)) / 1000)
        self.settings = settings
        self.logger = logger
        self.metrics = metrics
        let pipeline = EventPipeline(
            window: settings.batchWindow, logCapacity: settings.eventLogSize, logByteLimit: settings.eventLogBytes,
            firstEventID: EventLog.randomFirstID())
        let state = LockedState(State(machine: SessionStateMachine(pipeline: pipeline, now: runtime.clock.now)))
        self.state = state
        // A session never goes on without its login: a refused resume closes the connection.
        var protocolConfiguration = settings.upstream.ddp
        protocolConfiguration.closesWhenLoginIsLost = true
        var options = settings.upstream.options(protocolConfiguration: protocolConfiguration, pacer: pacer, runtime: runtime)
        // The public fan-out's anonymous connections stand for no one address.
        let user: UserIdentity? = if case .user(let user) = owner { user } else { nil }
        if let user { options.handshakeHeaders[.init("X-Forwarded-For")!] = user.address }
        let account: BudgetAccount = if case .publicPool = owner { .publicPool() } else { .address(user?.key) }
        self.account = account
        self.client = DDPClient(
            options: options, logger: logger,
            events: Events(state: state, metrics: metrics, budget: budget, account: account, clock: runtime.clock),
            eventLoop: runtime.eventLoopGroup.any())
    }

    /// Starts the upstream connection; it runs until the session closes, with no task (its
    /// connect-and-reconnect loop is callbacks and timers on the client's event loop).
    func start() async {
        await client.start { [state] _ in state.withLock { $0.flushTimer?.cancel() } }
    }

    /// The session's side of its connection's delivery contract (``DDPClientEventSink``): each
    /// event is applied under the session lock while the connection's actor waits, so the
    /// order is actor → session → stream (docs/ARCHITECTURE.md, "Actors, locks and their order").
    struct Events: DDPClientEventSink {
        let state: LockedState<State>
        let metrics: BridgeMetrics
        let budget: MemoryBudget
        let account: BudgetAccount
        let clock: BridgeClock

        func receive(_ event: DDPClientEvent, on client: isolated DDPClient) {
            if case .stateChanged(.reconnecting(_, _, let cause)) = event {
                metrics.reconnects.increment()
                metrics.countUpstreamFailure(cause)
            }
            let waitersLeft = Session.perform(in: state, loop: client.eventLoop, clock: clock) { $0.received(event, now: clock.now) }
            if case .documentsChanged = event { charge(client) }
            // Requests that came while the attempt that just failed for a definite cause was under
            // way were left waiting for the next one: it goes now (through the pacer), not at the
            // end of the backoff, which their deadline may not outlast. (Their own ask came while
            // the attempt was under way, when there was no backoff to end.) The client enters its
            // backoff after this event; the ask runs after that, as a job of its loop.
            if waitersLeft { client.retrySoon() }
        }

        /// Charges the change in what the session holds (its cache and its event log) to the
        /// memory budget; past the total or the address's share, stops the subscriptions still
        /// loading (once, until back within).
        private func charge(_ client: isolated DDPClient) {
            let cached = client.cachedBytes
            let (delta, anonymous) = state.withLock { $0.machine.charge(cachedBytes: cached) }
            guard delta != 0 else { return }
            let standing = account.charge(budget, delta, anonymous: anonymous)
            guard state.withLock({ $0.machine.budgetStop(within: standing == .within, delta: delta) }),
                let cause = budget.cause(standing, anonymous: anonymous)
            else { return }
            metrics.memoryBudgetStops.increment()
            client.stopLoading(cause, warning: "past the memory budget (\(standing == .overTotal ? "in all" : "this address's share"))")
        }
    }

    /// Runs `step` on the books under the lock and performs the actions it returns, in order,
    /// under the same lock (so the order is actor → session → stream, as documented).
    /// `true` when requests that came during a failed attempt are left waiting for the next one.
    @discardableResult
    static func perform(
        in shared: LockedState<State>, loop: any EventLoop, clock: BridgeClock,
        _ step: (inout SessionStateMachine) -> [SessionStateMachine.Action]
    ) -> Bool {
        shared.withLock { state in
            let actions = step(&state.machine)
            return perform(actions, on: &state, in: shared, loop: loop, clock: clock)
        }
    }

    @discardableResult
    private static func perform(
        _ actions: [SessionStateMachine.Action], on state: inout State, in shared: LockedState<State>, loop: any EventLoop,
        clock: BridgeClock
    ) -> Bool {
        var waitersLeft = false
        for action in actions {
            switch action {
            case .deliver(let events):
                deliver(events, in: state)
            case .resumeConnectionWaiters(let error, let waitingBefore):
                for (number, waiter) in state.connectionWaiters where waitingBefore.map({ waiter.attemptsBegun < $0 }) ?? true {
                    state.connectionWaiters[number] = nil
                    if let error { waiter.continuation.resume(throwing: error) } else { waiter.continuation.resume() }
                }
                if waitingBefore != nil, !state.connectionWaiters.isEmpty { waitersLeft = true }
            case .finishStreams(let ending):
                finishStreams(with: ending, in: state)
            case .armFlushTimer(let deadline):
                state.flushTimer = clock.schedule(after: min(deadline - clock.now, .seconds(60)), on: loop) {
                    shared.withLock { state in
                        state.flushTimer = nil
                        perform(state.machine.flushTimerFired(now: clock.now), on: &state, in: shared, loop: loop, clock: clock)
                    }
                }
            }
        }
        return waitersLeft
    }

    /// Everything held in the batch goes out to the streams now (under the lock).
    /// (Two steps on purpose: the actions are a local array before the streams are read, so
    /// Swift does not copy the state, and its event log, for the loop.)
    static func flush(_ state: inout State, now: ContinuousClock.Instant) {
        for case .deliver(let events) in state.machine.flush(now: now) { deliver(events, in: state) }
    }

    /// The whole batch once to each loop's feed (in order: under the lock).
    static func deliver(_ events: [SessionEvent], in state: State) {
        for (feed, _) in state.feeds.values { feed.post(.events(events)) }
    }

    /// The last frame to every stream: behind what each loop's feed holds for its streams.
    static func finishStreams(with ending: [UInt8], in state: State) {
        for (feed, _) in state.feeds.values { feed.post(.finish(ending)) }
    }

    // MARK: - Activity

    func touch() {
        let now = runtime.clock.now
        state.withLock { $0.machine.touch(now: now) }
    }

    func isIdle(now: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.machine.isIdle(now: now, timeout: settings.idleTimeout) }
    }

    public var connection: ConnectionState { state.withLock { $0.machine.connection } }

    /// While the upstream is not connected, its state's name: what the session's cache answers
    /// may be stale (`Upstream-State`, and a query's `upstream`); `nil` while connected.
    var staleness: String? {
        let connection = self.connection
        if case .connected = connection { return nil }
        return connection.name
    }

    /// The connection as `GET /v1/session` reports it: `resyncing` (not `connected`) while the
    /// view waits for its subscriptions after a reconnect, so a stuck view never looks healthy.
    func connectionReport() async -> EJSON {
        guard case .connected = connection, await client.isResyncing else { return connection.ejson }
        guard case .object(var report) = connection.ejson else { return connection.ejson }
        report["state"] = "resyncing"
        return .object(report)
    }
    var openStreamCount: Int { state.withLock { $0.streams.count } }
    public var userID: String? { state.withLock { $0.machine.userID } }
    /// The session's Meteor resume token (`nil`: anonymous).
    var loginToken: String? { state.withLock { $0.machine.loginToken } }
    /// The cache holds documents (as of its last charge to the memory budget).
    var holdsDocuments: Bool { state.withLock { $0.machine.cachedBytes > 0 } }
    /// The session had a login and lost it: 401 `login-lost` for every request; the registry ends it.
    var loginLost: BridgeError? { state.withLock { $0.machine.loginLost } }

    /// Waits until the upstream connection is up, or answers 503 (after `timeout`, or at once
    /// when the connection is closed for good); a cancelled request stops waiting.
    func waitUntilConnected(timeout: Duration) async throws(BridgeError) {
        let number = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        do {
            try await withDeadline(timeout, clock: runtime.clock, on: client.eventLoop) { continuation in
                self.state.withLock { state in
                    switch state.machine.connectionWait {
                    case .ready: continuation.resume()
                    case .refused(let error): continuation.resume(throwing: error)
                    case .wait:
                        state.connectionWaiters[number] = (continuation, state.machine.attemptsBegun)
                        // A request should not wait out a backoff that grew while the upstream was away.
                        self.client.retrySoon()
                    }
                }
            } end: { end in
                let elsewhere = self.runtime.upstreamFailureLog.failure
                let (waiter, unreachable) = self.state.withLock {
                    ($0.connectionWaiters.removeValue(forKey: number), $0.machine.unreachable(elsewhere: elsewhere))
                }
                waiter?.continuation.resume(throwing: end == .cancelled ? DDPClientError.cancelled : unreachable)
            }
        } catch {
            throw BridgeError.from(error)
        }
    }

    /// Closes the upstream connection (logging out first when the bridge logged in with a password,
    /// unless `keepLogin`: the session lives on in its store); open streams get a last event saying why.
    func close(reason: String, keepLogin: Bool = false) async {
        let closing = state.withLock { state -> SessionStateMachine.Closing? in
            guard let closing = state.machine.close(reason: reason, keepLogin: keepLogin) else { return nil }
            Session.finishStreams(with: closing.ending, in: state)
            return closing
        }
        guard let closing else {
            await client.close(reason: reason)
            return
        }
        // What the cache held goes back to the budget with the session.
        if closing.charged != 0 { account.giveBack(closing.charged, to: budget, anonymous: closing.anonymous) }
        if closing.logOut, await client.isConnected { _ = try? await client.logout(timeout: .seconds(2)) }
        await client.close(reason: reason)
    }

    // MARK: - Login

    // Who the session is follows what its connection says (`loginChanged`, whatever call logged
    // in or out); these calls only claim the logins they made with credentials.

    /// Logs in upstream; a password login by the bridge is logged out when the session closes.
    func login(_ request: LoginRequest, timeout: Duration) async throws -> LoginResult {
        let result = try await client.login(request, timeout: timeout)
        // A password login made here is the bridge's to log out; a token the client brought is the client's.
        let byBridge = if case .password = request { true } else { false }
        claimLogin(token: result.token, byBridge: byBridge)
        return result
    }

    func createUser(username: String?, email: String?, password: String, profile: EJSON?, timeout: Duration) async throws -> LoginResult {
        let result = try await client.createUser(username: username, email: email, password: password, profile: profile, timeout: timeout)
        claimLogin(token: result.token, byBridge: true)
        return result
    }

    func logout(timeout: Duration) async throws {
        try await client.logout(timeout: timeout)
    }

    /// Claims the login a call made (the connection already made it the session's): the bridge's
    /// to log out when the session closes if it was made with credentials here (`byBridge`), as
    /// the session routes' are (a password login, a sign-up).
    func claimLogin(token: String, byBridge: Bool) {
        state.withLock { $0.machine.claimLogin(token: token, byBridge: byBridge) }
    }

    /// Whether a call of `method` with `params` that logs in was made with credentials (a
    /// password `login`, `createUser`), as opposed to a token the client brought (`resume`) or
    /// another payload: the same rule as the session routes' (``login(_:timeout:)``).
    static func logsInWithCredentials(method: String, params: [EJSON]) -> Bool {
        switch method {
        case "createUser": true
        case "login": params.first?["password"] != nil
        default: false
        }
    }

    // MARK: - Documents

    /// One document with its `_id`, encoded (`nil`: the session does not hold it). A document
    /// read again since its last change costs no hop to the connection's actor and no encoding.
    func encodedDocument(_ collection: String, _ id: String) async -> ByteBuffer? {
        if let body = state.withLock({ $0.machine.encodedDocument(collection, id) }) { return body }
        // Read inside the connection's actor, with the change count at that instant (the sink
        // counts changes under the session lock, inside the same actor).
        let (document, generation) = await client.withCache { cache in
            (cache.document(collection, id), state.withLock { $0.machine.documentGeneration })
        }
        guard let document else { return nil }
        let body = ByteBuffer(bytes: EJSONWriter.encode(.object(DocumentQuery.withID(id, document))))
        state.withLock { $0.machine.keepEncodedDocument(body, collection, id, readAt: generation) }
        return body
    }

    // MARK: - Subscriptions

    /// Subscribes (or shares the identical subscription already made); waits for `ready` when asked.
    /// `transient`: the reference an event stream holds while it is open (not kept in a store).
    func subscribe(_ name: String, params: [EJSON], wait: Bool, timeout: Duration, transient: Bool = false) async throws -> SubscriptionInfo {
        // A new subscription loads documents: the memory budget, and this address's share, must have room.
        if !holdsSubscription(name, params) { try budget.admit(user?.key, anonymous: userID == nil) }
        // A subscription's name and params are kept for the session's life (and in its store).
        let size = name.utf8.count + EJSONWriter.encode(.array(params)).count
        guard size <= settings.maxSubscriptionParamsSize else {
            throw BridgeError(
                .paramsTooLarge,
                "A subscription's name and params may take at most \(settings.maxSubscriptionParamsSize) bytes of JSON; these take \(size)")
        }
        let acquired = try acquireSubscription(name, params, limit: limits.subscriptions, transient: transient) {
            BridgeError(.tooManySubscriptions, "A session may hold at most \($0) subscriptions")
        }
        return try await startSubscription(acquired, name, params: params, wait: wait, timeout: timeout, transient: transient)
    }

    /// Takes a reference to the subscription for name and params (made when there is none yet, if
    /// the session holds fewer than `limit`; else `refusal(limit)` is thrown). Synchronous, so a
    /// caller can take it while holding its own lock (the public fan-out's placement).
    func acquireSubscription(
        _ name: String, _ params: [EJSON], limit: Int, transient: Bool = false, refusal: (Int) -> BridgeError
    ) throws(BridgeError) -> String {
        try state.withLock { state throws(BridgeError) -> String in
            try state.machine.acquireSubscription(
                name, params, limit: limit, transient: transient, makeID: { "b" + MeteorRandom.id() }, refusal: refusal)
        }
    }

    /// A reference to the subscription for name and params when it is ready on a connection that
    /// is up (``SessionStateMachine/acquireReadySubscription(_:_:)``); `nil`, with nothing taken, otherwise.
    func acquireReadySubscription(_ name: String, _ params: [EJSON]) -> String? {
        state.withLock { $0.machine.acquireReadySubscription(name, params) }
    }

    /// Whether the session holds a subscription for name and params (referenced or lingering).
    func holdsSubscription(_ name: String, _ params: [EJSON]) -> Bool { holdsSubscription(key: SharedSubscriptions.key(name, params)) }

    func holdsSubscription(key: String) -> Bool { state.withLock { $0.machine.holdsSubscription(key: key) } }

    var subscriptionCount: Int { state.withLock { $0.machine.subscriptionCount } }

    /// Starts upstream a subscription taken with ``acquireSubscription(_:_:limit:refusal:)``
    /// (idempotent when it is already started) and waits for `ready` when asked. On failure the
    /// caller's reference is dropped.
    func startSubscription(
        _ id: String, _ name: String, params: [EJSON], wait: Bool, timeout: Duration, transient: Bool = false
    ) async throws -> SubscriptionInfo {
        do {
            // Idempotent per id: a caller sharing a subscription a concurrent caller is still
            // starting either starts it or finds it started, in the client actor's order.
            try await client.subscribe(name, params: params, id: id, waitUntilReady: false)
            if wait {
                // A child span of the request's: the wait for the upstream's `ready`.
                try await withSpan("ddp.subscribe", ofKind: .client) { span in
                    span.attributes["rpc.system"] = "ddp"
                    span.attributes["ddp.subscription"] = name
                    try await client.waitUntilReady(id, timeout: timeout)
                }
            }
        } catch let error as DDPError {
            state.withLock { $0.machine.subscriptionFailed(id) }
            throw error
        } catch let error as DDPClientError where error.code != .timedOut && error.code != .cancelled {
            // Stopped on this side (closed, too large, a limit): it is gone, as a refused one is.
            state.withLock { $0.machine.subscriptionFailed(id) }
            throw error
        } catch {
            // Timed out or cancelled: this caller's reference goes; the subscription lingers
            // for others and is stopped upstream when nobody holds it.
            let now = runtime.clock.now
            state.withLock { _ = $0.machine.releaseSubscription(id, lingeringUntil: now, transient: transient) }
            throw error
        }
        return state.withLock { state in
            state.machine.subscription(id) ?? SubscriptionInfo(id: id, name: name, params: params, state: .pending, refs: 1)
        }
    }

    public var subscriptions: [SubscriptionInfo] { state.withLock { $0.machine.subscriptionList } }

    /// Drops a reference to a subscription; `false` when there is no such subscription.
    func unsubscribe(_ id: String, transient: Bool = false) -> Bool {
        let deadline = runtime.clock.now + settings.subscriptionLinger
        return state.withLock { $0.machine.releaseSubscription(id, lingeringUntil: deadline, transient: transient) }
    }

    func unsubscribe(named name: String) -> Int {
        let deadline = runtime.clock.now + settings.subscriptionLinger
        return state.withLock { $0.machine.releaseSubscriptions(named: name, lingeringUntil: deadline) }
    }

    /// Stops upstream the subscriptions whose linger is over.
    func releaseLingering(now: ContinuousClock.Instant) async {
        let expired = state.withLock { $0.machine.takeExpiredSubscriptions(now: now) }
        for id in expired { await client.unsubscribe(id) }
    }
}
