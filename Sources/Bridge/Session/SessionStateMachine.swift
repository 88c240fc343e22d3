import BridgeStore
import DDP
import DDPClient
import Foundation
import HTTPTypes
import NIOCore

/// A session as a value, in the shape of ``DDP/DDPConnectionStateMachine``: its ``Phase``
/// (connecting, connected, upstream closed, login lost, closed), what its upstream connection
/// reported (state, user, failure), its subscription ledger, its event pipeline, its recently
/// encoded documents, its activity and open streams, its login, its store bookkeeping and its
/// memory charge. All of it is private: every input is a method (what happened, with its
/// instant), and what must happen outside (events to the streams, waiters to resume, a timer to
/// arm, streams to end) comes back as ``Action``s, which ``Session`` (the shell, its only
/// caller) performs under its lock, in order. It does no I/O and reads no clock.
///
/// The phases (docs/ARCHITECTURE.md draws them):
///
///     connecting ──connected──▶ connected ──dropped──▶ connecting
///         │                        │
///         ├──client closed──▶ upstreamClosed
///         └─────── resume refused (from any open phase) ──▶ loginLost
///     any phase ──close(reason:)──▶ closed (final)
///
/// Tested as transcripts, without sockets (SessionStateMachineTests).
struct SessionStateMachine: Sendable {
    enum Action: Sendable {
        /// Hand these events, in order, to every open stream.
        case deliver([SessionEvent])
        /// Resume the requests waiting for the upstream: `nil`, it is connected; else fail them with
        /// the error. `waitingBefore`: only those that began to wait before that attempt
        /// (``attemptsBegun``) began; `nil`, all of them.
        case resumeConnectionWaiters(BridgeError?, waitingBefore: Int? = nil)
        /// Arm the batch window's timer (none is armed): call ``flushTimerFired(now:)`` at this instant.
        case armFlushTimer(at: ContinuousClock.Instant)
        /// End every open stream with this last frame.
        case finishStreams(ending: [UInt8])
    }

    /// How a request that needs the upstream goes on (``connectionWait``).
    enum ConnectionWait: Sendable {
        case ready
        case refused(BridgeError)
        case wait
    }

    /// What the shell does when the session closes (``close(reason:keepLogin:)``).
    struct Closing: Sendable {
        /// The last frame every open stream gets.
        let ending: [UInt8]
        /// Log out upstream first (the bridge logged in with a password, and the login is not kept).
        let logOut: Bool
        /// The charge to give back to the memory budget, and whether it was an anonymous one.
        let charged: Int
        let anonymous: Bool
    }

    /// What a session's store row holds, at its next version (``storeRecord(onlyIfChanged:slack:now:wallClock:idleTimeout:)``).
    struct StoreRecord: Sendable {
        let version: Int64
        let expiresAt: Int64
        let userID: String?
        let bridgeLogin: Bool
        let subscriptions: [StoredSubscription]
        let loginToken: String?
    }

    /// Where the session is in its life; requests, streams and the store follow it.
    enum Phase: Sendable {
        /// The upstream connection is not up yet, or is coming back: requests wait for it (up to
        /// their timeout).
        case connecting
        /// Requests go upstream.
        case connected
        /// The connection stopped for good (its client was closed): requests get 503.
        case upstreamClosed(reason: String)
        /// The login no longer holds upstream (its resume token was refused after a reconnect):
        /// every request gets 401 `login-lost`, streams ended with it, and the registry ends the
        /// session. Never stored as an anonymous session.
        case loginLost(BridgeError)
        /// Ended (idle, deleted, shut down): final.
        case closed(reason: String)
    }

    // MARK: - The books

