import CoreMetrics
public import DDP
public import DDPClient
import Foundation
import HTTPTypes
public import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One user's session: exactly one upstream DDP connection shared by all its requests,
/// its subscriptions, its login state and its document cache (the client's merged view).
public final class Session: Sendable {
    struct State: Sendable {
        var lastActivity = ContinuousClock.now
        var openStreams = 0
        var subscriptions = SharedSubscriptions()
        var connection: ConnectionState = .idle
        /// Why the upstream is not usable (``DDP/ConnectionState/failure(previously:)``).
        var upstreamFailure: String?
        var userID: String?
        /// The bridge itself logged in with a password (so closing the session logs out upstream).
        var loggedInByBridge = false
        var closed: String?
        var pipeline: EventPipeline
        var streams: [Int: EventStream] = [:]
        var nextStream = 1
        /// Requests waiting for the upstream connection to come up (see ``waitUntilConnected(timeout:)``).
        var connectionWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter = 0
        /// Sends the pending batch out when its window ends (a NIO timer: no task per session).
        var flushTimer: Scheduled<Void>?
        /// Recently answered single-document bodies, dropped as their documents change.
        var encodedDocuments = EncodedDocuments()
        /// The Meteor resume token of the login upstream (kept, sealed, by a session store).
        var loginToken: String?
        /// Saves of this session to its store so far (a store keeps only the newest).
        var version: Int64 = 0
        /// The idle deadline last saved (ms since 1970), and whether anything else changed since.
        var savedDeadline: Int64 = 0
        var dirty = false
        /// The cache's estimated bytes as last charged to the memory budget, and whether a stop
        /// for the budget is under way (nothing more is stopped until the charge is back within).
        var chargedBytes = 0
        var budgetStopPending = false
        /// A write of this session to its store is under way; who asked for one meanwhile.
        var storeCheckedAt: ContinuousClock.Instant?
        var saveInFlight = false
        var saveWaiters: [CheckedContinuation<Bool, Never>] = []
    }

    /// A short id for logs; not the token.
    public let id: String
    let tokenHash: String
    public let client: DDPClient
    public let clientAddress: String
    /// SHA-256 of the Meteor login token this session is keyed by, if any.
    let meteorKey: String?
    /// Kept in the session store (a session with a bridge token, when the bridge has a store).
    let isPersistent: Bool
    public let createdAt: Date
    let configuration: BridgeConfiguration
    let state: LockedState<State>
    let logger: Logger

    let metrics: BridgeMetrics
    let budget: MemoryBudget

    init(
        tokenHash: String, clientAddress: String, meteorKey: String?, configuration: BridgeConfiguration, logger: Logger,
        metrics: BridgeMetrics, budget: MemoryBudget, pacer: ReconnectPacer = .unlimited, isPersistent: Bool = false, createdAt: Date = Date()
    ) {
        self.budget = budget
        let id = String(MeteorRandom.id().prefix(8))
        var logger = logger
        logger[metadataKey: "ddp.session"] = .string(id)
        self.id = id
        self.tokenHash = tokenHash
        self.clientAddress = clientAddress
        self.meteorKey = meteorKey
        self.isPersistent = isPersistent
        self.createdAt = createdAt
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        let state = LockedState(
            State(
                pipeline: EventPipeline(
                    window: configuration.batchWindow, logCapacity: configuration.eventLogSize, logByteLimit: configuration.eventLogBytes,
                    firstEventID: EventLog.randomFirstID())))
        self.state = state
        var options = DDPClientOptions(
            url: configuration.upstream, protocolConfiguration: configuration.ddp, tls: configuration.upstreamTLS,
            compression: configuration.upstreamCompression, maxMessageSize: configuration.upstreamMaxMessageSize, pacer: pacer)
        // The public fan-out's anonymous connections stand for no one address.
        if !clientAddress.isEmpty { options.handshakeHeaders[.init("X-Forwarded-For")!] = clientAddress }
        self.client = DDPClient(
            options: options, logger: logger, events: Events(state: state, metrics: metrics, budget: budget, address: clientAddress))
    }

    /// Runs the upstream connection until the session closes.
    func run() async {
        await client.run()
        state.withLock { $0.flushTimer?.cancel() }
    }