    private(set) var phase: Phase = .connecting
    /// The connection's state as last reported (for `GET /v1/session` and 503 details).
    private(set) var connection: ConnectionState = .idle
    /// How many connection attempts have begun (a request that waits notes it: an attempt that
    /// began before it came may fail without failing it, see ``received(_:now:)``).
    private(set) var attemptsBegun = 0
    /// Why the upstream is not usable (``DDP/ConnectionState/failure(previously:)``).
    private(set) var upstreamFailure: UpstreamFailure?
    /// Who the session is, and the Meteor resume token of that login (kept, sealed, by a
    /// session store): what the upstream connection last said (``DDPClient/DDPClientEvent/loginChanged(_:)``),
    /// whichever route the login took (a session route, `POST /v1/methods/login`, a resume).
    private(set) var userID: String?
    private(set) var loginToken: String?
    /// The bridge itself logged in with a password (so closing the session logs out upstream):
    /// claimed for the current token by whoever made the login (``claimLogin(token:byBridge:)``).
    private(set) var loggedInByBridge = false
    /// The subscription ledger (shared by name and params, counted, lingering).
    private var subscriptions = SharedSubscriptions()
    private var pipeline: EventPipeline
    /// Recently answered single-document bodies, dropped as their documents change.
    private var encodedDocuments = EncodedDocuments()
    private var lastActivity: ContinuousClock.Instant
    /// Streams admitted and not yet detached.
    private var openStreams = 0
    private var flushArmed = false

    /// Saves of this session to its store so far (a store keeps only the newest).
    private var version: Int64 = 0
    /// The idle deadline last saved (ms since 1970), and whether anything else changed since.
    private var savedDeadline: Int64 = 0
    private var dirty = false
    private var storeCheckedAt: ContinuousClock.Instant?
    /// A write of this session to its store is under way.
    private var saveInFlight = false

    /// The cache's and log's bytes as last charged to the memory budget, and whether a stop for
    /// the budget is under way (nothing more is stopped until the charge is back within).
    private var chargedBytes = 0
    /// The cache's bytes at the last charge: documents still held (a stopped subscription's are
    /// removed by the server after its `unsub`, and may still be arriving meanwhile).
    private(set) var cachedBytes = 0

    /// The session had a login and lost it: what every request gets (401 `login-lost`).
    var loginLost: BridgeError? {
        if case .loginLost(let error) = phase { error } else { nil }
    }

    private var isClosed: Bool {
        if case .closed = phase { true } else { false }
    }

    /// The session's event log (read by streams' preludes, a page at a time, under the lock).
    var log: EventLog { pipeline.log }
    private var budgetStopPending = false

    init(pipeline: EventPipeline, now: ContinuousClock.Instant) {
        self.pipeline = pipeline
        self.lastActivity = now
    }

    // MARK: - What the upstream connection reports

    /// An event of the session's ``DDPClient``: state, stream events, and the batch timer.
    mutating func received(_ event: DDPClientEvent, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        var events: [SessionEvent] = []
        switch event {
        case .stateChanged(let state):
            connection = state
            upstreamFailure = state.failure(previously: upstreamFailure)
            events = pipeline.event(.connection, state.ejson, now: now)
            switch state {
            case .connecting:
                attemptsBegun += 1
            case .connected:
                actions.append(.resumeConnectionWaiters(nil))
            case .reconnecting(_, _, let cause?) where cause.isDefinite:
                // The attempt failed for a definite cause: the requests that waited for it fail
                // now with that cause, rather than wait out their deadline for an answer already
                // known. A request that came while the attempt was under way waits for the next
                // one (it asks for it at once): the upstream may be back since that attempt
                // began. After a timeout or a lost connection they all wait for the next attempt.
                actions.append(.resumeConnectionWaiters(unreachable(elsewhere: cause), waitingBefore: attemptsBegun))
            case .closed(let reason):
                actions.append(.resumeConnectionWaiters(loginLost ?? .upstreamUnavailable("The upstream connection is closed: \(reason)")))
            default:
                break
            }
            // A lost login and a closed session stay what they are; otherwise the phase follows the connection.
            switch (phase, state) {
            case (.loginLost, _), (.closed, _): break
            case (_, .connected): phase = .connected
            case (_, .closed(let reason)): phase = .upstreamClosed(reason: reason)
            case (_, .idle), (_, .connecting), (_, .reconnecting): phase = .connecting
            }
        case .subscriptionReady(let id):
            subscriptions.markReady(id)
            events = pipeline.event(.ready, ["subscriptions": [.string(id)]], now: now)
        case .subscriptionStopped(let id, let error):
            subscriptions.remove(id)
            events = pipeline.event(.nosub, ["subscription": .string(id), "error": error?.ejson ?? .null], now: now)
        case .loginChanged(let login):
            let user = login?.userId
            // A new token is nobody's to log out until its maker claims it.
            if login?.token != loginToken { loggedInByBridge = false }
            loginToken = login?.token
            dirty = true
            if user != userID {
                userID = user
                events = pipeline.event(.user, ["userId": user.map(EJSON.string) ?? .null], now: now)
            }
        case .documentsChanged(let changes):
            encodedDocuments.changed(changes)
            events = pipeline.documents(changes, now: now)
        case .resumeRefused(let refusal):
            // The upstream no longer takes the login. The session never goes on without it (its
            // connection closed: nothing more was sent upstream): its streams end now, its
            // requests get 401 `login-lost`, and the registry ends it.
            loginToken = nil
            loggedInByBridge = false
            switch phase {
            case .loginLost, .closed:
                break
            case .connecting, .connected, .upstreamClosed:
                phase = .loginLost(BridgeError.from(DDPClientError.loginLost(refusal)))
                if let ending = lostLoginEnding { actions.append(.finishStreams(ending: ending)) }
            }
        case .protocolError:
            break
        }
        // Waiters first, then the streams: as the shell did before it was a machine.
        if !events.isEmpty { actions.append(.deliver(events)) }
        return actions + armFlushTimer(now: now)
    }