    /// The session's side of its connection's delivery contract (``DDPClientEventSink``): each
    /// event is applied under the session lock while the connection's actor waits, so the
    /// order is actor → session → stream (docs/ARCHITECTURE.md, "Actors, locks and their order").
    struct Events: DDPClientEventSink {
        let state: LockedState<State>
        let metrics: BridgeMetrics
        let budget: MemoryBudget
        let address: String

        func receive(_ event: DDPClientEvent, on client: isolated DDPClient) {
            if case .stateChanged(.reconnecting) = event { metrics.reconnects.increment() }
            Session.handle(event, in: state)
            if case .documentsChanged = event { charge(client) }
        }

        /// Charges the change in what the session holds (its cache and its event log) to the
        /// memory budget; past the total or the address's share, stops the subscriptions still
        /// loading (once, until back within).
        private func charge(_ client: isolated DDPClient) {
            let cached = client.cachedBytes
            let (delta, anonymous) = state.withLock { state -> (Int, Bool) in
                // A closed session gave its charge back; what still arrives is not its to hold.
                guard state.closed == nil else { return (0, false) }
                let bytes = cached + state.pipeline.log.bytes
                defer { state.chargedBytes = bytes }
                return (bytes - state.chargedBytes, state.userID == nil)
            }
            guard delta != 0 else { return }
            let standing = budget.charge(address, delta, anonymous: anonymous)
            let stop = state.withLock { state -> Bool in
                guard standing != .within else {
                    state.budgetStopPending = false
                    return false
                }
                guard delta > 0, !state.budgetStopPending else { return false }
                state.budgetStopPending = true
                return true
            }
            guard stop, let refusal = budget.refusal(standing, anonymous: anonymous) else { return }
            metrics.memoryBudgetStops.increment()
            client.stopLoading(
                DDPError.meteor(refusal.error.stringValue ?? "memory-budget-exhausted", refusal.reason),
                warning: "past the memory budget (\(standing == .overTotal ? "in all" : "this address's share"))")
        }
    }

    /// What the upstream connection reports becomes session state and stream events.
    static func handle(_ event: DDPClientEvent, in shared: LockedState<State>) {
        let now = ContinuousClock.now
        shared.withLock { state in
            var events: [SessionEvent] = []
            switch event {
            case .stateChanged(let connection):
                state.connection = connection
                state.upstreamFailure = connection.failure(previously: state.upstreamFailure)
                events = state.pipeline.event(.connection, connection.ejson, now: now)
                switch connection {
                case .connected:
                    for waiter in state.connectionWaiters.values { waiter.resume() }
                    state.connectionWaiters = [:]
                case .closed(let reason):
                    let error = BridgeError.upstreamUnavailable("The upstream connection is closed: \(reason)")
                    for waiter in state.connectionWaiters.values { waiter.resume(throwing: error) }
                    state.connectionWaiters = [:]
                default:
                    break
                }
            case .subscriptionReady(let id):
                state.subscriptions.markReady(id)
                events = state.pipeline.event(.ready, ["subscriptions": [.string(id)]], now: now)
            case .subscriptionStopped(let id, let error):
                state.subscriptions.remove(id)
                events = state.pipeline.event(.nosub, ["subscription": .string(id), "error": error?.ejson ?? .null], now: now)
            case .userChanged(let user):
                state.userID = user
                state.dirty = true
                events = state.pipeline.event(.user, ["userId": user.map(EJSON.string) ?? .null], now: now)
            case .documentsChanged(let changes):
                state.encodedDocuments.changed(changes)
                events = state.pipeline.documents(changes, now: now)
            case .resumeRefused:
                // The upstream no longer takes the login: the session is anonymous from now on.
                state.loginToken = nil
                state.loggedInByBridge = false
                state.dirty = true
            case .protocolError:
                break
            }
            state.deliver(events)
            armFlushTimer(&state, in: shared)
        }
    }

    /// Arms the timer that sends a held batch out when its window ends (one at a time).
    private static func armFlushTimer(_ state: inout State, in shared: LockedState<State>) {
        guard state.flushTimer == nil, let deadline = state.pipeline.deadline else { return }
        let delay = TimeAmount(min(max(deadline - .now, .zero), .seconds(60)))
        state.flushTimer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: delay) {
            shared.withLock { state in
                state.flushTimer = nil
                state.flushPipeline(now: .now, onlyIfDue: true)
                armFlushTimer(&state, in: shared)
            }
        }
    }

    // MARK: - Activity

    func touch() { state.withLock { $0.lastActivity = .now } }

    func isIdle(now: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.openStreams == 0 && now - $0.lastActivity >= configuration.sessionIdleTimeout }
    }

    public var connection: ConnectionState { state.withLock { $0.connection } }

    /// The connection as `GET /v1/session` reports it: `resyncing` (not `connected`) while the
    /// view waits for its subscriptions after a reconnect, so a stuck view never looks healthy.
    func connectionReport() async -> EJSON {
        guard case .connected = connection, await client.isResyncing else { return connection.ejson }
        guard case .object(var report) = connection.ejson else { return connection.ejson }
        report["state"] = "resyncing"
        return .object(report)
    }
    var openStreamCount: Int { state.withLock { $0.streams.count } }
    public var userID: String? { state.withLock { $0.userID } }

    /// Waits until the upstream connection is up, or answers 503 (after `timeout`, or at once
    /// when the connection is closed for good); a cancelled request stops waiting.
    func waitUntilConnected(timeout: Duration) async throws(BridgeError) {
        do {
            try await withThrowingDeadline(timeout) { number, continuation in
                self.state.withLock { state in
                    switch state.connection {
                    case .connected: continuation.resume()
                    case .closed(let reason):
                        continuation.resume(throwing: BridgeError.upstreamUnavailable("The upstream connection is closed: \(reason)"))
                    default: state.connectionWaiters[number] = continuation
                    }
                }
            } end: { number, error in
                self.state.withLock { $0.connectionWaiters.removeValue(forKey: number) }?.resume(throwing: error ?? self.unreachable())
            }
        } catch {
            throw BridgeError.from(error)
        }
    }

    /// 503 with the time until the next attempt as `Retry-After`.
    private func unreachable() -> BridgeError {
        let (connection, failure) = state.withLock { ($0.connection, $0.upstreamFailure) }
        var retry = 5
        if case .reconnecting(_, let delay, _) = connection { retry = BridgeError.retryAfterSeconds(milliseconds: delay.seconds * 1000) }
        let reason = "The upstream Meteor server is unreachable" + (failure.map { ": \($0)" } ?? "")
        return BridgeError(.serviceUnavailable, "upstream-unavailable", reason, details: ["upstream": connection.ejson], retryAfter: retry)
    }

    /// Registers a continuation (under a number) with `register`, and ends it through `end` when
    /// `timeout` passes (`nil` error: the caller's own timeout error) or the task is cancelled.
    private func withThrowingDeadline(
        _ timeout: Duration,
        register: @escaping @Sendable (Int, CheckedContinuation<Void, any Error>) -> Void,
        end: @escaping @Sendable (Int, (any Error)?) -> Void
    ) async throws {
        let number = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = NIOLockedValueBox<Scheduled<Void>?>(nil)
        defer { timer.withLockedValue { $0?.cancel() } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                register(number, continuation)
                // Armed after registering, so neither the deadline nor a cancellation can come first and be lost.
                let amount = TimeAmount(min(max(timeout, .zero), .seconds(86_400)))
                timer.withLockedValue { $0 = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: amount) { end(number, nil) } }
                if Task.isCancelled { end(number, DDPClientError.cancelled) }
            }
        } onCancel: {
            end(number, DDPClientError.cancelled)
        }
    }

    /// Closes the upstream connection (logging out first when the bridge logged in with a password,
    /// unless `keepLogin`: the session lives on in its store); open streams get a last event saying why.
    func close(reason: String, keepLogin: Bool = false) async {
        let (logOut, charged, anonymous) = state.withLock { state -> (Bool, Int, Bool) in
            guard state.closed == nil else { return (false, 0, false) }
            state.closed = reason
            // What the cache held goes back to the budget with the session.
            let charged = state.chargedBytes
            state.chargedBytes = 0
            let ending = SSEFrame.encode(
                id: nil, event: "error", data: ["error": "session-ended", "reason": .string("The session has ended: \(reason)")])
            for stream in state.streams.values { stream.finish(with: ending) }
            return (state.loggedInByBridge && !keepLogin, charged, state.userID == nil)
        }
        if charged != 0 { budget.charge(clientAddress, -charged, anonymous: anonymous) }
        if logOut, await client.isConnected { _ = try? await client.logout(timeout: .seconds(2)) }
        await client.close(reason: reason)
    }

    // MARK: - Login

    /// Logs in upstream; a password login by the bridge is logged out when the session closes.
    func login(_ request: LoginRequest, timeout: Duration) async throws -> LoginResult {
        let result = try await client.login(request, timeout: timeout)
        state.withLock { state in
            state.loginToken = result.token
            // A password login made here is the bridge's to log out; a token the client brought is the client's.
            if case .password = request { state.loggedInByBridge = true } else { state.loggedInByBridge = false }
        }
        return result
    }

    func createUser(username: String?, email: String?, password: String, profile: EJSON?, timeout: Duration) async throws -> LoginResult {
        let result = try await client.createUser(username: username, email: email, password: password, profile: profile, timeout: timeout)
        state.withLock { state in
            state.loggedInByBridge = true
            state.loginToken = result.token
        }
        return result
    }

    func logout(timeout: Duration) async throws {
        try await client.logout(timeout: timeout)
        state.withLock { state in
            state.loggedInByBridge = false
            state.loginToken = nil
        }
    }

    // MARK: - Subscriptions

    /// Subscribes (or shares the identical subscription already made); waits for `ready` when asked.
    /// `transient`: the reference an event stream holds while it is open (not kept in a store).
    func subscribe(_ name: String, params: [EJSON], wait: Bool, timeout: Duration, transient: Bool = false) async throws -> SubscriptionInfo {
        // A new subscription loads documents: the memory budget, and this address's share, must have room.
        if !holdsSubscription(name, params) { try budget.admit(clientAddress, anonymous: userID == nil) }
        // A subscription's name and params are kept for the session's life (and in its store).
        let size = name.utf8.count + EJSONWriter.encode(.array(params)).count
        guard size <= configuration.maxSubscriptionParamsSize else {
            throw BridgeError(
                .contentTooLarge, "params-too-large",
                "A subscription's name and params may take at most \(configuration.maxSubscriptionParamsSize) bytes of JSON; these take \(size)")
        }
        let acquired = try acquireSubscription(name, params, limit: configuration.maxSubscriptionsPerSession, transient: transient) {
            BridgeError(.tooManyRequests, "too-many-subscriptions", "A session may hold at most \($0) subscriptions")
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
            let key = SharedSubscriptions.key(name, params)
            if state.subscriptions.id(forKey: key) == nil && state.subscriptions.count >= limit { throw refusal(limit) }
            return state.subscriptions.acquire(name, params, transient: transient) { "b" + MeteorRandom.id() }.id
        }
    }

    /// Whether the session holds a subscription for name and params (referenced or lingering).
    func holdsSubscription(_ name: String, _ params: [EJSON]) -> Bool { holdsSubscription(key: SharedSubscriptions.key(name, params)) }

    func holdsSubscription(key: String) -> Bool { state.withLock { $0.subscriptions.id(forKey: key) != nil } }

    var subscriptionCount: Int { state.withLock { $0.subscriptions.count } }

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
            if wait { try await client.waitUntilReady(id, timeout: timeout) }
        } catch let error as DDPError {
            state.withLock { $0.subscriptions.remove(id) }
            throw error
        } catch {
            // Timed out or cancelled: this caller's reference goes; the subscription lingers
            // for others and is stopped upstream when nobody holds it.
            let now = ContinuousClock.now
            state.withLock { _ = $0.subscriptions.release(id, at: now, transient: transient) }
            throw error
        }
        return state.withLock { state in
            state.subscriptions.entries[id]?.info ?? SubscriptionInfo(id: id, name: name, params: params, state: .pending, refs: 1)
        }
    }

    public var subscriptions: [SubscriptionInfo] { state.withLock { $0.subscriptions.list } }

    /// Drops a reference to a subscription; `false` when there is no such subscription.
    func unsubscribe(_ id: String, transient: Bool = false) -> Bool {
        let deadline = ContinuousClock.now + configuration.subscriptionLinger
        return state.withLock { state in
            guard let entry = state.subscriptions.entries[id], entry.info.refs > 0 else { return false }
            return state.subscriptions.release(id, at: deadline, transient: transient)
        }
    }

    func unsubscribe(named name: String) -> Int {
        let deadline = ContinuousClock.now + configuration.subscriptionLinger
        return state.withLock { $0.subscriptions.releaseAll(named: name, at: deadline) }
    }

    /// Stops upstream the subscriptions whose linger is over.
    func releaseLingering(now: ContinuousClock.Instant) async {
        let expired = state.withLock { $0.subscriptions.takeExpired(now: now) }
        for id in expired { await client.unsubscribe(id) }
    }
}