    /// The batch window's timer fired: what is due goes out, and the next window is armed.
    mutating func flushTimerFired(now: ContinuousClock.Instant) -> [Action] {
        flushArmed = false
        let events = pipeline.flushIfDue(now: now)
        return (events.isEmpty ? [] : [.deliver(events)]) + armFlushTimer(now: now)
    }

    /// Everything held in the batch goes out now (a stream attaches, a position is read).
    mutating func flush(now: ContinuousClock.Instant) -> [Action] {
        let events = pipeline.flush(now: now)
        return events.isEmpty ? [] : [.deliver(events)]
    }

    private mutating func armFlushTimer(now: ContinuousClock.Instant) -> [Action] {
        guard !flushArmed, let deadline = pipeline.deadline(now: now) else { return [] }
        flushArmed = true
        return [.armFlushTimer(at: deadline)]
    }

    // MARK: - Requests that need the upstream

    var connectionWait: ConnectionWait {
        switch phase {
        case .loginLost(let error): .refused(error)
        case .connected: .ready
        case .upstreamClosed(let reason): .refused(.upstreamUnavailable("The upstream connection is closed: \(reason)"))
        case .connecting: .wait
        // A closed session's connection is closing: what it says last.
        case .closed:
            switch connection {
            case .connected: .ready
            case .closed(let reason): .refused(.upstreamUnavailable("The upstream connection is closed: \(reason)"))
            default: .wait
            }
        }
    }

    /// 503 with the time until the next attempt as `Retry-After` (a wait for the upstream ran
    /// out), naming the cause: this session's last failed attempt, else `elsewhere` (the
    /// process's latest, ``DDPClient/UpstreamFailureLog``), for a first attempt still under way
    /// when the wait ran out (an upgrade that is never answered outlasts `--connect-timeout`).
    func unreachable(elsewhere: UpstreamFailure? = nil) -> BridgeError {
        var retry = 5
        // Fractional milliseconds (a Double), rounded up to seconds there: `wholeMilliseconds` would truncate first.
        if case .reconnecting(_, let delay, _) = connection { retry = BridgeError.retryAfterSeconds(milliseconds: delay.seconds * 1000) }
        let failure = upstreamFailure ?? elsewhere
        let reason = "The upstream Meteor server is unreachable" + (failure.map { ": \($0.message)" } ?? "")
        return BridgeError(
            .upstreamUnavailable, reason, details: UpstreamFailure.details(connection, failure), retryAfter: retry)
    }

    // MARK: - Activity and streams

    mutating func touch(now: ContinuousClock.Instant) { lastActivity = now }

    func isIdle(now: ContinuousClock.Instant, timeout: Duration) -> Bool { openStreams == 0 && now - lastActivity >= timeout }

    /// Admits one more stream (a closed session, or one at its limit, refuses it).
    mutating func admitStream(limit: Int) throws(BridgeError) {
        if case .closed(let reason) = phase { throw BridgeError(.sessionExpired, "This session has ended: \(reason)") }
        if let loginLost { throw loginLost }
        guard openStreams < limit else {
            throw BridgeError(.tooManyStreams, "A session may have at most \(limit) open streams")
        }
        openStreams += 1
    }

    /// A stream ended: the session is active from now, as a request would make it.
    mutating func streamDetached(now: ContinuousClock.Instant) {
        openStreams -= 1
        lastActivity = now
    }

    // MARK: - Login

    /// A login upstream succeeded, made by the claimant: `byBridge`, with credentials here (the
    /// bridge's to log out when the session closes). Who is logged in, and with which token,
    /// the connection has said already (``received(_:now:)``); a token it no longer holds (a
    /// later login came first) is not claimed.
    mutating func claimLogin(token: String, byBridge: Bool) {
        guard token == loginToken else { return }
        loggedInByBridge = byBridge
    }

    /// The last frame every stream gets once the login is lost, open or attaching (`nil`: it is not).
    var lostLoginEnding: [UInt8]? {
        loginLost.map { SSEFrame.lastError(.loginLost, $0.reason) }
    }

    // MARK: - Memory budget

    /// The change in what the session holds (its cache's bytes and its log's), now charged:
    /// the delta to charge, and whether the session is anonymous. A closed session gave its
    /// charge back; what still arrives is not its to hold.
    mutating func charge(cachedBytes: Int) -> (delta: Int, anonymous: Bool) {
        guard !isClosed else { return (0, false) }
        self.cachedBytes = cachedBytes
        let bytes = cachedBytes + pipeline.log.bytes
        defer { chargedBytes = bytes }
        return (bytes - chargedBytes, userID == nil)
    }

    /// After a charge: whether to stop the loading subscriptions now (once, until back within).
    mutating func budgetStop(within: Bool, delta: Int) -> Bool {
        guard !within else {
            budgetStopPending = false
            return false
        }
        guard delta > 0, !budgetStopPending else { return false }
        budgetStopPending = true
        return true
    }

    // MARK: - Subscriptions

    /// Takes a reference to the subscription for name and params: made (with `makeID`) when
    /// there is none yet and the session holds fewer than `limit`, else `refusal(limit)`.
    mutating func acquireSubscription(
        _ name: String, _ params: [EJSON], limit: Int, transient: Bool, makeID: () -> String, refusal: (Int) -> BridgeError
    ) throws(BridgeError) -> String {
        let key = SharedSubscriptions.key(name, params)
        if subscriptions.id(forKey: key) == nil && subscriptions.count >= limit { throw refusal(limit) }
        return subscriptions.acquire(name, params, transient: transient, newID: makeID).id
    }

    /// A reference to the subscription for name and params when a reader can start on it at once:
    /// it is held and ready, and the connection is up. `nil` otherwise, with nothing taken.
    mutating func acquireReadySubscription(_ name: String, _ params: [EJSON]) -> String? {
        guard case .connected = phase, let id = subscriptions.id(forKey: SharedSubscriptions.key(name, params)),
            subscriptions.entries[id]?.info.state == .ready
        else { return nil }
        return subscriptions.acquire(name, params, newID: { id }).id
    }

    /// A subscription is gone (refused, stopped on this side): off the ledger.
    mutating func subscriptionFailed(_ id: String) { subscriptions.remove(id) }

    /// Drops a reference; the subscription lingers until `deadline` when it was the last.
    /// `false` when there is no such referenced subscription.
    mutating func releaseSubscription(_ id: String, lingeringUntil deadline: ContinuousClock.Instant, transient: Bool) -> Bool {
        guard let entry = subscriptions.entries[id], entry.info.refs > 0 else { return false }
        return subscriptions.release(id, at: deadline, transient: transient)
    }

    /// Drops every reference to the subscriptions of `name`; how many there were.
    mutating func releaseSubscriptions(named name: String, lingeringUntil deadline: ContinuousClock.Instant) -> Int {
        subscriptions.releaseAll(named: name, at: deadline)
    }

    /// The subscriptions whose linger is over, off the ledger: to stop upstream.
    mutating func takeExpiredSubscriptions(now: ContinuousClock.Instant) -> [String] { subscriptions.takeExpired(now: now) }

    /// Takes on a stored subscription under its own id and reference count (`false`: not taken).
    mutating func restoreSubscription(_ stored: StoredSubscription) -> Bool {
        subscriptions.restore(id: stored.id, name: stored.name, params: stored.params, refs: stored.refs)
    }

    func holdsSubscription(key: String) -> Bool { subscriptions.id(forKey: key) != nil }
    var subscriptionCount: Int { subscriptions.count }
    var subscriptionList: [SubscriptionInfo] { subscriptions.list }
    func subscription(_ id: String) -> SubscriptionInfo? { subscriptions.entries[id]?.info }

    // MARK: - Encoded documents

    /// The body answered for this document since its last change, if kept.
    func encodedDocument(_ collection: String, _ id: String) -> ByteBuffer? { encodedDocuments.body(collection, id) }

    /// Counts changes to the session's documents (a read notes it, to keep its body after).
    var documentGeneration: UInt64 { encodedDocuments.generation }

    /// Keeps a document's encoded body, unless a change came after the read it was made from.
    mutating func keepEncodedDocument(_ body: ByteBuffer, _ collection: String, _ id: String, readAt generation: UInt64) {
        encodedDocuments.keep(body, collection, id, readAt: generation)
    }

    // MARK: - Closing

    /// Closes the books (`nil` when closed already): the streams' last frame, whether to log out
    /// upstream, and the charge to give back.
    mutating func close(reason: String, keepLogin: Bool) -> Closing? {
        guard !isClosed else { return nil }
        phase = .closed(reason: reason)
        defer { chargedBytes = 0 }
        let ending = SSEFrame.lastError(.sessionEnded, "The session has ended: \(reason)")
        return Closing(ending: ending, logOut: loggedInByBridge && !keepLogin, charged: chargedBytes, anonymous: userID == nil)
    }

    // MARK: - Store bookkeeping

    /// What the store should hold now, at the next version; `onlyIfChanged`: `nil` unless
    /// something changed since the last save or the idle deadline moved by more than `slack`.
    /// `wallClock` turns the idle deadline into ms since 1970 (an open stream counts as activity).
    mutating func storeRecord(
        onlyIfChanged: Bool, slack: Duration, now: ContinuousClock.Instant, wallClock: Date, idleTimeout: Duration
    ) -> StoreRecord? {
        // A session that lost its login is never stored as an anonymous one: it ends.
        switch phase {
        case .closed, .loginLost: return nil
        case .connecting, .connected, .upstreamClosed: break
        }
        let since = openStreams == 0 ? now - lastActivity : .zero
        let remaining = max(idleTimeout - since, .zero)
        let deadline = StoredSession.milliseconds(wallClock.addingTimeInterval(remaining.seconds))
        if onlyIfChanged, !dirty, deadline - savedDeadline <= slack.wholeMilliseconds { return nil }
        version += 1
        savedDeadline = deadline
        dirty = false
        return StoreRecord(
            version: version, expiresAt: deadline, userID: userID, bridgeLogin: loggedInByBridge, subscriptions: subscriptions.durable,
            loginToken: loginToken)
    }

    /// `true` when the store was last asked about this session `interval` ago or more (and
    /// marks it asked now): one caller checks, the others go on.
    mutating func claimStoreCheck(every interval: Duration, now: ContinuousClock.Instant) -> Bool {
        if let last = storeCheckedAt, now - last < interval { return false }
        storeCheckedAt = now
        return true
    }

    /// `true`: the caller writes the session (none is being written); `false`: it waits for
    /// the next write.
    mutating func leadSave() -> Bool {
        guard saveInFlight else {
            saveInFlight = true
            return true
        }
        return false
    }

    /// A write ended; `othersWaiting`: callers asked meanwhile, and the next write is theirs.
    mutating func saveEnded(othersWaiting: Bool) {
        if !othersWaiting { saveInFlight = false }
    }

    /// Something the store keeps changed: the registry's sweep saves it (a failed save is tried again).
    mutating func markDirty() { dirty = true }

    /// Takes on what a stored session held (before its login and subscriptions are redone).
    mutating func adopt(version: Int64, expiresAt: Int64, bridgeLogin: Bool) {
        self.version = version
        savedDeadline = expiresAt
        loggedInByBridge = bridgeLogin
    }
}
